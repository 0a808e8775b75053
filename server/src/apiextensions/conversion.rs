//! CRD conversion webhooks (kube's `webhook_converter.go`): a custom resource whose definition
//! says `conversion.strategy: Webhook` is converted between its versions by the webhook —
//! objects written through a version other than the storage version before they are stored,
//! objects read (single, lists, watch events) through another version before they are sent.
//! One `ConversionReview` carries every object of a call; the response must answer the
//! request's uid with as many objects, in order, each in the desired version and of the same
//! kind, name, namespace and uid. The converted object keeps the original's metadata but for
//! its labels and annotations. Any failure is kube's `conversion webhook for <gvk> failed: ...`
//! (500), and nothing is stored.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use serde_json::{json, Value};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::scheme::custom::ConversionWebhook;
use crate::store::Store;
use crate::webhook::{self, ClientConfig};

/// How long a conversion call may take (kube's conversion client timeout).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The `ConversionReview` versions kube speaks, in its order of preference when both are named.
const REVIEW_VERSIONS: [&str; 2] = ["v1beta1", "v1"];

/// `group/version, Kind=kind`, as kube prints a GroupVersionKind.
fn gvk(obj: &Value) -> String {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = obj["kind"].as_str().unwrap_or_default();
    if group.is_empty() {
        format!("{version}, Kind={kind}")
    } else {
        format!("{group}/{version}, Kind={kind}")
    }
}

fn text<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

/// kube's `validateConvertedObject`: only labels and annotations may change.
fn same_identity(original: &Value, converted: &Value) -> Result<(), String> {
    let kind = |o: &Value| o["kind"].as_str().unwrap_or_default().to_string();
    if kind(original) != kind(converted) {
        return Err(format!(
            "must have the same kind: {} != {}",
            kind(original),
            kind(converted)
        ));
    }
    for (field, what) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (a, b) = (text(original, field), text(converted, field));
        if a != b {
            return Err(format!("must have the same {what}: {a} != {b}"));
        }
    }
    Ok(())
}

/// kube's `restoreObjectMeta`: the original's metadata with the converted object's labels and
/// annotations.
fn restore_metadata(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                go_type(other)
            ))
        }
    };
    let mut metadata = original["metadata"].as_object().cloned().unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(m)) => {
                if let Some((k, v)) = m.iter().find(|(_, v)| !v.is_string()) {
                    return Err(format!(
                        "metadata.{field}[{k}] must be a string, but is {} in converted object",
                        go_type(v)
                    ));
                }
                metadata.insert(field.to_string(), Value::Object(m.clone()));
            }
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    go_type(other)
                ))
            }
        }
    }
    converted["metadata"] = Value::Object(metadata);
    Ok(())
}

/// The Go type a JSON value decodes to, as kube's messages name it.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The client configuration of a definition's webhook; its identity changes with the
/// configuration, so a changed `caBundle` or address gets a new HTTP client.
fn client(definition: &str, hook: &ConversionWebhook) -> ClientConfig {
    let mut hasher = DefaultHasher::new();
    hook.client_config.to_string().hash(&mut hasher);
    let id = format!("conversion/{definition}/{:x}", hasher.finish());
    ClientConfig::parse(&hook.client_config, &id, TIMEOUT)
}

