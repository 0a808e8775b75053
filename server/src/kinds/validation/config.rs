//! kube's rules for ConfigMaps and Secrets (`ValidateConfigMap`, `ValidateSecret` and their
//! updates): keys that are valid config keys, no key in both `data` and `binaryData`, at most
//! 1 MiB of data, the keys a Secret's type requires — and, once marked immutable, data that
//! never changes (nor the mark); a Secret's type is fixed.

use serde_json::Value;

use super::{keys, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;

/// The most bytes of data a ConfigMap or Secret may hold (kube's `MaxSecretSize`).
const MAX_SIZE: usize = 1024 * 1024;

/// kube's message for a key that is not a valid config key.
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// kube's message for a change of data marked immutable.
const IMMUTABLE: &str = "Forbidden: field is immutable when `immutable` is set";

/// kube's `IsConfigMapKey` messages for `key`.
fn config_key_errors(key: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters");
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errors.push(CONFIG_KEY);
    }
    match key {
        "." => errors.push("must not be '.'"),
        ".." => errors.push("must not be '..'"),
        k if k.starts_with("..") => errors.push("must not start with '..'"),
        _ => {}
    }
    errors
}

/// The keys of `field` checked as config keys, in order; returns the bytes of their values
/// (`binary`: base64 text, counted decoded).
fn check_keys(obj: &Value, field: &str, binary: bool, causes: &mut Causes) -> usize {
    let mut entries: Vec<(&String, &Value)> = keys(&obj[field]).collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut size = 0;
    for (key, value) in entries {
        for e in config_key_errors(key) {
            causes.push((
                format!("{field}[{key}]"),
                format!("Invalid value: {}: {e}", go_quote(key)),
            ));
        }
        let text = value.as_str().unwrap_or_default();
        size += if binary { decoded_len(text) } else { text.len() };
    }
    size
}

/// The bytes base64 text decodes to.
fn decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count();
    (text.len() / 4 * 3).saturating_sub(padding)
}

/// A ConfigMap.
pub fn config_map(obj: &Value, causes: &mut Causes) {
    let mut size = check_keys(obj, "data", false, causes);
    let mut duplicated: Vec<&String> = keys(&obj["data"])
        .filter(|(k, _)| obj["binaryData"].get(k.as_str()).is_some())
        .map(|(k, _)| k)
        .collect();
    duplicated.sort();
    for key in duplicated {
        causes.push((
            format!("data[{key}]"),
            format!(
                "Invalid value: {}: duplicate of key present in binaryData",
                go_quote(key)
            ),
        ));
    }
    size += check_keys(obj, "binaryData", true, causes);
    if size > MAX_SIZE {
        causes.push((
            "[]".to_string(),
            format!("Too long: must have at most {MAX_SIZE} bytes"),
        ));
    }
}

/// A ConfigMap's update: data marked immutable stays as it is.
pub fn config_map_update(old: &Value, new: &Value, causes: &mut Causes) {
    immutable(old, new, &["data", "binaryData"], causes);
}

/// What a Secret of each type must hold in `data`.
const REQUIRED_KEYS: &[(&str, &[&str])] = &[
    ("kubernetes.io/dockercfg", &[".dockercfg"]),
    ("kubernetes.io/dockerconfigjson", &[".dockerconfigjson"]),
    ("kubernetes.io/ssh-auth", &["ssh-privatekey"]),
    ("kubernetes.io/tls", &["tls.crt", "tls.key"]),
];

/// A Secret.
pub fn secret(obj: &Value, causes: &mut Causes) {
    let size = check_keys(obj, "data", true, causes);
    if size > MAX_SIZE {
        causes.push((
            "data".to_string(),
            format!("Too long: must have at most {MAX_SIZE} bytes"),
        ));
    }
    let data = &obj["data"];
    match str_of(obj, "type") {
        "kubernetes.io/service-account-token" => {
            let name = obj["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .unwrap_or_default();
            if name.is_empty() {
                causes.push((
                    "metadata.annotations[kubernetes.io/service-account.name]".to_string(),
                    "Required value".to_string(),
                ));
            }
        }
        "kubernetes.io/basic-auth" => {
            if data.get("username").is_none() && data.get("password").is_none() {
                for key in ["username", "password"] {
                    causes.push((format!("data[{key}]"), "Required value".to_string()));
                }
            }
        }
        kind => {
            let required = REQUIRED_KEYS
                .iter()
                .find(|(t, _)| *t == kind)
                .map_or(&[][..], |(_, keys)| *keys);
            for key in required {
                if data.get(*key).is_none() {
                    causes.push((format!("data[{key}]"), "Required value".to_string()));
                }
            }
        }
    }
}

/// A Secret's update: its type is fixed, and data marked immutable stays as it is.
pub fn secret_update(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (str_of(old, "type"), str_of(new, "type"));
    if before != after {
        causes.push((
            "type".to_string(),
            format!("Invalid value: {}: field is immutable", go_quote(after)),
        ));
    }
    immutable(old, new, &["data"], causes);
}

/// Once `old` is marked immutable, the mark stays and `fields` do not change.
fn immutable(old: &Value, new: &Value, fields: &[&str], causes: &mut Causes) {
    if old["immutable"] != Value::Bool(true) {
        return;
    }
    if new["immutable"] != Value::Bool(true) {
        causes.push(("immutable".to_string(), IMMUTABLE.to_string()));
    }
    for field in fields {
        if empty_as_null(&old[*field]) != empty_as_null(&new[*field]) {
            causes.push((field.to_string(), IMMUTABLE.to_string()));
        }
    }
}

/// A map field with nothing in it compares as absent (kube decodes both to an empty map).
fn empty_as_null(v: &Value) -> &Value {
    match v {
        Value::Object(o) if o.is_empty() => &Value::Null,
        other => other,
    }
}
