//! Unit tests of the built-in validation: objects prepared as the store prepares them, then
//! checked, with kube's field paths and messages.

use serde_json::{json, Value};

use super::causes;
use crate::config::ServiceRanges;
use crate::kinds::strategy::registry;
use crate::machinery::meta::{prepare_create, prepare_update};
use crate::registry::strategy::{prepare_for_create, prepare_for_update};

/// The problems kube would name for creating `obj` as `plural` (every group used here serves
/// `v1`), as `field: message`.
fn create(group: &str, plural: &str, mut obj: Value) -> Vec<String> {
    let r = registry(&ServiceRanges::default());
    let rt = r.lookup(group, "v1", plural).expect("served");
    prepare_create(rt, &mut obj, rt.namespaced.then_some("ns")).expect("metadata");
    prepare_for_create(rt, &mut obj);
    shown(causes(rt, None, &obj))
}

/// The problems kube would name for updating `old` (as created) to `new`.
fn update(group: &str, plural: &str, old: Value, mut new: Value) -> Vec<String> {
    let r = registry(&ServiceRanges::default());
    let rt = r.lookup(group, "v1", plural).expect("served");
    let mut old = old;
    prepare_create(rt, &mut old, rt.namespaced.then_some("ns")).expect("metadata");
    prepare_for_create(rt, &mut old);
    let name = old["metadata"]["name"].as_str().unwrap_or_default().to_string();
    prepare_update(rt, &old, &mut new, &name).expect("metadata");
    prepare_for_update(rt, &old, &mut new).expect("prepared");
    shown(causes(rt, Some(&old), &new))
}

fn shown(causes: Vec<(String, String)>) -> Vec<String> {
    causes.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
}

fn pod(containers: Value) -> Value {
    json!({"metadata": {"name": "test"}, "spec": {"containers": containers}})
}

#[test]
fn a_valid_pod_has_no_problems() {
    assert!(create("", "pods", pod(json!([{"name": "c", "image": "busybox"}]))).is_empty());
}

#[test]
fn probes_have_one_valid_handler_and_no_negative_timings() {
    let probed = |probes: Value| {
        let mut c = json!({"name": "c", "image": "busybox"});
        for (k, v) in probes.as_object().unwrap() {
            c[k] = v.clone();
        }
        create("", "pods", pod(json!([c])))
    };
    assert!(probed(json!({"livenessProbe": {"httpGet": {"port": 8080}},
        "readinessProbe": {"tcpSocket": {"port": "http"}, "successThreshold": 3},
        "startupProbe": {"exec": {"command": ["true"]}}}))
    .is_empty());
    assert_eq!(
        probed(
            json!({"livenessProbe": {"exec": {"command": ["true"]}, "httpGet": {"port": 80}, "tcpSocket": {"port": 80}}})
        ),
        [
            "spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
            "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
        ]
    );
    assert_eq!(
        probed(json!({"readinessProbe": {"periodSeconds": 5}})),
        ["spec.containers[0].readinessProbe: Required value: must specify a handler type"]
    );
    assert_eq!(
        probed(json!({"livenessProbe": {"httpGet": {"port": 70000, "scheme": "FTP"}, "initialDelaySeconds": -1,
            "successThreshold": 2, "terminationGracePeriodSeconds": 0}})),
        [
            "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
            "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than 0",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ]
    );
    assert_eq!(
        probed(json!({"startupProbe": {"exec": {"command": []}}, "readinessProbe": {"grpc": {}}})),
        [
            "spec.containers[0].readinessProbe.grpc.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.containers[0].startupProbe.exec.command: Required value",
        ]
    );
    // Lifecycle hooks have one handler too.
    assert_eq!(
        probed(
            json!({"lifecycle": {"preStop": {"exec": {"command": ["stop"]}, "sleep": {"seconds": 5}},
            "postStart": {"httpGet": {"path": "/", "port": "web", "scheme": "HTTP"}}}})
        ),
        ["spec.containers[0].lifecycle.preStop.sleep: Forbidden: may not specify more than 1 handler type"]
    );
    assert_eq!(
        probed(json!({"lifecycle": {"postStart": {}}})),
        ["spec.containers[0].lifecycle.postStart: Required value: must specify a handler type"]
    );
    // An init container is probed only when it is a sidecar.
    let init = |restart: Value| {
        let mut spec = pod(json!([{"name": "c", "image": "busybox"}]));
        spec["spec"]["initContainers"] = json!([{"name": "i", "image": "busybox", "restartPolicy": restart,
            "readinessProbe": {"tcpSocket": {"port": "Bad_Port"}}}]);
        create("", "pods", spec)
    };
    assert_eq!(
        init(json!("Always")),
        ["spec.initContainers[0].readinessProbe.tcpSocket.port: Invalid value: \"Bad_Port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"]
    );
    assert_eq!(
        init(Value::Null),
        ["spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"]
    );
}

#[test]
fn security_contexts_have_ids_in_range_and_a_valid_seccomp_profile() {
    let mut p = pod(json!([{"name": "c", "image": "busybox",
        "securityContext": {"runAsUser": -1, "seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/p.json"}}}]));
    p["spec"]["securityContext"] = json!({"runAsGroup": 3000000000_i64, "supplementalGroups": [1, -2],
        "seccompProfile": {"type": "Strict"}});
    assert_eq!(
        create("", "pods", p),
        [
            "spec.containers[0].securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            "spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: \"/etc/p.json\": must be a relative path",
            "spec.securityContext.runAsGroup: Invalid value: 3000000000: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.seccompProfile.type: Unsupported value: \"Strict\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
        ]
    );
    let mut p = pod(
        json!([{"name": "c", "image": "busybox", "securityContext": {"runAsUser": 1000,
        "seccompProfile": {"type": "Localhost"}}}]),
    );
    p["spec"]["securityContext"] = json!({"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}});
    assert_eq!(
        create("", "pods", p),
        ["spec.containers[0].securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"]
    );
}

#[test]
fn a_namespace_s_finalizers_are_kubes_or_prefixed() {
    let ns = json!({"metadata": {"name": "shop"},
        "spec": {"finalizers": ["kubernetes", "example.com/hold", "custom"]}});
    assert_eq!(
        create("", "namespaces", ns),
        ["spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"]
    );
}

#[test]
fn node_taints_are_valid_and_unique_and_ids_stay_once_set() {
    let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "db", "effect": "NoExecute"},
        {"key": "bad key", "value": "-x", "effect": "Sometimes"},
        {"key": "k"}]}});
    assert_eq!(
        create("", "nodes", node),
        [
            "metadata.taints[1]: Duplicate value: core.Taint{Key:\"dedicated\", Value:\"web\", Effect:\"NoSchedule\", TimeAdded:<nil>}: taints must be unique by key and effect pair",
            "metadata.taints[3].key: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "metadata.taints[3].value: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "metadata.taints[3].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            "metadata.taints[4].effect: Required value",
        ]
    );
    let old = json!({"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///i-1", "podCIDRs": ["10.0.1.0/24"]}});
    let new = json!({"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///i-2", "podCIDRs": ["10.0.2.0/24"]}});
    assert_eq!(
        update("", "nodes", old, new),
        [
            "spec.providerID: Forbidden: node updates may not change providerID except from \"\" to valid",
            "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid",
        ]
    );
    let unset = json!({"metadata": {"name": "n2"}, "spec": {}});
    let set = json!({"metadata": {"name": "n2"}, "spec": {"providerID": "aws:///i-3", "podCIDRs": ["10.0.3.0/24"]}});
    assert!(update("", "nodes", unset, set).is_empty());
}

