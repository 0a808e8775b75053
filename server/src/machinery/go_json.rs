//! JSON as kube-apiserver's Go encoder writes it: strings escaped as Go escapes them
//! ([`encode`]), and the field order of the documents kuberaft builds itself as JSON values.
//!
//! kube-apiserver encodes Go structs, so a `Status`, a `Table`, a `Scale` or a review comes
//! out in the order its struct declares its fields (`kind`, `apiVersion`, `metadata`, ...); a
//! `serde_json::Value` sorts its keys. Rather than a struct per document, each document kind
//! has a [`Shape`] — its fields in Go's order, each with the shape of its value — and
//! [`Ordered`] serializes a value along it: the fields the shape names first, in its order,
//! then any others in sorted order. Stored objects are not reordered here (their bytes are
//! the store's, shared by every reader); only documents named in [`shape_of`] are.

use std::io;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::ser::{CharEscape, Formatter};
use serde_json::Value;

/// The order of a value's fields, and of the values inside it.
#[derive(Debug)]
pub enum Shape {
    /// Serialized as it is (sorted keys).
    Plain,
    /// An object: these fields first, in this order, each with its shape.
    Object(&'static [(&'static str, Shape)]),
    /// An API object: `kind`, `apiVersion` and `metadata` (`ObjectMeta`), then these fields.
    Kind(&'static [(&'static str, Shape)]),
    /// A list whose items have this shape.
    List(&'static Shape),
    /// A map whose values have this shape.
    Map(&'static Shape),
}

use Shape::{Kind, List, Map, Object, Plain};

/// `metav1.ListMeta`.
const LIST_META: Shape = Object(&[
    ("selfLink", Plain),
    ("resourceVersion", Plain),
    ("continue", Plain),
    ("remainingItemCount", Plain),
]);

const OWNER_REFERENCE: Shape = Object(&[
    ("apiVersion", Plain),
    ("kind", Plain),
    ("name", Plain),
    ("uid", Plain),
    ("controller", Plain),
    ("blockOwnerDeletion", Plain),
]);

const MANAGED_FIELDS_ENTRY: Shape = Object(&[
    ("manager", Plain),
    ("operation", Plain),
    ("apiVersion", Plain),
    ("time", Plain),
    ("fieldsType", Plain),
    ("fieldsV1", Plain),
    ("subresource", Plain),
]);

/// A list's own fields (`metav1.TypeMeta`, `metav1.ListMeta`), which open its encoding.
pub const LIST_HEAD: Shape = Object(&[("kind", Plain), ("apiVersion", Plain), ("metadata", LIST_META)]);

/// `metav1.ObjectMeta`.
const OBJECT_META: Shape = Object(&[
    ("name", Plain),
    ("generateName", Plain),
    ("namespace", Plain),
    ("selfLink", Plain),
    ("uid", Plain),
    ("resourceVersion", Plain),
    ("generation", Plain),
    ("creationTimestamp", Plain),
    ("deletionTimestamp", Plain),
    ("deletionGracePeriodSeconds", Plain),
    ("labels", Plain),
    ("annotations", Plain),
    ("ownerReferences", List(&OWNER_REFERENCE)),
    ("finalizers", Plain),
    ("managedFields", List(&MANAGED_FIELDS_ENTRY)),
]);

const STATUS_CAUSE: Shape = Object(&[("reason", Plain), ("message", Plain), ("field", Plain)]);

/// `metav1.Status`.
pub const STATUS: Shape = Object(&[
    ("kind", Plain),
    ("apiVersion", Plain),
    ("metadata", LIST_META),
    ("status", Plain),
    ("message", Plain),
    ("reason", Plain),
    (
        "details",
        Object(&[
            ("name", Plain),
            ("group", Plain),
            ("kind", Plain),
            ("uid", Plain),
            ("causes", List(&STATUS_CAUSE)),
            ("retryAfterSeconds", Plain),
        ]),
    ),
    ("code", Plain),
]);

/// `metav1.PartialObjectMetadata`.
const PARTIAL_OBJECT_METADATA: Shape = Kind(&[]);

/// An object embedded in a Table row or a watch event: its type fields and metadata first.
const OBJECT: Shape = PARTIAL_OBJECT_METADATA;

/// `metav1.PartialObjectMetadataList`.
const PARTIAL_OBJECT_METADATA_LIST: Shape = Object(&[
    ("kind", Plain),
    ("apiVersion", Plain),
    ("metadata", LIST_META),
    ("items", List(&PARTIAL_OBJECT_METADATA)),
]);

/// `metav1.Table`.
const TABLE: Shape = Object(&[
    ("kind", Plain),
    ("apiVersion", Plain),
    ("metadata", LIST_META),
    (
        "columnDefinitions",
        List(&Object(&[
            ("name", Plain),
            ("type", Plain),
            ("format", Plain),
            ("description", Plain),
            ("priority", Plain),
        ])),
    ),
    (
        "rows",
        List(&Object(&[
            ("cells", Plain),
            (
                "conditions",
                List(&Object(&[
                    ("type", Plain),
                    ("status", Plain),
                    ("lastTransitionTime", Plain),
                    ("reason", Plain),
                    ("message", Plain),
                ])),
            ),
            ("object", OBJECT),
        ])),
    ),
]);

/// `autoscaling/v1.Scale`.
const SCALE: Shape = Kind(&[
    ("spec", Object(&[("replicas", Plain)])),
    ("status", Object(&[("replicas", Plain), ("selector", Plain)])),
]);

const USER_INFO: Shape = Object(&[
    ("username", Plain),
    ("uid", Plain),
    ("groups", Plain),
    ("extra", Plain),
]);

/// `authentication/v1.TokenRequest`.
const TOKEN_REQUEST: Shape = Kind(&[
    (
        "spec",
        Object(&[
            ("audiences", Plain),
            ("expirationSeconds", Plain),
            (
                "boundObjectRef",
                Object(&[
                    ("kind", Plain),
                    ("apiVersion", Plain),
                    ("name", Plain),
                    ("uid", Plain),
                ]),
            ),
        ]),
    ),
    (
        "status",
        Object(&[("token", Plain), ("expirationTimestamp", Plain)]),
    ),
]);

/// `authentication/v1.TokenReview`.
const TOKEN_REVIEW: Shape = Kind(&[
    ("spec", Object(&[("token", Plain), ("audiences", Plain)])),
    (
        "status",
        Object(&[
            ("authenticated", Plain),
            ("user", USER_INFO),
            ("audiences", Plain),
            ("error", Plain),
        ]),
    ),
]);

/// `authentication/v1.SelfSubjectReview`.
const SELF_SUBJECT_REVIEW: Shape = Kind(&[("status", Object(&[("userInfo", USER_INFO)]))]);

const RESOURCE_ATTRIBUTES: Shape = Object(&[
    ("namespace", Plain),
    ("verb", Plain),
    ("group", Plain),
    ("version", Plain),
    ("resource", Plain),
    ("subresource", Plain),
    ("name", Plain),
    ("fieldSelector", Plain),
    ("labelSelector", Plain),
]);

const NON_RESOURCE_ATTRIBUTES: Shape = Object(&[("path", Plain), ("verb", Plain)]);

const ACCESS_REVIEW_STATUS: Shape = Object(&[
    ("allowed", Plain),
    ("denied", Plain),
    ("reason", Plain),
    ("evaluationError", Plain),
]);

/// `authorization/v1.SubjectAccessReview` and `LocalSubjectAccessReview`.
const SUBJECT_ACCESS_REVIEW: Shape = Kind(&[
    (
        "spec",
        Object(&[
            ("resourceAttributes", RESOURCE_ATTRIBUTES),
            ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
            ("user", Plain),
            ("groups", Plain),
            ("extra", Map(&Plain)),
            ("uid", Plain),
        ]),
    ),
    ("status", ACCESS_REVIEW_STATUS),
]);

/// `authorization/v1.SelfSubjectAccessReview`.
const SELF_SUBJECT_ACCESS_REVIEW: Shape = Kind(&[
    (
        "spec",
        Object(&[
            ("resourceAttributes", RESOURCE_ATTRIBUTES),
            ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
        ]),
    ),
    ("status", ACCESS_REVIEW_STATUS),
]);

/// `authorization/v1.SelfSubjectRulesReview`.
const SELF_SUBJECT_RULES_REVIEW: Shape = Kind(&[
    ("spec", Object(&[("namespace", Plain)])),
    (
        "status",
        Object(&[
            (
                "resourceRules",
                List(&Object(&[
                    ("verbs", Plain),
                    ("apiGroups", Plain),
                    ("resources", Plain),
                    ("resourceNames", Plain),
                ])),
            ),
            (
                "nonResourceRules",
                List(&Object(&[("verbs", Plain), ("nonResourceURLs", Plain)])),
            ),
            ("incomplete", Plain),
            ("evaluationError", Plain),
        ]),
    ),
]);

/// The documents kuberaft builds itself, by `apiVersion` and `kind`.
const DOCUMENTS: &[(&str, &str, &Shape)] = &[
    ("v1", "Status", &STATUS),
    ("meta.k8s.io/v1", "Table", &TABLE),
    ("meta.k8s.io/v1beta1", "Table", &TABLE),
    (
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        &PARTIAL_OBJECT_METADATA,
    ),
    (
        "meta.k8s.io/v1beta1",
        "PartialObjectMetadata",
        &PARTIAL_OBJECT_METADATA,
    ),
    (
        "meta.k8s.io/v1",
        "PartialObjectMetadataList",
        &PARTIAL_OBJECT_METADATA_LIST,
    ),
    (
        "meta.k8s.io/v1beta1",
        "PartialObjectMetadataList",
        &PARTIAL_OBJECT_METADATA_LIST,
    ),
    ("autoscaling/v1", "Scale", &SCALE),
    ("authentication.k8s.io/v1", "TokenRequest", &TOKEN_REQUEST),
    ("authentication.k8s.io/v1", "TokenReview", &TOKEN_REVIEW),
    (
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
        &SELF_SUBJECT_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &SUBJECT_ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        &SUBJECT_ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &SELF_SUBJECT_ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        &SELF_SUBJECT_RULES_REVIEW,
    ),
];

/// The shape of `value` when it is one of the documents kuberaft builds itself.
pub fn shape_of(value: &Value) -> Option<&'static Shape> {
    let api_version = value.get("apiVersion")?.as_str()?;
    let kind = value.get("kind")?.as_str()?;
    DOCUMENTS
        .iter()
        .find(|(v, k, _)| (*v, *k) == (api_version, kind))
        .map(|(_, _, shape)| *shape)
}

