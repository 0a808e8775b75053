//! Tests of the protobuf transcoder: round trips of built-in kinds, known bytes, Go decoding
//! semantics, and refusals of truncated, garbage, deeply nested and mistyped input.

use prost::encoding::encode_varint;
use serde_json::{json, Value};

use super::transcode::{decode_message, encode_message, MAX_DEPTH};
use super::wire::{Reason, Write};
use super::*;
use crate::scheme::Registry;

fn round_trip(obj: Value) -> Value {
    let bytes = encode_object(&obj).unwrap_or_else(|e| panic!("encode {}: {e}", obj["kind"]));
    assert_eq!(&bytes[..4], b"k8s\0");
    let back = decode_object(&bytes).unwrap_or_else(|e| panic!("decode {}: {e}", obj["kind"]));
    assert_eq!(back, obj, "round trip of {}", obj["kind"]);
    back
}

#[test]
fn config_map_with_binary_data_round_trips() {
    round_trip(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "c", "namespace": "default", "uid": "6c7d0a9e-0000-4000-8000-000000000001",
            "resourceVersion": "42", "creationTimestamp": "2024-05-06T07:08:09Z",
            "labels": {"app": "web", "tier": "front"}, "annotations": {"note": "ünïcødé"},
            "finalizers": ["a/b"],
            "managedFields": [{
                "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}}}
            }]
        },
        "data": {"a": "b", "empty": ""},
        "binaryData": {"bin": "AAECA/8=", "none": ""},
        "immutable": false
    }));
}

#[test]
fn pod_with_containers_quantities_probes_and_times_round_trips() {
    round_trip(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "generateName": "p-",
            "deletionTimestamp": "1969-07-20T20:17:40Z", "deletionGracePeriodSeconds": 0,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {
            "containers": [{
                "name": "web", "image": "nginx:1.27", "command": ["nginx", "-g", "daemon off;"],
                "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"},
                          {"containerPort": 53, "protocol": "UDP", "hostPort": 0}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "initialDelaySeconds": 3, "periodSeconds": 10, "failureThreshold": 3},
                "readinessProbe": {"tcpSocket": {"port": "http"}, "timeoutSeconds": 1},
                "env": [{"name": "A", "value": "1"},
                        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a", "optional": true}}}],
                "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]}}
            }],
            "volumes": [{"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}},
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "terminationGracePeriodSeconds": 30, "automountServiceAccountToken": false,
            "securityContext": {"supplementalGroups": [1000, -1, 2147483648i64]},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]
        },
        "status": {"phase": "Running", "podIP": "10.0.0.1",
            "startTime": "2024-01-02T03:04:05Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-02T03:04:06Z"}]}
    }));
}

#[test]
fn deployment_secret_namespace_and_service_account_round_trip() {
    round_trip(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"app": "d"}, "generation": 3},
        "spec": {
            "replicas": 0, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "d"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}}
        },
        "status": {}
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "type": "Opaque", "data": {"k": "dg=="}, "stringData": {"x": "y"}
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
        "automountServiceAccountToken": false, "secrets": [{"name": "tok"}]
    }));
    round_trip(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    }));
}

#[test]
fn meta_kinds_round_trip() {
    round_trip(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u", "resourceVersion": "7"}, "propagationPolicy": "Foreground",
        "dryRun": ["All"], "orphanDependents": false
    }));
    // client-go labels DeleteOptions with the group version of the resource.
    assert_eq!(
        message_for_kind("apps/v1", "DeleteOptions"),
        Some("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions")
    );
    round_trip(json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "configmaps \"x\" not found", "reason": "NotFound", "code": 404,
        "details": {"name": "x", "kind": "configmaps", "retryAfterSeconds": 1,
            "causes": [{"reason": "FieldValueInvalid", "message": "m", "field": "spec.x"}]}
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"resourceVersion": "12", "continue": "c"},
        "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}, {"metadata": {"name": "b"}}]
    }));
    round_trip(json!({
        "apiVersion": "v1", "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [{"name": "pods", "namespaced": true, "kind": "Pod",
            "verbs": ["create", "get"], "shortNames": ["po"], "singularName": "pod"}]
    }));
}

