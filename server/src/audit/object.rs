//! Request and response bodies as an audit event records them: one line of JSON whatever the
//! body was (JSON kept as the client or the server wrote it, compacted; YAML and Kubernetes
//! protobuf converted), optionally without `metadata.managedFields` (the policy's
//! `omitManagedFields`, for an object, a list's items and a Table's rows), and the metadata
//! kube copies from a created or updated object into the event's object reference.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::machinery::protobuf;

/// Why a body is not recorded.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The body is not valid in its media type.
    #[error("undecodable {media_type} body: {why}")]
    Undecodable {
        /// The body's media type.
        media_type: String,
        /// What is wrong.
        why: String,
    },
    /// The body's media type is not an object encoding.
    #[error("a {0} body is not an object")]
    NotAnObject(String),
}

/// Whether `media_type` is YAML.
fn is_yaml(media_type: &str) -> bool {
    matches!(
        media_type,
        "application/yaml" | "application/x-yaml" | "text/yaml" | "application/apply-patch+yaml"
    )
}

/// Whether `media_type` is JSON (objects, patches, tables, discovery).
fn is_json(media_type: &str) -> bool {
    media_type.is_empty() || media_type == "application/json" || media_type.ends_with("+json")
}

/// JSON text without the whitespace between tokens (strings untouched).
fn compact(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

fn undecodable(media_type: &str, why: impl ToString) -> ObjectError {
    ObjectError::Undecodable {
        media_type: media_type.to_string(),
        why: why.to_string(),
    }
}

/// A body of `media_type` (`application/json`, a patch type, YAML, Kubernetes protobuf; the
/// parameters after `;` ignored) as one line of JSON.
pub fn to_json(media_type: &str, body: &[u8]) -> Result<Box<RawValue>, ObjectError> {
    let media_type = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let text =
        if is_json(&media_type) || (media_type == "application/apply-patch+yaml" && body.starts_with(b"{")) {
            String::from_utf8(compact(body)).map_err(|e| undecodable(&media_type, e))?
        } else if is_yaml(&media_type) {
            let value: serde_json::Value =
                yaml_serde::from_slice(body).map_err(|e| undecodable(&media_type, e))?;
            serde_json::to_string(&value).map_err(|e| undecodable(&media_type, e))?
        } else if media_type == protobuf::MEDIA_TYPE {
            let value = protobuf::decode_object(body).map_err(|e| undecodable(&media_type, e))?;
            serde_json::to_string(&value).map_err(|e| undecodable(&media_type, e))?
        } else {
            return Err(ObjectError::NotAnObject(media_type));
        };
    RawValue::from_string(text).map_err(|e| undecodable(&media_type, e))
}

/// A JSON object's members in their order, the values left as they are.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Collect;
        impl<'de> Visitor<'de> for Collect {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Collect)
    }
}

impl Members<'_> {
    fn write(&self, out: &mut String) {
        out.push('{');
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key).unwrap_or_default());
            out.push(':');
            out.push_str(value.get());
        }
        out.push('}');
    }
}

/// `json` with `edit` applied to the member `key` of the object, when it has one.
fn edit_member(json: &str, edit: &mut dyn FnMut(&str, &str) -> Option<String>) -> Option<String> {
    let members: Members = serde_json::from_str(json).ok()?;
    let mut changed = false;
    let mut edited: Vec<(String, String)> = Vec::with_capacity(members.0.len());
    for (key, value) in &members.0 {
        match edit(key, value.get()) {
            Some(new) => {
                changed = true;
                edited.push((key.clone(), new));
            }
            None => edited.push((key.clone(), value.get().to_string())),
        }
    }
    if !changed {
        return None;
    }
    let mut out = String::with_capacity(json.len());
    out.push('{');
    for (i, (key, value)) in edited.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    Some(out)
}

/// An object's JSON without `metadata.managedFields`, or `None` when it has none.
fn object_without_managed_fields(json: &str) -> Option<String> {
    edit_member(json, &mut |key: &str, value: &str| match key {
        "metadata" => {
            let mut meta: Members = serde_json::from_str(value).ok()?;
            let before = meta.0.len();
            meta.0.retain(|(k, _)| k != "managedFields");
            (meta.0.len() != before).then(|| {
                let mut out = String::with_capacity(value.len());
                meta.write(&mut out);
                out
            })
        }
        _ => None,
    })
}

/// Each element of a JSON array through `edit`, or `None` when none changed.
fn edit_items(json: &str, edit: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let items: Vec<&RawValue> = serde_json::from_str(json).ok()?;
    let edited: Vec<Option<String>> = items.iter().map(|item| edit(item.get())).collect();
    if edited.iter().all(Option::is_none) {
        return None;
    }
    let parts: Vec<&str> = items
        .iter()
        .zip(&edited)
        .map(|(item, new)| new.as_deref().unwrap_or(item.get()))
        .collect();
    Some(format!("[{}]", parts.join(",")))
}