/// The shape of an object carried inside another document (a watch event, a Table row): a
/// document's own, or type fields and metadata first.
pub fn shape_of_object(value: &Value) -> &'static Shape {
    shape_of(value).unwrap_or(&OBJECT)
}

/// What opens every API object.
const TYPE_AND_META: &[(&str, Shape)] = &[("kind", Plain), ("apiVersion", Plain), ("metadata", OBJECT_META)];

/// An object's fields: those `orders` name first, in their order, then the others sorted.
fn ordered_map<S: Serializer>(
    serializer: S,
    fields: &serde_json::Map<String, Value>,
    orders: &[&'static [(&'static str, Shape)]],
) -> Result<S::Ok, S::Error> {
    let named = || orders.iter().flat_map(|order| order.iter());
    let mut map = serializer.serialize_map(Some(fields.len()))?;
    for (name, shape) in named() {
        if let Some(v) = fields.get(*name) {
            map.serialize_entry(name, &Ordered(v, shape))?;
        }
    }
    for (name, v) in fields {
        if !named().any(|(n, _)| n == name) {
            map.serialize_entry(name, v)?;
        }
    }
    map.end()
}

/// A value serialized along a shape.
pub struct Ordered<'a>(pub &'a Value, pub &'static Shape);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (self.0, self.1) {
            (Value::Object(fields), Object(order)) => ordered_map(serializer, fields, &[order]),
            (Value::Object(fields), Kind(order)) => ordered_map(serializer, fields, &[TYPE_AND_META, order]),
            (Value::Object(entries), Map(shape)) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (name, v) in entries {
                    map.serialize_entry(name, &Ordered(v, shape))?;
                }
                map.end()
            }
            (Value::Array(items), List(shape)) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Ordered(item, shape))?;
                }
                seq.end()
            }
            (v, _) => v.serialize(serializer),
        }
    }
}

