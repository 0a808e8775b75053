//! Object metadata: the fields the server decides (uid, creation time, generation, generated
//! names), the ones it keeps immutable, and the validation kube-apiserver applies to names,
//! labels and annotations.
//!
//! Everything random or time-based is decided here, on the replica that receives the request,
//! before the write is proposed: apply stays deterministic.

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use crate::machinery::errors::{go_quote, ApiError, ApiResult};
use crate::machinery::timestamp::now_rfc3339;
use crate::scheme::ResourceType;

/// Field causes of a validation failure: `(field path, message)`.
pub type Causes = Vec<(String, String)>;

/// The most bytes the keys and values of an object's annotations may total (256 KiB).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

/// The longest a DNS label, a qualified name's name part or a label value may be.
const LABEL_MAX: usize = 63;

/// The longest a DNS subdomain may be.
const SUBDOMAIN_MAX: usize = 253;

/// apimachinery's `MaxLenError`.
fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// apimachinery's `RegexError`: what the value must look like, with examples.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        shown.join(" or ")
    )
}

fn dns_label_regex_error() -> String {
    regex_error(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        DNS1123_LABEL_FMT,
        &["my-name", "123-abc"],
    )
}

fn dns_subdomain_regex_error() -> String {
    regex_error(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        &format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"),
        &["example.com"],
    )
}

fn qualified_name_regex_error() -> String {
    regex_error(
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        QUALIFIED_NAME_FMT,
        &["MyName", "my.name", "123-abc"],
    )
}

/// Whether `s` matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (`first` decides the first byte).
fn label_shaped(s: &[u8], first: fn(&u8) -> bool) -> bool {
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    s.first().is_some_and(first) && s.last().is_some_and(inner) && s.iter().all(|b| inner(b) || *b == b'-')
}

fn dns1123_first(b: &u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn subdomain_shaped(s: &[u8]) -> bool {
    s.split(|b| *b == b'.').all(|l| label_shaped(l, dns1123_first))
}

/// Whether `s` matches a qualified name's name part, `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn qualified_shaped(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphanumeric)
        && s.last().is_some_and(u8::is_ascii_alphanumeric)
        && s.iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// apimachinery's `maskTrailingDash`, for a name that is a prefix (a generated name's base):
/// a trailing dash, and the byte before it, become an `a` (kube's exact slicing).
pub fn mask_trailing_dash(name: &str) -> Cow<'_, [u8]> {
    let b = name.as_bytes();
    if b.len() > 1 && b.ends_with(b"-") {
        let mut masked = b[..b.len() - 2].to_vec();
        masked.push(b'a');
        Cow::Owned(masked)
    } else {
        Cow::Borrowed(b)
    }
}

/// apimachinery's `IsDNS1123Label`: every reason `value` is not a lowercase RFC 1123 label
/// (`my-name`), none when it is one.
pub fn dns_label_reasons(value: &[u8]) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > LABEL_MAX {
        reasons.push(max_len_error(LABEL_MAX));
    }
    if !label_shaped(value, dns1123_first) {
        reasons.push(if subdomain_shaped(value) {
            "must not contain dots".to_string()
        } else {
            dns_label_regex_error()
        });
    }
    reasons
}

/// apimachinery's `IsDNS1123Subdomain`: every reason `value` is not a lowercase RFC 1123
/// subdomain (`example.com`), none when it is one.
pub fn dns_subdomain_reasons(value: &[u8]) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        reasons.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !subdomain_shaped(value) {
        reasons.push(dns_subdomain_regex_error());
    }
    reasons
}

/// apimachinery's `IsWildcardDNS1123Subdomain`: every reason `value` is not `*.` followed by a
/// DNS subdomain (`*.example.com`), none when it is one.
pub fn wildcard_dns_subdomain_reasons(value: &[u8]) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        reasons.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !value.strip_prefix(b"*.").is_some_and(subdomain_shaped) {
        reasons.push(regex_error(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
            &format!("\\*\\.{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"),
            &["*.example.com"],
        ));
    }
    reasons
}