/// Converts `objects` (each a whole object of the definition's kind, none in
/// `api_version`) to `api_version` with one call of the webhook. `list` says whether they are
/// a list's items (kube words the checks of a list's items differently).
pub async fn convert(
    store: &Store,
    definition: &str,
    hook: &ConversionWebhook,
    objects: &[Value],
    api_version: &str,
    list: bool,
) -> ApiResult<Vec<Value>> {
    let Some(first) = objects.first() else {
        return Ok(Vec::new());
    };
    let what = gvk(first);
    let failed = |why: String| ApiError::unknown(format!("conversion webhook for {what} failed: {why}"));
    let invalid = |at: usize, why: String| {
        ApiError::unknown(if list {
            format!("conversion webhook for {what} returned invalid converted object at index {at}: {why}")
        } else {
            format!("conversion webhook for {what} returned invalid object at index 0: {why}")
        })
    };
    let Some(review_version) = hook
        .review_versions
        .iter()
        .find(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    else {
        return Err(ApiError::unknown("no supported conversion review versions"));
    };
    let review_api_version = format!("apiextensions.k8s.io/{review_version}");
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "kind": "ConversionReview",
        "apiVersion": review_api_version,
        "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": objects},
    });
    let answer = webhook::post(store, &client(definition, hook), &review)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let v1 = review_version == "v1";
    if v1 && (answer["apiVersion"] != json!(review_api_version) || answer["kind"] != "ConversionReview") {
        return Err(failed(format!(
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}",
            gvk(&answer)
        )));
    }
    let response = answer
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| failed("no response provided".into()))?;
    let answered_uid = response["uid"].as_str().unwrap_or_default();
    if v1 && answered_uid != uid {
        return Err(failed(format!(
            "expected response.uid={uid:?}, got {answered_uid:?}"
        )));
    }
    let result = &response["result"];
    if result["status"] != "Success" {
        let message = result["message"].as_str().unwrap_or_default();
        return Err(failed(if message.is_empty() {
            format!(
                "response.result.status was '{}', not 'Success'",
                result["status"].as_str().unwrap_or_default()
            )
        } else {
            message.to_string()
        }));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if converted.len() != objects.len() {
        return Err(ApiError::unknown(format!(
            "conversion webhook for {what} returned {} objects, expected {}",
            converted.len(),
            objects.len()
        )));
    }
    let mut out = Vec::with_capacity(objects.len());
    for (i, (original, answer)) in objects.iter().zip(converted).enumerate() {
        // kube counts a list's items from 1 in these messages.
        let at = i + 1;
        let mut obj = answer.clone();
        let (got_version, got_kind) = (
            obj["apiVersion"].as_str().unwrap_or_default(),
            obj["kind"].as_str().unwrap_or_default(),
        );
        if got_version != api_version {
            return Err(invalid(
                at,
                format!("invalid groupVersion (expected {api_version}, received {got_version})"),
            ));
        }
        let kind = original["kind"].as_str().unwrap_or_default();
        if got_kind != kind {
            return Err(invalid(
                at,
                format!("invalid kind (expected {kind}, received {got_kind})"),
            ));
        }
        same_identity(original, &obj).map_err(|why| invalid(at, why))?;
        restore_metadata(original, &mut obj).map_err(|why| {
            ApiError::unknown(if list {
                format!(
                    "conversion webhook for {what} returned invalid metadata in object at index {at}: {why}"
                )
            } else {
                format!("conversion webhook for {what} returned invalid metadata: {why}")
            })
        })?;
        out.push(obj);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only labels and annotations of the webhook's answer are kept; the rest of the metadata
    /// is the original's.
    #[test]
    fn converted_objects_keep_the_original_metadata_but_labels_and_annotations() {
        let original = json!({"kind": "CronTab", "metadata": {"name": "a", "uid": "1", "resourceVersion": "5", "labels": {"x": "1"}}});
        let mut converted = json!({"kind": "CronTab", "metadata": {"name": "a", "uid": "1", "resourceVersion": "9", "labels": {"y": "2"}, "annotations": {"z": "3"}}});
        assert_eq!(same_identity(&original, &converted), Ok(()));
        assert_eq!(restore_metadata(&original, &mut converted), Ok(()));
        assert_eq!(
            converted["metadata"],
            json!({"name": "a", "uid": "1", "resourceVersion": "5", "labels": {"y": "2"}, "annotations": {"z": "3"}})
        );
        let renamed = json!({"kind": "CronTab", "metadata": {"name": "b", "uid": "1"}});
        assert_eq!(
            same_identity(&original, &renamed),
            Err("must have the same name: a != b".to_string())
        );
        let mut bad = json!({"kind": "CronTab", "metadata": {"labels": {"x": 1}}});
        assert_eq!(
            restore_metadata(&original, &mut bad),
            Err("metadata.labels[x] must be a string, but is int64 in converted object".to_string())
        );
    }

    #[test]
    fn kinds_are_printed_as_kube_prints_them() {
        assert_eq!(
            gvk(&json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab"})),
            "stable.example.com/v1, Kind=CronTab"
        );
    }
}