#[test]
fn persistent_volumes_have_modes_storage_and_one_source() {
    let good = json!({"metadata": {"name": "pv1"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}, "nfs": {"server": "nfs.example.com", "path": "/exports"}}});
    assert!(create("", "persistentvolumes", good).is_empty());
    let bad = json!({"metadata": {"name": "pv2"}, "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteMany", "WriteOnly"],
        "persistentVolumeReclaimPolicy": "Recycle", "volumeMode": "Raw",
        "hostPath": {"path": "/"}, "nfs": {"server": "s", "path": "/x"}, "local": {"path": "/mnt"}}});
    assert_eq!(
        create("", "persistentvolumes", bad),
        [
            "spec.accessModes: Unsupported value: \"WriteOnly\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
            "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
            "spec.capacity: Required value",
            "spec.capacity: Unsupported value: core.ResourceList(nil): supported values: \"storage\"",
            "spec.nfs: Forbidden: may not specify more than 1 volume type",
            "spec.local: Forbidden: may not specify more than 1 volume type",
            "spec.persistentVolumeReclaimPolicy: Forbidden: may not be 'recycle' for a hostPath mount of '/'",
            "spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"",
        ]
    );
    let sourceless = json!({"metadata": {"name": "pv3"}, "spec": {"capacity": {"storage": "1Gi"}}});
    assert_eq!(
        create("", "persistentvolumes", sourceless),
        [
            "spec.accessModes: Required value",
            "spec: Required value: must specify a volume type"
        ]
    );
    let local = json!({"metadata": {"name": "pv4"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}, "local": {"path": "/mnt/disk"}}});
    assert_eq!(
        create("", "persistentvolumes", local),
        ["spec.nodeAffinity: Required value: Local volume requires node affinity"]
    );
}