/// `value` as compact JSON, in kube's order when it is a document kuberaft builds itself.
pub fn to_vec(value: &Value) -> serde_json::Result<Vec<u8>> {
    match shape_of(value) {
        Some(shape) => encode(&Ordered(value, shape), false),
        None => encode(value, false),
    }
}

/// JSON as Go's `encoding/json` writes it (compact, or indented by two spaces): besides
/// what serde_json escapes, `<`, `>` and `&` (`\u003c`, `\u003e`, `\u0026`) and the line
/// and paragraph separators U+2028 and U+2029, as Go's HTML-safe default does; backspace and
/// form feed as `\u0008` and `\u000c`.
pub fn encode<T: Serialize + ?Sized>(value: &T, pretty: bool) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    if pretty {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            GoEscape(serde_json::ser::PrettyFormatter::new()),
        );
        value.serialize(&mut ser)?;
    } else {
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, GoEscape(serde_json::ser::CompactFormatter));
        value.serialize(&mut ser)?;
    }
    Ok(out)
}

/// A serde_json formatter that escapes strings as Go does and leaves the rest to `F`.
struct GoEscape<F>(F);

impl<F: Formatter> Formatter for GoEscape<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..i])?;
            writer.write_all(escaped.as_bytes())?;
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        match escape {
            CharEscape::Backspace => w.write_all(b"\\u0008"),
            CharEscape::FormFeed => w.write_all(b"\\u000c"),
            other => self.0.write_char_escape(w, other),
        }
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documents_come_out_in_go_field_order() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "m", "reason": "Invalid", "code": 422,
            "details": {"name": "a", "kind": "configmaps", "causes": [{"reason": "FieldValueInvalid", "message": "x", "field": "data"}]}});
        assert_eq!(
            String::from_utf8(to_vec(&status).unwrap()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"Invalid","details":{"name":"a","kind":"configmaps","causes":[{"reason":"FieldValueInvalid","message":"x","field":"data"}]},"code":422}"#
        );
        let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"uid": "u", "name": "web", "namespace": "ns"},
            "spec": {"replicas": 2}, "status": {"selector": "app=web", "replicas": 1}});
        assert_eq!(
            String::from_utf8(to_vec(&scale).unwrap()).unwrap(),
            r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"ns","uid":"u"},"spec":{"replicas":2},"status":{"replicas":1,"selector":"app=web"}}"#
        );
        // Strings are escaped as Go escapes them.
        let odd = json!({"kind": "Status", "apiVersion": "v1", "message": "<nil> & \u{2028}"});
        assert_eq!(
            String::from_utf8(to_vec(&odd).unwrap()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","message":"\u003cnil\u003e \u0026 \u2028"}"#
        );
        // Anything else keeps its sorted keys.
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "data": {}});
        assert_eq!(to_vec(&cm).unwrap(), serde_json::to_vec(&cm).unwrap());
        let pretty = encode(&json!({"a": ["<"]}), true).unwrap();
        assert_eq!(
            String::from_utf8(pretty).unwrap(),
            "{\n  \"a\": [\n    \"\\u003c\"\n  ]\n}"
        );
    }
}
