//! The resourceVersion contract of get, list and watch: which revision a request may be
//! answered at, decided from `resourceVersion`, `resourceVersionMatch`, `limit`, `continue`
//! and `sendInitialEvents` exactly as the spec's tables and kube-apiserver's option
//! validation say, plus the opaque continue token of paged lists.

use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::query::{flag, Query};

/// The version tag inside continue tokens (kube-apiserver's).
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Which revision a read may be served at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAt {
    /// resourceVersion unset: a linearizable read (read index, then the local cache).
    MostRecent,
    /// resourceVersion="0": whatever the local cache holds.
    Any,
    /// At least this revision.
    NotOlderThan(i64),
    /// Exactly this revision.
    Exact(i64),
}

/// A list request's plan: the revision, where the page starts and how long it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPlan {
    /// The revision to read at.
    pub at: ReadAt,
    /// Continue after this key (relative to the collection's key prefix).
    pub after: Option<String>,
    /// Page length (`None`: everything).
    pub limit: Option<usize>,
    /// The request continues an earlier page (a compacted revision then yields a token to go
    /// on at the latest revision).
    pub continuing: bool,
}

/// How a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchPlan {
    /// Where the watch starts: the initial state is read at this revision class, or the
    /// stream starts after an exact revision.
    pub start: WatchStartAt,
    /// Send the initial state as ADDED events first.
    pub initial_events: bool,
    /// Close the initial state with a BOOKMARK annotated `k8s.io/initial-events-end`
    /// (streaming lists).
    pub initial_events_end: bool,
    /// Periodic BOOKMARK events were asked for.
    pub bookmarks: bool,
    /// `timeoutSeconds`, if given.
    pub timeout: Option<Duration>,
}

/// The revision a watch starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStartAt {
    /// The state at a linearizable read.
    MostRecent,
    /// The cache's state now.
    Any,
    /// The state once the cache has reached this revision (streaming list with a resourceVersion).
    NotOlderThan(i64),
    /// Changes after this revision.
    After(i64),
}

/// The fields of a continue token (kube-apiserver's layout: version, revision, start key).
#[derive(Serialize, Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

/// Encodes a continue token: go on after `after` (relative key) at revision `rv` (`-1`: at the
/// latest revision, given when the original revision was compacted).
pub fn encode_continue(rv: i64, after: &str) -> String {
    let t = Token {
        v: TOKEN_VERSION.into(),
        rv,
        start: after.into(),
    };
    base64::engine::general_purpose::URL_SAFE.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn invalid_continue(why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "invalid continue token: continue key is not valid: {why}"
    ))
}

/// Decodes a continue token into `(revision, relative start key)`; `-1` means "latest".
pub fn decode_continue(token: &str) -> ApiResult<(i64, String)> {
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|e| invalid_continue(&e.to_string()))?;
    let t: Token = serde_json::from_slice(&bytes).map_err(|e| invalid_continue(&e.to_string()))?;
    if t.v != TOKEN_VERSION {
        return Err(invalid_continue("server does not recognize this encoded version"));
    }
    if t.rv == 0 || t.rv < -1 {
        return Err(invalid_continue(&format!(
            "incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
        )));
    }
    Ok((t.rv, t.start))
}

fn param<'a>(q: &'a Query, name: &str) -> Option<&'a str> {
    q.get(name).map(String::as_str)
}

/// `resourceVersion`, with `""` meaning unset.
fn resource_version(q: &Query) -> Option<&str> {
    param(q, "resourceVersion").filter(|v| !v.is_empty())
}

/// Parses a resourceVersion; a non-number is a 400.
pub fn parse_rv(rv: &str) -> ApiResult<i64> {
    rv.parse::<u64>()
        .ok()
        .and_then(|v| i64::try_from(v).ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: invalid syntax"
            ))
        })
}

fn forbidden(field: &'static str, msg: &str) -> (&'static str, &'static str, String) {
    (field, "FieldValueForbidden", format!("Forbidden: {msg}"))
}

fn not_supported(
    field: &'static str,
    value: &str,
    supported: &[&str],
) -> (&'static str, &'static str, String) {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    (
        field,
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
    )
}

