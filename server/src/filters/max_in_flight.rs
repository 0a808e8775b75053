//! In-flight limits: kube-apiserver's `--max-requests-inflight` and
//! `--max-mutating-requests-inflight`. A replica executes at most so many read-only requests
//! (`get`, `list`) and so many mutating ones at once, each holding its seat until its response
//! body is sent (or dropped); a request beyond that is answered at
//! once with kube's `429` (`Retry-After: 1`, "Too many requests, please try again later.")
//! instead of queueing, so a flood degrades into refusals a client retries rather than into
//! memory and latency that grow without bound.
//!
//! Not limited, as in kube-apiserver: long-running requests (watches and connect streams),
//! whose count says nothing about load, and `system:masters`, which always gets an answer; and
//! the health checks, which kube's priority and fairness exempts (`probes`). Lease writes
//! (`coordination.k8s.io` leases: node heartbeats and leader election) have seats of their own,
//! as kube's priority levels give them, so that a flood of other writes never starves them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::authentication::UserInfo;
use crate::endpoints::request_info::{RequestInfo, Verb};
use crate::filters::metrics;
use crate::filters::observed_body::{Observed, Observer};

/// The group that is never limited.
const MASTERS: &str = "system:masters";
/// kube-apiserver's answer to a refused request, and the wait it asks for.
const TOO_MANY: &str = "Too many requests, please try again later.\n";
const RETRY_AFTER: &str = "1";

/// The replica's seats, per kind of request (`None`: no limit).
#[derive(Debug)]
pub struct Limits {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
    leases: Option<Arc<Semaphore>>,
}

impl Limits {
    /// Seats for `read_only` and `mutating` requests and for lease writes (0: unlimited).
    pub fn new(read_only: usize, mutating: usize, leases: usize) -> Arc<Limits> {
        crate::filters::read_vs_write::set_limits(read_only, mutating);
        let seats = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Arc::new(Limits {
            read_only: seats(read_only),
            mutating: seats(mutating),
            leases: seats(leases),
        })
    }
}

/// Where a request takes its seat.
#[derive(Debug, PartialEq, Eq)]
enum Pool {
    Exempt,
    ReadOnly,
    Mutating,
    Leases,
}

/// The pool of a request.
fn pool(info: Option<&RequestInfo>, user: Option<&UserInfo>, long_running: bool) -> Pool {
    if long_running || user.is_some_and(|u| u.groups.iter().any(|g| g == MASTERS)) {
        return Pool::Exempt;
    }
    match info {
        Some(RequestInfo::Resource { request, verb }) => match verb {
            Verb::Get | Verb::List | Verb::Watch => Pool::ReadOnly,
            _ if &*request.rt.group == "coordination.k8s.io" && &*request.rt.plural == "leases" => {
                Pool::Leases
            }
            _ => Pool::Mutating,
        },
        Some(RequestInfo::NonResource { path, .. })
            if matches!(path.as_str(), "/livez" | "/readyz" | "/healthz") =>
        {
            Pool::Exempt
        }
        Some(RequestInfo::NonResource { verb, .. }) if verb != "get" && verb != "head" => Pool::Mutating,
        _ => Pool::ReadOnly,
    }
}

/// The filter: a seat for the request while its handler runs, or `429`.
pub async fn filter(State(limits): State<Arc<Limits>>, request: Request, next: Next) -> Response {
    let info = request.extensions().get::<RequestInfo>();
    let user = request.extensions().get::<Arc<UserInfo>>().map(Arc::as_ref);
    let long_running = metrics::is_long_running(&request);
    let seats = match pool(info, user, long_running) {
        Pool::Exempt => None,
        Pool::ReadOnly => limits.read_only.as_ref(),
        Pool::Mutating => limits.mutating.as_ref(),
        Pool::Leases => limits.leases.as_ref(),
    };
    let Some(seats) = seats else {
        return next.run(request).await;
    };
    let Ok(seat) = seats.clone().try_acquire_owned() else {
        metrics::record_refused(&request, StatusCode::TOO_MANY_REQUESTS);
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            TOO_MANY,
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
        response
            .headers_mut()
            .insert("X-Content-Type-Options", HeaderValue::from_static("nosniff"));
        return response;
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(parts, Observed::body(body, Seat { _held: seat }))
}

/// A seat held by a response body: released when the body is dropped, once it is all sent or
/// the client went away. kube-apiserver's handler writes the whole response before its filter
/// returns the seat; a seat returned with the headers would let slow readers of large lists
/// pile up without bound.
struct Seat {
    _held: OwnedSemaphorePermit,
}

impl Observer for Seat {
    fn dropped(&mut self, _ended: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints::request_info::{parse_path, Target};
    use crate::scheme::Registry;
    use axum::http::Method;

    fn info(method: Method, path: &str) -> RequestInfo {
        match parse_path(&Registry::new(), path) {
            Ok(Target::Resource(request)) => {
                let verb = request.verb(&method, false).expect("a verb");
                RequestInfo::Resource { request, verb }
            }
            other => panic!("{path}: {other:?}"),
        }
    }

    fn user(groups: &[&str]) -> UserInfo {
        UserInfo {
            name: "u".into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: Default::default(),
        }
    }

    #[test]
    fn requests_take_seats_by_kind_and_masters_are_exempt() {
        let alice = user(&["system:authenticated"]);
        let list = info(Method::GET, "/api/v1/namespaces/a/configmaps");
        let create = info(Method::POST, "/api/v1/namespaces/a/configmaps");
        let lease = info(
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
        );
        assert_eq!(pool(Some(&list), Some(&alice), false), Pool::ReadOnly);
        assert_eq!(pool(Some(&create), Some(&alice), false), Pool::Mutating);
        assert_eq!(pool(Some(&lease), Some(&alice), false), Pool::Leases);
        assert_eq!(pool(Some(&list), Some(&alice), true), Pool::Exempt);
        let admin = user(&["system:masters", "system:authenticated"]);
        assert_eq!(pool(Some(&create), Some(&admin), false), Pool::Exempt);
    }
}
