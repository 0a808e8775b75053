//! `kuberaft-bench codecs`: what each wire encoding of the API costs, in CPU and in bytes, for
//! the two payloads that dominate a busy API server: a list of Pods and a watch frame of one
//! Pod. It runs kuberaft's own encoders and decoders in process (JSON as kube's serializer
//! writes it, Kubernetes protobuf, CBOR), so the numbers are the server's codec cost without
//! the network, and each figure is the median of several timed runs.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kuberaft::endpoints::response::value_json_bytes;
use kuberaft::machinery::{cbor, protobuf};
use serde_json::{json, Value};

/// A Pod as a cluster holds it after scheduling: two containers with env, ports, resources
/// and mounts, the service-account volume, tolerations, managed fields and a running status.
pub fn pod(i: usize) -> Value {
    let name = format!("web-{i:04}");
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "generateName": "web-",
            "namespace": "bench",
            "uid": format!("0b6f8a52-93f4-4c4e-9d5b-{i:012}"),
            "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": "2026-11-26T02:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f5", "tier": "frontend"},
            "annotations": {"kubernetes.io/config.seen": "2026-11-26T02:00:01.123456789Z"},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f5",
                "uid": "5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", "controller": true,
                "blockOwnerDeletion": true
            }],
            "managedFields": [{
                "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-26T02:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:tier": {}}},
                             "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}
            }]
        },
        "spec": {
            "containers": [
                {
                    "name": "web", "image": "registry.example.com/web:1.27.3",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "MODE", "value": "production"}, {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
                    "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "250m", "memory": "128Mi"}},
                    "volumeMounts": [{"name": "kube-api-access", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent"
                },
                {
                    "name": "sidecar", "image": "registry.example.com/proxy:2.4.1",
                    "args": ["--listen=:9090", "--upstream=127.0.0.1:8080"],
                    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent"
                }
            ],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
            ]}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": format!("node-{}", i % 10),
            "securityContext": {}, "schedulerName": "default-scheduler", "priority": 0,
            "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable",
            "hostIP": "10.0.0.12", "podIP": format!("10.244.{}.{}", i / 250, i % 250 + 2),
            "startTime": "2026-11-26T02:00:01Z",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-26T02:00:01Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T02:00:05Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-26T02:00:05Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T02:00:00Z"}
            ],
            "containerStatuses": [
                {"name": "web", "ready": true, "restartCount": 0, "image": "registry.example.com/web:1.27.3",
                 "imageID": "registry.example.com/web@sha256:4f2d9c1e", "containerID": format!("containerd://{i:064x}"),
                 "started": true, "state": {"running": {"startedAt": "2026-11-26T02:00:03Z"}}},
                {"name": "sidecar", "ready": true, "restartCount": 0, "image": "registry.example.com/proxy:2.4.1",
                 "imageID": "registry.example.com/proxy@sha256:9a8b7c6d", "containerID": format!("containerd://{:064x}", i + 1),
                 "started": true, "state": {"running": {"startedAt": "2026-11-26T02:00:03Z"}}}
            ]
        }
    })
}

/// A `PodList` of `n` Pods (items without their type, as kube lists built-in types).
pub fn pod_list(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            let mut p = pod(i);
            if let Some(o) = p.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            p
        })
        .collect();
    json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "2000"}, "items": items})
}

/// One encoding's figures for one payload.
struct Cell {
    bytes: usize,
    encode: Duration,
    decode: Duration,
}

