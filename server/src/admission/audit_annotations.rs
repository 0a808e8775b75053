//! Audit annotations that admission adds to the request's audit event, collected per request
//! like [`super::warnings`]: a plugin calls [`annotate`] wherever it runs (a policy's
//! `validation_failure` with `validationActions: [Audit]`, its `auditAnnotations`, a webhook's
//! `auditAnnotations`, PodSecurity's `enforce-policy` and `audit-violations`), and the endpoint
//! that serves the request hands what was [`collect`]ed to the audit record — also for a
//! refused write. As in kube-apiserver, the first value given for a key stays.

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static ANNOTATIONS: RefCell<Vec<(String, String)>>;
}

/// Most annotations one request collects.
const MAX_ANNOTATIONS: usize = 256;

/// Runs `request`, returning its output and the annotations plugins added while it ran.
pub async fn collect<F: Future>(request: F) -> (F::Output, Vec<(String, String)>) {
    ANNOTATIONS
        .scope(RefCell::new(Vec::new()), async {
            let out = request.await;
            let annotations = ANNOTATIONS.with(|a| a.take());
            (out, annotations)
        })
        .await
}

/// Adds `key: value` to the current request's audit event unless `key` has a value already
/// (nothing outside a request).
pub fn annotate(key: impl Into<String>, value: impl Into<String>) {
    let key = key.into();
    let _ = ANNOTATIONS.try_with(|a| {
        let mut a = a.borrow_mut();
        if a.len() < MAX_ANNOTATIONS && !a.iter().any(|(k, _)| *k == key) {
            a.push((key, value.into()));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_value_of_a_key_stays() {
        let ((), got) = collect(async {
            annotate("a", "1");
            annotate("b", "2");
            annotate("a", "3");
        })
        .await;
        assert_eq!(
            got,
            [
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "2".to_string())
            ]
        );
        annotate("outside", "a request");
    }
}
