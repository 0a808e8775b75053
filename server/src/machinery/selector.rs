//! Label and field selectors (`?labelSelector=`, `?fieldSelector=`), parsed once per request and
//! matched against each object.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::machinery::errors::{ApiError, ApiResult};

/// What selectors read from an object: its labels and its selectable fields. A whole object
/// (`Value`) is one; the watch cache keeps a compact extract of each object instead.
pub trait Selectable {
    /// The value of the label `key`, if the object has it.
    fn label(&self, key: &str) -> Option<&str>;
    /// The text a field selector compares for the JSON path `path` (one the selector parser
    /// produced); an absent field reads as `""` (`"false"` for a boolean path).
    fn field(&self, path: &str) -> String;
}

impl Selectable for Value {
    fn label(&self, key: &str) -> Option<&str> {
        self.get("metadata")?.get("labels")?.get(key)?.as_str()
    }

    fn field(&self, path: &str) -> String {
        field_text(self, path)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set(values: &str) -> ApiResult<BTreeSet<String>> {
    let inner = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: expected a (value, ...) set in {values:?}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    /// `a`, `!a`, joined by commas.
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for part in split_top(s).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || ApiError::bad_request(format!("unable to parse requirement: {part:?}"));
            let req = if let Some(k) = part.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Req::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().to_string(), set(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Req::In(k.trim().to_string(), set(v)?)
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Req::Exists(part.to_string())
            } else {
                return Err(bad());
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object's labels satisfy the selector.
    pub fn matches(&self, obj: &(impl Selectable + ?Sized)) -> bool {
        let get = |k: &str| obj.label(k);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// One `field=value` / `field!=value` requirement, with the JSON path it reads.
#[derive(Debug, Clone, PartialEq)]
struct FieldReq {
    path: String,
    equal: bool,
    value: String,
}

/// A parsed field selector over `metadata.name`, `metadata.namespace` and the type's own
/// selectable fields: `=`, `==` and `!=` joined by commas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<FieldReq>);

impl FieldSelector {
    /// Parses a field selector for a built-in type that can be selected by `fields` (its
    /// entry in the type table: `(field, JSON path)`, see `scheme::field_selectors`); an
    /// unknown field is a 400 with kube-apiserver's message.
    pub fn parse(s: &str, fields: &[(&str, &str)]) -> ApiResult<Self> {
        Self::parse_with(s, fields)
    }

    /// Parses a field selector for a custom resource whose definition declares `selectable`
    /// fields (their JSON paths, which are also their names).
    pub fn parse_custom(s: &str, selectable: &[impl AsRef<str>]) -> ApiResult<Self> {
        let extra: Vec<(&str, &str)> = selectable.iter().map(|p| (p.as_ref(), p.as_ref())).collect();
        Self::parse_with(s, &extra)
    }

    fn parse_with(s: &str, extra: &[(&str, &str)]) -> ApiResult<Self> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let path = match field {
                "metadata.name" => "metadata.name",
                "metadata.namespace" => "metadata.namespace",
                other => match extra.iter().find(|(f, _)| *f == other) {
                    Some((_, path)) => *path,
                    None if extra.is_empty() => {
                        return Err(ApiError::bad_request(format!(
                            "\"{other}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                        )))
                    }
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {other}"
                        )))
                    }
                },
            };
            out.push(FieldReq {
                path: path.to_string(),
                equal,
                value: value.trim().to_string(),
            });
        }
        Ok(FieldSelector(out))
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value the selector requires the field at `path` to equal (`path=value`), if it
    /// pins it: an object it matches has exactly that value there.
    pub fn pinned(&self, path: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.equal && r.path == path)
            .map(|r| r.value.as_str())
    }

    /// Whether the object satisfies the selector; an absent field reads as `""`.
    pub fn matches(&self, obj: &(impl Selectable + ?Sized)) -> bool {
        self.0.iter().all(|r| (obj.field(&r.path) == r.value) == r.equal)
    }
}

/// The JSON paths a field selector on objects of a type that can be selected by `fields` can
/// compare.
pub fn selectable_paths<'a>(fields: &'a [(&'a str, &'a str)]) -> impl Iterator<Item = &'a str> {
    ["metadata.name", "metadata.namespace"]
        .into_iter()
        .chain(fields.iter().map(|(_, path)| *path))
}