/// apimachinery's `IsDNS1035Label`: every reason `value` is not a DNS-1035 label (a DNS label
/// starting with a letter), none when it is one.
pub fn dns1035_label_reasons(value: &[u8]) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > LABEL_MAX {
        reasons.push(max_len_error(LABEL_MAX));
    }
    if !label_shaped(value, u8::is_ascii_lowercase) {
        reasons.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    reasons
}

/// apimachinery's `IsQualifiedName`: every reason `value` is not a qualified name (an optional
/// DNS subdomain prefix and `/`, then a name part, as label keys are), none when it is one.
pub fn qualified_name_reasons(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                reasons.push("prefix part must be non-empty".to_string());
            } else {
                reasons.extend(
                    dns_subdomain_reasons(prefix.as_bytes())
                        .into_iter()
                        .map(|r| format!("prefix part {r}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"],
                )
            )]
        }
    };
    if name.is_empty() {
        reasons.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX {
        reasons.push(format!("name part {}", max_len_error(LABEL_MAX)));
    }
    if !qualified_shaped(name.as_bytes()) {
        reasons.push(qualified_name_regex_error());
    }
    reasons
}

/// apimachinery's `IsValidLabelValue`: every reason `value` is not a label value (empty, or a
/// qualified name's name part), none when it is one.
pub fn label_value_reasons(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > LABEL_MAX {
        reasons.push(max_len_error(LABEL_MAX));
    }
    if !value.is_empty() && !qualified_shaped(value.as_bytes()) {
        reasons.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    reasons
}

/// kube's field message for `value` when `reasons` says it is invalid: the first reason.
fn invalid(value: &str, reasons: Vec<String>) -> Option<String> {
    reasons
        .into_iter()
        .next()
        .map(|why| format!("Invalid value: {}: {why}", go_quote(value)))
}

/// Whether `s` is a lowercase RFC 1123 label (`my-name`), as kube validates namespace names,
/// container and port names.
pub fn is_dns_label(s: &str) -> bool {
    dns_label_reasons(s.as_bytes()).is_empty()
}

/// Whether `s` is a lowercase RFC 1123 subdomain (`example.com`), as kube validates names and
/// API groups.
pub fn is_dns_subdomain(s: &str) -> bool {
    dns_subdomain_reasons(s.as_bytes()).is_empty()
}

/// kube's message for a value that is not a lowercase RFC 1123 label, if it is not one.
pub fn dns_label_error(value: &str) -> Option<String> {
    invalid(value, dns_label_reasons(value.as_bytes()))
}

/// kube's message for a value that is not a lowercase RFC 1123 subdomain, if it is not one.
pub fn dns_subdomain_error(value: &str) -> Option<String> {
    invalid(value, dns_subdomain_reasons(value.as_bytes()))
}

/// kube's `IsValidPathSegmentName` messages for a name that only has to fit in a URL path
/// segment, if it does not.
pub fn path_segment_error(value: &str) -> Option<String> {
    let why = match value {
        "." => "may not be '.'",
        ".." => "may not be '..'",
        _ if value.contains('/') => "may not contain '/'",
        _ if value.contains('%') => "may not contain '%'",
        _ => return None,
    };
    Some(format!("Invalid value: {}: {why}", go_quote(value)))
}

/// Validates an object name for `rt`; returns kube-apiserver's message on failure.
pub fn name_error(rt: &ResourceType, name: &str) -> Option<String> {
    if rt.name_is_path_segment() {
        path_segment_error(name)
    } else if rt.name_is_label() {
        dns_label_error(name)
    } else {
        dns_subdomain_error(name)
    }
}

/// kube's message for a value that is not a qualified name (`prefix/name`, as label keys and
/// match condition names are), if it is not one.
pub fn qualified_name_error(key: &str) -> Option<String> {
    invalid(key, qualified_name_reasons(key))
}

/// kube's message for a value that is not a label value (empty, or a qualified name's name
/// part), if it is not one.
pub fn label_value_error(value: &str) -> Option<String> {
    invalid(value, label_value_reasons(value))
}

/// kube's `ValidateFinalizers`: each finalizer a qualified name, and not both `orphan` and
/// `foregroundDeletion` (reported at `path`, without an index, as kube reports them).
pub fn validate_finalizers(finalizers: &[Value], path: &str, causes: &mut Causes) {
    let names: Vec<&str> = finalizers.iter().filter_map(Value::as_str).collect();
    for name in &names {
        if let Some(e) = qualified_name_error(name) {
            causes.push((path.to_string(), e));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        let shown: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
        causes.push((
            path.to_string(),
            format!(
                "Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                shown.join(", ")
            ),
        ));
    }
}

/// Checks metadata a client controls: labels, annotations and finalizers.
pub fn validate_metadata(meta: &Map<String, Value>, causes: &mut Causes) {
    if let Some(labels) = meta.get("labels") {
        match labels.as_object() {
            Some(labels) => {
                for (k, v) in labels {
                    if let Some(e) = qualified_name_error(k) {
                        causes.push(("metadata.labels".into(), e));
                    }
                    match v.as_str() {
                        Some(s) => {
                            if let Some(e) = label_value_error(s) {
                                causes.push(("metadata.labels".into(), e));
                            }
                        }
                        None => causes.push((
                            "metadata.labels".into(),
                            format!("Invalid value: {v}: label values must be strings"),
                        )),
                    }
                }
            }
            None if labels.is_null() => {}
            None => causes.push((
                "metadata.labels".into(),
                "Invalid value: labels must be a map of strings".into(),
            )),
        }
    }
    if let Some(ann) = meta.get("annotations") {
        match ann.as_object() {
            Some(ann) => {
                let mut total = 0;
                for (k, v) in ann {
                    if let Some(e) = qualified_name_error(k) {
                        causes.push(("metadata.annotations".into(), e));
                    }
                    match v.as_str() {
                        Some(s) => total += k.len() + s.len(),
                        None => causes.push((
                            "metadata.annotations".into(),
                            format!("Invalid value: {v}: annotation values must be strings"),
                        )),
                    }
                }
                if total > MAX_ANNOTATIONS_BYTES {
                    causes.push((
                        "metadata.annotations".into(),
                        format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes (got {total})"),
                    ));
                }
            }
            None if ann.is_null() => {}
            None => causes.push((
                "metadata.annotations".into(),
                "Invalid value: annotations must be a map of strings".into(),
            )),
        }
    }
    if let Some(Value::Array(finalizers)) = meta.get("finalizers") {
        validate_finalizers(finalizers, "metadata.finalizers", causes);
    }
}

/// A new object uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `generateName` + five random characters from kube-apiserver's alphabet.
pub fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    let base = &base[..base.len().min(58)];
    format!("{base}{suffix}")
}

/// The object's `metadata` map (created when absent); errors when it is not an object.
pub fn metadata_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON or YAML object"))?;
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// Checks `apiVersion`/`kind` of a body against the URL, filling them in when absent.
pub fn check_type(rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON or YAML object"))?;
    let gv = rt.group_version();
    match o.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("apiVersion".into(), json!(gv));
        }
        Some(v) if v == gv => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({gv})"
            )))
        }
    }
    match o.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("kind".into(), json!(rt.kind));
        }
        Some(k) if k == &*rt.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                &rt.kind
            )))
        }
    }
    Ok(())
}