/// A PersistentVolume named `name` of 1Gi, read-write once, with the spec fields `fields`.
fn pv(name: &str, fields: Value) -> Value {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}});
    for (k, v) in fields.as_object().expect("an object") {
        spec[k] = v.clone();
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

#[test]
fn persistent_volume_sources_have_their_own_fields_checked() {
    let affinity = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}});
    for good in [
        json!({"hostPath": {"path": "/data", "type": "DirectoryOrCreate"}}),
        json!({"nfs": {"server": "nfs.example.com", "path": "/exports/a"}}),
        json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1",
            "nodePublishSecretRef": {"name": "creds", "namespace": "kube-system"}}}),
        json!({"local": {"path": "/mnt/disks/ssd1"}, "nodeAffinity": affinity}),
        json!({"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage.disk1", "lun": 0}}),
        json!({"fc": {"targetWWNs": ["500a0982991b8dc5"], "lun": 2}}),
        json!({"azureDisk": {"diskName": "d", "diskURI": "/subscriptions/s/resourcegroups/g/providers/microsoft.compute/disks/d", "kind": "Managed"}}),
    ] {
        assert_eq!(
            create("", "persistentvolumes", pv("good", good.clone())),
            Vec::<String>::new(),
            "{good}"
        );
    }
    let cases = [
        (json!({"hostPath": {"path": "/data/../etc", "type": "Folder"}}), vec![
            "spec.hostPath.path: Invalid value: \"/data/../etc\": must not contain '..'",
            "spec.hostPath.type: Unsupported value: \"Folder\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"",
        ]),
        (json!({"nfs": {"path": "exports"}}), vec![
            "spec.nfs.server: Required value",
            "spec.nfs.path: Invalid value: \"exports\": must be an absolute path",
        ]),
        (json!({"csi": {"driver": "Bad_Driver!", "nodeExpandSecretRef": {"name": "s"}}}), vec![
            "spec.csi.driver: Invalid value: \"Bad_Driver!\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "spec.csi.volumeHandle: Required value",
            "spec.csi.nodeExpandSecretRef.namespace: Required value",
        ]),
        (json!({"local": {"path": ""}}), vec![
            "spec.local.path: Required value",
            "spec.nodeAffinity: Required value: Local volume requires node affinity",
        ]),
        (json!({"iscsi": {"iqn": "iqn.bad", "lun": 300, "chapAuthSession": true, "initiatorName": "eui.short"}}), vec![
            "spec.iscsi.targetPortal: Required value",
            "spec.iscsi.iqn: Invalid value: \"iqn.bad\": must be valid format",
            "spec.iscsi.lun: Invalid value: 300: must be between 0 and 255, inclusive",
            "spec.iscsi.secretRef: Required value",
            "spec.iscsi.initiatorname: Invalid value: \"eui.short\": must be valid format",
        ]),
        (json!({"fc": {"targetWWNs": ["a"], "wwids": ["b"]}}), vec![
            "spec.fc.targetWWNs: Invalid value: [\"a\"]: targetWWNs and wwids can not be specified simultaneously",
            "spec.fc.lun: Required value: lun is required if targetWWNs is specified",
        ]),
        (json!({"gcePersistentDisk": {"partition": 300}}), vec![
            "spec.persistentDisk.pdName: Required value",
            "spec.persistentDisk.partition: Invalid value: 300: must be between 1 and 255, inclusive",
        ]),
        (json!({"cephfs": {}, "rbd": {}}), vec![
            "spec.rbd.monitors: Required value",
            "spec.rbd.image: Required value",
            "spec.cephFS: Forbidden: may not specify more than 1 volume type",
        ]),
        (json!({"azureDisk": {"diskName": "d", "diskURI": "/subscriptions/x", "kind": "Shared", "cachingMode": "All"}}), vec![
            "spec.azureDisk.cachingMode: Unsupported value: \"All\": supported values: \"None\", \"ReadOnly\", \"ReadWrite\"",
            "spec.azureDisk.diskURI: Unsupported value: \"/subscriptions/x\": supported values: \"https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd\"",
        ]),
        (json!({"azureFile": {"secretName": "s", "secretNamespace": ""}, "storageClassName": "Fast"}), vec![
            "spec.azureFile.shareName: Required value",
            "spec.azureFile.secretNamespace: Required value",
            "spec.storageClassName: Invalid value: \"Fast\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ]),
        (json!({"hostPath": {"path": "/d"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1", "2"]}]}]}}}), vec![
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        ]),
        (json!({"hostPath": {"path": "/d"}, "nodeAffinity": {}}), vec![
            "spec.nodeAffinity.required: Required value: must specify required node constraints",
        ]),
    ];
    for (fields, expected) in cases {
        assert_eq!(
            create("", "persistentvolumes", pv("bad", fields.clone())),
            expected,
            "{fields}"
        );
    }
}

/// The problems kube would name for updating the stored `old` to `new`, both as given (a
/// claim's status is the storage's, which a client's update does not set).
fn update_stored(plural: &str, old: Value, new: Value) -> Vec<String> {
    update_stored_in("", plural, old, new)
}

/// The same for a type of `group`.
fn update_stored_in(group: &str, plural: &str, old: Value, new: Value) -> Vec<String> {
    let r = registry(&ServiceRanges::default());
    let rt = r.lookup(group, "v1", plural).expect("served");
    shown(causes(rt, Some(&old), &new))
}

#[test]
fn a_persistent_volume_keeps_its_source_mode_and_node_affinity() {
    let zone = |key: &str, value: &str| json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}});
    let old = pv(
        "pv",
        json!({"nfs": {"server": "s", "path": "/a"}, "volumeMode": "Filesystem",
        "nodeAffinity": zone("failure-domain.beta.kubernetes.io/zone", "a")}),
    );
    let mut renamed = old.clone();
    renamed["spec"]["nodeAffinity"] = zone("topology.kubernetes.io/zone", "a");
    renamed["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
    assert_eq!(
        update("", "persistentvolumes", old.clone(), renamed),
        Vec::<String>::new()
    );
    let mut changed = old.clone();
    changed["spec"]["nfs"]["path"] = json!("/b");
    changed["spec"]["volumeMode"] = json!("Block");
    changed["spec"]["nodeAffinity"] = zone("topology.kubernetes.io/zone", "b");
    assert_eq!(
        update("", "persistentvolumes", old, changed),
        [
            "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n- {\"nfs\":{\"path\":\"/a\",\"server\":\"s\"}}\n+ {\"nfs\":{\"path\":\"/b\",\"server\":\"s\"}}",
            "volumeMode: Invalid value: \"Block\": field is immutable",
            "nodeAffinity: Invalid value: {\"Required\":{\"NodeSelectorTerms\":[{\"MatchExpressions\":[{\"Key\":\"topology.kubernetes.io/zone\",\"Operator\":\"In\",\"Values\":[\"b\"]}],\"MatchFields\":null}]}}: field is immutable, except for updating from beta label to GA",
        ]
    );
    // A CSI volume may be given the secret it is expanded with, once.
    let csi = pv(
        "csi",
        json!({"csi": {"driver": "d.example.com", "volumeHandle": "h"}}),
    );
    let mut expandable = csi.clone();
    expandable["spec"]["csi"]["controllerExpandSecretRef"] = json!({"name": "s", "namespace": "ns"});
    assert_eq!(
        update("", "persistentvolumes", csi, expandable),
        Vec::<String>::new()
    );
}

#[test]
fn a_claim_keeps_its_spec_but_a_bound_claim_may_grow() {
    let claim = |storage: &str, status: Value| {
        json!({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": storage}}, "volumeMode": "Filesystem"}, "status": status})
    };
    let bound = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
    assert_eq!(
        update_stored(
            "persistentvolumeclaims",
            claim("1Gi", bound.clone()),
            claim("2Gi", bound.clone())
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        update_stored(
            "persistentvolumeclaims",
            claim("2Gi", bound.clone()),
            claim("1Gi", bound.clone())
        ),
        ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
    );
    assert_eq!(
        update_stored(
            "persistentvolumeclaims",
            claim("2Gi", bound.clone()),
            claim("1536Mi", bound)
        ),
        Vec::<String>::new()
    );
    let pending = json!({"phase": "Pending"});
    let mut named = claim("1Gi", pending.clone());
    named["spec"]["volumeName"] = json!("pv-1");
    named["spec"]["storageClassName"] = json!("fast");
    assert_eq!(
        update_stored(
            "persistentvolumeclaims",
            claim("1Gi", pending.clone()),
            named.clone()
        ),
        Vec::<String>::new()
    );
    let mut renamed = named.clone();
    renamed["spec"]["volumeName"] = json!("pv-2");
    renamed["spec"]["volumeMode"] = json!("Block");
    assert_eq!(
        update_stored("persistentvolumeclaims", named, renamed),
        [
            "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n- {\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}},\"storageClassName\":\"fast\",\"volumeMode\":\"Filesystem\",\"volumeName\":\"pv-1\"}\n+ {\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}},\"storageClassName\":\"fast\",\"volumeMode\":\"Block\",\"volumeName\":\"pv-2\"}",
            "volumeMode: Invalid value: \"Block\": field is immutable",
        ]
    );
    let mut classed = claim("1Gi", pending.clone());
    classed["spec"]["volumeAttributesClassName"] = json!("gold");
    let mut unclassed = classed.clone();
    unclassed["spec"]["volumeAttributesClassName"] = json!("");
    unclassed["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "slow"});
    assert_eq!(
        update_stored("persistentvolumeclaims", classed, unclassed),
        [
            "metadata.annotations.volume.beta.kubernetes.io/storage-class: Invalid value: \"slow\": field is immutable",
            "spec.volumeAttributesClassName: Forbidden: update from non-nil value to an empty string is forbidden",
        ]
    );
}

#[test]
fn ingresses_have_rules_or_a_default_and_valid_paths_and_backends() {
    let ing = |spec: Value| {
        create(
            "networking.k8s.io",
            "ingresses",
            json!({"metadata": {"name": "web"}, "spec": spec}),
        )
    };
    let svc = json!({"service": {"name": "web", "port": {"number": 80}}});
    assert!(
        ing(json!({"rules": [{"host": "shop.example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": svc}]}}]}))
        .is_empty()
    );
    assert_eq!(
        ing(json!({})),
        ["spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"]
    );
    assert_eq!(
        ing(json!({"defaultBackend": {"service": {"name": "Web", "port": {"name": "http", "number": 80}}},
            "rules": [{"host": "10.0.0.1", "http": {"paths": [
                {"path": "a//b", "pathType": "Exact", "backend": {"resource": {"kind": "Bucket", "name": "b"}, "service": {"name": "x"}}},
                {"path": "/x", "pathType": "Regex", "backend": {"service": {"name": "web", "port": {}}}},
                {"path": "/y", "backend": svc}]}},
                {"host": "Bad_Host", "http": {"paths": []}}]})),
        [
            "spec.defaultBackend.service.name: Invalid value: \"Web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.defaultBackend: Invalid value: \"\": cannot set both port name & port number",
            "spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b\": must be an absolute path",
            "spec.rules[0].http.paths[0].path: Invalid value: \"a//b\": must not contain '//'",
            "spec.rules[0].http.paths[0].backend: Invalid value: \"\": cannot set both resource and service backends",
            "spec.rules[0].http.paths[1].pathType: Unsupported value: \"Regex\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
            "spec.rules[0].http.paths[1].backend: Required value: port name or number is required",
            "spec.rules[0].http.paths[2].pathType: Required value: pathType must be specified",
            "spec.rules[1].host: Invalid value: \"Bad_Host\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "spec.rules[1].http.paths: Required value",
        ]
    );
    // Wildcard hosts, in rules and TLS entries, and TLS secret names.
    assert!(ing(json!({"rules": [{"host": "*.example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": svc}]}}],
        "tls": [{"hosts": ["*.example.com", "shop.example.com"], "secretName": "shop-tls"}]}))
    .is_empty());
    let wildcard = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    assert_eq!(
        ing(json!({"rules": [{"host": "shop.*.com"}],
            "tls": [{"hosts": ["*", "Shop.example.com"], "secretName": "Shop_TLS"}]})),
        [
            format!("spec.rules[0].host: Invalid value: \"shop.*.com\": {wildcard}"),
            format!("spec.tls[0].hosts[0]: Invalid value: \"*\": {wildcard}"),
            "spec.tls[0].hosts[1]: Invalid value: \"Shop.example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string(),
            "spec.tls[0].secretName: Invalid value: \"Shop_TLS\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string(),
        ]
    );
}