/// The text a field selector compares for `path` in `obj`.
pub fn field_text(obj: &Value, path: &str) -> String {
    let (path, boolean) = match path.strip_suffix('?') {
        Some(p) => (p, true),
        None => (path, false),
    };
    value_text(path.split('.').try_fold(obj, |v, seg| v.get(seg)), boolean)
}

/// The text a field selector compares for the value found at a path (`None`: absent);
/// `boolean` paths (`…?`) read an absent or null value as `false`.
pub fn value_text(v: Option<&Value>, boolean: bool) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        None | Some(Value::Null) if boolean => "false".into(),
        _ => String::new(),
    }
}

/// A `LabelSelector` as a selector string (`app=web,tier in (a,b),!legacy`), requirements
/// sorted by key; empty for a missing or empty selector.
pub fn selector_string(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", label_text(v))));
        }
    }
    for e in selector["matchExpressions"].as_array().into_iter().flatten() {
        let key = label_text(&e["key"]);
        let values: BTreeSet<String> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(label_text)
            .collect();
        let values = values.into_iter().collect::<Vec<_>>().join(",");
        let req = match e["operator"].as_str() {
            Some("In") => format!("{key} in ({values})"),
            Some("NotIn") => format!("{key} notin ({values})"),
            Some("Exists") => key.clone(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key, req));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter().map(|(_, r)| r).collect::<Vec<_>>().join(",")
}

/// A label key or value as text: a string as it is, nothing for null, other JSON as written.
fn label_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::field_selectors;
    use serde_json::json;

    #[test]
    fn label_selectors_cover_every_operator() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m("app=web") && m("app==web") && m("app!=db") && m("app"));
        assert!(m("app in (web, db),tier") && m("tier notin (back)") && m("!missing"));
        assert!(!m("app=db") && !m("missing") && !m("app in (db)") && !m("!app") && !m("app notin (web)"));
        assert!(m(""));
        assert_eq!(LabelSelector::parse("app in web").unwrap_err().code, 400);
    }

    #[test]
    fn field_selectors_match_name_and_namespace() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let f = |s: &str, plural: &str| FieldSelector::parse(s, field_selectors("", plural));
        assert!(f("metadata.name=a,metadata.namespace!=x", "pods")
            .unwrap()
            .matches(&o));
        assert!(!f("metadata.name=b", "pods").unwrap().matches(&o));
        let e = f("spec.foo=1", "pods").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "field label not supported: spec.foo")
        );
        let e = f("spec.foo=1", "configmaps").unwrap_err();
        assert_eq!(
            e.message,
            "\"spec.foo\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
    }

    #[test]
    fn custom_resources_select_by_their_declared_fields() {
        let obj = json!({"metadata": {"name": "a"}, "spec": {"color": "red"}});
        let f = FieldSelector::parse_custom("spec.color=red,metadata.name=a", &["spec.color"]).unwrap();
        assert!(f.matches(&obj));
        assert!(!FieldSelector::parse_custom("spec.color!=red", &["spec.color"])
            .unwrap()
            .matches(&obj));
        assert_eq!(
            FieldSelector::parse_custom("spec.size=1", &["spec.color"])
                .unwrap_err()
                .message,
            "field label not supported: spec.size"
        );
    }

    #[test]
    fn field_selectors_cover_per_type_fields() {
        let pod = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let f = |s: &str| {
            FieldSelector::parse(s, field_selectors("", "pods"))
                .unwrap()
                .matches(&pod)
        };
        assert!(f("spec.nodeName=n1,status.phase=Running") && f("spec.hostNetwork=false"));
        assert!(!f("spec.nodeName=n2") && !f("status.phase!=Running"));
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "kubelet"}});
        let e = |s: &str| {
            FieldSelector::parse(s, field_selectors("", "events"))
                .unwrap()
                .matches(&ev)
        };
        assert!(e("involvedObject.kind=Pod,involvedObject.name=p,source=kubelet"));
        let secret = json!({"type": "Opaque"});
        assert!(
            FieldSelector::parse("type=Opaque", field_selectors("", "secrets"))
                .unwrap()
                .matches(&secret)
        );
        let rs = json!({"status": {"replicas": 3}});
        assert!(
            FieldSelector::parse("status.replicas=3", field_selectors("apps", "replicasets"))
                .unwrap()
                .matches(&rs)
        );
    }
}
