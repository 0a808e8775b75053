//! Label and field selectors (`?labelSelector=`, `?fieldSelector=`), parsed once per request and
//! matched against each object.

use std::collections::BTreeSet;

use serde_json::Value;

use super::status::{ApiError, ApiResult};

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

    /// Whether the object's labels satisfy the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
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

/// A parsed field selector over the fields every object has (`metadata.name`,
/// `metadata.namespace`): `=`, `==` and `!=` joined by commas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a field selector; unknown fields are a 400 like kube-apiserver's.
    pub fn parse(s: &str, kind: &str) -> ApiResult<Self> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: {part:?}; can't understand {part:?}"
                )));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace") {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field} (kind {kind} supports metadata.name and metadata.namespace)"
                )));
            }
            out.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(out))
    }

    /// Whether the object satisfies the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field
                .strip_prefix("metadata.")
                .and_then(|f| obj.get("metadata")?.get(f)?.as_str())
                .unwrap_or("");
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace!=x", "Pod")
                .unwrap()
                .matches(&o)
        );
        assert!(!FieldSelector::parse("metadata.name=b", "Pod")
            .unwrap()
            .matches(&o));
        assert_eq!(FieldSelector::parse("spec.foo=1", "Pod").unwrap_err().code, 400);
    }
}
