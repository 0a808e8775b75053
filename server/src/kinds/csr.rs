//! CertificateSigningRequests: a request records who made it (`spec.username`, `uid`,
//! `groups`, `extra`, whatever the client sent there), starts with an empty status (no one
//! creates a pre-approved request), and is approved or denied through its `approval`
//! subresource (`kubectl certificate approve`), as kube-apiserver's strategy has it. An update
//! of the request itself changes only its metadata: its spec is kept, as kube's strategy keeps
//! it. A write through `status` may not add or change the approval conditions
//! ([`validation::certificates`] checks the rest of every write).

use serde_json::{json, Value};

use crate::authentication::user::UserInfo;
use crate::kinds::strategy::Builtin;
use crate::kinds::validation;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;

/// The CertificateSigningRequest strategy.
pub const CERTIFICATE_SIGNING_REQUEST: Builtin = Builtin {
    initial_status: Some(|| json!({})),
    on_create_by: Some(record_requester),
    on_update: Some(keep_spec),
    on_status_update: Some(status_update),
    ..Builtin::new("certificates.k8s.io", "CertificateSigningRequest")
};

/// A write through `status`: `422` when it adds or changes an Approved or Denied condition.
fn status_update(old: &Value, new: &mut Value) -> ApiResult<()> {
    let causes = validation::certificates::status_update(old, new);
    if causes.is_empty() {
        return Ok(());
    }
    let name = meta_str(old, "name").unwrap_or_default();
    Err(ApiError::invalid(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        name,
        &causes,
    ))
}

/// The stored spec, whatever the update sent (kube's `PrepareForUpdate` of the strategy).
fn keep_spec(old: &Value, new: &mut Value) {
    if let Some(o) = new.as_object_mut() {
        match old.get("spec") {
            Some(spec) => o.insert("spec".into(), spec.clone()),
            None => o.remove("spec"),
        };
    }
}

/// The requester in the spec, replacing what the client put there.
fn record_requester(csr: &mut Value, user: &UserInfo) {
    let Some(spec) = csr.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["username", "uid", "groups", "extra"] {
        spec.remove(field);
    }
    spec.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        spec.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), json!(user.extra));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requester_replaces_what_the_client_claimed() {
        let mut csr = json!({"spec": {"username": "admin", "groups": ["system:masters"], "request": "x"}});
        let user = UserInfo {
            name: "jane".into(),
            uid: String::new(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: Default::default(),
        };
        record_requester(&mut csr, &user);
        assert_eq!(
            csr["spec"],
            json!({"request": "x", "username": "jane", "groups": ["dev", "system:authenticated"]})
        );
    }
}
