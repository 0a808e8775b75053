//! One call of one webhook (kube's `request/admissionreview.go` and the dispatchers'
//! `callHook`): the `AdmissionReview` request built from the write, in the first
//! `admission.k8s.io` version (`v1`, `v1beta1`) the webhook accepts, the checks of its response
//! (fewer for `v1beta1`, as kube's), and kube's errors — a denial becomes the webhook's `Status`
//! (`admission webhook "NAME" denied the request: ...`), a webhook that cannot be called or
//! answers nonsense becomes `failed calling webhook "NAME": ...`, subject to its
//! `failurePolicy`.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::matching::{strings, Hook, ReviewVersion};
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
/// version it is called in), in review version `version`, with its uid; `requested` is the
/// write as the request made it, whose version `requestKind` and `requestResource` name.
/// (`v1beta1`'s request has the same fields as `v1`'s.)
pub fn request(
    version: ReviewVersion,
    attrs: &Attributes<'_>,
    requested: &Attributes<'_>,
    obj: Option<&Value>,
) -> (String, Value) {
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
        "apiVersion": version.api_version(),
        "request": Value::Object(r),
    });
    (uid, review)
}

/// kube's `VerifyAdmissionResponse`: the response present; for a `v1` review its uid and type
/// right, a patch only from a mutating webhook and only with its type; a `v1beta1` review's
/// uid, type and patch type are not checked (a mutating webhook's patch is a JSONPatch, a
/// validating webhook's patch is ignored), as kube never checked them in `v1beta1`.
fn verify(hook: &Hook, version: ReviewVersion, uid: &str, review: &Value) -> Result<Outcome, String> {
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("webhook response was absent")?;
    let patch = response["patch"].as_str().filter(|p| !p.is_empty());
    let patch = match version {
        ReviewVersion::V1 => verify_v1(hook, uid, review, response, patch)?,
        ReviewVersion::V1beta1 => patch.filter(|_| hook.mutating).map(|p| (p, "JSONPatch")),
    };
    // The webhook's audit annotations are recorded whatever it decided, under its name.
    for (key, value) in response["auditAnnotations"].as_object().into_iter().flatten() {
        if let Some(value) = value.as_str() {
            annotate(format!("{}/{key}", hook.name), value);
        }
    }
    if response["allowed"].as_bool() != Some(true) {
        return Ok(Outcome::Refused(denial(hook, &response["status"])));
    }
    let patch = match patch {
        Some((p, "JSONPatch")) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?;
            Some(serde_json::from_slice(&bytes).map_err(|e| format!("response.patch: {e}"))?)
        }
        Some((_, other)) => return Err(format!("unsupported patch type {other:?}")),
        None => None,
    };
    Ok(Outcome::Allowed {
        patch,
        warnings: strings(&response["warnings"]),
    })
}