#[test]
fn special_types_round_trip() {
    round_trip(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15,
            "acquireTime": "2024-01-02T03:04:05.123456Z", "renewTime": "2024-01-02T03:04:05.000000Z",
            "leaseTransitions": 0}
    }));
    round_trip(json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "cr"},
        "revision": 2, "data": {"spec": {"template": {"x": [1, 2.5, null, true]}}}
    }));
    let props = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"n": {"type": "integer", "minimum": 1.5, "maximum": 10, "default": 3,
                    "enum": [1, "two", {"three": 3}]}},
                "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "items": {"type": "string"}},
            "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "closed": {"type": "object", "additionalProperties": false},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        },
        "dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}},
        "x-kubernetes-validations": [{"rule": "self.n > 0", "message": "positive"}]
    });
    round_trip(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "listKind": "WidgetList", "singular": "widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": props}}]}
    }));
}

#[test]
fn encoding_matches_known_bytes() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
    let mut want = b"k8s\0".to_vec();
    // Unknown.typeMeta = { apiVersion: "v1", kind: "ConfigMap" }
    want.extend_from_slice(&[0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
    want.extend_from_slice(b"ConfigMap");
    // Unknown.raw = ConfigMap { metadata { name: "c" }, data { "a": "b" } }
    want.extend_from_slice(&[
        0x12, 0x0d, 0x0a, 0x03, 0x0a, 0x01, b'c', 0x12, 0x06, 0x0a, 0x01, b'a', 0x12, 0x01, b'b',
    ]);
    // contentEncoding and contentType, empty but written.
    want.extend_from_slice(&[0x1a, 0x00, 0x22, 0x00]);
    assert_eq!(encode_object(&cm).unwrap(), want);

    // IntOrString writes all three plain fields; negative int32 is a ten-byte varint.
    let mut out = Vec::new();
    encode_message(
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        &json!(-1),
        1,
        &mut out,
    )
    .unwrap();
    assert_eq!(
        out,
        [0x08, 0x00, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x1a, 0x00]
    );
    let mut out = Vec::new();
    encode_message(
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        &json!("25%"),
        1,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [0x08, 0x01, 0x10, 0x00, 0x1a, 0x03, b'2', b'5', b'%']);
    // Time: seconds and nanos; 2024-01-01T00:00:00Z is 1704067200 = 0x65920080.
    let mut out = Vec::new();
    encode_message(
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
        &json!("2024-01-01T00:00:00Z"),
        1,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [0x08, 0x80, 0x81, 0xc8, 0xac, 0x06, 0x10, 0x00]);
}

#[test]
fn decoding_hand_built_bytes_follows_go_semantics() {
    // A Go client's Namespace: every plain string written, even empty; the zero creation time
    // as an empty message; a zero generation; an unknown field 99.
    let mut meta = Vec::new();
    meta.len_field(1, b"x");
    meta.len_field(2, b"");
    meta.len_field(3, b"");
    meta.varint_field(7, 0);
    meta.len_field(8, b"");
    let mut ns = Vec::new();
    ns.len_field(1, &meta);
    ns.len_field(2, b"");
    let mut status = Vec::new();
    status.len_field(1, b"");
    ns.len_field(3, &status);
    ns.varint_field(99, 5);
    let v = decode_message("k8s.io.api.core.v1.Namespace", &ns, 1).unwrap();
    assert_eq!(
        v,
        json!({"metadata": {"name": "x", "generation": 0}, "spec": {}, "status": {}})
    );

    // Packed repeated int64 is accepted too.
    let mut packed = Vec::new();
    encode_varint(1000, &mut packed);
    encode_varint(-1i64 as u64, &mut packed);
    let mut psc = Vec::new();
    psc.len_field(4, &packed);
    let v = decode_message("k8s.io.api.core.v1.PodSecurityContext", &psc, 1).unwrap();
    assert_eq!(v, json!({"supplementalGroups": [1000, -1]}));

    // An empty storageClassName means "no class" and is kept.
    let mut pvc = Vec::new();
    pvc.len_field(5, b"");
    let v = decode_message("k8s.io.api.core.v1.PersistentVolumeClaimSpec", &pvc, 1).unwrap();
    assert_eq!(v, json!({"storageClassName": ""}));

    // Quantity zero value and IntOrString by type.
    assert_eq!(
        decode_message("k8s.io.apimachinery.pkg.api.resource.Quantity", &[], 1).unwrap(),
        "0"
    );
    assert_eq!(
        decode_message(
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
            &[0x08, 0x00, 0x10, 0x50],
            1
        )
        .unwrap(),
        80
    );
    let err = decode_message(
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        &[0x08, 0x02],
        1,
    )
    .unwrap_err();
    assert!(matches!(err.reason, Reason::Invalid(_)), "{err}");
}

#[test]
fn registry_kinds_all_have_messages() {
    let registry = Registry::new();
    let mut n = 0;
    for rt in registry.all().filter(|t| !t.review) {
        let gv = rt.group_version();
        assert!(message_for_kind(&gv, &rt.kind).is_some(), "{gv} {}", rt.kind);
        assert!(
            message_for_kind(&gv, &rt.list_kind).is_some(),
            "{gv} {}",
            rt.list_kind
        );
        n += 1;
    }
    assert!(n > 20, "{n} types");
    assert_eq!(
        message_for_kind("v1", "Status"),
        Some("k8s.io.apimachinery.pkg.apis.meta.v1.Status")
    );
    assert_eq!(
        message_for_kind("events.k8s.io/v1", "Event"),
        Some("k8s.io.api.events.v1.Event")
    );
    assert_eq!(message_for_kind("v1", "Event"), Some("k8s.io.api.core.v1.Event"));
    assert_eq!(message_for_kind("v1", "No.Such"), None);
    assert_eq!(message_for_kind("example.com/v1", "Widget"), None);
}

fn sample() -> Vec<u8> {
    encode_object(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"a": "b"}, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "1"}}}]}}}
    }))
    .unwrap()
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample();
    assert!(decode_object(&bytes).is_ok());
    // Cutting at a field boundary of the envelope leaves a valid, smaller envelope: after the
    // typeMeta (an object with no fields) and after the raw object. Every other cut fails.
    let type_meta_end = 4 + 2 + usize::from(bytes[5]);
    for n in 0..bytes.len() - 4 {
        let r = decode_object(&bytes[..n]);
        if n == type_meta_end {
            assert_eq!(r.unwrap(), json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        } else {
            assert!(r.is_err(), "prefix of {n} bytes decoded: {r:?}");
        }
    }
    let err = decode_request(&bytes[..bytes.len() / 2]).unwrap_err();
    assert_eq!(err.code, 400);
    assert!(err.message.contains("truncated"), "{}", err.message);
}

