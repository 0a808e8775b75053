//! kube-apiserver's metrics on a real three-replica cluster: requests made with kubectl and
//! plain HTTP show up in `/metrics` under kube-apiserver's names, with its label names and
//! values, as a Prometheus text-format parser reads them; `/metrics` is only for users allowed
//! `get /metrics` (`system:monitoring`); and every series the dashboard and alert rules in
//! `deploy/monitoring/` use is one a replica exports.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use prometheus_parse::{Sample, Scrape, Value as Prom};
use serde_json::{json, Value};
use support::eventually;
use support::kube::Kube;

const T: Duration = Duration::from_secs(30);

/// kube-apiserver's buckets of `apiserver_request_duration_seconds`.
const REQUEST_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
    20.0, 30.0, 45.0, 60.0,
];

/// The labels of `apiserver_longrunning_requests` and `apiserver_response_sizes`.
const TARGET_LABELS: [&str; 7] = [
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];

/// The labels of `apiserver_request_total`: those, `dry_run` and `code`.
fn request_labels() -> BTreeSet<&'static str> {
    TARGET_LABELS.into_iter().chain(["dry_run", "code"]).collect()
}

async fn scrape_with(client: &reqwest::Client, url: &str) -> Result<Scrape, String> {
    let r = client.get(url).send().await.map_err(|e| e.to_string())?;
    if r.status() != 200 {
        return Err(format!("GET /metrics: {}", r.status()));
    }
    let text = r.text().await.map_err(|e| e.to_string())?;
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).map_err(|e| e.to_string())
}

/// The samples of `name` whose labels include `labels`.
fn samples<'a>(s: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    s.samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .collect()
}

/// A sample's value (a histogram's: its count).
fn value(sample: &Sample) -> f64 {
    match &sample.value {
        Prom::Counter(v) | Prom::Gauge(v) | Prom::Untyped(v) => *v,
        Prom::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
        Prom::Summary(_) => f64::NAN,
    }
}

/// The sum of the matching samples' values.
fn total(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(s, name, labels).iter().map(|x| value(x)).sum()
}

fn label_names(sample: &Sample) -> BTreeSet<&str> {
    sample.labels.keys().map(String::as_str).collect()
}

/// Every series family name a scrape has (a histogram's `_bucket`, `_sum` and `_count` too).
fn family_names(s: &Scrape) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for x in &s.samples {
        names.insert(x.metric.clone());
        if matches!(x.value, Prom::Histogram(_)) {
            names.insert(format!("{}_bucket", x.metric));
        }
    }
    names
}

/// The kuberaft and kube-apiserver series names a PromQL expression uses.
fn series_in(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("apiserver_") || w.starts_with("kuberaft_"))
        .map(str::to_string)
        .collect()
}