/// The checks kube makes of a `v1` review only; the patch with its type.
fn verify_v1<'a>(
    hook: &Hook,
    uid: &str,
    review: &Value,
    response: &'a Value,
    patch: Option<&'a str>,
) -> Result<Option<(&'a str, &'a str)>, String> {
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
    Ok(patch.zip(patch_type))
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

/// kube's error for a webhook that accepts no review version it knows (only a configuration
/// stored before validation required one can say so).
const UNKNOWN_REVIEW_VERSIONS: &str =
    "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)";

/// What is sent to `hook` about this write: its review version, the review's uid and the
/// review; or why nothing is (a dry run it may not see, no review version it accepts).
fn prepare(
    hook: &Hook,
    attrs: &Attributes<'_>,
    requested: &Attributes<'_>,
    obj: Option<&Value>,
) -> Result<(ReviewVersion, String, Value), Outcome> {
    if let Some(refused) = dry_run_refusal(hook, attrs) {
        return Err(refused);
    }
    let version = hook
        .review_version
        .ok_or_else(|| failed(hook, UNKNOWN_REVIEW_VERSIONS))?;
    let (uid, body) = request(version, attrs, requested, obj);
    Ok((version, uid, body))
}

/// Calls `hook` about this write (`obj` is the object written, `None` for a delete).
pub async fn call(
    store: &Store,
    hook: &Hook,
    attrs: &Attributes<'_>,
    requested: &Attributes<'_>,
    obj: Option<&Value>,
) -> Outcome {
    let (version, uid, body) = match prepare(hook, attrs, requested, obj) {
        Ok(prepared) => prepared,
        Err(outcome) => return outcome,
    };
    let review = match crate::webhook::post(store, &hook.client, &body).await {
        Ok(r) => r,
        Err(why) => return failed(hook, format!("failed to call webhook: {why}")),
    };
    match verify(hook, version, &uid, &review) {
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
            &json!({"name": "h.example.com", "sideEffects": side_effects, "admissionReviewVersions": ["v1"]}),
            "x",
            false,
        )
    }

    fn hook_speaking(versions: Value, mutating: bool) -> Hook {
        Hook::parse(
            &json!({"name": "h.example.com", "sideEffects": "None", "admissionReviewVersions": versions}),
            "x",
            mutating,
        )
    }

    /// kube sends the first review version the webhook lists that it knows; a webhook that
    /// lists none fails the call with kube's message.
    #[test]
    fn the_review_is_sent_in_the_first_version_the_webhook_knows() {
        let attrs = pod_create();
        for (versions, api_version) in [
            (json!(["v1", "v1beta1"]), "admission.k8s.io/v1"),
            (json!(["v2", "v1beta1", "v1"]), "admission.k8s.io/v1beta1"),
        ] {
            let Ok((_, uid, review)) = prepare(&hook_speaking(versions, false), &attrs, &attrs, None) else {
                panic!("{api_version}: not sent");
            };
            assert_eq!(review["apiVersion"], api_version);
            assert_eq!(review["kind"], "AdmissionReview");
            assert_eq!(review["request"]["uid"], uid.as_str());
        }
        let Err(Outcome::Failed(e)) = prepare(&hook_speaking(json!(["v2"]), false), &attrs, &attrs, None)
        else {
            panic!("a webhook that speaks no known version was called");
        };
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                500,
                r#"Internal error occurred: failed calling webhook "h.example.com": could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"#
            )
        );
    }

    /// A `v1beta1` answer's uid, apiVersion, kind and patchType are not checked; a validating
    /// webhook's patch is ignored; `v1` checks them all.
    #[test]
    fn v1beta1_responses_are_checked_as_kube_checks_them() {
        let patch =
            base64::engine::general_purpose::STANDARD.encode(r#"[{"op":"add","path":"/a","value":1}]"#);
        let bare = json!({"response": {"allowed": true, "patch": patch}});
        let mutating = hook_speaking(json!(["v1beta1"]), true);
        let Ok(Outcome::Allowed { patch: Some(p), .. }) =
            verify(&mutating, ReviewVersion::V1beta1, "u", &bare)
        else {
            panic!("a v1beta1 patch without its type was refused");
        };
        assert_eq!(p, json!([{"op": "add", "path": "/a", "value": 1}]));
        let validating = hook_speaking(json!(["v1beta1"]), false);
        assert!(matches!(
            verify(&validating, ReviewVersion::V1beta1, "u", &bare),
            Ok(Outcome::Allowed { patch: None, .. })
        ));
        let denied = json!({"response": {"allowed": false, "status": {"message": "no"}}});
        let Ok(Outcome::Refused(e)) = verify(&validating, ReviewVersion::V1beta1, "u", &denied) else {
            panic!("a v1beta1 denial was not a denial");
        };
        assert_eq!(
            e.message,
            r#"admission webhook "h.example.com" denied the request: no"#
        );
        assert_eq!(
            verify(&validating, ReviewVersion::V1beta1, "u", &json!({}))
                .err()
                .as_deref(),
            Some("webhook response was absent")
        );
        let v1 = hook_speaking(json!(["v1"]), true);
        assert_eq!(
            verify(&v1, ReviewVersion::V1, "u", &bare).err().as_deref(),
            Some(r#"expected response.uid="u", got """#)
        );
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
