//! Large lists streamed to many clients at once (issue 19, "Overload: degrade, never fall
//! over"): a three-replica cluster holds thousands of ConfigMaps of about 8 KiB; thirty clients
//! list them all at once and read slowly, and the serving replica's memory must not grow by
//! anything near thirty copies of the list. The streamed list must read the same to every
//! client (kubectl, kube-rs, the official Python client, protobuf, CBOR, gzip), and a response
//! body keeps its in-flight seat until it is sent or dropped, so unread lists cannot pile up.

mod support;

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use support::kube::Kube;
use support::python::{client_versions, python_for, run_script};
use support::{eventually, Options};

/// How many ConfigMaps the namespace holds.
const OBJECTS: usize = 3000;
/// The size of each one's payload.
const PAYLOAD_BYTES: usize = 8192;
/// How many clients list them at once.
const READERS: usize = 30;
/// Create requests in flight at once while filling the namespace.
const CREATORS: usize = 32;
/// The namespace of the list.
const NS: &str = "big";
/// What its list holds: the ConfigMaps and `kube-root-ca.crt`.
const LISTED: usize = OBJECTS + 1;
/// Read-only seats of every replica, for the seat checks.
const READ_SEATS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_lists_are_streamed_to_many_slow_clients() {
    // The seat checks are of the in-flight limits (priority and fairness off), whose read-only
    // seats are the replica's own.
    let k = Kube::start_with(Options {
        inflight: (READ_SEATS, 200),
        priority_and_fairness: false,
        ..Options::default()
    })
    .await;
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            0,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": NS}})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    fill(&k).await;

    let whole = k
        .http
        .get(k.url(0, &format!("/api/v1/namespaces/{NS}/configmaps")))
        .send()
        .await
        .unwrap();
    assert_eq!(whole.status(), 200);
    let length: usize = whole.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let json_bytes = whole.bytes().await.unwrap();
    assert_eq!(json_bytes.len(), length);
    let list: Value = serde_json::from_slice(&json_bytes).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(LISTED));
    assert!(json_bytes.starts_with(b"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{"));
    assert!(json_bytes.ends_with(b"]}\n"));

    slow_readers_cost_far_less_than_copies_of_the_list(&k, json_bytes.len()).await;
    every_client_reads_the_streamed_list(&k, &list, &json_bytes).await;
    unread_lists_hold_their_seats(&k).await;
}

/// Creates the ConfigMaps, [`CREATORS`] at a time through every replica (a follower forwards
/// its writes to the leader). Any failure fails the test with the rate it was seen at.
async fn fill(k: &Kube) {
    let payload: String = (0..PAYLOAD_BYTES)
        .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
        .collect();
    let started = Instant::now();
    let results: Vec<(usize, u16, String)> = futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let cm = json!({"metadata": {"name": format!("cm-{i:05}")}, "data": {"payload": payload}});
            let req = k
                .http
                .post(k.url(i % 3, &format!("/api/v1/namespaces/{NS}/configmaps")))
                .json(&cm);
            async move {
                let r = req.send().await.unwrap();
                let code = r.status().as_u16();
                (i, code, r.text().await.unwrap_or_default())
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let rate = OBJECTS as f64 / elapsed.as_secs_f64();
    let failed: Vec<_> = results.iter().filter(|(_, code, _)| *code != 201).collect();
    eprintln!(
        "created {OBJECTS} ConfigMaps of {PAYLOAD_BYTES} bytes in {elapsed:?} ({rate:.0}/s, {CREATORS} in flight)"
    );
    assert!(
        failed.is_empty(),
        "{} of {OBJECTS} creates failed at {rate:.0} creates/s ({CREATORS} in flight, through replicas 0-2 in turn); first: {:?}{}",
        failed.len(),
        failed.first(),
        k.cluster.log_tails(20)
    );
}

/// [`READERS`] clients list the namespace at once, each reading its body a piece at a time
/// with pauses; replica 0's resident memory is sampled meanwhile. Streaming holds a chunk per
/// client where building the list whole held a copy each.
async fn slow_readers_cost_far_less_than_copies_of_the_list(k: &Kube, list_bytes: usize) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = k.cluster.rss_kib(0);
    let done = Arc::new(AtomicBool::new(false));
    let url = k.url(0, &format!("/api/v1/namespaces/{NS}/configmaps"));
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            // A client (and so a connection) each.
            let http = k.cluster.http();
            let url = url.clone();
            tokio::spawn(async move {
                let mut r = http.get(&url).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let mut read = 0;
                while let Some(chunk) = r.chunk().await.unwrap() {
                    read += chunk.len();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                read
            })
        })
        .collect();
    let sampler = {
        let done = done.clone();
        let pid_rss = move || k.cluster.rss_kib(0);
        let mut peak = before;
        let mut samples = 0;
        async move {
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(pid_rss());
                samples += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (peak, samples)
        }
    };
    let reading = async {
        let mut lengths = Vec::new();
        for r in readers {
            lengths.push(r.await.unwrap());
        }
        done.store(true, Ordering::Relaxed);
        lengths
    };
    let started = Instant::now();
    let (lengths, (peak, samples)) = tokio::join!(reading, sampler);
    let elapsed = started.elapsed();
    assert!(
        lengths.iter().all(|n| *n == list_bytes),
        "{lengths:?} != {list_bytes}"
    );
    let growth_kib = peak.saturating_sub(before);
    let copies_kib = (READERS * list_bytes / 1024) as u64;
    eprintln!(
        "{READERS} slow readers of a {list_bytes}-byte list ({elapsed:?}): replica RSS {before} KiB before, \
         peak {peak} KiB ({samples} samples), growth {growth_kib} KiB; {READERS} copies would be {copies_kib} KiB"
    );
    assert!(
        growth_kib * 10 < copies_kib,
        "the replica grew by {growth_kib} KiB serving {READERS} lists of {list_bytes} bytes \
         (a tenth of {READERS} copies is {} KiB)",
        copies_kib / 10
    );
}

