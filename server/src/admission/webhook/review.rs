//! One call of one webhook (kube's `request/admissionreview.go` and the dispatchers'
//! `callHook`): the `admission.k8s.io/v1` `AdmissionReview` request built from the write, the
//! checks of its response, and kube's errors — a denial becomes the webhook's `Status`
//! (`admission webhook "NAME" denied the request: ...`), a webhook that cannot be called or
//! answers nonsense becomes `failed calling webhook "NAME": ...`, subject to its
//! `failurePolicy`.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::matching::{strings, Hook};
use crate::admission::audit_annotations::annotate;
use crate::admission::{Attributes, Operation};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::store::Store;

/// How a call ended.
pub enum Outcome {
    /// The webhook allowed the write (a mutating one may have answered a JSONPatch).
    Allowed {
        patch: Option<Value>,
        warnings: Vec<String>,
    },
    /// The webhook refused the write (its `Status`), or the write may not be sent to it.
    Refused(ApiError),
    /// The webhook could not be called, or answered something that is not a valid review:
    /// the write fails or passes as its `failurePolicy` says.
    Failed(ApiError),
}

impl Hook {
    /// What a failed call does to the write: `Fail` refuses it with the error, `Ignore` lets it
    /// through.
    pub fn on_failure(&self, e: ApiError) -> ApiResult<()> {
        if self.fail {
            return Err(e);
        }
        tracing::warn!(webhook = %self.name, error = %e.message, "failed calling webhook, failing open");
        Ok(())
    }
}

/// kube's `NewInternalError`: `Internal error occurred: ...`, the text as the one cause.
pub fn internal(text: String) -> ApiError {
    let mut e = ApiError::internal(format!("Internal error occurred: {text}"));
    e.details = Some(json!({"causes": [{"message": text}]}));
    e
}

fn failed(hook: &Hook, why: impl std::fmt::Display) -> Outcome {
    Outcome::Failed(internal(format!("failed calling webhook {:?}: {why}", hook.name)))
}

/// The reasons of kube's `metav1.StatusReason` (a webhook's other reasons are dropped).
const REASONS: [&str; 18] = [
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
];