/// Prepares a new object for storage: name (or generated name), namespace, uid and creation
/// time; drops fields clients may not set (the type's strategy sets the generation). Returns
/// the object's name.
pub fn prepare_create(rt: &ResourceType, obj: &mut Value, namespace: Option<&str>) -> ApiResult<String> {
    check_type(rt, obj)?;
    let meta = metadata_mut(obj)?;
    let mut causes = Causes::new();
    let name = match meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        Some(n) => n.to_string(),
        None => match meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(base) => generate_name(base),
            None => {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    "",
                    &[(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ))
            }
        },
    };
    if let Some(e) = name_error(rt, &name) {
        causes.push(("metadata.name".into(), e));
    }
    match (
        rt.namespaced,
        namespace,
        meta.get("namespace").and_then(Value::as_str),
    ) {
        (true, Some(url), Some(body)) if !body.is_empty() && body != url => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ))
        }
        (true, Some(url), _) => {
            meta.insert("namespace".into(), json!(url));
        }
        (false, _, Some(ns)) if !ns.is_empty() => {
            meta.remove("namespace");
        }
        _ => {}
    }
    validate_metadata(meta, &mut causes);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &causes));
    }
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(new_uid()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    for server_owned in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "generation",
    ] {
        meta.remove(server_owned);
    }
    Ok(name)
}