/// The streamed list reads the same to kubectl, kube-rs, the official Python client, and in
/// protobuf, CBOR and gzip, as the JSON list does.
async fn every_client_reads_the_streamed_list(k: &Kube, list: &Value, json_bytes: &[u8]) {
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    let get = |accept: &str| k.http.get(k.url(1, &path)).header("accept", accept.to_string());

    // gzip: the same bytes, compressed.
    let r = get("application/json")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let compressed = r.bytes().await.unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_end(&mut text)
        .expect("a gzip body");
    let from_follower: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(from_follower["items"], list["items"]);
    assert!(
        text.len() == json_bytes.len(),
        "{} != {}",
        text.len(),
        json_bytes.len()
    );

    // Protobuf and CBOR hold the same list.
    let r = get("application/vnd.kubernetes.protobuf").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/vnd.kubernetes.protobuf");
    let length: usize = r.headers()["content-length"].to_str().unwrap().parse().unwrap();
    let bytes = r.bytes().await.unwrap();
    assert_eq!(bytes.len(), length);
    let decoded = kuberaft::machinery::protobuf::decode_object(&bytes).expect("a protobuf list");
    assert_eq!(decoded["kind"], "ConfigMapList");
    assert_eq!(decoded["items"], list["items"]);
    let r = get("application/cbor").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/cbor");
    let bytes = r.bytes().await.unwrap();
    let body = bytes
        .strip_prefix(&[0xd9, 0xd9, 0xf7])
        .expect("the self-described tag");
    let mut d = minicbor::Decoder::new(body);
    let decoded = cbor_value(&mut d);
    assert_eq!(d.position(), body.len());
    assert_eq!(decoded["kind"], "ConfigMapList");
    assert_eq!(decoded["items"], list["items"]);

    // kubectl, across namespaces.
    let all: Value = k
        .http
        .get(k.url(0, "/api/v1/configmaps"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let total = all["items"].as_array().map(Vec::len).unwrap_or_default();
    assert!(total > OBJECTS, "{total}");
    let names = k.ok("node-2", &["get", "configmaps", "-A", "-o", "name"]);
    assert_eq!(names.lines().count(), total);

    // kube-rs.
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(k.kube_client(2), NS);
    let listed = api.list(&kube::api::ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), LISTED);
    let payloads = listed
        .items
        .iter()
        .filter_map(|cm| cm.data.as_ref().and_then(|d| d.get("payload")))
        .filter(|p| p.len() == PAYLOAD_BYTES)
        .count();
    assert_eq!(payloads, OBJECTS);

    // The official Python client, whole and paged.
    for version in client_versions() {
        let (ok, output) = run_script(k, &python_for(version), "big_list.py", NS).await;
        assert!(ok, "kubernetes=={version}:\n{output}");
        assert!(
            output.contains(&format!(
                "listed {LISTED} configmaps, {LISTED} names, {OBJECTS} payloads of sizes [{PAYLOAD_BYTES}]"
            )) && output.contains(&format!("paged {LISTED} configmaps in 4 pages, same names: True")),
            "kubernetes=={version}:\n{output}"
        );
    }
}

/// A list body that is not read keeps its read-only seat: with every seat held by unread
/// lists the next read is refused with kube's `429`, and once the bodies are dropped reads
/// are served again.
async fn unread_lists_hold_their_seats(k: &Kube) {
    let alice = k.cluster_admin("alice");
    let url = k.url(0, &format!("/api/v1/namespaces/{NS}/configmaps"));
    let small = k.url(0, "/api/v1/namespaces/default/configmaps");
    // A small list answers once a seat is free (and once the binding has reached the cache).
    let small_list_served = || {
        eventually(Duration::from_secs(10), || async {
            match alice().get(&small).send().await {
                Ok(r) if r.status() == 200 => Ok(()),
                Ok(r) => Err(format!("{}", r.status())),
                Err(e) => Err(e.to_string()),
            }
        })
    };
    // Alice reads while seats are free.
    small_list_served().await;
    let mut unread = Vec::new();
    for _ in 0..READ_SEATS {
        let r = alice().get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        unread.push(r);
    }
    let refused = alice().get(&small).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        refused.text().await.unwrap(),
        "Too many requests, please try again later.\n"
    );
    // Reading one body to its end frees its seat; dropping the others frees theirs.
    let first = unread.pop().unwrap();
    assert!(first.bytes().await.unwrap().len() > OBJECTS * PAYLOAD_BYTES);
    small_list_served().await;
    drop(unread);
    let lists: Vec<_> = (0..READ_SEATS)
        .map(|_| {
            let (http, url) = (alice(), url.clone());
            async move {
                eventually(Duration::from_secs(10), || async {
                    match http.get(&url).send().await {
                        Ok(r) if r.status() == 200 => Ok(r),
                        Ok(r) => Err(format!("{}", r.status())),
                        Err(e) => Err(e.to_string()),
                    }
                })
                .await
            }
        })
        .collect();
    let held = futures::future::join_all(lists).await;
    assert_eq!(held.len(), READ_SEATS);
}