fn limit(q: &Query) -> ApiResult<Option<usize>> {
    match param(q, "limit").filter(|l| !l.is_empty()) {
        None => Ok(None),
        Some(l) => {
            let n: i64 = l.parse().map_err(|_| {
                ApiError::bad_request(format!("limit: Invalid value: {l:?}: must be an integer"))
            })?;
            Ok(usize::try_from(n).ok().filter(|n| *n > 0))
        }
    }
}

/// The read class of a get: unset → Most Recent, "0" → Any, N → Not older than N.
pub fn get_plan(q: &Query) -> ApiResult<ReadAt> {
    Ok(match resource_version(q) {
        None => ReadAt::MostRecent,
        Some("0") => ReadAt::Any,
        Some(rv) => ReadAt::NotOlderThan(parse_rv(rv)?),
    })
}

/// The plan of a list, per the spec's table; contradictory options are kube-apiserver's 422
/// (`ListOptions` validation) or 400 (a resourceVersion beside a continue token).
pub fn list_plan(q: &Query) -> ApiResult<ListPlan> {
    let rv = resource_version(q);
    let matching = param(q, "resourceVersionMatch").filter(|m| !m.is_empty());
    let cont = param(q, "continue").filter(|c| !c.is_empty());
    let mut errs = Vec::new();
    if let Some(m) = matching {
        if rv.is_none() {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if cont.is_some() {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if m != "Exact" && m != "NotOlderThan" {
            errs.push(not_supported(
                "resourceVersionMatch",
                m,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if m == "Exact" && rv == Some("0") {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if param(q, "sendInitialEvents").is_some() {
        errs.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_list_options(&errs));
    }
    let limit = limit(q)?;
    if let Some(token) = cont {
        if rv.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (at, after) = decode_continue(token)?;
        return Ok(ListPlan {
            at: if at == -1 {
                ReadAt::MostRecent
            } else {
                ReadAt::Exact(at)
            },
            after: Some(after),
            limit,
            continuing: true,
        });
    }
    let at = match (matching, rv) {
        (_, None) => ReadAt::MostRecent,
        (_, Some("0")) => ReadAt::Any,
        (Some("Exact"), Some(rv)) => ReadAt::Exact(parse_rv(rv)?),
        (Some(_), Some(rv)) => ReadAt::NotOlderThan(parse_rv(rv)?),
        (None, Some(rv)) if limit.is_some() => ReadAt::Exact(parse_rv(rv)?),
        (None, Some(rv)) => ReadAt::NotOlderThan(parse_rv(rv)?),
    };
    Ok(ListPlan {
        at,
        after: None,
        limit,
        continuing: false,
    })
}

/// The plan of a watch, with kube-apiserver's validation of the streaming-list options.
pub fn watch_plan(q: &Query) -> ApiResult<WatchPlan> {
    let rv = resource_version(q);
    let matching = param(q, "resourceVersionMatch").filter(|m| !m.is_empty());
    let initial = flag(q, "sendInitialEvents");
    let mut errs = Vec::new();
    if initial.is_some() && matching != Some("NotOlderThan") {
        errs.push(forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if let Some(m) = matching {
        if initial.is_none() {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if m != "NotOlderThan" {
            errs.push(not_supported("resourceVersionMatch", m, &["NotOlderThan"]));
        }
        if param(q, "continue").is_some_and(|c| !c.is_empty()) {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_list_options(&errs));
    }
    let bookmarks = flag(q, "allowWatchBookmarks").unwrap_or(false);
    // 0, like no value, means the server's default.
    let timeout = match param(q, "timeoutSeconds").filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => {
            let secs: u64 = t.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "timeoutSeconds: Invalid value: {t:?}: must be a non-negative integer"
                ))
            })?;
            (secs > 0).then(|| Duration::from_secs(secs))
        }
    };
    let (start, initial_events) = match (initial, rv) {
        // Legacy semantics: unset and "0" list then watch; N starts after N.
        (None, None) => (WatchStartAt::MostRecent, true),
        (None, Some("0")) => (WatchStartAt::Any, true),
        (None, Some(rv)) => (WatchStartAt::After(parse_rv(rv)?), false),
        // Streaming lists: the state synced at least to the consistent read / N.
        (Some(true), None) => (WatchStartAt::MostRecent, true),
        (Some(true), Some("0")) => (WatchStartAt::Any, true),
        (Some(true), Some(rv)) => (WatchStartAt::NotOlderThan(parse_rv(rv)?), true),
        (Some(false), None) => (WatchStartAt::MostRecent, false),
        (Some(false), Some("0")) => (WatchStartAt::Any, false),
        (Some(false), Some(rv)) => (WatchStartAt::After(parse_rv(rv)?), false),
    };
    Ok(WatchPlan {
        start,
        initial_events,
        initial_events_end: initial == Some(true) && bookmarks,
        bookmarks,
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::query::pairs as q;

    #[test]
    fn list_table_rows() {
        let at = |p: &[(&str, &str)]| list_plan(&q(p)).map(|p| p.at);
        assert_eq!(at(&[]), Ok(ReadAt::MostRecent));
        assert_eq!(at(&[("resourceVersion", "0")]), Ok(ReadAt::Any));
        assert_eq!(at(&[("resourceVersion", "7")]), Ok(ReadAt::NotOlderThan(7)));
        assert_eq!(
            at(&[("resourceVersion", "7"), ("limit", "2")]),
            Ok(ReadAt::Exact(7))
        );
        assert_eq!(at(&[("limit", "2")]), Ok(ReadAt::MostRecent));
        assert_eq!(at(&[("resourceVersion", "0"), ("limit", "2")]), Ok(ReadAt::Any));
        assert_eq!(
            at(&[("resourceVersion", "7"), ("resourceVersionMatch", "Exact")]),
            Ok(ReadAt::Exact(7))
        );
        assert_eq!(
            at(&[("resourceVersion", "0"), ("resourceVersionMatch", "NotOlderThan")]),
            Ok(ReadAt::Any)
        );
        let e = list_plan(&q(&[("resourceVersionMatch", "Exact")])).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.message, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
        let e = list_plan(&q(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")])).unwrap_err();
        assert!(e
            .message
            .contains("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
        let tok = encode_continue(9, "a/b");
        let p = list_plan(&q(&[("continue", &tok), ("limit", "1")])).unwrap();
        assert_eq!((p.at, p.after.as_deref()), (ReadAt::Exact(9), Some("a/b")));
        let p = list_plan(&q(&[("continue", &tok), ("resourceVersion", "0")])).unwrap();
        assert_eq!(p.at, ReadAt::Exact(9));
        let e = list_plan(&q(&[("continue", &tok), ("resourceVersion", "5")])).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "specifying resource version is not allowed when using continue"
            )
        );
        assert_eq!(list_plan(&q(&[("continue", "%%%")])).unwrap_err().code, 400);
        assert_eq!(list_plan(&q(&[("resourceVersion", "x")])).unwrap_err().code, 400);
    }

    #[test]
    fn watch_options() {
        let p = watch_plan(&q(&[])).unwrap();
        assert_eq!((p.start, p.initial_events), (WatchStartAt::MostRecent, true));
        let p = watch_plan(&q(&[("resourceVersion", "5")])).unwrap();
        assert_eq!((p.start, p.initial_events), (WatchStartAt::After(5), false));
        let p = watch_plan(&q(&[
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
        ]))
        .unwrap();
        assert!(p.initial_events && p.initial_events_end && p.start == WatchStartAt::MostRecent);
        let p = watch_plan(&q(&[("timeoutSeconds", "0")])).unwrap();
        assert_eq!(p.timeout, None);
        let p = watch_plan(&q(&[("timeoutSeconds", "5")])).unwrap();
        assert_eq!(p.timeout, Some(Duration::from_secs(5)));
        let e = watch_plan(&q(&[("sendInitialEvents", "true")])).unwrap_err();
        assert_eq!(e.message, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
        let e = watch_plan(&q(&[("resourceVersionMatch", "NotOlderThan")])).unwrap_err();
        assert!(e
            .message
            .contains("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
    }
}