/// `object` without `metadata.managedFields` — the object's own, each item's of a list, each
/// row object's of a Table — its members otherwise as they were, in their order.
pub fn omit_managed_fields(object: Box<RawValue>) -> Box<RawValue> {
    let top = object_without_managed_fields(object.get());
    let current = top.as_deref().unwrap_or(object.get());
    let nested = edit_member(current, &mut |key: &str, value: &str| match key {
        "items" => edit_items(value, &object_without_managed_fields),
        "rows" => edit_items(value, &|row: &str| {
            edit_member(row, &mut |key: &str, value: &str| match key {
                "object" => object_without_managed_fields(value),
                _ => None,
            })
        }),
        _ => None,
    });
    match nested.or(top) {
        Some(text) => RawValue::from_string(text).unwrap_or(object),
        None => object,
    }
}

/// What kube copies from a request's object into the event's object reference when the
/// request did not name it (a create names no object in its path).
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[serde(default)]
    pub name: String,
    /// `metadata.namespace`.
    #[serde(default)]
    pub namespace: String,
    /// `metadata.uid`.
    #[serde(default)]
    pub uid: String,
    /// `metadata.resourceVersion`.
    #[serde(default)]
    pub resource_version: String,
}

/// The metadata of the object `json` is, when it has metadata.
pub fn metadata(json: &RawValue) -> Option<ObjectMeta> {
    #[derive(Deserialize)]
    struct Object {
        metadata: Option<ObjectMeta>,
    }
    serde_json::from_str::<Object>(json.get()).ok()?.metadata
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_bodies_are_kept_in_their_order_on_one_line() {
        let body = b"{\n  \"kind\": \"ConfigMap\",\n  \"apiVersion\": \"v1\",\n  \"data\": {\"a b\": \"x \\\" y\\n\"}\n}\n";
        assert_eq!(
            to_json("application/json; charset=utf-8", body).unwrap().get(),
            r#"{"kind":"ConfigMap","apiVersion":"v1","data":{"a b":"x \" y\n"}}"#
        );
        assert_eq!(
            to_json("application/merge-patch+json", br#"{"data": {"a": null}}"#)
                .unwrap()
                .get(),
            r#"{"data":{"a":null}}"#
        );
        assert_eq!(
            to_json("application/yaml", b"kind: ConfigMap\ndata:\n  a: '1'\n")
                .unwrap()
                .get(),
            r#"{"data":{"a":"1"},"kind":"ConfigMap"}"#
        );
        assert!(to_json("application/json", b"{\"a\": ").is_err());
        assert!(matches!(
            to_json("text/plain", b"ok"),
            Err(ObjectError::NotAnObject(_))
        ));
    }

    #[test]
    fn protobuf_bodies_become_json() {
        let object = serde_json::json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}});
        let bytes = protobuf::encode_object(&object).unwrap();
        let json = to_json(protobuf::MEDIA_TYPE, &bytes).unwrap();
        let back: serde_json::Value = serde_json::from_str(json.get()).unwrap();
        assert_eq!(back["metadata"]["name"], "a");
    }

    #[test]
    fn managed_fields_go_from_objects_lists_and_tables() {
        let raw = |s: &str| RawValue::from_string(s.to_string()).unwrap();
        let object = raw(
            r#"{"kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m"}],"uid":"u"},"data":{}}"#,
        );
        assert_eq!(
            omit_managed_fields(object).get(),
            r#"{"kind":"ConfigMap","metadata":{"name":"a","uid":"u"},"data":{}}"#
        );
        let list = raw(
            r#"{"kind":"ConfigMapList","metadata":{},"items":[{"metadata":{"name":"a","managedFields":[]}},{"metadata":{"name":"b"}}]}"#,
        );
        assert_eq!(
            omit_managed_fields(list).get(),
            r#"{"kind":"ConfigMapList","metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#
        );
        let table = raw(
            r#"{"kind":"Table","rows":[{"cells":[1],"object":{"metadata":{"managedFields":[],"name":"a"}}}]}"#,
        );
        assert_eq!(
            omit_managed_fields(table).get(),
            r#"{"kind":"Table","rows":[{"cells":[1],"object":{"metadata":{"name":"a"}}}]}"#
        );
        let untouched = raw(r#"{"kind":"Status","code":404}"#);
        assert_eq!(
            omit_managed_fields(untouched).get(),
            r#"{"kind":"Status","code":404}"#
        );
        assert_eq!(omit_managed_fields(raw("[1,2]")).get(), "[1,2]");
    }

    #[test]
    fn the_metadata_of_an_object_is_read() {
        let object = RawValue::from_string(
            r#"{"kind":"Secret","metadata":{"name":"s1","namespace":"shop","resourceVersion":"7","labels":{}},"data":{"k":"dg=="}}"#.into(),
        )
        .unwrap();
        assert_eq!(
            metadata(&object),
            Some(ObjectMeta {
                name: "s1".into(),
                namespace: "shop".into(),
                uid: String::new(),
                resource_version: "7".into(),
            })
        );
        let options = RawValue::from_string(r#"{"propagationPolicy":"Background"}"#.into()).unwrap();
        assert_eq!(metadata(&options), None);
    }
}