#[test]
fn garbage_never_panics() {
    let base = sample();
    // A small deterministic generator: flip bytes of a valid object and feed pure noise.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut b = base.clone();
        for _ in 0..(next() % 4 + 1) {
            let i = (next() as usize) % b.len();
            b[i] = next() as u8;
        }
        let _ = decode_object(&b);
        let noise: Vec<u8> = (0..(next() % 64)).map(|_| next() as u8).collect();
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend_from_slice(&noise);
        let _ = decode_object(&with_magic);
        let _ = decode_message("k8s.io.api.core.v1.Pod", &noise, 1);
    }
    assert!(decode_object(b"{\"kind\":\"Pod\"}").is_err());
    assert!(decode_object(b"").is_err());
}

#[test]
fn deep_nesting_is_rejected() {
    // JSONSchemaProps.not (tag 28) nested far past the limit.
    let schema = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
    let mut inner: Vec<u8> = Vec::new();
    for _ in 0..(MAX_DEPTH + 10) {
        let mut outer = Vec::new();
        outer.len_field(28, &inner);
        inner = outer;
    }
    let err = decode_message(schema, &inner, 1).unwrap_err();
    assert_eq!(err.reason, Reason::TooDeep(MAX_DEPTH));
    // Within the limit it decodes.
    let mut ok: Vec<u8> = Vec::new();
    for _ in 0..20 {
        let mut outer = Vec::new();
        outer.len_field(28, &ok);
        ok = outer;
    }
    assert!(decode_message(schema, &ok, 1).is_ok());

    // Objects nested through RawExtension envelopes (WatchEvent.object) are bounded too.
    let mut obj = encode_object(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).unwrap();
    for _ in 0..(MAX_DEPTH + 10) {
        let mut raw_ext = Vec::new();
        raw_ext.len_field(1, &obj);
        let mut event = Vec::new();
        event.len_field(1, b"ADDED");
        event.len_field(2, &raw_ext);
        obj = envelope("v1", "WatchEvent", &event);
    }
    let err = decode_object(&obj).unwrap_err();
    assert_eq!(err.reason, Reason::TooDeep(MAX_DEPTH));

    // Embedded JSON counts toward the same limit.
    let deep_json = format!("{}{}", "[".repeat(120), "]".repeat(120));
    let mut cr = Vec::new();
    let mut raw = Vec::new();
    raw.len_field(1, deep_json.as_bytes());
    cr.len_field(2, &raw);
    let err = decode_message("k8s.io.api.apps.v1.ControllerRevision", &cr, 1).unwrap_err();
    assert_eq!(err.reason, Reason::TooDeep(MAX_DEPTH));
}