#[test]
fn containers_need_a_name_and_an_image() {
    assert_eq!(
        create("", "pods", pod(json!([{"image": "busybox"}]))),
        ["spec.containers[0].name: Required value"]
    );
    assert_eq!(
        create(
            "",
            "pods",
            pod(json!([{"name": "c", "image": "busybox"}, {"name": "c", "image": "x"}]))
        ),
        ["spec.containers[1].name: Duplicate value: \"c\""]
    );
    assert_eq!(
        create("", "pods", pod(json!([{"name": "Bad_Name"}]))),
        [
            "spec.containers[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.containers[0].image: Required value",
        ]
    );
    assert_eq!(
        create("", "pods", pod(json!([]))),
        ["spec.containers: Required value"]
    );
}

#[test]
fn ports_volumes_and_policies_are_checked() {
    let mut p = pod(json!([{"name": "c", "image": "x",
        "ports": [{"containerPort": 70000}, {"containerPort": 80, "protocol": "HTTP"}],
        "volumeMounts": [{"name": "nope", "mountPath": "/a"}]}]));
    p["spec"]["restartPolicy"] = json!("Sometimes");
    p["spec"]["volumes"] = json!([{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]);
    assert_eq!(
        create("", "pods", p),
        [
            "spec.volumes[1].name: Duplicate value: \"v\"",
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[0].volumeMounts[0].name: Not found: \"nope\"",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ]
    );
}

#[test]
fn a_pod_may_change_only_its_images_and_what_kube_lists() {
    let old = pod(json!([{"name": "c", "image": "busybox", "imagePullPolicy": "Always"}]));
    let new_image = pod(json!([{"name": "c", "image": "busybox:2", "imagePullPolicy": "Always"}]));
    assert!(update("", "pods", old.clone(), new_image).is_empty());
    let new_port = pod(
        json!([{"name": "c", "image": "busybox", "imagePullPolicy": "Always",
        "ports": [{"containerPort": 80}]}]),
    );
    let problems = update("", "pods", old, new_port);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].starts_with(
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    ));
}

fn deployment(selector: Value, labels: Value) -> Value {
    json!({"metadata": {"name": "web"}, "spec": {"selector": selector,
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

#[test]
fn workload_selectors_must_match_their_templates() {
    assert!(create(
        "apps",
        "deployments",
        deployment(json!({"matchLabels": {"app": "web"}}), json!({"app": "web"}))
    )
    .is_empty());
    assert_eq!(
        create("apps", "deployments", deployment(json!({"matchLabels": {"app": "web"}}), json!({"app": "db", "tier": "x"}))),
        ["spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"db\", \"tier\":\"x\"}: `selector` does not match template `labels`"]
    );
    assert_eq!(
        create("apps", "deployments", deployment(json!({}), json!({"app": "web"}))),
        ["spec.selector: Invalid value: &LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}: empty selector is invalid for deployment"]
    );
    let old = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web", "v": "1"}),
    );
    let new = deployment(
        json!({"matchLabels": {"app": "web", "v": "1"}}),
        json!({"app": "web", "v": "1"}),
    );
    assert_eq!(
        update("apps", "deployments", old, new),
        ["spec.selector: Invalid value: &LabelSelector{MatchLabels:map[string]string{app: web,v: 1,},MatchExpressions:[]LabelSelectorRequirement{},}: field is immutable"]
    );
}

#[test]
fn jobs_pods_do_not_always_restart_and_their_template_is_fixed() {
    let job = |image: &str, restart: Option<&str>| {
        let mut j = json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {
            "containers": [{"name": "pi", "image": image}]}}}});
        if let Some(r) = restart {
            j["spec"]["template"]["spec"]["restartPolicy"] = json!(r);
        }
        j
    };
    assert_eq!(
        create("batch", "jobs", job("perl", None)),
        ["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
    );
    assert!(create("batch", "jobs", job("perl", Some("Never"))).is_empty());
    let r = registry(&ServiceRanges::default());
    let rt = r.lookup("batch", "v1", "jobs").expect("served");
    let mut old = job("perl", Some("Never"));
    prepare_create(rt, &mut old, Some("ns")).expect("metadata");
    prepare_for_create(rt, &mut old);
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:2");
    let problems = shown(causes(rt, Some(&old), &new));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("spec.template: Invalid value: "));
    assert!(problems[0].ends_with(": field is immutable"));
}