/// Every `expr` in a JSON document (a Grafana dashboard's panel targets and variables).
fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "definition", Value::String(e)) => out.push(e.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

/// What is wrong with a scrape taken after the requests of the test were made.
fn problems(s: &Scrape) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut expect = |what: &str, ok: bool| {
        if !ok {
            wrong.push(what.to_string());
        }
    };
    let cm = [
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
        ("subresource", ""),
        ("component", "apiserver"),
    ];
    let request = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        cm.iter().copied().chain(extra.iter().copied()).collect()
    };
    let requests = "apiserver_request_total";
    for (what, labels) in [
        (
            "kubectl get configmap",
            request(&[
                ("verb", "GET"),
                ("scope", "resource"),
                ("dry_run", ""),
                ("code", "200"),
            ]),
        ),
        (
            "kubectl get configmaps -n",
            request(&[("verb", "LIST"), ("scope", "namespace"), ("code", "200")]),
        ),
        (
            "kubectl get configmaps -A",
            request(&[("verb", "LIST"), ("scope", "cluster"), ("code", "200")]),
        ),
        (
            "kubectl create configmap",
            request(&[
                ("verb", "POST"),
                ("scope", "resource"),
                ("dry_run", ""),
                ("code", "201"),
            ]),
        ),
        (
            "create with dryRun=All",
            request(&[
                ("verb", "POST"),
                ("scope", "resource"),
                ("dry_run", "All"),
                ("code", "201"),
            ]),
        ),
        (
            "kubectl apply --server-side",
            request(&[("verb", "APPLY"), ("scope", "resource")]),
        ),
        (
            "kubectl patch",
            request(&[("verb", "PATCH"), ("scope", "resource"), ("code", "200")]),
        ),
        (
            "kubectl delete configmap",
            request(&[("verb", "DELETE"), ("scope", "resource"), ("code", "200")]),
        ),
        (
            "a watch",
            request(&[("verb", "WATCH"), ("scope", "namespace"), ("code", "200")]),
        ),
        (
            "a get of a missing object",
            request(&[("verb", "GET"), ("scope", "resource"), ("code", "404")]),
        ),
    ] {
        expect(
            &format!("{requests} of {what} {labels:?}"),
            total(s, requests, &labels) >= 1.0,
        );
    }
    expect(
        "apiserver_request_total of a cluster-scoped create (namespaces)",
        total(
            s,
            requests,
            &[
                ("verb", "POST"),
                ("resource", "namespaces"),
                ("scope", "resource"),
                ("code", "201"),
            ],
        ) >= 1.0,
    );
    expect(
        "apiserver_request_total of the readiness checks",
        total(
            s,
            requests,
            &[
                ("verb", "GET"),
                ("subresource", "/readyz"),
                ("component", ""),
                ("scope", ""),
                ("code", "200"),
            ],
        ) >= 1.0,
    );
    let all = samples(s, requests, &[]);
    expect("apiserver_request_total has series", !all.is_empty());
    for x in &all {
        let names = label_names(x);
        expect(&format!("{requests} labels {names:?}"), names == request_labels());
    }
    // Paths that name no registered resource create no series.
    expect(
        "no series for an unregistered resource",
        !s.samples
            .iter()
            .any(|x| x.labels.values().any(|v| v == "widgets")),
    );

    let durations = samples(
        s,
        "apiserver_request_duration_seconds",
        &request(&[("verb", "GET"), ("scope", "resource")]),
    );
    expect(
        "apiserver_request_duration_seconds of a GET",
        !durations.is_empty(),
    );
    for x in &durations {
        let mut names = label_names(x);
        names.insert("code");
        expect(
            "apiserver_request_duration_seconds labels",
            names == request_labels(),
        );
        if let Prom::Histogram(buckets) = &x.value {
            let les: Vec<f64> = buckets
                .iter()
                .map(|b| b.less_than)
                .filter(|le| le.is_finite())
                .collect();
            let mut sorted = les.clone();
            sorted.sort_by(f64::total_cmp);
            expect(
                &format!("kube's duration buckets, not {sorted:?}"),
                sorted == REQUEST_BUCKETS,
            );
        }
    }
    let sizes = samples(
        s,
        "apiserver_response_sizes",
        &request(&[("verb", "LIST"), ("scope", "namespace")]),
    );
    expect(
        "apiserver_response_sizes of a LIST",
        sizes.iter().any(|x| value(x) >= 1.0),
    );
    for x in &sizes {
        expect(
            "apiserver_response_sizes labels",
            label_names(x) == TARGET_LABELS.into_iter().collect::<BTreeSet<_>>(),
        );
        if let Prom::Histogram(buckets) = &x.value {
            let mut les: Vec<f64> = buckets
                .iter()
                .map(|b| b.less_than)
                .filter(|le| le.is_finite())
                .collect();
            les.sort_by(f64::total_cmp);
            expect(
                "kube's response size buckets",
                les == [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9],
            );
        }
    }
    for kind in ["readOnly", "mutating"] {
        let inflight = samples(
            s,
            "apiserver_current_inflight_requests",
            &[("request_kind", kind)],
        );
        expect(
            &format!("apiserver_current_inflight_requests{{request_kind={kind}}}"),
            inflight.len() == 1,
        );
    }
    // The in-flight counts over time as fractions of the limits: kube's buckets, nanoseconds
    // as weights; requests were executing for some of the time, none ever waited.
    for phase in ["executing", "waiting"] {
        for kind in ["readOnly", "mutating"] {
            let what = format!(
                "apiserver_flowcontrol_read_vs_write_current_requests{{phase={phase},request_kind={kind}}}"
            );
            let series = samples(
                s,
                "apiserver_flowcontrol_read_vs_write_current_requests",
                &[("phase", phase), ("request_kind", kind)],
            );
            let buckets = match series.as_slice() {
                [one] => match &one.value {
                    Prom::Histogram(buckets) => buckets.clone(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            let bounds: Vec<f64> = buckets
                .iter()
                .map(|b| b.less_than)
                .filter(|le| le.is_finite())
                .collect();
            expect(
                &format!("{what} with kube's buckets"),
                bounds
                    == [
                        0.0, 0.001, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0,
                    ],
            );
            let at = |le: f64| {
                buckets
                    .iter()
                    .find(|b| b.less_than == le)
                    .map_or(0.0, |b| b.count)
            };
            let (idle, all) = (at(0.0), at(f64::INFINITY));
            expect(&format!("{what} counts nanoseconds"), all > 1e9);
            if phase == "waiting" {
                expect(&format!("{what} is always 0"), idle == all);
            } else if kind == "readOnly" {
                expect(&format!("{what} shows requests executing"), idle < all);
            }
        }
    }
    expect(
        "apiserver_storage_objects of configmaps",
        total(s, "apiserver_storage_objects", &[("resource", "configmaps")]) >= 2.0,
    );
    expect(
        "apiserver_storage_objects of a grouped resource as `resource.group`",
        total(
            s,
            "apiserver_storage_objects",
            &[("resource", "clusterroles.rbac.authorization.k8s.io")],
        ) >= 1.0,
    );
    expect(
        "apiserver_storage_size_bytes",
        total(
            s,
            "apiserver_storage_size_bytes",
            &[("storage_cluster_id", "etcd-0")],
        ) > 0.0,
    );
    // Lists served from the watch cache, with kube 1.34's labels.
    let cached = [("group", ""), ("index", ""), ("resource", "configmaps")];
    let fetched = total(s, "apiserver_cache_list_fetched_objects_total", &cached);
    let returned = total(
        s,
        "apiserver_cache_list_returned_objects_total",
        &[("group", ""), ("resource", "configmaps")],
    );
    expect(
        "apiserver_cache_list_total of configmaps",
        total(s, "apiserver_cache_list_total", &cached) >= 2.0,
    );
    expect(
        &format!("apiserver_cache_list_*_objects_total: {fetched} read >= {returned} returned >= 1"),
        fetched >= returned && returned >= 1.0,
    );
    let watch = [("group", ""), ("version", "v1"), ("resource", "configmaps")];
    expect(
        "apiserver_watch_events_total",
        total(s, "apiserver_watch_events_total", &watch) >= 1.0,
    );
    expect(
        "apiserver_watch_events_sizes",
        total(s, "apiserver_watch_events_sizes", &watch) >= 1.0,
    );
    expect(
        "apiserver_watch_cache_events_received_total of configmaps",
        total(
            s,
            "apiserver_watch_cache_events_received_total",
            &[("group", ""), ("resource", "configmaps")],
        ) >= 1.0,
    );
    expect(
        "apiserver_watch_cache_resource_version of configmaps",
        total(
            s,
            "apiserver_watch_cache_resource_version",
            &[("group", ""), ("resource", "configmaps")],
        ) >= 1.0,
    );
    expect(
        "kuberaft_store_request_duration_seconds of creates of configmaps",
        total(
            s,
            "kuberaft_store_request_duration_seconds",
            &[("operation", "create"), ("group", ""), ("resource", "configmaps")],
        ) >= 1.0,
    );
    for series in [
        "kuberaft_raft_term",
        "kuberaft_raft_is_leader",
        "kuberaft_raft_commit_index",
        "kuberaft_raft_applied_index",
        "kuberaft_store_revision",
        "kuberaft_watch_cache_revision",
        "kuberaft_storage_fsync_duration_seconds",
    ] {
        expect(series, !samples(s, series, &[]).is_empty());
    }
    wrong
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_show_up_in_kube_apiserver_series() {
    let k = Kube::start().await;
    let ok = |args: &[&str]| {
        let (ok, out, err) = k.kubectl("node-1", args);
        assert!(ok, "kubectl {args:?}: {err}");
        out
    };
    ok(&["create", "namespace", "metrics"]);
    ok(&["create", "configmap", "c1", "-n", "metrics", "--from-literal=a=1"]);
    ok(&["get", "configmap", "c1", "-n", "metrics", "-o", "name"]);
    ok(&["get", "configmaps", "-n", "metrics"]);
    ok(&["get", "configmaps", "-A"]);
    ok(&[
        "create",
        "configmap",
        "c3",
        "-n",
        "metrics",
        "--from-literal=a=1",
        "--dry-run=server",
    ]);
    let applied = k.manifest(
        "c2.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c2\n  namespace: metrics\ndata:\n  a: \"1\"\n",
    );
    ok(&["apply", "--server-side", "-f", &applied]);
    ok(&[
        "patch",
        "configmap",
        "c2",
        "-n",
        "metrics",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    let (found, _, _) = k.kubectl("node-1", &["get", "configmap", "missing", "-n", "metrics"]);
    assert!(!found);
    // kube's clients send dryRun as a query option; so does a plain HTTP client.
    let (code, _) = k
        .send(
            reqwest::Method::POST,
            0,
            "/api/v1/namespaces/metrics/configmaps?dryRun=All",
            Some(&json!({"metadata": {"name": "c4"}, "data": {"a": "1"}})),
        )
        .await;
    assert_eq!(code, 201);
    for path in [
        "/api/v1/namespaces/metrics/widgets",
        "/apis/example.com/v1/widgets",
    ] {
        let (code, _) = k.send(reqwest::Method::GET, 0, path, None).await;
        assert_eq!(code, 404, "{path}");
    }

    // Only users allowed `get /metrics` read it: `system:monitoring` is, a plain user is not.
    let metrics = k.url(0, "/metrics");
    let monitoring = k
        .cluster
        .http_builder_as("prometheus", &["system:monitoring"])
        .build()
        .unwrap();
    let nobody = k.cluster.http_builder_as("nobody", &[]).build().unwrap();
    let denied = nobody.get(&metrics).send().await.unwrap();
    assert_eq!(denied.status(), 403);
    let body: Value = denied.json().await.unwrap();
    assert_eq!(
        body["message"], "forbidden: User \"nobody\" cannot get path \"/metrics\"",
        "{body}"
    );

    // An open watch is a long-running request and a registered watcher until it ends.
    let watch_url = k.url(
        0,
        "/api/v1/namespaces/metrics/configmaps?watch=true&timeoutSeconds=8",
    );
    let mut watch = k.http.get(&watch_url).send().await.unwrap();
    assert_eq!(watch.status(), 200);
    let open = [
        ("verb", "WATCH"),
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
        ("subresource", ""),
        ("scope", "namespace"),
        ("component", "apiserver"),
    ];
    eventually(T, || async {
        let s = scrape_with(&monitoring, &metrics).await?;
        let longrunning = samples(&s, "apiserver_longrunning_requests", &open);
        let watchers = total(
            &s,
            "apiserver_registered_watchers",
            &[("group", ""), ("version", "v1"), ("kind", "ConfigMap")],
        );
        match longrunning.as_slice() {
            [one] if value(one) >= 1.0 && watchers >= 1.0 => {
                assert_eq!(
                    label_names(one),
                    TARGET_LABELS.into_iter().collect::<BTreeSet<_>>()
                );
                Ok(())
            }
            _ => Err(format!("long-running {longrunning:?}, watchers {watchers}")),
        }
    })
    .await;
    ok(&["delete", "configmap", "c1", "-n", "metrics"]);
    // The watch sends the deletion, and ends at its timeout.
    let mut events = String::new();
    while let Some(chunk) = watch.chunk().await.unwrap() {
        events.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(events.contains("\"DELETED\""), "{events}");

    eventually(T, || async {
        let s = scrape_with(&monitoring, &metrics).await?;
        let wrong = problems(&s);
        let still_open = total(&s, "apiserver_longrunning_requests", &open);
        if wrong.is_empty() && still_open == 0.0 {
            Ok(())
        } else {
            Err(format!(
                "{wrong:#?}\nlong-running watches still open: {still_open}"
            ))
        }
    })
    .await;

    // Every series the dashboard and the alert rules use is one a replica exports.
    let s = scrape_with(&monitoring, &metrics).await.unwrap();
    let exported = family_names(&s);
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring");
    let mut used = Vec::new();
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(deploy.join("grafana-dashboard.json")).unwrap())
            .unwrap();
    exprs(&dashboard, &mut used);
    let rules: Value =
        yaml_serde::from_str(&std::fs::read_to_string(deploy.join("prometheus-rules.yaml")).unwrap())
            .unwrap();
    exprs(&rules, &mut used);
    let names: BTreeSet<String> = used.iter().flat_map(|e| series_in(e)).collect();
    assert!(names.len() >= 15, "{names:?}");
    let missing: Vec<&String> = names.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "used in deploy/monitoring but not exported: {missing:?}"
    );

    // Response sizes are the bytes the client is sent, as kube counts them: a list gzipped
    // for a client that accepts it counts compressed.
    let path = "/api/v1/namespaces/metrics/configmaps";
    for i in 0..40 {
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i}")}, "data": {"a": "x".repeat(4096)}});
        let (code, body) = k.send(reqwest::Method::POST, 0, path, Some(&cm)).await;
        assert_eq!(code, 201, "{body}");
    }
    let listed = [
        ("verb", "LIST"),
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
        ("subresource", ""),
        ("scope", "namespace"),
        ("component", "apiserver"),
    ];
    let sent = |s: &Scrape| total(s, "apiserver_response_sizes_sum", &listed);
    let before = sent(&scrape_with(&monitoring, &metrics).await.unwrap());
    let r = k
        .http
        .get(k.url(0, path))
        .header("accept", "application/json")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let compressed = r.bytes().await.unwrap().len() as f64;
    assert!(compressed < 128.0 * 1024.0, "{compressed} bytes: not compressed");
    eventually(T, || async {
        let after = sent(&scrape_with(&monitoring, &metrics).await?);
        if after - before == compressed {
            Ok(())
        } else {
            Err(format!(
                "recorded {} bytes, the client got {compressed}",
                after - before
            ))
        }
    })
    .await;
}