#[test]
fn wrong_shapes_and_wire_types_are_errors() {
    // A string field sent as a varint.
    let mut cm = Vec::new();
    let mut meta = Vec::new();
    meta.varint_field(1, 5);
    cm.len_field(1, &meta);
    let err = decode_message("k8s.io.api.core.v1.ConfigMap", &cm, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "metadata.name: wire type 0 does not fit a string field"
    );
    // Invalid UTF-8.
    let mut meta = Vec::new();
    meta.len_field(1, &[0xff, 0xfe]);
    let mut cm = Vec::new();
    cm.len_field(1, &meta);
    assert!(decode_message("k8s.io.api.core.v1.ConfigMap", &cm, 1).is_err());
    // Envelope problems.
    assert!(decode_object(&envelope("v1", "NoSuchKind", &[])).is_err());
    assert!(decode_object(&envelope("v1", "", &[])).is_err());
    let mut gz = MAGIC.to_vec();
    gz.len_field(3, b"gzip");
    assert!(decode_object(&gz).is_err());
    // JSON values of the wrong shape fail to encode, naming the field.
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}});
    assert_eq!(
        encode_object(&bad).unwrap_err().to_string(),
        "data.a: expected a string, found a number"
    );
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1e12}});
    assert!(encode_object(&bad).is_err());
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": "not base64!"}});
    assert!(encode_object(&bad).is_err());
    assert!(encode_object(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})).is_err());
}

#[test]
fn errors_render_as_protobuf_status() {
    let e = ApiError::unavailable("no leader");
    let resp = error_response(e.clone());
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], MEDIA_TYPE);
    assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    let body = futures::executor::block_on(axum::body::to_bytes(resp.into_body(), 1 << 20)).unwrap();
    assert_eq!(decode_object(&body).unwrap(), e.body());
}

#[test]
fn delete_bodies_become_json() {
    let opts = json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
        "preconditions": {"resourceVersion": "5"}});
    let proto = encode_object(&opts).unwrap();
    let out = json_body(MEDIA_TYPE, proto.into()).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), opts);
    let plain = bytes::Bytes::from_static(b"{}");
    assert_eq!(json_body("application/json", plain.clone()).unwrap(), plain);
    assert_eq!(
        json_body(MEDIA_TYPE, bytes::Bytes::from_static(b"junk"))
            .unwrap_err()
            .code,
        400
    );
}
