//! The watch cache's form of an object read straight from its stored JSON, without decoding
//! the object into a tree and encoding it again.
//!
//! Every replica turns every change it applies into a cache entry: the object as a list item
//! (without `kind` and `apiVersion`, with `metadata.resourceVersion` set) plus the labels and
//! field texts selectors read. Decoding a pod of 8 KB into a `serde_json::Value` and encoding
//! it again was the largest single cost of applying a change in a large cluster's load, and of
//! loading the cache when a replica starts. Stored objects are the compact, key-sorted JSON
//! `serde_json` writes for a `Value`, so the entry can be spliced from the stored bytes
//! instead: only the top level and `metadata` are split into their members, and the
//! selectable fields are looked up along their paths.
//!
//! The splice is exactly what decoding and encoding again would produce, or nothing: whenever
//! the bytes hold something the cache's encoder would write differently (the characters Go's
//! encoder escapes and `serde_json` does not) or a key that is itself escaped, [`splice`]
//! returns `None` and the caller decodes the object.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::machinery::selector::value_text;

/// A stored object's cache entry, spliced from its JSON.
#[derive(Debug)]
pub struct Spliced {
    /// The object's JSON without `kind` and `apiVersion`, with `metadata.resourceVersion`.
    pub item: Vec<u8>,
    /// `"kind":…,"apiVersion":…` as they open the whole object's JSON (empty if absent).
    pub type_fields: String,
    /// The string-valued labels, in key order.
    pub labels: Vec<(Box<str>, Box<str>)>,
    /// The text of each of `paths`, as [`crate::machinery::selector::field_text`] reads it.
    pub fields: Vec<(&'static str, Box<str>)>,
}

/// An object's members, borrowed from its JSON, in key order.
type Members<'a> = BTreeMap<&'a str, &'a RawValue>;

/// The cache entry of the stored JSON `plain` at revision `rv`, with the texts of the
/// selectable `paths`; `None` when only decoding gives the exact entry (or the JSON is not an
/// object with an object `metadata`).
pub fn splice(plain: &[u8], rv: i64, paths: impl Iterator<Item = &'static str>) -> Option<Spliced> {
    if !encodes_alike(plain) {
        return None;
    }
    let top: Members = serde_json::from_slice(plain).ok()?;
    let meta: Members = serde_json::from_str(top.get("metadata")?.get()).ok()?;
    let mut type_fields = String::new();
    for field in ["kind", "apiVersion"] {
        if let Some(v) = top.get(field) {
            if !type_fields.is_empty() {
                type_fields.push(',');
            }
            type_fields.push('"');
            type_fields.push_str(field);
            type_fields.push_str("\":");
            type_fields.push_str(v.get());
        }
    }
    let rv_text = format!("\"{rv}\"");
    let mut item = Vec::with_capacity(plain.len() + rv_text.len() + 20);
    item.push(b'{');
    let mut first = true;
    for (key, value) in &top {
        if matches!(*key, "kind" | "apiVersion") {
            continue;
        }
        member(&mut item, &mut first, key);
        if *key == "metadata" {
            let mut meta_first = true;
            item.push(b'{');
            let rv_member = std::iter::once(("resourceVersion", rv_text.as_str()));
            let mut members: Vec<(&str, &str)> = meta
                .iter()
                .filter(|(k, _)| **k != "resourceVersion")
                .map(|(k, v)| (*k, v.get()))
                .collect();
            let at = members.partition_point(|(k, _)| *k < "resourceVersion");
            members.splice(at..at, rv_member);
            for (k, v) in members {
                member(&mut item, &mut meta_first, k);
                item.extend_from_slice(v.as_bytes());
            }
            item.push(b'}');
        } else {
            item.extend_from_slice(value.get().as_bytes());
        }
    }
    item.push(b'}');
    // The cache keeps exactly the bytes.
    item.shrink_to_fit();
    let labels = match meta.get("labels") {
        Some(raw) => match serde_json::from_str::<Value>(raw.get()).ok()? {
            Value::Object(l) => l
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(s) => Some((k.into_boxed_str(), s.into_boxed_str())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        },
        None => Vec::new(),
    };
    let mut objects = Objects::default();
    let fields = paths
        .map(|path| Some((path, field_text(&top, &mut objects, path)?.into_boxed_str())))
        .collect::<Option<Vec<_>>>()?;
    Some(Spliced {
        item,
        type_fields,
        labels,
        fields,
    })
}

/// Writes `"key":`, after a comma unless it is the first member.
fn member(out: &mut Vec<u8>, first: &mut bool, key: &str) {
    if !std::mem::take(first) {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Whether the cache's encoder (Go's escaping) writes `plain`'s strings as they are: it
/// escapes `<`, `>`, `&`, U+2028 and U+2029, and writes `\b` and `\f` as `\u0008` and
/// `\u000c`, where `serde_json` does not. (A `\\b` also counts: the check may refuse more
/// than it must, never less.)
fn encodes_alike(plain: &[u8]) -> bool {
    memchr::memchr3(b'<', b'>', b'&', plain).is_none()
        && !memchr::memchr_iter(0xe2, plain)
            .any(|i| matches!(plain.get(i + 1..i + 3), Some([0x80, 0xa8 | 0xa9])))
        && !memchr::memchr_iter(b'\\', plain).any(|i| matches!(plain.get(i + 1), Some(b'b' | b'f')))
}

/// The top-level members split as objects on first use: a type's selectable fields mostly
/// share their first segment (`spec.…`, `status.…`), which is then read once.
#[derive(Default)]
struct Objects<'a> {
    split: Vec<(&'a str, Option<Members<'a>>)>,
}

impl<'a> Objects<'a> {
    /// The members of the top-level member `name` (`raw`), or `None` when it is not an
    /// object; `Err` when its keys are escaped (decode instead).
    fn of(&mut self, name: &'a str, raw: &'a RawValue) -> Result<Option<&Members<'a>>, ()> {
        let at = match self.split.iter().position(|(n, _)| *n == name) {
            Some(at) => at,
            None => {
                let members = match raw.get().as_bytes().first() {
                    Some(b'{') => Some(serde_json::from_str::<Members>(raw.get()).map_err(|_| ())?),
                    _ => None,
                };
                self.split.push((name, members));
                self.split.len() - 1
            }
        };
        Ok(self.split[at].1.as_ref())
    }
}

/// The text a field selector compares for `path` (see `machinery::selector::field_text`);
/// `None` when the path crosses an object whose keys are escaped (decode instead).
fn field_text<'a>(top: &Members<'a>, objects: &mut Objects<'a>, path: &'a str) -> Option<String> {
    let (path, boolean) = match path.strip_suffix('?') {
        Some(p) => (p, true),
        None => (path, false),
    };
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let mut at: Option<&RawValue> = top.get(first).copied();
    if let (Some(raw), Some(second)) = (at, segments.next()) {
        at = objects.of(first, raw).ok()?.and_then(|m| m.get(second).copied());
    }
    for segment in segments {
        let Some(raw) = at else { break };
        at = match raw.get().as_bytes().first() {
            Some(b'{') => serde_json::from_str::<Members>(raw.get())
                .ok()?
                .get(segment)
                .copied(),
            _ => None,
        };
    }
    let value = at
        .map(|raw| serde_json::from_str::<Value>(raw.get()))
        .transpose()
        .ok()?;
    Some(value_text(value.as_ref(), boolean))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machinery::go_json;
    use crate::machinery::selector;

    const PATHS: [&str; 4] = [
        "metadata.name",
        "spec.nodeName",
        "status.phase",
        "spec.hostNetwork?",
    ];

    /// An entry as the tests compare it: item, type fields, labels, field texts.
    type Entry = (Vec<u8>, String, Vec<(String, String)>, Vec<String>);

    /// What decoding and encoding again gives: the reference the splice must equal.
    fn decoded(plain: &[u8], rv: i64) -> Entry {
        let mut obj: Value = serde_json::from_slice(plain).unwrap();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        let labels = obj["metadata"]["labels"]
            .as_object()
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let fields = PATHS.iter().map(|p| selector::field_text(&obj, p)).collect();
        let o = obj.as_object_mut().unwrap();
        let mut type_fields = Vec::new();
        for f in ["kind", "apiVersion"] {
            if let Some(v) = o.remove(f) {
                type_fields.push(format!("{}:{}", json!(f), v));
            }
        }
        (
            go_json::encode(&obj, false).unwrap(),
            type_fields.join(","),
            labels,
            fields,
        )
    }

    fn spliced(plain: &[u8], rv: i64) -> Option<Entry> {
        let s = splice(plain, rv, PATHS.into_iter())?;
        Some((
            s.item,
            s.type_fields,
            s.labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
            s.fields.into_iter().map(|(_, v)| v.into()).collect(),
        ))
    }

    #[test]
    fn a_splice_is_exactly_what_decoding_and_encoding_again_gives() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
                "labels": {"app": "web", "tier": "a b", "n": 1}, "uid": "u", "zzz": [1, 2.5, -3e-7]},
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i:1"}],
                    "hostNetwork": true, "x": {"deep": {"é": "ü\u{1}\"\\/"}}},
                "status": {"phase": "Running", "n": 12345678901234567_u64}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "c", "resourceVersion": "9"},
                "data": {"a": "x\ty\nz"}}),
            json!({"metadata": {}}),
            json!({"apiVersion": "v1", "metadata": {"a": null, "labels": {}}, "spec": null}),
            json!({"metadata": {"name": "n"}, "spec": "not an object", "status": {"phase": 3}}),
            json!({"metadata": {"name": "n"}, "spec": {"nodeName": {"an": "object"}}}),
        ];
        for obj in objects {
            let plain = serde_json::to_vec(&obj).unwrap();
            for rv in [1, 42, i64::MAX] {
                assert_eq!(spliced(&plain, rv), Some(decoded(&plain, rv)), "{obj}");
            }
        }
    }

    #[test]
    fn what_the_encoders_write_differently_is_left_to_decoding() {
        for obj in [
            json!({"metadata": {"name": "a<b"}}),
            json!({"metadata": {"annotations": {"x": "&"}}}),
            json!({"metadata": {}, "data": {"s": "\u{2028}"}}),
            json!({"metadata": {}, "data": {"s": "\u{8}"}}),
            json!({"metadata": {}, "data": {"s": "\u{c}"}}),
            json!({"metadata": {}, "data": {"a\"b": "escaped key"}}),
            json!({"metadata": {}, "spec": {"node\"Name": "x"}}),
        ] {
            let plain = serde_json::to_vec(&obj).unwrap();
            let spliced = spliced(&plain, 5);
            assert!(spliced.is_none() || spliced == Some(decoded(&plain, 5)), "{obj}");
        }
        // An escaped key at the top or in metadata, or on a field's path, is never spliced.
        for obj in [
            json!({"metadata": {}, "a\"b": 1}),
            json!({"metadata": {"a\"b": 1}}),
            json!({"metadata": {}, "spec": {"node\"Name": "x"}}),
        ] {
            assert!(spliced(&serde_json::to_vec(&obj).unwrap(), 5).is_none(), "{obj}");
        }
        for bad in [&b"[1]"[..], b"{\"metadata\": 1}", b"{}", b"not json"] {
            assert!(spliced(bad, 5).is_none());
        }
    }
}