/// Prepares an update: the name must match, and immutable metadata and the generation come
/// from `old` (the type's strategy moves the generation when the spec changed).
pub fn prepare_update(rt: &ResourceType, old: &Value, new: &mut Value, name: &str) -> ApiResult<()> {
    check_type(rt, new)?;
    let meta = metadata_mut(new)?;
    match meta.get("name").and_then(Value::as_str) {
        Some(n) if n == name => {}
        None | Some("") => {
            meta.insert("name".into(), json!(name));
        }
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )))
        }
    }
    let mut causes = Causes::new();
    validate_metadata(meta, &mut causes);
    let old_meta = old.get("metadata").and_then(Value::as_object);
    for immutable in [
        "uid",
        "creationTimestamp",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.and_then(|m| m.get(immutable)) {
            Some(v) => {
                meta.insert(immutable.into(), v.clone());
            }
            None => {
                meta.remove(immutable);
            }
        }
    }
    meta.remove("resourceVersion");
    meta.remove("selfLink");
    if !causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, name, &causes));
    }
    Ok(())
}

/// The `PartialObjectMetadata` view (`meta.k8s.io/<version>`) of an object, or the
/// `PartialObjectMetadataList` view of a list, for clients that only need metadata (garbage
/// collectors, kube-rs `list_metadata`); a `Status` passes through unchanged.
pub fn partial_object_metadata(body: Value, version: &str) -> Value {
    let api_version = format!("meta.k8s.io/{version}");
    let partial = |mut obj: Value| {
        json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": api_version,
            "metadata": obj.get_mut("metadata").map(Value::take).unwrap_or_else(|| json!({})),
        })
    };
    match body {
        Value::Object(mut list) if list.get("items").is_some_and(Value::is_array) => {
            let items: Vec<Value> = match list.remove("items") {
                Some(Value::Array(items)) => items.into_iter().map(partial).collect(),
                _ => Vec::new(),
            };
            json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": api_version,
                "metadata": list.remove("metadata").unwrap_or_else(|| json!({})),
                "items": items,
            })
        }
        status if status.get("kind").and_then(Value::as_str) == Some("Status") => status,
        obj => partial(obj),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Registry;

    #[test]
    fn names_follow_rfc_1123() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        let ns = r.lookup("", "v1", "namespaces").unwrap();
        assert!(name_error(cm, "a.b-c").is_none());
        assert!(name_error(cm, "Bad_Name").unwrap().contains("RFC 1123 subdomain"));
        assert!(name_error(ns, "a_b").unwrap().contains("RFC 1123 label"));
        assert_eq!(
            name_error(ns, "a.b"),
            Some("Invalid value: \"a.b\": must not contain dots".to_string())
        );
        assert_eq!(
            name_error(cm, &"a".repeat(254)).map(|m| m.ends_with("must be no more than 253 characters")),
            Some(true)
        );
    }

    #[test]
    fn create_fills_server_fields_and_rejects_bad_metadata() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        let mut obj = json!({"metadata": {"generateName": "web-", "resourceVersion": "9", "labels": {"app": "x"}}, "data": {}});
        let name = prepare_create(cm, &mut obj, Some("default")).unwrap();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(obj["kind"], "ConfigMap");
        assert_eq!(obj["metadata"]["namespace"], "default");
        assert!(obj["metadata"]["uid"].as_str().unwrap().len() == 36);
        assert!(obj["metadata"].get("resourceVersion").is_none());
        assert!(obj["metadata"].get("generation").is_none());
        let mut bad = json!({"metadata": {"name": "x", "labels": {"bad key!": "v"}}});
        let err = prepare_create(cm, &mut bad, Some("default")).unwrap_err();
        assert_eq!((err.code, err.reason), (422, "Invalid"));
        let mut other_ns = json!({"metadata": {"name": "x", "namespace": "other"}});
        assert_eq!(
            prepare_create(cm, &mut other_ns, Some("default"))
                .unwrap_err()
                .code,
            400
        );
        let mut wrong_kind = json!({"kind": "Secret", "metadata": {"name": "x"}});
        assert_eq!(
            prepare_create(cm, &mut wrong_kind, Some("default"))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn finalizers_are_qualified_names_not_both_orphan_and_foreground() {
        let causes = |finalizers: Value| {
            let mut causes = Causes::new();
            let meta = json!({"name": "a", "finalizers": finalizers});
            validate_metadata(meta.as_object().unwrap(), &mut causes);
            causes
        };
        assert!(causes(json!(["kubernetes", "example.com/keep"])).is_empty());
        assert_eq!(
            causes(json!(["bad name"])),
            [("metadata.finalizers".to_string(), "Invalid value: \"bad name\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string())]
        );
        assert_eq!(
            causes(json!(["orphan", "foregroundDeletion"])),
            [("metadata.finalizers".to_string(), "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set".to_string())]
        );
    }

    #[test]
    fn update_keeps_immutable_fields_and_the_stored_generation() {
        let r = Registry::new();
        let d = r.lookup("apps", "v1", "deployments").unwrap();
        let mut old = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}});
        prepare_create(d, &mut old, Some("ns")).unwrap();
        old["metadata"]["generation"] = json!(3);
        let mut new =
            json!({"metadata": {"name": "d", "uid": "forged", "generation": 9}, "spec": {"replicas": 2}});
        prepare_update(d, &old, &mut new, "d").unwrap();
        assert_eq!(new["metadata"]["uid"], old["metadata"]["uid"]);
        assert_eq!(new["metadata"]["generation"], 3);
        let mut renamed = json!({"metadata": {"name": "e"}});
        assert_eq!(prepare_update(d, &old, &mut renamed, "d").unwrap_err().code, 400);
    }

    #[test]
    fn metadata_views_keep_only_metadata() {
        let obj = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "resourceVersion": "5"}, "data": {"k": "v"}});
        assert_eq!(
            partial_object_metadata(obj.clone(), "v1"),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a", "resourceVersion": "5"}})
        );
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": [obj]});
        let view = partial_object_metadata(list, "v1beta1");
        assert_eq!(view["kind"], "PartialObjectMetadataList");
        assert_eq!(view["apiVersion"], "meta.k8s.io/v1beta1");
        assert_eq!(view["metadata"]["resourceVersion"], "9");
        assert_eq!(view["items"][0]["kind"], "PartialObjectMetadata");
        assert_eq!(view["items"][0]["metadata"]["name"], "a");
        assert!(view["items"][0].get("data").is_none());
        let status = json!({"kind": "Status", "code": 404});
        assert_eq!(partial_object_metadata(status.clone(), "v1"), status);
    }
}