/// kube's `ToStatusErr`: the webhook's `Status` with a code of at least 400 and its message
/// prefixed by who denied the request.
fn denial(hook: &Hook, result: &Value) -> ApiError {
    let denied_by = format!("admission webhook {:?} denied the request", hook.name);
    let message = result["message"].as_str().filter(|m| !m.is_empty());
    let reason = result["reason"].as_str().filter(|r| !r.is_empty());
    let message = match (message, reason) {
        (Some(m), _) => format!("{denied_by}: {m}"),
        (None, Some(r)) => format!("{denied_by}: {r}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = result["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let mut e = ApiError::bad_request(message);
    e.code = code;
    e.reason = reason
        .and_then(|r| REASONS.iter().find(|known| **known == r))
        .copied()
        .unwrap_or("");
    e.details = result.get("details").filter(|d| d.is_object()).cloned();
    e
}

/// The request's user as the review carries it (the server's own writes as kube's loopback
/// client).
fn user_info(attrs: &Attributes<'_>) -> Value {
    let Some(u) = attrs.user else {
        return json!({"username": "system:apiserver", "groups": ["system:authenticated", "system:masters"]});
    };
    let mut info = Map::new();
    info.insert("username".into(), json!(u.name));
    if !u.uid.is_empty() {
        info.insert("uid".into(), json!(u.uid));
    }
    info.insert("groups".into(), json!(u.groups));
    if !u.extra.is_empty() {
        info.insert("extra".into(), json!(u.extra));
    }
    Value::Object(info)
}

/// The write's options, as kube gives them (none for a connection).
fn options(attrs: &Attributes<'_>) -> Value {
    let kind = match attrs.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => return Value::Null,
    };
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if attrs.dry_run {
        o["dryRun"] = json!(["All"]);
    }
    o
}

/// The `AdmissionReview` sent for this write as the webhook sees it (`attrs`, `obj`: in the
/// version it is called in), with its uid; `requested` is the write as the request made it,
/// whose version `requestKind` and `requestResource` name.
pub fn request(attrs: &Attributes<'_>, requested: &Attributes<'_>, obj: Option<&Value>) -> (String, Value) {
    let uid = uuid::Uuid::new_v4().to_string();
    let gvk = |a: &Attributes<'_>| json!({"group": a.group, "version": a.version, "kind": a.kind});
    let gvr = |a: &Attributes<'_>| json!({"group": a.group, "version": a.version, "resource": a.resource});
    let mut r = Map::new();
    r.insert("uid".into(), json!(uid));
    r.insert("kind".into(), gvk(attrs));
    r.insert("resource".into(), gvr(attrs));
    if let Some(sub) = attrs.subresource {
        r.insert("subResource".into(), json!(sub));
    }
    r.insert("requestKind".into(), gvk(requested));
    r.insert("requestResource".into(), gvr(requested));
    if let Some(sub) = attrs.subresource {
        r.insert("requestSubResource".into(), json!(sub));
    }
    if !attrs.name.is_empty() {
        r.insert("name".into(), json!(attrs.name));
    }
    if let Some(ns) = attrs.namespace.filter(|_| attrs.namespaced) {
        r.insert("namespace".into(), json!(ns));
    }
    r.insert("operation".into(), json!(attrs.operation.as_str()));
    r.insert("userInfo".into(), user_info(attrs));
    r.insert("object".into(), obj.cloned().unwrap_or(Value::Null));
    r.insert("oldObject".into(), attrs.old.cloned().unwrap_or(Value::Null));
    r.insert("dryRun".into(), json!(attrs.dry_run));
    r.insert("options".into(), options(attrs));
    let review = json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": Value::Object(r),
    });
    (uid, review)
}

/// kube's `VerifyAdmissionResponse` for a v1 review: the response present, its uid and type
/// right, a patch only from a mutating webhook and only with its type.
fn verify(hook: &Hook, uid: &str, review: &Value) -> Result<Outcome, String> {
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let got = response["uid"].as_str().unwrap_or_default();
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let api_version = review["apiVersion"].as_str().unwrap_or_default();
    let kind = review["kind"].as_str().unwrap_or_default();
    if (api_version, kind) != ("admission.k8s.io/v1", "AdmissionReview") {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {group}/{version}, Kind={kind}"
        ));
    }
    let patch = response["patch"].as_str().filter(|p| !p.is_empty());
    let patch_type = response.get("patchType").and_then(Value::as_str);
    if hook.mutating {
        match (patch, patch_type) {
            (Some(_), None) => {
                return Err("webhook returned response.patch but not response.patchType".into())
            }
            (None, Some(_)) => {
                return Err("webhook returned response.patchType but not response.patch".into())
            }
            (Some(_), Some("")) => return Err("webhook returned invalid response.patchType of \"\"".into()),
            _ => {}
        }
    } else if patch.is_some() {
        return Err("validating webhook may not return response.patch".into());
    } else if patch_type.is_some() {
        return Err("validating webhook may not return response.patchType".into());
    }
    // The webhook's audit annotations are recorded whatever it decided, under its name.
    for (key, value) in response["auditAnnotations"].as_object().into_iter().flatten() {
        if let Some(value) = value.as_str() {
            annotate(format!("{}/{key}", hook.name), value);
        }
    }
    if response["allowed"].as_bool() != Some(true) {
        return Ok(Outcome::Refused(denial(hook, &response["status"])));
    }
    let patch = match (patch, patch_type) {
        (Some(p), Some("JSONPatch")) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?;
            Some(serde_json::from_slice(&bytes).map_err(|e| format!("response.patch: {e}"))?)
        }
        (Some(_), Some(other)) => return Err(format!("unsupported patch type {other:?}")),
        _ => None,
    };
    Ok(Outcome::Allowed {
        patch,
        warnings: strings(&response["warnings"]),
    })
}

