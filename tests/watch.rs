//! The watch cache's resourceVersion contract on a real three-replica cluster: every row of the
//! spec's get/list/watch tables over plain HTTP, paging, 410/504/422/400 answers with their
//! Status bodies, watches resumed on another replica, bookmarks, streaming lists, selector
//! transitions, slow watchers, watches multiplexed over HTTP/2, kubelets' watches indexed by
//! node, and the real kubectl (`get -w`, `--chunk-size`, selectors).

mod support;

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use prost::encoding::decode_varint;
use reqwest::Method;
use serde_json::{json, Value};
use support::kube::Kube;
use support::Options;

const T: Duration = Duration::from_secs(30);

fn rv_of(v: &Value) -> i64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion in {v}"))
        .parse()
        .unwrap()
}

/// Creates namespace `ns` and waits until it holds what every namespace gets (the `default`
/// ServiceAccount, the `kube-root-ca.crt` ConfigMap), so those writes precede the test's own.
async fn create_ns(k: &Kube, ns: &str) {
    let (code, body) = k
        .send(
            Method::POST,
            0,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": ns}})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    k.wait_namespace_populated(ns).await;
}

/// The ConfigMap every namespace holds.
const ROOT_CA: &str = "kube-root-ca.crt";

/// Creates a ConfigMap through replica `node`; returns its resourceVersion.
async fn create_cm(k: &Kube, node: usize, ns: &str, name: &str, labels: Value, data: Value) -> i64 {
    let (code, body) = k
        .send(
            Method::POST,
            node,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            Some(&json!({"metadata": {"name": name, "labels": labels}, "data": data})),
        )
        .await;
    assert_eq!(code, 201, "{body}{}", k.cluster.log_tails(40));
    rv_of(&body)
}

/// Merge-patches a ConfigMap through replica `node`; returns its new resourceVersion.
async fn patch_cm(k: &Kube, node: usize, ns: &str, name: &str, patch: Value) -> i64 {
    let r = k
        .http
        .patch(k.url(node, &format!("/api/v1/namespaces/{ns}/configmaps/{name}")))
        .header("Content-Type", "application/merge-patch+json")
        .body(patch.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    rv_of(&r.json().await.unwrap())
}

async fn delete_cm(k: &Kube, node: usize, ns: &str, name: &str) {
    let (code, body) = k
        .send(
            Method::DELETE,
            node,
            &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{body}");
}

/// GET with response headers.
async fn get_full(k: &Kube, node: usize, path: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let r = k.http.get(k.url(node, path)).send().await.unwrap();
    let code = r.status().as_u16();
    let headers = r.headers().clone();
    (code, headers, r.json().await.unwrap_or(Value::Null))
}

async fn get(k: &Kube, node: usize, path: &str) -> (u16, Value) {
    let (code, _, body) = get_full(k, node, path).await;
    (code, body)
}

/// The current revision, from a Most Recent list of `base` on node-1.
async fn current(k: &Kube, base: &str) -> i64 {
    rv_of(&get(k, 0, base).await.1)
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// A watch response read event by event.
struct Watch {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

/// What reading a watch produced.
#[derive(Debug)]
enum Next {
    Event(Value),
    Closed,
    Quiet,
}

impl Watch {
    async fn open(k: &Kube, node: usize, path: &str) -> Watch {
        Watch::open_accept(k, node, path, "application/json").await
    }

    async fn open_accept(k: &Kube, node: usize, path: &str, accept: &str) -> Watch {
        let resp = k
            .http
            .get(k.url(node, path))
            .header("Accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "watch {path}");
        Watch {
            resp,
            buf: Vec::new(),
        }
    }

    /// The next raw line (JSON) or `None` at the end of the stream / after `wait`.
    async fn next(&mut self, wait: Duration) -> Next {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Next::Event(serde_json::from_slice(&line).expect("a watch line is JSON"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.resp.chunk()).await {
                Err(_) => return Next::Quiet,
                Ok(Ok(Some(c))) => self.buf.extend_from_slice(&c),
                Ok(Ok(None)) | Ok(Err(_)) => return Next::Closed,
            }
        }
    }

    /// The next event; panics when the stream ends or stays quiet for `T`.
    async fn event(&mut self) -> Value {
        match self.next(T).await {
            Next::Event(e) => e,
            other => panic!("expected an event, got {other:?}"),
        }
    }

    /// Events (bookmarks skipped) until `n` were received.
    async fn events(&mut self, n: usize) -> Vec<Value> {
        self.events_within(n).await.unwrap_or_else(|(got, next)| {
            panic!("expected an event, got {next:?} after {} of {n}", got.len())
        })
    }

    /// Events (bookmarks skipped) until `n` were received; those received and what came
    /// instead of the next when the stream ended or stayed quiet for `T`.
    async fn events_within(&mut self, n: usize) -> Result<Vec<Value>, (Vec<Value>, Next)> {
        let mut out = Vec::new();
        while out.len() < n {
            match self.next(T).await {
                Next::Event(e) if e["type"] == "BOOKMARK" => {}
                Next::Event(e) => out.push(e),
                other => return Err((out, other)),
            }
        }
        Ok(out)
    }
}

fn summary(events: &[Value]) -> Vec<(String, String, i64)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"].as_str().unwrap_or("").to_string(),
                rv_of(&e["object"]),
            )
        })
        .collect()
}

/// The stream checker: resourceVersions strictly increase (ordered, unique) and equal the
/// revisions the writes were acknowledged at (no gaps against the store's history).
fn check_stream(events: &[Value], expected_revisions: &[i64]) {
    let got: Vec<i64> = events.iter().map(|e| rv_of(&e["object"])).collect();
    assert!(got.windows(2).all(|w| w[0] < w[1]), "not ordered/unique: {got:?}");
    assert_eq!(got, expected_revisions, "gap or duplicate: {:?}", summary(events));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_list_follow_the_resource_version_tables() {
    let k = Kube::start().await;
    create_ns(&k, "rv").await;
    let rv1 = create_cm(&k, 0, "rv", "a", json!({"app": "x"}), json!({"v": "1"})).await;
    let rv2 = patch_cm(&k, 0, "rv", "a", json!({"data": {"v": "2"}})).await;
    create_cm(&k, 1, "rv", "b", json!({"app": "y"}), json!({})).await;

    // Read-your-writes across replicas: a write acknowledged by node-1 is visible to a Most
    // Recent get/list on node-3 at once.
    for i in 0..5 {
        let name = format!("ryw-{i}");
        let rv = create_cm(&k, 0, "rv", &name, json!({}), json!({})).await;
        let (code, obj) = get(&k, 2, &format!("/api/v1/namespaces/rv/configmaps/{name}")).await;
        assert_eq!((code, rv_of(&obj)), (200, rv), "{obj}");
        let (_, list) = get(&k, 2, "/api/v1/namespaces/rv/configmaps").await;
        assert!(names(&list).contains(&name) && rv_of(&list) >= rv);
    }

    // get: unset (Most Recent), 0 (Any), N (Not older than).
    for q in ["", "?resourceVersion=0", &format!("?resourceVersion={rv2}")] {
        let (code, obj) = get(&k, 2, &format!("/api/v1/namespaces/rv/configmaps/a{q}")).await;
        assert_eq!((code, obj["data"]["v"].as_str()), (200, Some("2")), "{q}: {obj}");
    }
    let far = rv2 + 1_000_000;
    let t0 = Instant::now();
    let (code, headers, status) = get_full(
        &k,
        1,
        &format!("/api/v1/namespaces/rv/configmaps/a?resourceVersion={far}"),
    )
    .await;
    assert_eq!(code, 504, "{status}");
    assert!(t0.elapsed() >= Duration::from_secs(3) && t0.elapsed() < Duration::from_secs(10));
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(status["reason"], "Timeout");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Too large resource version"),
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1);

    // list rows.
    let base = "/api/v1/namespaces/rv/configmaps";
    let (code, latest) = get(&k, 1, base).await;
    assert_eq!(code, 200);
    let now = rv_of(&latest);
    assert_eq!(names(&latest).len(), 8, "7 written and {ROOT_CA}");
    let (_, any) = get(&k, 1, &format!("{base}?resourceVersion=0")).await;
    assert!(rv_of(&any) >= 1 && !names(&any).is_empty());
    let (_, nolder) = get(&k, 2, &format!("{base}?resourceVersion={rv2}")).await;
    assert!(rv_of(&nolder) >= rv2);
    let (_, nolder) = get(
        &k,
        2,
        &format!("{base}?resourceVersion={rv2}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert!(rv_of(&nolder) >= rv2);
    let (_, zero) = get(
        &k,
        2,
        &format!("{base}?resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=2"),
    )
    .await;
    assert_eq!(names(&zero).len(), 2);
    let (_, zero) = get(&k, 2, &format!("{base}?resourceVersion=0&limit=3")).await;
    assert_eq!(names(&zero).len(), 3);
    assert_eq!(zero["metadata"]["remainingItemCount"], 5);
    let (_, nolder) = get(
        &k,
        1,
        &format!("{base}?resourceVersion={rv1}&resourceVersionMatch=NotOlderThan&limit=3"),
    )
    .await;
    assert!(rv_of(&nolder) >= now && names(&nolder).len() == 3, "{nolder}");
    let (code, _, status) = get_full(
        &k,
        2,
        &format!("{base}?resourceVersion={far}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (504, Some("Timeout")));

    // Exact: resourceVersionMatch=Exact, and limit with resourceVersion=N, read the past.
    for q in [
        format!("?resourceVersion={rv1}&resourceVersionMatch=Exact"),
        format!("?resourceVersion={rv1}&limit=10"),
        format!("?resourceVersion={rv1}&resourceVersionMatch=Exact&limit=10"),
    ] {
        let (code, past) = get(&k, 2, &format!("{base}{q}")).await;
        assert_eq!(code, 200, "{q}: {past}");
        assert_eq!(rv_of(&past), rv1, "{q}");
        assert_eq!(names(&past), vec!["a", ROOT_CA], "{q}");
        assert_eq!(past["items"][0]["data"]["v"], "1", "{q}");
        assert_eq!(rv_of(&past["items"][0]), rv1);
    }
    let (code, at_now) = get(
        &k,
        0,
        &format!("{base}?resourceVersion={now}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!((code, rv_of(&at_now), names(&at_now)), (200, now, names(&latest)));

    // Invalid combinations: kube-apiserver's ListOptions validation (422) and the 400 row.
    let invalid = [
        ("?resourceVersionMatch=Exact", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ("?resourceVersionMatch=Exact&limit=5", "resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ("?resourceVersionMatch=NotOlderThan", "resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ("?resourceVersionMatch=NotOlderThan&limit=5", "resourceVersionMatch is forbidden unless resourceVersion is provided"),
        ("?resourceVersion=0&resourceVersionMatch=Exact", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""),
        ("?resourceVersion=0&resourceVersionMatch=Exact&limit=5", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""),
        ("?resourceVersion=5&resourceVersionMatch=Newest", "resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""),
        ("?sendInitialEvents=true", "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
    ];
    for (q, msg) in invalid {
        let (code, status) = get(&k, 1, &format!("{base}{q}")).await;
        assert_eq!(code, 422, "{q}: {status}");
        assert_eq!(status["reason"], "Invalid", "{q}");
        assert_eq!(status["details"]["kind"], "ListOptions", "{q}");
        let m = status["message"].as_str().unwrap();
        assert!(
            m.starts_with("ListOptions.meta.k8s.io \"\" is invalid: ") && m.contains(msg),
            "{q}: {m}"
        );
    }
    let (_, first) = get(&k, 1, &format!("{base}?limit=2")).await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let (code, status) = get(
        &k,
        1,
        &format!("{base}?limit=2&continue={token}&resourceVersion={now}"),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "specifying resource version is not allowed when using continue"
    );
    let (code, status) = get(
        &k,
        1,
        &format!("{base}?limit=2&continue={token}&resourceVersionMatch=Exact&resourceVersion={now}"),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"]
        .as_str()
        .unwrap()
        .contains("resourceVersionMatch is forbidden when continue is provided"));
    // continue with resourceVersion=0: treated as the continue token.
    let (code, second) = get(
        &k,
        1,
        &format!("{base}?limit=2&continue={token}&resourceVersion=0"),
    )
    .await;
    assert_eq!((code, rv_of(&second)), (200, rv_of(&first)));
    let (code, status) = get(&k, 1, &format!("{base}?limit=2&continue=bm90LWpzb24")).await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid continue token"),
        "{status}"
    );
    let (code, status) = get(&k, 1, &format!("{base}?resourceVersion=abc")).await;
    assert_eq!(code, 400, "{status}");

    // Label selectors with every operator, and per-type field selectors.
    let (_, sel) = get(&k, 2, &format!("{base}?labelSelector=app%20in%20(x,z)")).await;
    assert_eq!(names(&sel), vec!["a"]);
    let (_, sel) = get(&k, 2, &format!("{base}?labelSelector=app,app!=x")).await;
    assert_eq!(names(&sel), vec!["b"]);
    let (_, sel) = get(&k, 2, &format!("{base}?fieldSelector=metadata.name=b")).await;
    assert_eq!(names(&sel), vec!["b"]);
    let (code, status) = get(&k, 2, &format!("{base}?fieldSelector=spec.nodeName=n1")).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    for (name, node, phase) in [("p1", "n1", "Running"), ("p2", "n2", "Pending")] {
        let (code, body) = k
            .send(
                Method::POST,
                0,
                "/api/v1/namespaces/rv/pods",
                Some(&json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}, "status": {"phase": phase}})),
            )
            .await;
        assert_eq!(code, 201, "{body}");
    }
    let (_, pods) = get(&k, 1, "/api/v1/namespaces/rv/pods?fieldSelector=spec.nodeName=n2").await;
    assert_eq!(names(&pods), vec!["p2"]);
    let (_, pods) = get(
        &k,
        1,
        "/api/v1/pods?fieldSelector=spec.nodeName!=n2,metadata.namespace=rv",
    )
    .await;
    assert_eq!(names(&pods), vec!["p1"]);
    let (code, status) = get(&k, 1, "/api/v1/pods?fieldSelector=spec.bogus=1").await;
    assert_eq!(
        (code, status["message"].as_str()),
        (400, Some("field label not supported: spec.bogus"))
    );
    let (code, body) = k
        .send(
            Method::POST,
            0,
            "/api/v1/namespaces/rv/secrets",
            Some(&json!({"metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth", "stringData": {"username": "u", "password": "p"}})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (_, secrets) = get(
        &k,
        1,
        "/api/v1/namespaces/rv/secrets?fieldSelector=type=kubernetes.io/basic-auth",
    )
    .await;
    assert_eq!(names(&secrets), vec!["s"]);
    let (_, secrets) = get(&k, 1, "/api/v1/namespaces/rv/secrets?fieldSelector=type=Opaque").await;
    assert!(names(&secrets).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_one_consistent_snapshot_while_writes_happen() {
    let k = Kube::start().await;
    create_ns(&k, "pg").await;
    for i in 0..30 {
        create_cm(
            &k,
            i % 3,
            "pg",
            &format!("cm-{i:02}"),
            json!({"even": (i % 2 == 0).to_string()}),
            json!({}),
        )
        .await;
    }
    let base = "/api/v1/namespaces/pg/configmaps";
    let (_, first) = get(&k, 2, &format!("{base}?limit=7")).await;
    let rev = rv_of(&first);
    assert_eq!(
        first["metadata"]["remainingItemCount"], 24,
        "{}",
        first["metadata"]
    );
    let mut seen = names(&first);
    let mut token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let mut writes = 0;
    while !token.is_empty() {
        // Writes between pages: new objects, changes and deletions must not show.
        patch_cm(
            &k,
            0,
            "pg",
            &format!("cm-{:02}", 29 - writes),
            json!({"data": {"late": "yes"}}),
        )
        .await;
        create_cm(&k, 1, "pg", &format!("late-{writes}"), json!({}), json!({})).await;
        writes += 1;
        let (code, page) = get(&k, writes % 3, &format!("{base}?limit=7&continue={token}")).await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(rv_of(&page), rev, "every page is at the first page's revision");
        for item in page["items"].as_array().unwrap() {
            assert!(
                item["data"].get("late").is_none(),
                "a later change leaked: {item}"
            );
            assert!(rv_of(item) <= rev);
        }
        seen.extend(names(&page));
        token = page["metadata"]["continue"].as_str().unwrap_or("").to_string();
        match page["metadata"].get("remainingItemCount") {
            Some(n) => assert_eq!(n.as_i64().unwrap() as usize, 31 - seen.len()),
            None => assert!(token.is_empty(), "{}", page["metadata"]),
        }
    }
    let expected: Vec<String> = (0..30)
        .map(|i| format!("cm-{i:02}"))
        .chain([ROOT_CA.to_string()])
        .collect();
    assert_eq!(seen, expected);
    // The same snapshot read exactly.
    let (_, exact) = get(
        &k,
        1,
        &format!("{base}?resourceVersion={rev}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(names(&exact), expected);
    // With a selector: no remainingItemCount, pages of matches only.
    let (_, sel) = get(&k, 0, &format!("{base}?limit=4&labelSelector=even%3Dtrue")).await;
    assert_eq!(names(&sel), vec!["cm-00", "cm-02", "cm-04", "cm-06"]);
    assert!(sel["metadata"].get("remainingItemCount").is_none() && sel["metadata"]["continue"].is_string());

    // kubectl pages with --chunk-size and gets everything.
    let out = k.ok(
        "node-3",
        &["get", "cm", "-n", "pg", "--chunk-size=5", "-o", "name"],
    );
    assert_eq!(out.lines().count(), 31 + writes);
    let (ok, _, err) = k.kubectl("node-2", &["get", "cm", "-n", "pg", "--chunk-size=5", "-v=6"]);
    assert!(ok && err.matches("limit=5").count() >= 7, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_revisions_answer_410_gone() {
    let k = Kube::start_with(Options {
        retention_seconds: 1,
        ..Options::default()
    })
    .await;
    create_ns(&k, "gone").await;
    let old = create_cm(&k, 0, "gone", "a", json!({}), json!({})).await;
    create_cm(&k, 0, "gone", "b", json!({}), json!({})).await;
    create_cm(&k, 0, "gone", "c", json!({}), json!({})).await;
    let base = "/api/v1/namespaces/gone/configmaps";
    let (_, first) = get(&k, 1, &format!("{base}?limit=1")).await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let first_rv = rv_of(&first);
    // Wait until the history at the first page's revision is compacted on every replica.
    support::eventually(T, || async {
        patch_cm(
            &k,
            0,
            "gone",
            "c",
            json!({"data": {"t": format!("{:?}", Instant::now())}}),
        )
        .await;
        for node in 0..3 {
            let q = format!("{base}?resourceVersion={first_rv}&resourceVersionMatch=Exact");
            let (code, _) = get(&k, node, &q).await;
            if code != 410 {
                return Err(format!("node {node}: {code}"));
            }
        }
        Ok(())
    })
    .await;
    for node in 0..3 {
        let (code, status) = get(&k, node, &format!("{base}?resourceVersion={old}&limit=5")).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (410, Some("Expired")),
            "{status}"
        );
        assert_eq!(
            status["message"],
            "The resourceVersion for the provided list is too old."
        );
    }
    let (code, status) = get(&k, 1, &format!("{base}?limit=1&continue={token}")).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (410, Some("Expired")),
        "{status}"
    );
    assert!(status["message"]
        .as_str()
        .unwrap()
        .starts_with("The provided continue parameter is too old to display a consistent list result."));
    // The token in the Status continues (inconsistently) at the latest revision.
    let fresh = status["metadata"]["continue"].as_str().unwrap();
    let (code, rest) = get(&k, 1, &format!("{base}?limit=5&continue={fresh}")).await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), vec!["b", "c", ROOT_CA]);
    // A watch from a compacted revision: one ERROR event with a 410 Expired Status.
    let mut w = Watch::open(&k, 2, &format!("{base}?watch=1&resourceVersion={old}")).await;
    let e = w.event().await;
    assert_eq!(e["type"], "ERROR", "{e}");
    assert_eq!(
        (e["object"]["code"].as_i64(), e["object"]["reason"].as_str()),
        (Some(410), Some("Expired"))
    );
    assert!(e["object"]["message"]
        .as_str()
        .unwrap()
        .starts_with("too old resource version"));
    assert!(matches!(w.next(T).await, Next::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_start_resume_bookmark_and_follow_selectors() {
    let k = Kube::start().await;
    create_ns(&k, "w").await;
    create_ns(&k, "other").await;
    let base = "/api/v1/namespaces/w/configmaps";
    let r0 = create_cm(&k, 0, "w", "pre", json!({"app": "web"}), json!({})).await;

    // Start unset (Most Recent) and "0" (Any): the state as ADDED, then changes.
    for q in ["", "&resourceVersion=0"] {
        let mut w = Watch::open(&k, 2, &format!("{base}?watch=1{q}")).await;
        let state = w.events(2).await;
        let added: Vec<(String, String)> = summary(&state).into_iter().map(|(t, n, _)| (t, n)).collect();
        assert_eq!(
            added,
            [("ADDED".into(), ROOT_CA.into()), ("ADDED".into(), "pre".into())],
            "{q}"
        );
        assert_eq!(rv_of(&state[1]["object"]), r0, "{q}");
        assert_eq!(state[1]["object"]["kind"], "ConfigMap");
    }
    // A watch from N: only the changes after N, on every replica, in order, with every type.
    let mut expected = Vec::new();
    let mut w1 = Watch::open(&k, 1, &format!("{base}?watch=1&resourceVersion={r0}")).await;
    expected.push(create_cm(&k, 0, "w", "x", json!({"app": "web"}), json!({})).await);
    expected.push(patch_cm(&k, 2, "w", "x", json!({"data": {"k": "1"}})).await);
    expected.push(patch_cm(&k, 1, "w", "pre", json!({"data": {"k": "1"}})).await);
    delete_cm(&k, 0, "w", "x").await;
    let (_, after_delete) = get(&k, 0, base).await;
    expected.push(rv_of(&after_delete));
    let got = w1.events(4).await;
    let types: Vec<String> = summary(&got)
        .into_iter()
        .map(|(t, n, _)| format!("{t} {n}"))
        .collect();
    assert_eq!(types, ["ADDED x", "MODIFIED x", "MODIFIED pre", "DELETED x"]);
    check_stream(&got, &expected);
    drop(w1);

    // Resume on another replica from the last RV seen: no gap, no duplicate.
    let now = current(&k, base).await;
    let mut w = Watch::open(&k, 0, &format!("{base}?watch=1&resourceVersion={now}")).await;
    let mut first_half = Vec::new();
    let mut revs = Vec::new();
    for i in 0..6 {
        revs.push(create_cm(&k, i % 3, "w", &format!("r{i}"), json!({}), json!({})).await);
    }
    first_half.extend(w.events(3).await);
    drop(w);
    let last = rv_of(&first_half[2]["object"]);
    for i in 6..9 {
        revs.push(create_cm(&k, i % 3, "w", &format!("r{i}"), json!({}), json!({})).await);
    }
    let mut w = Watch::open(&k, 2, &format!("{base}?watch=1&resourceVersion={last}")).await;
    let mut all = first_half;
    all.extend(w.events(6).await);
    check_stream(&all, &revs);
    assert!(matches!(w.next(Duration::from_millis(500)).await, Next::Quiet));
    drop(w);

    // Bookmarks on a quiet collection: writes elsewhere advance it; a bookmark is never ahead
    // of an event not yet sent, and never older than the last event.
    let now = current(&k, base).await;
    let mut w = Watch::open(
        &k,
        1,
        &format!("{base}?watch=1&resourceVersion={now}&allowWatchBookmarks=true"),
    )
    .await;
    let other = create_cm(&k, 0, "other", "noise", json!({}), json!({})).await;
    let bm = loop {
        let e = w.event().await;
        assert_eq!(e["type"], "BOOKMARK", "only bookmarks on a quiet collection: {e}");
        if rv_of(&e["object"]) >= other {
            break e;
        }
    };
    assert_eq!(bm["object"]["kind"], "ConfigMap");
    assert!(bm["object"]["metadata"].get("name").is_none());
    let mut last_rv = rv_of(&bm["object"]);
    let mut mine = Vec::new();
    for i in 0..10 {
        mine.push(
            create_cm(
                &k,
                i % 3,
                if i % 2 == 0 { "w" } else { "other" },
                &format!("bm{i}"),
                json!({}),
                json!({}),
            )
            .await,
        );
    }
    let mine_w: Vec<i64> = mine.iter().step_by(2).copied().collect();
    let mut got = Vec::new();
    let deadline = Instant::now() + T;
    while got.len() < mine_w.len() || last_rv < *mine.last().unwrap() {
        assert!(Instant::now() < deadline, "stalled at {last_rv}");
        let e = w.event().await;
        let rv = rv_of(&e["object"]);
        assert!(rv >= last_rv, "went backwards: {e}");
        if e["type"] == "BOOKMARK" {
            // Every event of this collection at or below the bookmark was already sent.
            let pending = mine_w.iter().filter(|r| **r <= rv).count();
            assert!(
                got.len() >= pending,
                "bookmark {rv} ahead of unsent events {mine_w:?}, got {got:?}"
            );
        } else {
            got.push(rv);
        }
        last_rv = rv;
    }
    assert_eq!(got, mine_w);
    drop(w);

    // Selector transitions: starting to match is ADDED, stopping is DELETED.
    let now = current(&k, base).await;
    let mut w = Watch::open(
        &k,
        2,
        &format!("{base}?watch=1&resourceVersion={now}&labelSelector=app%3Dweb"),
    )
    .await;
    let a = create_cm(&k, 0, "w", "sel", json!({"app": "db"}), json!({})).await;
    let b = patch_cm(&k, 0, "w", "sel", json!({"metadata": {"labels": {"app": "web"}}})).await;
    let c = patch_cm(&k, 1, "w", "sel", json!({"data": {"z": "1"}})).await;
    let d = patch_cm(&k, 0, "w", "sel", json!({"metadata": {"labels": {"app": "db"}}})).await;
    patch_cm(&k, 0, "w", "sel", json!({"data": {"z": "2"}})).await;
    let got = w.events(3).await;
    assert!(a < b);
    assert_eq!(
        summary(&got),
        vec![
            ("ADDED".into(), "sel".into(), b),
            ("MODIFIED".into(), "sel".into(), c),
            ("DELETED".into(), "sel".into(), d)
        ]
    );
    assert_eq!(got[2]["object"]["metadata"]["labels"]["app"], "db");
    assert!(matches!(w.next(Duration::from_millis(500)).await, Next::Quiet));

    // Field selector watch through the legacy /watch/ path, on one object by name.
    let mut w = Watch::open(
        &k,
        0,
        &format!("/api/v1/watch/namespaces/w/configmaps/pre?resourceVersion={now}"),
    )
    .await;
    let e = patch_cm(&k, 2, "w", "pre", json!({"data": {"k": "2"}})).await;
    patch_cm(&k, 2, "w", "sel", json!({"data": {"k": "2"}})).await;
    let got = w.events(1).await;
    assert_eq!(summary(&got), vec![("MODIFIED".into(), "pre".into(), e)]);
    assert!(matches!(w.next(Duration::from_millis(500)).await, Next::Quiet));

    // timeoutSeconds ends the stream cleanly.
    let now = current(&k, base).await;
    let t0 = Instant::now();
    let mut w = Watch::open(
        &k,
        1,
        &format!("{base}?watch=1&resourceVersion={now}&timeoutSeconds=1"),
    )
    .await;
    assert!(matches!(w.next(Duration::from_secs(10)).await, Next::Closed));
    assert!(t0.elapsed() < Duration::from_secs(5));

    // A watch from a revision this replica has not reached: 504 Too large resource version.
    let r = k
        .http
        .get(k.url(1, &format!("{base}?watch=1&resourceVersion={}", e + 1_000_000)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let status: Value = r.json().await.unwrap();
    assert!(status["message"]
        .as_str()
        .unwrap()
        .contains("Too large resource version"));

    // Protobuf: length-delimited WatchEvent messages whose object carries the k8s envelope.
    let now = current(&k, base).await;
    let mut r = k
        .http
        .get(k.url(1, &format!("{base}?watch=1&resourceVersion={now}")))
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    patch_cm(&k, 0, "w", "pre", json!({"data": {"k": "pb"}})).await;
    let mut buf = Vec::new();
    while buf.len() < 4 || buf.len() < 4 + u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize {
        let chunk = tokio::time::timeout(T, r.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        buf.extend_from_slice(&chunk);
    }
    let event = pb_fields(&buf[4..]);
    assert_eq!(event[0], (1, b"MODIFIED".to_vec()));
    let raw = &pb_fields(&event[1].1)[0].1;
    assert!(raw.starts_with(b"k8s\0"), "{raw:?}");
    assert!(raw.windows(b"pb".len()).any(|w| w == b"pb"));

    // YAML encoding: one document per event.
    let now = current(&k, base).await;
    let mut r = k
        .http
        .get(k.url(2, &format!("{base}?watch=1&resourceVersion={now}")))
        .header("Accept", "application/yaml")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/yaml");
    let y = patch_cm(&k, 0, "w", "pre", json!({"data": {"k": "3"}})).await;
    let chunk = tokio::time::timeout(T, r.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let doc: Value = yaml_serde::from_slice(&chunk).unwrap();
    assert_eq!(
        (doc["type"].as_str(), rv_of(&doc["object"])),
        (Some("MODIFIED"), y),
        "{doc}"
    );
}

/// The length-delimited fields `(number, payload)` of a protobuf message.
fn pb_fields(mut b: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = decode_varint(&mut b).unwrap();
        assert_eq!(key & 7, 2, "only length-delimited fields expected");
        let len = decode_varint(&mut b).unwrap() as usize;
        out.push(((key >> 3) as u32, b[..len].to_vec()));
        b = &b[len..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_send_the_state_then_an_annotated_bookmark() {
    let k = Kube::start().await;
    create_ns(&k, "sl").await;
    for i in 0..5 {
        create_cm(
            &k,
            i % 3,
            "sl",
            &format!("o{i}"),
            json!({"i": i.to_string()}),
            json!({}),
        )
        .await;
    }
    let base = "/api/v1/namespaces/sl/configmaps";
    let starts = [(1, "&resourceVersion="), (2, "&resourceVersion=0"), (0, "")];
    for (later, (node, rv)) in starts.into_iter().enumerate() {
        let mut w = Watch::open(
            &k,
            node,
            &format!("{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true{rv}"),
        )
        .await;
        let mut added = Vec::new();
        let bm = loop {
            let e = w.event().await;
            match e["type"].as_str() {
                Some("ADDED") => added.push(e["object"].clone()),
                Some("BOOKMARK") => break e,
                _ => panic!("{e}"),
            }
        };
        assert_eq!(
            bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let at = rv_of(&bm["object"]);
        // The initial events equal a list at the bookmark's resourceVersion.
        let (_, list) = get(
            &k,
            node,
            &format!("{base}?resourceVersion={at}&resourceVersionMatch=Exact"),
        )
        .await;
        let listed: Vec<Value> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"].clone())
            .collect();
        let streamed: Vec<Value> = added.iter().map(|o| o["metadata"].clone()).collect();
        assert_eq!(streamed, listed);
        assert_eq!(added.len(), 6 + later, "5 written, {ROOT_CA} and the later ones");
        // Then the stream continues after the bookmark.
        let next = create_cm(
            &k,
            (node + 1) % 3,
            "sl",
            &format!("later-{node}"),
            json!({}),
            json!({}),
        )
        .await;
        let got = w.events(1).await;
        assert_eq!(summary(&got)[0], ("ADDED".into(), format!("later-{node}"), next));
    }
    // With a resourceVersion: the state synced at least to it.
    let last = create_cm(&k, 0, "sl", "z", json!({}), json!({})).await;
    let mut w = Watch::open(
        &k,
        2,
        &format!("{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={last}"),
    )
    .await;
    let mut n = 0;
    loop {
        let e = w.event().await;
        if e["type"] == "BOOKMARK" {
            assert!(rv_of(&e["object"]) >= last);
            break;
        }
        n += 1;
    }
    assert_eq!(n, 10);
    // kube-apiserver's validation of the streaming-list options.
    let cases = [
        (
            "?watch=1&sendInitialEvents=true",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "?watch=1&resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
            "Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
        ),
    ];
    for (q, msg) in cases {
        let (code, status) = get(&k, 0, &format!("{base}{q}")).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (422, Some("Invalid")),
            "{q}: {status}"
        );
        assert!(status["message"].as_str().unwrap().contains(msg), "{q}: {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_watcher_is_closed_and_resumes_without_loss() {
    let k = Kube::start_with(Options {
        watch_buffer: 8,
        ..Options::default()
    })
    .await;
    create_ns(&k, "slow").await;
    let start = create_cm(&k, 0, "slow", "seed", json!({}), json!({})).await;
    let base = "/api/v1/namespaces/slow/configmaps";
    let slow = Watch::open(&k, 1, &format!("{base}?watch=1&resourceVersion={start}")).await;
    // Big objects, and nobody reading: the socket, the frame queue and then the watcher's
    // buffer fill up.
    let big = "x".repeat(256 * 1024);
    let mut revs = Vec::new();
    for i in 0..120 {
        revs.push(create_cm(&k, 0, "slow", &format!("big-{i}"), json!({}), json!({"v": big})).await);
    }
    closed_then_resumed(
        &k,
        slow,
        |last| format!("{base}?watch=1&resourceVersion={last}"),
        &revs,
    )
    .await;

    // The same for a kubelet's watch, which takes its node's events from a queue of its own.
    let pods = "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dslow-node";
    let from = current(&k, "/api/v1/namespaces/slow/pods").await;
    let slow = Watch::open(&k, 1, &format!("{pods}&resourceVersion={from}")).await;
    let big = "x".repeat(200 * 1024);
    let mut revs = Vec::new();
    for i in 0..120 {
        let pod = json!({"metadata": {"name": format!("big-{i}"), "annotations": {"v": big}},
            "spec": {"nodeName": "slow-node", "containers": [{"name": "c", "image": "i"}]}});
        let (code, body) = k
            .send(Method::POST, 0, "/api/v1/namespaces/slow/pods", Some(&pod))
            .await;
        assert_eq!(code, 201, "create {i}: {body}{}", k.cluster.log_tails(40));
        revs.push(rv_of(&body));
    }
    closed_then_resumed(&k, slow, |last| format!("{pods}&resourceVersion={last}"), &revs).await;
}

/// Reads a watch nobody read while `revs` were written, which the server cut off: its stream
/// ends (cleanly) before the last event; resumed on another replica from the last
/// resourceVersion received (`resume` is the watch from there), it sends the rest, no gap,
/// no duplicate.
async fn closed_then_resumed(k: &Kube, mut slow: Watch, resume: impl Fn(i64) -> String, revs: &[i64]) {
    let mut got = Vec::new();
    loop {
        match slow.next(T).await {
            Next::Event(e) => got.push(e),
            Next::Closed => break,
            Next::Quiet => panic!("the slow watch was neither closed nor complete"),
        }
    }
    assert!(
        !got.is_empty() && got.len() < revs.len(),
        "received {} of {}",
        got.len(),
        revs.len()
    );
    let last = rv_of(&got.last().unwrap()["object"]);
    let mut w = Watch::open(k, 2, &resume(last)).await;
    let rest = revs.len() - got.len();
    match w.events_within(rest).await {
        Ok(events) => got.extend(events),
        Err((events, next)) => {
            let slow: Vec<i64> = got.iter().map(|e| rv_of(&e["object"])).collect();
            let resumed: Vec<i64> = events.iter().map(|e| rv_of(&e["object"])).collect();
            let missing: Vec<&i64> = revs
                .iter()
                .filter(|r| !slow.contains(r) && !resumed.contains(r))
                .collect();
            panic!(
                "the watch resumed on replica 2 from {last} sent {} of {rest} events, then {next:?}; \
                 missing from both streams: {missing:?}; the slow watch sent {slow:?}, the resumed \
                 one {resumed:?}; writes acknowledged at {revs:?}{}",
                events.len(),
                k.cluster.log_tails(40)
            )
        }
    }
    check_stream(&got, revs);
}

/// Spawns `kubectl` with the test kubeconfig, its stdout captured.
fn spawn_kubectl(k: &Kube, args: &[&str]) -> std::process::Child {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .arg("--cache-dir")
        .arg(&k.cache_dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watches_with_tables_and_selectors() {
    let k = Kube::start().await;
    create_ns(&k, "kw").await;
    create_cm(&k, 0, "kw", "before", json!({"app": "web"}), json!({})).await;
    let table = spawn_kubectl(
        &k,
        &[
            "--context",
            "node-2",
            "get",
            "cm",
            "-n",
            "kw",
            "-w",
            "--request-timeout",
            "6s",
        ],
    );
    let only = spawn_kubectl(
        &k,
        &[
            "--context",
            "node-3",
            "get",
            "cm",
            "-n",
            "kw",
            "--watch-only",
            "-l",
            "app=web",
            "-o",
            "name",
            "--request-timeout",
            "6s",
        ],
    );
    let fields = spawn_kubectl(
        &k,
        &[
            "--context",
            "node-1",
            "get",
            "cm",
            "-n",
            "kw",
            "-w",
            "--field-selector",
            "metadata.name=f1",
            "-o",
            "name",
            "--request-timeout",
            "6s",
        ],
    );
    // Write only once all three kubectl watches are registered (the replicas' watcher gauge).
    support::eventually(T, || async {
        let mut watchers = 0.0;
        for node in 0..3 {
            let text = k.text(&k.url(node, "/metrics")).await;
            watchers += text
                .lines()
                .filter(|l| {
                    l.starts_with("apiserver_registered_watchers{") && l.contains("kind=\"ConfigMap\"")
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>();
        }
        if watchers >= 3.0 {
            Ok(())
        } else {
            Err(format!("{watchers} watchers"))
        }
    })
    .await;
    create_cm(&k, 0, "kw", "f1", json!({"app": "db"}), json!({})).await;
    create_cm(&k, 1, "kw", "w1", json!({"app": "web"}), json!({})).await;
    let table = table.wait_with_output().unwrap();
    let only = only.wait_with_output().unwrap();
    let fields = fields.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    let rows: Vec<&str> = text.lines().collect();
    assert!(
        rows[0].starts_with("NAME") && rows[0].contains("DATA") && rows[0].contains("AGE"),
        "{text}"
    );
    assert_eq!(rows.iter().filter(|r| r.starts_with("NAME")).count(), 1, "{text}");
    let names: BTreeSet<&str> = rows[1..]
        .iter()
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert_eq!(names, BTreeSet::from(["before", "f1", ROOT_CA, "w1"]), "{text}");
    let only = String::from_utf8_lossy(&only.stdout);
    assert_eq!(only.lines().collect::<Vec<_>>(), vec!["configmap/w1"], "{only}");
    let fields = String::from_utf8_lossy(&fields.stdout);
    assert_eq!(
        fields.lines().collect::<Vec<_>>(),
        vec!["configmap/f1"],
        "{fields}"
    );
}

/// A value written under `key` through the raw Kv service, as a broken encryption key or a
/// stray `etcdctl put` would leave it: not an object anyone can decode.
async fn corrupt(k: &Kube, key: &str) {
    let mut kv = k.cluster.kv(k.cluster.replicas.len() - 1).await;
    support::put(&mut kv, key, b"\x00\x01 not a Kubernetes object")
        .await
        .expect("raw put");
}

/// Corrupt objects (feature gate `AllowUnsafeMalformedObjectDeletion` on): a watch ends with
/// a 500 `StorageReadError` ERROR event, get is a 500 naming the key, list a 500
/// `StorageReadError` naming every corrupt object, a plain delete fails, and only
/// `ignoreStoreReadErrorWithClusterBreakingPotential` removes one, skipping its finalizers;
/// the option is a 422 on a readable object and with other options.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_objects_fail_reads_until_an_unsafe_delete_removes_them() {
    let k = Kube::start_with(Options {
        feature_gates: vec!["AllowUnsafeMalformedObjectDeletion"],
        ..Options::default()
    })
    .await;
    create_ns(&k, "broken").await;
    let base = "/api/v1/namespaces/broken/configmaps";
    let key = "/registry/core/configmaps/broken/bad";
    create_cm(&k, 0, "broken", "good", json!({}), json!({"k": "v"})).await;
    let (code, held) = k
        .send(
            Method::POST,
            0,
            base,
            Some(&json!({"metadata": {"name": "bad", "finalizers": ["example.com/hold"]}})),
        )
        .await;
    assert_eq!(code, 201, "{held}");
    let before = current(&k, base).await;
    let mut watch = Watch::open(&k, 2, &format!("{base}?watch=1&resourceVersion={before}")).await;

    corrupt(&k, key).await;

    // The watcher is told, and its stream ends.
    let error = watch.event().await;
    assert_eq!(error["type"], "ERROR", "{error}");
    assert_eq!(error["object"]["code"], 500, "{error}");
    assert_eq!(error["object"]["reason"], "StorageReadError", "{error}");
    assert_eq!(error["object"]["details"]["causes"][0]["field"], key, "{error}");
    assert!(matches!(watch.next(T).await, Next::Closed));
    // Every replica refuses to read it, and says which object is broken.
    for node in 0..3 {
        let (code, status) = get(&k, node, &format!("{base}/bad")).await;
        assert_eq!(
            (code, &status["reason"]),
            (500, &json!("InternalError")),
            "{status}"
        );
        let message = status["message"].as_str().unwrap();
        assert!(
            message.starts_with("Internal error occurred: StorageError: corrupt object")
                && message.contains(key),
            "{message}"
        );
        let (code, status) = get(&k, node, base).await;
        assert_eq!(
            (code, &status["reason"]),
            (500, &json!("StorageReadError")),
            "{status}"
        );
        assert_eq!(
            status["message"],
            "failed to read one or more configmaps from the storage"
        );
        let causes = status["details"]["causes"].as_array().unwrap();
        assert_eq!(causes.len(), 1, "{status}");
        assert_eq!(causes[0]["field"], key);
        assert_eq!(causes[0]["reason"], "UnexpectedServerResponse");
    }
    // A watch from before the corruption replays up to it and ends the same way.
    let mut replay = Watch::open(&k, 1, &format!("{base}?watch=1&resourceVersion={before}")).await;
    assert_eq!(replay.event().await["object"]["reason"], "StorageReadError");
    let (ok, _, err) = k.kubectl("node-2", &["get", "configmap", "bad", "-n", "broken"]);
    assert!(!ok && err.contains("corrupt object"), "{err}");

    let one = |node: usize, query: &str| {
        let path = format!("{base}/bad{query}");
        let k = &k;
        async move { k.send(Method::DELETE, node, &path, None).await }
    };
    // A plain delete cannot read the object either.
    let (code, status) = one(0, "").await;
    assert_eq!(
        (code, &status["reason"]),
        (500, &json!("InternalError")),
        "{status}"
    );
    // The unsafe option takes no other option, and only removes corrupt objects.
    let (code, status) = one(
        1,
        "?ignoreStoreReadErrorWithClusterBreakingPotential=true&dryRun=All",
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: ignoreStoreReadErrorWithClusterBreakingPotential: Invalid value: true: cannot be set together with .dryRun"
    );
    let (code, status) = k
        .send(
            Method::DELETE,
            2,
            &format!("{base}/good"),
            Some(&json!({"ignoreStoreReadErrorWithClusterBreakingPotential": true})),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "configmaps \"good\" is invalid: ignoreStoreReadErrorWithClusterBreakingPotential: Invalid value: true: is exclusively used to delete corrupt object(s), try again by removing this option"
    );
    assert_eq!(get(&k, 2, &format!("{base}/good")).await.0, 200);

    // It takes the unsafe verb: a namespace admin who may delete configmaps may not do it.
    k.ok(
        "node-1",
        &[
            "create",
            "rolebinding",
            "ed-admin",
            "--clusterrole=admin",
            "--user=ed",
            "-n",
            "broken",
        ],
    );
    let ed = k.cluster.http_builder_as("ed", &[]).http1_only().build().unwrap();
    let unsafe_delete = format!("{base}/bad?ignoreStoreReadErrorWithClusterBreakingPotential=true");
    support::eventually(T, || async {
        let r = ed.delete(k.url(0, &unsafe_delete)).send().await.map_err(|e| e.to_string())?;
        let code = r.status().as_u16();
        let status: Value = r.json().await.map_err(|e| e.to_string())?;
        if code == 403
            && status["message"]
                == r#"configmaps "bad" is forbidden: User "ed" cannot unsafe-delete-ignore-read-errors resource "configmaps" in API group "" in the namespace "broken""#
        {
            Ok(())
        } else {
            Err(format!("{code} {status}"))
        }
    })
    .await;
    assert_eq!(
        get(&k, 0, &format!("{base}/bad")).await.0,
        500,
        "still there, still corrupt"
    );

    // The unsafe delete removes it although a finalizer was set.
    let (code, status) = one(2, "?ignoreStoreReadErrorWithClusterBreakingPotential=true").await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert_eq!(status["details"], json!({"name": "bad", "kind": "ConfigMap"}));
    for node in 0..3 {
        assert_eq!(get(&k, node, &format!("{base}/bad")).await.0, 404);
        let (code, list) = get(&k, node, base).await;
        assert_eq!(code, 200, "{list}");
        assert_eq!(names(&list), ["good", ROOT_CA]);
    }
    // The same through kubectl, as an operator would do it.
    create_cm(&k, 0, "broken", "bad2", json!({}), json!({})).await;
    corrupt(&k, "/registry/core/configmaps/broken/bad2").await;
    let raw = format!("{base}/bad2?ignoreStoreReadErrorWithClusterBreakingPotential=true");
    let out = k.ok("node-3", &["delete", "--raw", &raw]);
    assert!(out.contains("\"status\":\"Success\""), "{out}");
    let (ok, _, err) = k.kubectl("node-1", &["get", "configmap", "bad2", "-n", "broken"]);
    assert!(!ok && err.contains("NotFound"), "{err}");

    let after = current(&k, base).await;
    let mut fresh = Watch::open(&k, 0, &format!("{base}?watch=1&resourceVersion={after}")).await;
    create_cm(&k, 1, "broken", "new", json!({}), json!({})).await;
    let added = fresh.event().await;
    assert_eq!(
        (&added["type"], &added["object"]["metadata"]["name"]),
        (&json!("ADDED"), &json!("new"))
    );

    // Without the feature gate the option changes nothing: the delete fails as a plain one.
    let plain = Kube::start_with(Options {
        nodes: 1,
        ..Options::default()
    })
    .await;
    create_ns(&plain, "broken").await;
    create_cm(&plain, 0, "broken", "bad", json!({}), json!({})).await;
    corrupt(&plain, key).await;
    let (code, status) = plain
        .send(
            Method::DELETE,
            0,
            &format!("{base}/bad?ignoreStoreReadErrorWithClusterBreakingPotential=true"),
            None,
        )
        .await;
    assert_eq!(
        (code, &status["reason"]),
        (500, &json!("InternalError")),
        "{status}"
    );
    assert_eq!(get(&plain, 0, &format!("{base}/bad")).await.0, 500);
}

/// Watchers of one collection on one replica share each batch's encoding, and each must still
/// get exactly its own events: plain watchers of a namespace, one of another namespace, one of
/// every namespace and one with a label selector, while concurrent writes through every
/// replica put events of both namespaces into the same batches. A watcher that reads nothing
/// until hundreds of batches later (its socket full, so it falls behind the batches that keep
/// their shared encoding) then receives everything too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_sharing_batches_each_get_exactly_their_events() {
    let k = Kube::start().await;
    create_ns(&k, "share-a").await;
    create_ns(&k, "share-b").await;
    let a = "/api/v1/namespaces/share-a/configmaps";
    let b = "/api/v1/namespaces/share-b/configmaps";
    let q = format!("?watch=1&resourceVersion={}", current(&k, a).await);
    let mut plain = Vec::new();
    for _ in 0..4 {
        plain.push(Watch::open(&k, 1, &format!("{a}{q}")).await);
    }
    let mut other = Watch::open(&k, 1, &format!("{b}{q}")).await;
    let mut everywhere = Watch::open(&k, 1, &format!("/api/v1/configmaps{q}")).await;
    let mut kept = Watch::open(&k, 1, &format!("{a}{q}&labelSelector=keep%3Dyes")).await;

    let writes = futures::future::join_all((0..90).map(|i| {
        let k = &k;
        async move {
            let ns = if i % 2 == 0 { "share-a" } else { "share-b" };
            let keep = if i % 3 == 0 { "yes" } else { "no" };
            let rv = create_cm(k, i % 3, ns, &format!("cm-{i}"), json!({"keep": keep}), json!({})).await;
            (ns, keep, rv)
        }
    }))
    .await;
    let revs = |pick: &dyn Fn(&str, &str) -> bool| {
        let mut r: Vec<i64> = writes
            .iter()
            .filter(|(ns, keep, _)| pick(ns, keep))
            .map(|w| w.2)
            .collect();
        r.sort();
        r
    };
    let in_a = revs(&|ns, _| ns == "share-a");
    let in_b = revs(&|ns, _| ns == "share-b");
    let kept_in_a = revs(&|ns, keep| ns == "share-a" && keep == "yes");
    let every = revs(&|_, _| true);
    for w in &mut plain {
        check_stream(&w.events(in_a.len()).await, &in_a);
    }
    check_stream(&other.events(in_b.len()).await, &in_b);
    check_stream(&everywhere.events(every.len()).await, &every);
    check_stream(&kept.events(kept_in_a.len()).await, &kept_in_a);
    for w in plain.iter_mut().chain([&mut other, &mut everywhere, &mut kept]) {
        assert!(
            matches!(w.next(Duration::from_millis(300)).await, Next::Quiet),
            "an event nobody wrote"
        );
    }

    // One watcher keeps reading, one reads nothing until the end.
    let from = every.last().copied().unwrap_or_default();
    let q = format!("?watch=1&resourceVersion={from}");
    let mut reading = Watch::open(&k, 1, &format!("{a}{q}")).await;
    let mut idle = Watch::open(&k, 1, &format!("{a}{q}")).await;
    let big = "x".repeat(64 * 1024);
    let mut later = Vec::new();
    for i in 0..200 {
        later.push(
            create_cm(
                &k,
                1,
                "share-a",
                &format!("big-{i}"),
                json!({}),
                json!({"v": big}),
            )
            .await,
        );
        if i % 10 == 9 {
            reading.events(10).await;
        }
    }
    check_stream(&idle.events(later.len()).await, &later);
}

/// HTTP/2 with prior knowledge on the API port, as a client with many informers uses one
/// connection for all its watches: requests work as over HTTP/1.1, every watch multiplexed
/// on the connection gets exactly its events, and a stream whose reader stalls (its
/// flow-control window full) holds up none of the others; it gets all of its events once it
/// reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_multiplexed_over_one_http2_connection_each_get_their_events() {
    let k = Kube::start().await;
    let h2 = k
        .cluster
        .http_builder_as(support::ADMIN, &["system:masters"])
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let created = h2
        .post(k.url(1, "/api/v1/namespaces"))
        .json(&json!({"metadata": {"name": "h2"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.version(), reqwest::Version::HTTP_2);
    assert_eq!(created.status(), 201);
    k.wait_namespace_populated("h2").await;
    let path = "/api/v1/namespaces/h2/configmaps";
    let listed = h2.get(k.url(1, path)).send().await.unwrap();
    assert_eq!(listed.version(), reqwest::Version::HTTP_2);
    let from = rv_of(&listed.json::<Value>().await.unwrap());

    let open = |query: String| {
        let h2 = h2.clone();
        let url = k.url(1, &format!("{path}?watch=1&resourceVersion={from}{query}"));
        async move {
            let resp = h2.get(url).send().await.unwrap();
            assert_eq!(resp.version(), reqwest::Version::HTTP_2);
            assert_eq!(resp.status(), 200);
            Watch {
                resp,
                buf: Vec::new(),
            }
        }
    };
    // Every watch but one is read all the time by a task of its own, as informers read theirs.
    let writes = 48;
    let kept_writes = writes / 4;
    let mut readers = Vec::new();
    for i in 0..20 {
        let (query, n) = match i % 2 {
            0 => (String::new(), writes),
            _ => ("&labelSelector=keep%3Dyes".to_string(), kept_writes),
        };
        let mut w = open(query).await;
        readers.push((
            n,
            tokio::spawn(async move {
                let events = w.events(n).await;
                (w, events)
            }),
        ));
    }
    let mut stalled = open(String::new()).await;

    // 3 MiB of events: more than the stalled stream's window (2 MiB), so the server must stop
    // sending on that stream while the others go on.
    let big = "x".repeat(64 * 1024);
    let (mut all, mut kept_revs) = (Vec::new(), Vec::new());
    for i in 0..writes {
        let keep = if i % 4 == 0 { "yes" } else { "no" };
        let rv = create_cm(
            &k,
            i % 3,
            "h2",
            &format!("cm-{i}"),
            json!({"keep": keep}),
            json!({"v": big}),
        )
        .await;
        all.push(rv);
        if keep == "yes" {
            kept_revs.push(rv);
        }
    }
    let mut done = Vec::new();
    for (n, reader) in readers {
        let (w, events) = tokio::time::timeout(T, reader)
            .await
            .expect("a watch on the connection was held up")
            .unwrap();
        check_stream(&events, if n == writes { &all } else { &kept_revs });
        done.push(w);
    }
    check_stream(&stalled.events(all.len()).await, &all);
    for w in done.iter_mut().chain([&mut stalled]) {
        assert!(
            matches!(w.next(Duration::from_millis(300)).await, Next::Quiet),
            "an event nobody wrote"
        );
    }
}

/// Creates a pod through replica `via`, on `node` (pending without one); its resourceVersion.
async fn create_pod(k: &Kube, via: usize, ns: &str, name: &str, node: Option<&str>) -> i64 {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let (code, body) = k
        .send(
            Method::POST,
            via,
            &format!("/api/v1/namespaces/{ns}/pods"),
            Some(&json!({"metadata": {"name": name}, "spec": spec})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    rv_of(&body)
}

/// Binds a pending pod to `node` as a scheduler does; the pod's resourceVersion after it.
async fn bind_pod(k: &Kube, via: usize, ns: &str, name: &str, node: &str) -> i64 {
    let pod = format!("/api/v1/namespaces/{ns}/pods/{name}");
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    let (code, body) = k
        .send(Method::POST, via, &format!("{pod}/binding"), Some(&binding))
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, bound) = get(k, via, &pod).await;
    assert_eq!((code, bound["spec"]["nodeName"].as_str()), (200, Some(node)));
    rv_of(&bound)
}

/// Labels a pod (a merge patch); its new resourceVersion.
async fn label_pod(k: &Kube, via: usize, ns: &str, name: &str) -> i64 {
    let r = k
        .http
        .patch(k.url(via, &format!("/api/v1/namespaces/{ns}/pods/{name}")))
        .header("Content-Type", "application/merge-patch+json")
        .body(json!({"metadata": {"labels": {"seen": "yes"}}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    rv_of(&r.json().await.unwrap())
}

/// What one watcher must receive, pod by pod: each pod's events in order, with the
/// resourceVersion the write was acknowledged at when the write said it.
type Expected = std::collections::BTreeMap<String, Vec<(&'static str, Option<i64>)>>;

/// Checks a watcher's events: in revision order, and per pod exactly the expected ones.
fn check_pods(who: &str, got: &[Value], expected: &Expected) {
    let revs: Vec<i64> = got.iter().map(|e| rv_of(&e["object"])).collect();
    assert!(
        revs.windows(2).all(|w| w[0] < w[1]),
        "{who}: out of order: {:?}",
        summary(got)
    );
    let mut by_pod: std::collections::BTreeMap<String, Vec<(&'static str, Option<i64>)>> = Default::default();
    for (e, rev) in got.iter().zip(&revs) {
        let name = e["object"]["metadata"]["name"].as_str().unwrap().to_string();
        let kind = match e["type"].as_str().unwrap() {
            "ADDED" => "ADDED",
            "MODIFIED" => "MODIFIED",
            "DELETED" => "DELETED",
            other => panic!("{who}: a {other} event: {e}"),
        };
        let expected_rev = expected
            .get(&name)
            .and_then(|evs| evs.get(by_pod.get(&name).map_or(0, Vec::len)))
            .and_then(|(_, r)| *r);
        // Compared where the write said its revision; else any (the order is checked above).
        by_pod
            .entry(name)
            .or_default()
            .push((kind, expected_rev.map(|_| *rev)));
    }
    assert_eq!(&by_pod, expected, "{who}: {:?}", summary(got));
}

/// 200 kubelets' watches (`spec.nodeName=<node>`, indexed by node) on a three-replica cluster,
/// a scheduler's watch of pending pods (`spec.nodeName=`, indexed under the empty value), a
/// node's watch that starts with a streaming list, one with bookmarks on a node that never
/// gets a pod, and a watch of every pod (not indexed), while pods are created on nodes and
/// pending, bound to nodes (moving from the pending watch to their node's: DELETED for one,
/// ADDED for the other), labelled and deleted, concurrently through every replica. Each
/// watcher gets exactly its events, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_selector_watchers_indexed_by_node_each_get_exactly_their_events() {
    use futures::StreamExt;
    const NODES: usize = 200;
    const PODS: usize = 400;
    let k = Kube::start().await;
    let ns = "kubelets";
    create_ns(&k, ns).await;
    let base = format!("/api/v1/namespaces/{ns}/pods");
    let node = |i: usize| format!("node-{i}");
    // Pod j: pending then bound (j % 5 == 0), on a node nobody watches (j % 10 == 9), else on
    // one of the watched nodes.
    let placed = |j: usize| match j {
        _ if j.is_multiple_of(5) => None,
        _ if j % 10 == 9 => Some("unwatched".to_string()),
        _ => Some(node(j * 7 % NODES)),
    };
    let bound_to = |j: usize| placed(j).unwrap_or_else(|| node(j % NODES));
    let early = create_pod(&k, 0, ns, "early", Some(&node(5))).await;

    let from = current(&k, &base).await;
    let q = format!("watch=1&resourceVersion={from}");
    let selected = |value: &str| format!("/api/v1/pods?{q}&fieldSelector=spec.nodeName%3D{value}");
    let mut kubelets = Vec::new();
    for i in 0..NODES {
        kubelets.push(Watch::open(&k, i % 3, &selected(&node(i))).await);
    }
    let mut pending = Watch::open(&k, 1, &selected("")).await;
    let mut every = Watch::open(&k, 2, &format!("{base}?{q}")).await;
    let mut quiet = Watch::open(&k, 0, &format!("{}&allowWatchBookmarks=true", selected("idle"))).await;
    let mut streamed = Watch::open(
        &k,
        2,
        &format!(
            "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={from}&allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D{}",
            node(5)
        ),
    )
    .await;

    let name = |j: usize| format!("pod-{j}");
    let run = |writes: Vec<usize>, what: u8| {
        let k = &k;
        futures::stream::iter(writes.into_iter().map(move |j| async move {
            let (via, pod) = (j % 3, name(j));
            let rev = match what {
                0 => create_pod(k, via, ns, &pod, placed(j).as_deref()).await,
                1 => bind_pod(k, via, ns, &pod, &bound_to(j)).await,
                _ => label_pod(k, via, ns, &pod).await,
            };
            (j, rev)
        }))
        .buffer_unordered(16)
        .collect::<std::collections::BTreeMap<usize, i64>>()
    };
    let created = run((0..PODS).collect(), 0).await;
    let bound = run((0..PODS).filter(|j| placed(*j).is_none()).collect(), 1).await;
    let labelled = run((0..PODS).collect(), 2).await;
    futures::stream::iter((0..PODS).map(|j| {
        let path = format!("{base}/{}?gracePeriodSeconds=0", name(j));
        let k = &k;
        async move {
            let (code, body) = k.send(Method::DELETE, j % 3, &path, None).await;
            assert_eq!(code, 200, "{body}");
        }
    }))
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;

    // What each watcher must get, by the value it is indexed under.
    let mut by_node: std::collections::BTreeMap<String, Expected> = Default::default();
    let mut for_pending = Expected::new();
    let mut for_every = Expected::new();
    for j in 0..PODS {
        let (c, l) = (Some(created[&j]), Some(labelled[&j]));
        let on_node = match bound.get(&j) {
            Some(b) => {
                for_pending.insert(name(j), vec![("ADDED", c), ("DELETED", Some(*b))]);
                for_every.insert(
                    name(j),
                    vec![
                        ("ADDED", c),
                        ("MODIFIED", Some(*b)),
                        ("MODIFIED", l),
                        ("DELETED", None),
                    ],
                );
                vec![("ADDED", Some(*b)), ("MODIFIED", l), ("DELETED", None)]
            }
            None => {
                for_every.insert(name(j), vec![("ADDED", c), ("MODIFIED", l), ("DELETED", None)]);
                vec![("ADDED", c), ("MODIFIED", l), ("DELETED", None)]
            }
        };
        by_node.entry(bound_to(j)).or_default().insert(name(j), on_node);
    }
    assert!(by_node.len() > NODES / 2 && !for_pending.is_empty());
    let count = |e: &Expected| e.values().map(Vec::len).sum::<usize>();
    let none = Expected::new();
    for (i, w) in kubelets.iter_mut().enumerate() {
        let expected = by_node.get(&node(i)).unwrap_or(&none);
        check_pods(&node(i), &w.events(count(expected)).await, expected);
    }
    check_pods(
        "pending",
        &pending.events(count(&for_pending)).await,
        &for_pending,
    );
    check_pods("every pod", &every.events(count(&for_every)).await, &for_every);

    // The streaming list of node-5's pods, then that node's events like its kubelet's.
    let first = streamed.event().await;
    assert_eq!(
        (first["type"].as_str(), rv_of(&first["object"])),
        (Some("ADDED"), early)
    );
    let end = streamed.event().await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let expected = by_node.get(&node(5)).unwrap_or(&none);
    check_pods("streamed", &streamed.events(count(expected)).await, expected);

    // A watcher that got no event at all still learns (by bookmarks) how far the cache is.
    let last = current(&k, &base).await;
    loop {
        let e = quiet.event().await;
        assert_eq!(e["type"], "BOOKMARK", "an event for a node without pods: {e}");
        if rv_of(&e["object"]) >= last {
            break;
        }
    }

    // Nothing else came to anyone.
    let extra = futures::future::join_all(
        kubelets
            .iter_mut()
            .chain([&mut pending, &mut every])
            .map(|w| w.next(Duration::from_millis(500))),
    )
    .await;
    for (i, next) in extra.into_iter().enumerate() {
        assert!(
            matches!(next, Next::Quiet),
            "watcher {i}: an event nobody wrote: {next:?}"
        );
    }
}