/// A CBOR data item of Kubernetes' profile as JSON, read by minicbor rather than the server's
/// decoder (whose request limits a large list exceeds): text in byte strings, `[]byte` under
/// tag 22 as base64.
fn cbor_value(d: &mut minicbor::Decoder<'_>) -> Value {
    use base64::Engine;
    use minicbor::data::{Tag, Type};
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("UTF-8 text");
    match d.datatype().expect("a data item") {
        Type::Map => {
            let n = d.map().unwrap().expect("a definite-length map");
            let mut m = serde_json::Map::new();
            for _ in 0..n {
                let key = text(d.bytes().expect("a byte string key"));
                m.insert(key, cbor_value(d));
            }
            Value::Object(m)
        }
        Type::Array => {
            let n = d.array().unwrap().expect("a definite-length array");
            Value::Array((0..n).map(|_| cbor_value(d)).collect())
        }
        Type::Bytes => Value::String(text(d.bytes().unwrap())),
        Type::String => Value::String(d.str().unwrap().to_string()),
        Type::Tag => {
            assert_eq!(d.tag().unwrap(), Tag::new(22), "only []byte fields are tagged");
            Value::String(base64::engine::general_purpose::STANDARD.encode(d.bytes().unwrap()))
        }
        Type::Bool => Value::Bool(d.bool().unwrap()),
        Type::Null => {
            d.null().unwrap();
            Value::Null
        }
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => json!(d.u64().unwrap()),
        Type::I8 | Type::I16 | Type::I32 | Type::I64 => json!(d.i64().unwrap()),
        Type::F16 | Type::F32 | Type::F64 => json!(d.f64().unwrap()),
        other => panic!("unexpected CBOR type {other:?}"),
    }
}
