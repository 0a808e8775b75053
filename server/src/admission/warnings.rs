//! Warnings that admission plugins give the client (`Warning: 299` headers), collected per
//! request: a plugin calls [`warn`] wherever it runs (e.g. PodSecurity's "would violate
//! PodSecurity" for a warn-level namespace), and the endpoint that serves the request
//! [`collect`]s them — also for a refused write — without every verb threading them through.
//! Repeated texts are sent once, as kube-apiserver's warning recorder does (an update that
//! retries its compare-and-swap runs admission again).

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static WARNINGS: RefCell<Vec<String>>;
}

/// Most warnings one request collects (kube-apiserver also bounds them).
const MAX_WARNINGS: usize = 256;

/// Runs `request`, returning its output and the warnings plugins gave while it ran.
pub async fn collect<F: Future>(request: F) -> (F::Output, Vec<String>) {
    WARNINGS
        .scope(RefCell::new(Vec::new()), async {
            let out = request.await;
            let warnings = WARNINGS.with(|w| w.take());
            (out, warnings)
        })
        .await
}

/// Gives the client of the current request a warning (nothing outside a request: the server's
/// own writes have no one to warn).
pub fn warn(text: impl Into<String>) {
    let text = text.into();
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.borrow_mut();
        if w.len() < MAX_WARNINGS && !w.contains(&text) {
            w.push(text);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_collects_its_warnings_once_each() {
        let ((), got) = collect(async {
            warn("a");
            warn("b");
            warn("a");
        })
        .await;
        assert_eq!(got, ["a", "b"]);
        warn("outside a request");
    }
}