/// The median time of one call of `f`, over `runs` runs of `iterations` calls each.
fn median(runs: usize, iterations: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed() / iterations.max(1) as u32
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// Times an encoder and its decoder on `value`, checking that the bytes decode back.
fn measure(
    runs: usize,
    iterations: usize,
    value: &Value,
    encode: impl Fn(&Value) -> anyhow::Result<Vec<u8>>,
    decode: impl Fn(&[u8]) -> anyhow::Result<Value>,
) -> anyhow::Result<Cell> {
    let bytes = encode(value)?;
    decode(&bytes)?;
    let encode_time = median(runs, iterations, || {
        std::hint::black_box(encode(std::hint::black_box(value)).ok());
    });
    let decode_time = median(runs, iterations, || {
        std::hint::black_box(decode(std::hint::black_box(&bytes)).ok());
    });
    Ok(Cell {
        bytes: bytes.len(),
        encode: encode_time,
        decode: decode_time,
    })
}

/// A JSON watch frame as the server writes it: `{"type":…,"object":…}` and a newline.
fn json_frame(obj: &Value) -> anyhow::Result<Vec<u8>> {
    let mut out = br#"{"type":"MODIFIED","object":"#.to_vec();
    let object = value_json_bytes(obj, false)?;
    out.extend_from_slice(&object[..object.len() - 1]);
    out.extend_from_slice(b"}\n");
    Ok(out)
}

/// The object of a protobuf watch frame: the 4-byte length, then `WatchEvent { type = 1,
/// object = 2 { raw = 1 } }`, whose `raw` is an enveloped object.
fn protobuf_frame_object(frame: &[u8]) -> anyhow::Result<Value> {
    let magic = frame
        .windows(protobuf::MAGIC.len())
        .position(|w| w == protobuf::MAGIC)
        .ok_or_else(|| anyhow::anyhow!("no object in the frame"))?;
    Ok(protobuf::decode_object(&frame[magic..])?)
}

/// Runs the benchmark and returns the markdown table.
pub fn run(pods: usize, runs: usize) -> anyhow::Result<String> {
    let list = pod_list(pods);
    let one = pod(0);
    let list_iterations = (3000 / pods.max(1)).max(5);
    let frame_iterations = 2000;
    let rows: Vec<(&str, &str, Cell)> = vec![
        (
            "list",
            "JSON",
            measure(
                runs,
                list_iterations,
                &list,
                |v| Ok(value_json_bytes(v, false)?),
                |b| Ok(serde_json::from_slice(b)?),
            )?,
        ),
        (
            "list",
            "protobuf",
            measure(
                runs,
                list_iterations,
                &list,
                |v| Ok(protobuf::encode_object(v)?),
                |b| Ok(protobuf::decode_object(b)?),
            )?,
        ),
        (
            "list",
            "CBOR",
            measure(
                runs,
                list_iterations,
                &list,
                |v| Ok(cbor::encode(v)),
                |b| Ok(cbor::decode(b)?),
            )?,
        ),
        (
            "watch frame",
            "JSON",
            measure(runs, frame_iterations, &one, json_frame, |b| {
                Ok(serde_json::from_slice(b)?)
            })?,
        ),
        (
            "watch frame",
            "protobuf",
            measure(
                runs,
                frame_iterations,
                &one,
                |v| Ok(protobuf::watch_frame("MODIFIED", &protobuf::encode_object(v)?)),
                protobuf_frame_object,
            )?,
        ),
        (
            "watch frame",
            "CBOR",
            measure(
                runs,
                frame_iterations,
                &one,
                |v| Ok(cbor::watch_event("MODIFIED", &cbor::encode(v))),
                |b| Ok(cbor::decode(b)?),
            )?,
        ),
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| payload | encoding | bytes | bytes vs JSON | encode µs | decode µs | encode vs JSON | decode vs JSON |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (payload, encoding, cell) in &rows {
        let Some((_, _, json)) = rows.iter().find(|(p, e, _)| p == payload && *e == "JSON") else {
            continue;
        };
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let payload = if *payload == "list" {
            format!("list of {pods} Pods")
        } else {
            "watch frame (1 Pod)".to_string()
        };
        let _ = writeln!(
            out,
            "| {payload} | {encoding} | {} | {:.2} | {:.1} | {:.1} | {:.2} | {:.2} |",
            cell.bytes,
            cell.bytes as f64 / json.bytes as f64,
            us(cell.encode),
            us(cell.decode),
            us(cell.encode) / us(json.encode),
            us(cell.decode) / us(json.decode),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_round_trips_the_fixture() {
        let list = pod_list(3);
        assert_eq!(cbor::decode(&cbor::encode(&list)).unwrap(), list);
        assert_eq!(
            protobuf::decode_object(&protobuf::encode_object(&list).unwrap()).unwrap()["items"][2]
                ["metadata"]["name"],
            "web-0002"
        );
        let frame = protobuf::watch_frame("MODIFIED", &protobuf::encode_object(&pod(7)).unwrap());
        assert_eq!(
            protobuf_frame_object(&frame).unwrap()["metadata"]["name"],
            "web-0007"
        );
        let json: Value = serde_json::from_slice(&json_frame(&pod(1)).unwrap()).unwrap();
        assert_eq!(json["object"]["metadata"]["name"], "web-0001");
        assert!(run(2, 1).unwrap().contains("| list of 2 Pods | CBOR |"));
    }
}