#[test]
fn services_refuse_duplicate_and_out_of_range_ports() {
    let svc = |ports: Value| json!({"metadata": {"name": "web"}, "spec": {"ports": ports}});
    assert_eq!(
        create("", "services", svc(json!([{"name": "a", "port": 80}, {"name": "b", "port": 80}]))),
        ["spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"]
    );
    assert_eq!(
        create(
            "",
            "services",
            svc(json!([{"port": 80}, {"name": "b", "port": 70000}]))
        ),
        [
            "spec.ports[0].name: Required value",
            "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ]
    );
    assert_eq!(
        create("", "services", svc(json!([]))),
        ["spec.ports: Required value"]
    );
}

#[test]
fn config_keys_sizes_and_immutability() {
    assert_eq!(
        create("", "configmaps", json!({"metadata": {"name": "c"}, "data": {"a b": "x", "ok": "y"}})),
        ["data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]
    );
    let big = "x".repeat(1024 * 1024 + 1);
    assert_eq!(
        create(
            "",
            "configmaps",
            json!({"metadata": {"name": "c"}, "data": {"a": big}})
        ),
        ["[]: Too long: must have at most 1048576 bytes"]
    );
    let old = json!({"metadata": {"name": "s"}, "immutable": true, "data": {"a": "eA=="}});
    let new = json!({"metadata": {"name": "s"}, "immutable": true, "data": {"a": "eQ=="}});
    assert_eq!(
        update("", "secrets", old, new),
        ["data: Forbidden: field is immutable when `immutable` is set"]
    );
    assert_eq!(
        create(
            "",
            "secrets",
            json!({"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}})
        ),
        ["data[tls.key]: Required value"]
    );
}

#[test]
fn the_schema_requires_fields_and_unique_list_map_keys() {
    let mut p = pod(json!([{"name": "c", "image": "x", "env": [{"value": "v"}]}]));
    p["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
    assert_eq!(
        create("", "pods", p),
        ["spec.containers[0].env[0].name: Required value"]
    );
    let binding = json!({"metadata": {"name": "rb"}, "subjects": [{"kind": "User", "name": "u"}]});
    assert_eq!(
        create("rbac.authorization.k8s.io", "rolebindings", binding),
        ["roleRef: Required value"]
    );
    let mut p = pod(json!([{"name": "c", "image": "x"}]));
    p["spec"]["schedulingGates"] = json!([{"name": "g"}, {"name": "g"}]);
    assert_eq!(
        create("", "pods", p),
        ["spec.schedulingGates[1].name: Duplicate value: \"g\""]
    );
}

#[test]
fn rbac_rules_and_bindings_follow_kube() {
    let role = json!({"metadata": {"name": "r"}, "rules": [
        {"verbs": [], "resources": ["pods"]},
        {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
    assert_eq!(
        create("rbac.authorization.k8s.io", "roles", role),
        [
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
        ]
    );
    let binding = |kind: &str, name: &str| {
        json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "User", "name": "jane"}]})
    };
    assert_eq!(
        create(
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            binding("Role", "r")
        ),
        ["roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""]
    );
    assert_eq!(
        update(
            "rbac.authorization.k8s.io",
            "rolebindings",
            binding("ClusterRole", "view"),
            binding("ClusterRole", "edit")
        ),
        ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"]
    );
}

#[test]
fn claims_and_leases_follow_kube() {
    assert_eq!(
        create(
            "",
            "persistentvolumeclaims",
            json!({"metadata": {"name": "c"}, "spec": {}})
        ),
        [
            "spec.accessModes: Required value: at least 1 access mode is required",
            "spec.resources[storage]: Required value",
        ]
    );
    assert_eq!(
        create(
            "coordination.k8s.io",
            "leases",
            json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}})
        ),
        ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    );
}

#[test]
fn an_api_service_is_named_version_dot_group_and_checked_as_kube_aggregator_does() {
    let svc = |name: &str, spec: Value| json!({"metadata": {"name": name}, "spec": spec});
    let remote = json!({"group": "metrics.example.com", "version": "v1beta1",
                        "groupPriorityMinimum": 100, "versionPriority": 15,
                        "service": {"namespace": "ns", "name": "m"}, "caBundle": "AAAA"});
    let group = "apiregistration.k8s.io";
    assert!(create(
        group,
        "apiservices",
        svc("v1beta1.metrics.example.com", remote.clone())
    )
    .is_empty());
    let local = json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1});
    assert!(create(group, "apiservices", svc("v1.", local)).is_empty());
    assert_eq!(
        create(
            group,
            "apiservices",
            svc("metrics", json!({"group": "Bad", "version": "1x", "groupPriorityMinimum": 20001,
                                  "versionPriority": 0, "caBundle": "AAAA", "insecureSkipTLSVerify": true}))
        ),
        [
            "metadata.name: Invalid value: \"metrics\": must be `spec.version+\".\"+spec.group`: \"1x.Bad\"",
            "spec.group: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "spec.version: Invalid value: \"1x\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
            "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
            "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
            "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
        ]
    );
    let mut both = remote;
    both["insecureSkipTLSVerify"] = json!(true);
    both["service"] = json!({"port": 70000});
    assert_eq!(
        create(group, "apiservices", svc("v1beta1.metrics.example.com", both)),
        [
            "spec.service.namespace: Required value",
            "spec.service.name: Required value",
            "spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive",
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
        ]
    );
}

#[test]
fn container_resources_are_checked_as_kube_checks_them() {
    let with = |resources: Value| {
        create(
            "",
            "pods",
            pod(json!([{"name": "c", "image": "busybox", "resources": resources}])),
        )
    };
    assert!(with(
        json!({"limits": {"cpu": "1", "memory": "1Gi", "example.com/dongle": 2},
        "requests": {"cpu": "500m", "memory": "1024Mi", "example.com/dongle": "2"}})
    )
    .is_empty());
    let c = "spec.containers[0].resources";
    assert_eq!(
        with(json!({"limits": {"cpu": "1"}, "requests": {"cpu": "1.5", "memory": "-1Mi"}})),
        [
            format!("{c}.requests: Invalid value: \"1500m\": must be less than or equal to cpu limit of 1"),
            format!("{c}.requests[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0"),
        ]
    );
    assert_eq!(
        with(
            json!({"limits": {"example.com/dongle": "2"}, "requests": {"example.com/dongle": "1", "example.com/key": "1"}})
        ),
        [
            format!("{c}.requests: Invalid value: \"1\": must be equal to example.com/dongle limit of 2"),
            format!("{c}.limits: Required value: Limit must be set for non overcommitable resources"),
        ]
    );
    assert_eq!(
        with(json!({"limits": {"gpu": "1", "pods": "1", "hugepages-2Mi": "2Mi"}})),
        [
            format!("{c}.limits[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified"),
            format!("{c}.limits[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"),
            format!("{c}.limits[pods]: Invalid value: \"pods\": must be a standard resource for containers"),
            // Requests default to the limits, as in kube, and are checked too.
            format!("{c}.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified"),
            format!("{c}.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"),
            format!("{c}.requests[pods]: Invalid value: \"pods\": must be a standard resource for containers"),
            format!("{c}: Forbidden: HugePages require cpu or memory"),
        ]
    );
}

/// Causes with the long pattern explanations of kube's format errors cut off, for readability.
fn brief(causes: Vec<String>) -> Vec<String> {
    causes
        .into_iter()
        .map(|c| match c.find(" (e.g. ") {
            Some(i) => c[..i].to_string(),
            None => c,
        })
        .collect()
}

fn pod_with_spec(spec: Value) -> Value {
    let mut p = pod(json!([{"name": "c", "image": "busybox"}]));
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    p
}

#[test]
fn a_pod_using_security_contexts_affinity_and_spreading_as_documented_has_no_problems() {
    let p = json!({"metadata": {"name": "web", "labels": {"app": "web"},
        "annotations": {"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}},
      "spec": {"os": {"name": "linux"},
        "securityContext": {"runAsNonRoot": true, "fsGroup": 2000, "fsGroupChangePolicy": "OnRootMismatch",
          "seccompProfile": {"type": "RuntimeDefault"}, "appArmorProfile": {"type": "RuntimeDefault"},
          "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"},
                      {"name": "kernel/shm_rmid_forced", "value": "1"}],
          "seLinuxOptions": {"level": "s0:c123,c456"}, "supplementalGroupsPolicy": "Strict"},
        "containers": [{"name": "c", "image": "nginx", "securityContext": {"allowPrivilegeEscalation": false,
          "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}, "readOnlyRootFilesystem": true,
          "runAsUser": 1000, "procMount": "Default",
          "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}}],
        "affinity": {
          "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
              {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
                                    {"key": "cpus", "operator": "Gt", "values": ["4"]}],
               "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
              "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["any value!"]}]}}]},
          "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "namespaceSelector": {}, "namespaces": ["default"], "topologyKey": "kubernetes.io/hostname",
            "matchLabelKeys": ["pod-template-hash"]}]},
          "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
            "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}}]}},
        "topologySpreadConstraints": [
          {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
           "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore",
           "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]},
          {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}});
    assert_eq!(create("", "pods", p), Vec::<String>::new());
}

#[test]
fn pod_security_contexts_are_checked_in_kubes_order() {
    let p = pod_with_spec(
        json!({"hostNetwork": true, "hostPID": true, "shareProcessNamespace": true,
        "securityContext": {"runAsUser": -1, "fsGroup": -5,
            "sysctls": [{"name": "net.core.somaxconn", "value": "1"}, {"name": "kernel.shm_rmid_forced", "value": "1"},
                {"name": "Bad_Name", "value": "1"}, {"name": "net.core.somaxconn", "value": "2"}, {"name": "", "value": "x"}],
            "fsGroupChangePolicy": "Sometimes", "appArmorProfile": {"type": "Localhost"},
            "seLinuxChangePolicy": "Never", "supplementalGroupsPolicy": "Loose"}}),
    );
    assert_eq!(
        create("", "pods", p),
        [
            "spec.securityContext.fsGroup: Invalid value: -5: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
            "spec.securityContext.sysctls[0].name: Invalid value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is true",
            r#"spec.securityContext.sysctls[2].name: Invalid value: "Bad_Name": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"#,
            "spec.securityContext.sysctls[3].name: Duplicate value: \"net.core.somaxconn\"",
            "spec.securityContext.sysctls[3].name: Invalid value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is true",
            "spec.securityContext.sysctls[4].name: Required value",
            "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"",
            "spec.securityContext.appArmorProfile.localhostProfile: Required value: must be set when AppArmor type is Localhost",
            "spec.securityContext.supplementalGroupsPolicy: Unsupported value: \"Loose\": supported values: \"Merge\", \"Strict\"",
            "spec.securityContext.seLinuxChangePolicy: Unsupported value: \"Never\": supported values: \"MountOption\", \"Recursive\"",
        ]
    );
    // An IPC sysctl in the host's IPC namespace, written with slashes.
    let p = pod_with_spec(json!({"hostIPC": true,
        "securityContext": {"sysctls": [{"name": "kernel/msgmax", "value": "1"}, {"name": "net/ipv4/ip_forward", "value": "1"}]}}));
    assert_eq!(
        create("", "pods", p),
        ["spec.securityContext.sysctls[0].name: Invalid value: \"kernel/msgmax\": may not be specified when 'hostIPC' is true"]
    );
}

#[test]
fn container_security_contexts_follow_kubes_rules() {
    let sc = json!({"privileged": true, "allowPrivilegeEscalation": false,
        "capabilities": {"add": ["CAP_SYS_ADMIN", "NET_ADMIN"]}, "procMount": "Unmasked", "runAsGroup": -1,
        "seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"},
        "appArmorProfile": {"type": "Unconfined", "localhostProfile": "x"}});
    let p = pod(json!([{"name": "c", "image": "busybox", "securityContext": sc.clone()}]));
    let at = "spec.containers[0].securityContext";
    assert_eq!(
        create("", "pods", p),
        [
            format!("{at}.runAsGroup: Invalid value: -1: must be between 0 and 2147483647, inclusive"),
            format!("{at}.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"),
            format!("{at}.seccompProfile.localhostProfile: Invalid value: {}: can only be set when seccomp type is Localhost", sc["seccompProfile"]),
            format!("{at}: Invalid value: {sc}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"),
            format!("{at}: Invalid value: {sc}: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"),
            format!("{at}.appArmorProfile.localhostProfile: Invalid value: \"x\": can only be set when AppArmor type is Localhost"),
        ]
    );
    // In its own user namespace a container may unmask /proc, not name another mount type.
    let mut p = pod(
        json!([{"name": "c", "image": "busybox", "securityContext": {"procMount": "Unmasked"}},
        {"name": "d", "image": "busybox", "securityContext": {"procMount": "Masked",
            "appArmorProfile": {"type": "Localhost", "localhostProfile": " padded "}}}]),
    );
    p["spec"]["hostUsers"] = json!(false);
    p["spec"]["hostIPC"] = json!(true);
    assert_eq!(
        create("", "pods", p),
        [
            "spec.containers[1].securityContext.procMount: Unsupported value: \"Masked\": supported values: \"Default\", \"Unmasked\"",
            "spec.containers[1].securityContext.appArmorProfile.localhostProfile: Invalid value: \" padded \": must not be padded with whitespace",
            "spec.hostIPC: Forbidden: when `hostUsers` is false",
        ]
    );
}

#[test]
fn a_pod_has_the_settings_of_its_operating_system_only() {
    let p = pod_with_spec(json!({"os": {"name": "linux"},
        "containers": [{"name": "c", "image": "busybox", "securityContext": {"windowsOptions": {"runAsUserName": "dom\\ain\\user"}}}]}));
    assert_eq!(
        create("", "pods", p),
        [
            r#"spec.containers[0].securityContext.windowsOptions.runAsUserName: Invalid value: "dom\\ain\\user": runAsUserName cannot contain more than one backslash"#,
            "spec.containers[0].securityContext.windowsOptions: Forbidden: windows options cannot be set for a linux pod",
        ]
    );
    let p = pod_with_spec(json!({"os": {"name": "windows"}, "hostPID": true,
        "securityContext": {"runAsUser": 1000, "seLinuxOptions": {"level": "s0"}, "windowsOptions": {"gmsaCredentialSpec": ""}},
        "containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true,
            "windowsOptions": {"runAsUserName": "-bad-domain-\\us*er"}}}]}));
    assert_eq!(
        create("", "pods", p),
        [
            r#"spec.containers[0].securityContext.windowsOptions.runAsUserName: Invalid value: "-bad-domain-\\us*er": runAsUserName's User cannot contain the following characters: "/\:;|=,+*?<>@[]"#,
            "spec.securityContext.windowsOptions.gmsaCredentialSpec: Invalid value: \"\": gmsaCredentialSpec cannot be an empty string",
            "spec.securityContext.seLinuxOptions: Forbidden: cannot be set for a windows pod",
            "spec.hostPID: Forbidden: cannot be set for a windows pod",
            "spec.securityContext.runAsUser: Forbidden: cannot be set for a windows pod",
            "spec.containers[0].securityContext.privileged: Forbidden: cannot be set for a windows pod",
        ]
    );
    // Host process containers: all of them or none, on the host's network.
    let p = pod_with_spec(json!({"os": {"name": "windows"},
        "securityContext": {"windowsOptions": {"hostProcess": true}},
        "containers": [{"name": "c", "image": "busybox"},
            {"name": "d", "image": "busybox", "securityContext": {"windowsOptions": {"hostProcess": false}}}]}));
    assert_eq!(
        create("", "pods", p),
        [
            "spec.containers[1].securityContext.windowsOptions.hostProcess: Invalid value: false: pod hostProcess value must be identical if both are specified, was true",
            "spec: Invalid value: \"\": If pod contains any hostProcess containers then all containers must be HostProcess containers",
            "spec.hostNetwork: Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers",
        ]
    );
    assert_eq!(
        create("", "pods", pod_with_spec(json!({"os": {"name": "mac"}}))),
        ["spec.os: Unsupported value: \"mac\": supported values: \"linux\", \"windows\""]
    );
}

#[test]
fn seccomp_and_apparmor_annotations_are_valid_and_agree_with_the_fields() {
    let mut p = pod(json!([{"name": "c", "image": "busybox"}]));
    p["metadata"]["annotations"] = json!({
        "container.apparmor.security.beta.kubernetes.io/ghost": "localhost/x",
        "container.apparmor.security.beta.kubernetes.io/c": "bogus",
        "seccomp.security.alpha.kubernetes.io/pod": "chrome"});
    assert_eq!(
        create("", "pods", p),
        [
            "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: \"chrome\": must be a valid seccomp profile",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: Invalid value: \"bogus\": invalid AppArmor profile name: \"bogus\"",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/ghost]: Invalid value: \"ghost\": container not found",
        ]
    );
    let mut p = pod(json!([{"name": "c", "image": "busybox",
        "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]));
    p["spec"]["securityContext"] =
        json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "a.json"}});
    p["metadata"]["annotations"] = json!({
        "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
        "seccomp.security.alpha.kubernetes.io/pod": "localhost/b.json"});
    assert_eq!(
        create("", "pods", p),
        [
            "spec.securityContext.seccompProfile.localhostProfile: Forbidden: seccomp profile in annotation and field must match",
            "spec.containers[0].securityContext.appArmorProfile.type: Forbidden: apparmor type in annotation and field must match",
        ]
    );
    // AppArmor annotations are fixed once the pod exists.
    let old = pod(json!([{"name": "c", "image": "busybox"}]));
    let mut new = old.clone();
    new["metadata"]["annotations"] =
        json!({"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"});
    assert_eq!(
        update("", "pods", old, new),
        ["metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: Forbidden: may not add AppArmor annotations"]
    );
}

#[test]
fn affinity_terms_follow_kubes_rules() {
    let p = pod_with_spec(json!({"affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "zone", "operator": "In"}, {"key": "size", "operator": "Gt", "values": ["1", "2"]},
                    {"key": "gpu", "operator": "Exists", "values": ["x"]}, {"key": "bad key", "operator": "Near", "values": ["a b"]}],
                "matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["n1"]},
                    {"key": "metadata.name", "operator": "Exists", "values": ["Node_1"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0,
                "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["not valid!"]}]}}]},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "topologyKey": ""}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": "web"}}, "namespaces": ["Bad_NS"], "topologyKey": "kubernetes.io/hostname",
            "matchLabelKeys": ["app"], "mismatchLabelKeys": ["app"]}}]}}}));
    let na = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
    let pa = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]";
    let anti = "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]";
    assert_eq!(
        brief(create("", "pods", p)),
        [
            format!("{na}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
            format!("{na}.matchExpressions[1].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
            format!("{na}.matchExpressions[2].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
            format!("{na}.matchExpressions[3].operator: Invalid value: \"Near\": not a valid selector operator"),
            format!("{na}.matchExpressions[3].key: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
            format!("{na}.matchExpressions[3].values[0]: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
            format!("{na}.matchFields[0].key: Invalid value: \"metadata.labels\": not a valid field selector key"),
            format!("{na}.matchFields[1].operator: Invalid value: \"Exists\": not a valid selector operator"),
            format!("{na}.matchFields[1].values[0]: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100".to_string(),
            format!("{pa}.labelSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
            format!("{pa}.topologyKey: Required value: can not be empty"),
            format!("{pa}.topologyKey: Invalid value: \"\": name part must be non-empty"),
            format!("{pa}.topologyKey: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
            format!("{anti}.weight: Invalid value: 101: must be in the range 1-100"),
            format!("{anti}.podAffinityTerm.namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"),
            format!("{anti}.podAffinityTerm.matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and mismatchLabelKeys"),
        ]
    );
    let p = pod_with_spec(json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", "matchLabelKeys": ["app"]}]}}}));
    assert_eq!(
        create("", "pods", p),
        [
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term",
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set",
        ]
    );
    // The same rules hold in every workload's pod template.
    let mut d = deployment(json!({"matchLabels": {"app": "web"}}), json!({"app": "web"}));
    d["spec"]["template"]["spec"]["affinity"] = json!({"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "web"}}}]}});
    assert_eq!(
        brief(create("apps", "deployments", d)),
        [
            "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
            "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: \"\": name part must be non-empty",
            "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ]
    );
}

#[test]
fn topology_spread_constraints_follow_kubes_rules() {
    let p = pod_with_spec(json!({"topologySpreadConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": "Always"},
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "Maybe", "minDomains": 2, "nodeTaintsPolicy": "Honor",
         "matchLabelKeys": ["app", "pod-template-hash"], "labelSelector": {"matchLabels": {"app": "web"}}},
        {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway", "matchLabelKeys": ["app"],
         "labelSelector": null}]}));
    // kube merges the pod's `app` label into the third selector before it validates it.
    let mut p = p;
    p["metadata"]["labels"] = json!({"app": "web"});
    let at = "spec.topologySpreadConstraints";
    assert_eq!(
        create("", "pods", p),
        [
            format!("{at}[0].maxSkew: Invalid value: 0: must be greater than zero"),
            format!("{at}[0].{{topologyKey, whenUnsatisfiable}}: Duplicate value: \"{{zone, DoNotSchedule}}\""),
            format!("{at}[0].minDomains: Invalid value: 0: must be greater than zero"),
            format!("{at}[1].nodeAffinityPolicy: Unsupported value: \"Always\": supported values: \"Honor\", \"Ignore\""),
            format!("{at}[2].topologyKey: Required value: can not be empty"),
            format!("{at}[2].whenUnsatisfiable: Unsupported value: \"Maybe\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\""),
            format!("{at}[2].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not Maybe"),
            format!("{at}[2][0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector"),
            format!("{at}[3].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"),
        ]
    );
}

/// A PEM certificate signing request made by rcgen, and the same request with its signature
/// broken, both base64 as `spec.request` holds them.
fn signing_requests() -> (String, String) {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let key = rcgen::KeyPair::generate().expect("a key");
    let params = rcgen::CertificateParams::new(vec!["jane.example.com".to_string()]).expect("params");
    let csr = params.serialize_request(&key).expect("a request");
    let mut der = csr.der().to_vec();
    let last = der.len() - 1;
    der[last] ^= 0x01;
    let body: Vec<String> = b64(&der)
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let broken = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        body.join("\n")
    );
    (b64(csr.pem().expect("PEM").as_bytes()), b64(broken.as_bytes()))
}

fn csr(request: &str, spec: Value) -> Value {
    let mut obj = json!({"metadata": {"name": "jane"}, "spec": {"request": request,
        "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}});
    for (k, v) in spec.as_object().expect("an object") {
        obj["spec"][k] = v.clone();
    }
    obj
}

#[test]
fn certificate_signing_requests_are_pem_requests_that_verify_with_known_usages_and_signers() {
    let (good, broken) = signing_requests();
    let csrs = "certificatesigningrequests";
    let group = "certificates.k8s.io";
    assert_eq!(
        create(group, csrs, csr(&good, json!({"expirationSeconds": 3600}))),
        Vec::<String>::new()
    );
    assert_eq!(
        create(group, csrs, csr(&broken, json!({}))),
        [format!(
            "spec.request: Invalid value: \"{broken}\": x509: ECDSA verification failure"
        )]
    );
    let not_pem = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "hello");
    assert_eq!(
        create(group, csrs, csr(&not_pem, json!({"usages": ["client auth", "sign everything", "client auth"],
            "signerName": "example/a/b", "expirationSeconds": 300}))),
        [
            "spec.request: Invalid value: \"aGVsbG8=\": PEM block type must be CERTIFICATE REQUEST".to_string(),
            format!("spec.usages[1]: Unsupported value: \"sign everything\": supported values: {}",
                "\"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \"timestamping\""),
            "spec.usages[2]: Duplicate value: \"client auth\"".to_string(),
            "spec.signerName: Invalid value: \"example/a/b\": must be a fully qualified domain and path of the form 'example.com/signer-name'".to_string(),
            "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 600 seconds (10 minutes)".to_string(),
        ]
    );
    assert_eq!(
        create(group, csrs, csr(&good, json!({"signerName": "Example/signer_1", "usages": []}))),
        [
            "spec.usages: Required value",
            "spec.signerName: Invalid value: \"Example\": validating label \"Example\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "spec.signerName: Invalid value: \"Example\": should be a domain with at least two segments separated by dots",
            "spec.signerName: Invalid value: \"signer_1\": validating label \"signer_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ]
    );
    assert_eq!(
        create(group, csrs, csr(&good, json!({"signerName": "kubernetes.io/legacy-unknown"}))),
        ["spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version"]
    );
}

#[test]
fn a_request_s_conditions_follow_kubes_rules_on_every_path() {
    let (good, _) = signing_requests();
    let csrs = "certificatesigningrequests";
    let group = "certificates.k8s.io";
    let with = |conditions: Value, certificate: &str| {
        let mut obj = csr(&good, json!({}));
        obj["status"] = json!({"conditions": conditions});
        if !certificate.is_empty() {
            obj["status"]["certificate"] = json!(certificate);
        }
        obj
    };
    let approved = json!([{"type": "Approved", "status": "True", "reason": "AutoApproved"}]);
    let none = with(json!([]), "");
    assert_eq!(
        update_stored_in(group, csrs, none.clone(), with(approved.clone(), "")),
        Vec::<String>::new()
    );
    assert_eq!(
        update_stored_in(group, csrs, none.clone(), with(json!([{"type": "Approved", "status": "True"},
            {"type": "Denied", "status": "False"}, {"type": "Approved", "status": "True"}, {"type": "Pending"}]), "")),
        [
            "status.conditions[1].status: Unsupported value: \"False\": supported values: \"True\"",
            "status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
            "status.conditions: Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive",
            "status.conditions[2].type: Duplicate value: \"Approved\"",
            "status.conditions[3].status: Required value",
        ]
    );
    let not_pem = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        "-----BEGIN KEY-----\nAAAA\n-----END KEY-----\n",
    );
    assert_eq!(
        update_stored_in(group, csrs, with(approved.clone(), ""), with(json!([]), &not_pem)),
        [
            "status.certificate: Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks are allowed, found \"KEY\"",
            "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\"",
        ]
    );
    // Through `status`, the approval conditions are not added or changed.
    let status_causes = |old: &Value, new: &Value| super::certificates::status_update(old, new);
    assert_eq!(
        status_causes(&none, &with(approved.clone(), "")),
        [(
            "status.conditions".to_string(),
            "Forbidden: updates may not add a condition of type \"Approved\"".to_string()
        )]
    );
    let reworded = with(
        json!([{"type": "Approved", "status": "True", "reason": "Manual"}]),
        "",
    );
    assert_eq!(
        status_causes(&with(approved.clone(), ""), &reworded),
        [("status.conditions".to_string(), "Forbidden: updates may not modify a condition of type \"Approved\"\n- [{\"reason\":\"AutoApproved\",\"status\":\"True\",\"type\":\"Approved\"}]\n+ [{\"reason\":\"Manual\",\"status\":\"True\",\"type\":\"Approved\"}]".to_string())]
    );
    assert!(status_causes(&with(approved.clone(), ""), &with(approved, "")).is_empty());
}

#[test]
fn node_resources_addresses_and_pod_cidrs_follow_kube() {
    let node =
        |spec: Value, status: Value| json!({"metadata": {"name": "n1"}, "spec": spec, "status": status});
    let good = node(
        json!({"podCIDRs": ["10.0.1.0/24", "fd00:1::/64"]}),
        json!({"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "example.com/gpu": "2"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]}),
    );
    assert_eq!(
        update_stored("nodes", good.clone(), good.clone()),
        Vec::<String>::new()
    );
    let r = registry(&ServiceRanges::default());
    let rt = r.lookup("", "v1", "nodes").expect("served");
    assert!(causes(rt, None, &good).is_empty());
    let bad = node(
        json!({"podCIDRs": ["10.0.1.0/24", "10.0.2.0/24", "10.0.1.0/24", "10.0.300.0/24"], "configSource": {}}),
        json!({"capacity": {"cpu": "-1", "pods": "1500m"}, "allocatable": {"example.com/gpu": "500m"}}),
    );
    assert_eq!(
        shown(causes(rt, None, &bad)),
        [
            "spec.configSource: Forbidden: configSource may not be set",
            "status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0",
            "status.capacity.pods: Invalid value: \"1500m\": must be an integer",
            "status.allocatable.example.com/gpu: Invalid value: \"500m\": must be an integer",
            "spec.podCIDRs[3]: Invalid value: \"10.0.300.0/24\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            "spec.podCIDRs: Invalid value: [\"10.0.1.0/24\",\"10.0.2.0/24\",\"10.0.1.0/24\",\"10.0.300.0/24\"]: may specify no more than one CIDR for each IP family",
            "spec.podCIDRs[2]: Duplicate value: \"10.0.1.0/24\"",
        ]
    );
    let mut doubled = good.clone();
    doubled["status"]["addresses"] =
        json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "InternalIP", "address": "10.0.0.1"}]);
    assert_eq!(
        update_stored("nodes", good, doubled),
        ["status.addresses[1]: Duplicate value: {\"Type\":\"InternalIP\",\"Address\":\"10.0.0.1\"}"]
    );
}

#[test]
fn cron_schedules_and_time_zones_follow_kube() {
    let cron = |schedule: &str, zone: Option<&str>| {
        let mut obj = json!({"metadata": {"name": "c"}, "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {
            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        if let Some(zone) = zone {
            obj["spec"]["timeZone"] = json!(zone);
        }
        obj
    };
    for good in [
        "*/5 * * * *",
        "0 9-17 * JAN-dec MON-fri",
        "@hourly",
        "@every 1h30m",
        "0 0 1,15 * ?",
        "5/15 0 * * 0",
    ] {
        assert_eq!(
            create("batch", "cronjobs", cron(good, Some("Europe/Berlin"))),
            Vec::<String>::new(),
            "{good}"
        );
    }
    let cases = [
        ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        (
            "5-1 * * * *",
            "beginning of range (5) beyond end of range (1): 5-1",
        ),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        (
            "x * * * *",
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        (
            "@every 5x",
            "failed to parse duration @every 5x: time: unknown unit \"x\" in duration \"5x\"",
        ),
        (
            "@every 5",
            "failed to parse duration @every 5: time: missing unit in duration \"5\"",
        ),
        (
            "@every 1h.",
            "failed to parse duration @every 1h.: time: invalid duration \"1h.\"",
        ),
    ];
    for (schedule, why) in cases {
        assert_eq!(
            create("batch", "cronjobs", cron(schedule, None)),
            [format!("spec.schedule: Invalid value: {schedule:?}: {why}")],
            "{schedule}"
        );
    }
    assert_eq!(
        create("batch", "cronjobs", cron("TZ=Mars/Olympus 0 * * * *", Some("Local"))),
        [
            "spec.schedule: Invalid value: \"TZ=Mars/Olympus 0 * * * *\": provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
            "spec.schedule: Invalid value: \"TZ=Mars/Olympus 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ]
    );
    assert_eq!(
        create("batch", "cronjobs", cron("0 * * * *", Some("Europe/Atlantis"))),
        ["spec.timeZone: Invalid value: \"Europe/Atlantis\": unknown time zone Europe/Atlantis"]
    );
    assert_eq!(
        create("batch", "cronjobs", cron("", Some(""))),
        [
            "spec.schedule: Required value",
            "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string",
        ]
    );
    // A TZ= the stored schedule had stays accepted, but not with a timeZone.
    let old = cron("CRON_TZ=UTC 0 * * * *", None);
    assert_eq!(
        update(
            "batch",
            "cronjobs",
            old.clone(),
            cron("CRON_TZ=UTC 5 * * * *", None)
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        update("batch", "cronjobs", old, cron("CRON_TZ=UTC 5 * * * *", Some("UTC"))),
        ["spec.schedule: Invalid value: \"CRON_TZ=UTC 5 * * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule"]
    );
}
