//! A request's query parameters as the client sent them. The verbs read their options from it;
//! `store::plans` turns the read options into typed plans. Boolean options are read here, once,
//! the way kube-apiserver reads them, so every option accepts what clients send (the Python
//! client sends `True`).

use std::collections::HashMap;

/// Query parameters of a request.
pub type Query = HashMap<String, String>;

/// A query of these pairs (for tests of what reads queries).
#[cfg(test)]
pub fn pairs(pairs: &[(&str, &str)]) -> Query {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A boolean option's value as kube-apiserver's query conversion reads it
/// (`Convert_Slice_string_To_bool`): `""`, `"0"` and `"false"` in any letter case are false,
/// anything else is true.
pub fn option_true(value: &str) -> bool {
    !(value.is_empty() || value == "0" || value.eq_ignore_ascii_case("false"))
}

/// A boolean option of `q` (`None` when absent), read as [`option_true`] reads it.
pub fn flag(q: &Query, name: &str) -> Option<bool> {
    q.get(name).map(|v| option_true(v))
}

/// Go's `strconv.ParseBool`, which kube-apiserver uses for `pretty`: `1 t T TRUE true True`
/// and `0 f F FALSE false False`; `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Whether a raw query string asks for a watch, as kube's request info reads `watch`: its
/// first value, unless it is `0` or `false` in any letter case (`None` without the option).
pub fn watch_requested(raw: Option<&str>) -> Option<bool> {
    let value = raw?.split('&').find_map(|pair| match pair.split_once('=') {
        Some(("watch", v)) => Some(v),
        None if pair == "watch" => Some(""),
        _ => None,
    })?;
    Some(!(value.eq_ignore_ascii_case("false") || value == "0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boolean_options_read_as_kube_reads_them() {
        for t in ["true", "True", "TRUE", "1", "yes", "t"] {
            assert!(option_true(t), "{t}");
        }
        for f in ["", "0", "false", "False", "FALSE"] {
            assert!(!option_true(f), "{f:?}");
        }
        let q = Query::from([("allowWatchBookmarks".to_string(), "True".to_string())]);
        assert_eq!(flag(&q, "allowWatchBookmarks"), Some(true));
        assert_eq!(flag(&q, "force"), None);
        assert_eq!(parse_bool("True"), Some(true));
        assert_eq!(parse_bool("F"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn watch_is_asked_for_by_any_first_value_but_false_or_zero() {
        assert_eq!(watch_requested(Some("watch=True")), Some(true));
        assert_eq!(watch_requested(Some("limit=5&watch=1")), Some(true));
        assert_eq!(watch_requested(Some("watch")), Some(true));
        assert_eq!(watch_requested(Some("watch=False&watch=true")), Some(false));
        assert_eq!(watch_requested(Some("watch=0")), Some(false));
        assert_eq!(watch_requested(Some("limit=5")), None);
        assert_eq!(watch_requested(None), None);
    }
}