/// A dry run is sent only to webhooks without side effects (`None`, `NoneOnDryRun`); any
/// other is refused without calling the webhook (a configuration stored before v1 required
/// that could still say `Unknown` or `Some`).
fn dry_run_refusal(hook: &Hook, attrs: &Attributes<'_>) -> Option<Outcome> {
    if !attrs.dry_run {
        return None;
    }
    match hook.side_effects.as_str() {
        "None" | "NoneOnDryRun" => None,
        "" => Some(failed(hook, "Webhook SideEffects is nil")),
        _ => Some(Outcome::Refused(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )))),
    }
}

/// Calls `hook` about this write (`obj` is the object written, `None` for a delete).
pub async fn call(
    store: &Store,
    hook: &Hook,
    attrs: &Attributes<'_>,
    requested: &Attributes<'_>,
    obj: Option<&Value>,
) -> Outcome {
    if let Some(refused) = dry_run_refusal(hook, attrs) {
        return refused;
    }
    let (uid, body) = request(attrs, requested, obj);
    let review = match crate::webhook::post(store, &hook.client, &body).await {
        Ok(r) => r,
        Err(why) => return failed(hook, format!("failed to call webhook: {why}")),
    };
    match verify(hook, &uid, &review) {
        Ok(outcome) => outcome,
        Err(why) => failed(hook, format!("received invalid webhook response: {why}")),
    }
}

/// Applies a mutating webhook's JSONPatch (kube answers a patch that does not apply with an
/// internal error, whatever the failure policy).
pub fn apply_patch(hook: &Hook, obj: &mut Value, patch: Value) -> ApiResult<()> {
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| internal(e.to_string()))?;
    let mut next = obj.clone();
    json_patch::patch(&mut next, &patch).map_err(|e| {
        tracing::debug!(webhook = %hook.name, error = %e, "a webhook's patch does not apply");
        internal(e.to_string())
    })?;
    *obj = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::tests::pod_create;

    fn hook(side_effects: &str) -> Hook {
        Hook::parse(
            &json!({"name": "h.example.com", "sideEffects": side_effects}),
            "x",
            false,
        )
    }

    /// A dry run never reaches a webhook that may have side effects: kube's 400.
    #[test]
    fn dry_runs_are_refused_for_webhooks_with_side_effects() {
        let dry = Attributes {
            dry_run: true,
            ..pod_create()
        };
        for side_effects in ["Unknown", "Some"] {
            let Some(Outcome::Refused(e)) = dry_run_refusal(&hook(side_effects), &dry) else {
                panic!("{side_effects}: not refused");
            };
            assert_eq!(
                (e.code, e.reason, e.message.as_str()),
                (
                    400,
                    "BadRequest",
                    r#"admission webhook "h.example.com" does not support dry run"#
                )
            );
            assert!(dry_run_refusal(&hook(side_effects), &pod_create()).is_none());
        }
        for side_effects in ["None", "NoneOnDryRun"] {
            assert!(dry_run_refusal(&hook(side_effects), &dry).is_none());
        }
    }

    /// kube's `ToStatusErr`: the webhook's code (at least 400) and its message prefixed.
    #[test]
    fn denials_carry_the_webhooks_status() {
        let h = hook("None");
        let e = denial(&h, &json!({"message": "no", "code": 200}));
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                400,
                "",
                r#"admission webhook "h.example.com" denied the request: no"#
            )
        );
        let e = denial(&h, &json!({"reason": "Forbidden", "code": 403}));
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                403,
                "Forbidden",
                r#"admission webhook "h.example.com" denied the request: Forbidden"#
            )
        );
        let e = denial(&h, &Value::Null);
        assert_eq!(
            e.message,
            r#"admission webhook "h.example.com" denied the request without explanation"#
        );
    }
}
