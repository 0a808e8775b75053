//! kube-apiserver's validation of built-in objects on a real three-replica cluster, through
//! kubectl and plain HTTP: what kube refuses is refused with its `422` (field paths, messages
//! and cause reasons), on create, update, patch and apply and in dry runs, and nothing is
//! stored.

mod support;

use reqwest::Method;
use serde_json::{json, Value};
use support::kube::Kube;

const POD_WITHOUT_NAME: &str = "apiVersion: v1
kind: Pod
metadata:
  name: test
spec:
  containers:
  - image: busybox
";

/// kube's 422 Status for a single field error.
fn invalid(kind: &str, name: &str, field: &str, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{kind} \"{name}\" is invalid: {field}: {message}"),
        "reason": "Invalid",
        "details": {"name": name, "kind": kind,
            "causes": [{"reason": reason, "message": message, "field": field}]},
        "code": 422})
}

/// POSTs `body` to `path` on replica `node` and asserts kube's `422` answer `expected`.
async fn refused(k: &Kube, node: usize, path: &str, body: &Value, expected: Value) {
    let (code, status) = k.send(Method::POST, node, path, Some(body)).await;
    assert_eq!((code, status), (422, expected));
}

/// The same for a kind of a named group, which kube names `Kind.group`.
fn invalid_in(group: &str, kind: &str, name: &str, field: &str, reason: &str, message: &str) -> Value {
    let mut status = invalid(kind, name, field, reason, message);
    status["message"] = json!(format!(
        "{kind}.{group} \"{name}\" is invalid: {field}: {message}"
    ));
    status["details"]["group"] = json!(group);
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_without_a_container_name_is_refused_and_never_stored() {
    let k = Kube::start().await;
    let file = k.manifest("pod.yaml", POD_WITHOUT_NAME);
    for dry in [true, false] {
        let mut args = vec!["create", "-f", file.as_str()];
        if dry {
            args.push("--dry-run=server");
        }
        let (ok, out, err) = k.kubectl("node-2", &args);
        assert!(!ok, "{out}");
        assert_eq!(
            err.trim(),
            "The Pod \"test\" is invalid: spec.containers[0].name: Required value",
            "dry run: {dry}"
        );
    }
    let (ok, _, err) = k.kubectl("node-3", &["apply", "--server-side", "-f", &file]);
    assert!(!ok);
    assert!(err.contains("spec.containers[0].name: Required value"), "{err}");
    let (ok, _, err) = k.kubectl("node-1", &["get", "pod", "test"]);
    assert!(!ok && err.contains("NotFound"), "{err}");

    // A probe with two handlers, as a client-side apply that switched handlers leaves it.
    let probed = k.manifest(
        "probed.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: probed}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    livenessProbe:\n      exec: {command: [\"true\"]}\n      tcpSocket: {port: 80}\n      periodSeconds: -5\n",
    );
    let (ok, _, err) = k.kubectl("node-1", &["create", "-f", &probed]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "The Pod \"probed\" is invalid: \n* spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type\n* spec.containers[0].livenessProbe.periodSeconds: Invalid value: -5: must be greater than or equal to 0"
    );

    // A request above its limit (a number, as YAML writes `cpu: 1`), as kubectl shows
    // kube's refusal.
    let with_resources = |name: &str, resources: &str| {
        k.manifest(
            &format!("{name}.yaml"),
            &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {resources}\n"),
        )
    };
    let greedy = with_resources("greedy", "{limits: {cpu: 500m}, requests: {cpu: 1}}");
    let (ok, _, err) = k.kubectl("node-2", &["create", "-f", &greedy]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "The Pod \"greedy\" is invalid: spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m"
    );

    // Within its limit it is stored, its quantities as the strings kube writes: numbers as
    // strings, strings in canonical form.
    let modest = with_resources(
        "modest",
        "{limits: {cpu: 1, memory: 1024Mi, ephemeral-storage: 1.5Gi}, requests: {cpu: 0.5, memory: 1000}}",
    );
    k.ok("node-3", &["create", "-f", &modest]);
    let stored = k.json("node-1", &["get", "pod", "modest"]);
    assert_eq!(
        stored["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1536Mi"},
               "requests": {"cpu": "500m", "memory": "1k", "ephemeral-storage": "1536Mi"}})
    );

    let pods = "/api/v1/namespaces/default/pods";
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "test"},
        "spec": {"containers": [{"image": "busybox"}]}});
    for path in [format!("{pods}?dryRun=All"), pods.to_string()] {
        refused(
            &k,
            0,
            &path,
            &body,
            invalid(
                "Pod",
                "test",
                "spec.containers[0].name",
                "FieldValueRequired",
                "Required value",
            ),
        )
        .await;
    }

    // A valid pod may change its image, and nothing else kube keeps fixed.
    let good = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let (code, _) = k.send(Method::POST, 0, pods, Some(&good)).await;
    assert_eq!(code, 201);
    let (ok, out, err) = k.kubectl("node-2", &["set", "image", "pod/ok", "c=busybox:1.37"]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "patch",
            "pod",
            "ok",
            "-p",
            r#"{"spec":{"containers":[{"name":"c","workingDir":"/tmp"}]}}"#,
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("The Pod \"ok\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
        "{err}"
    );
    let (ok, _, err) = k.kubectl(
        "node-1",
        &["patch", "pod", "ok", "-p", r#"{"spec":{"containers":[{"name":"c","ports":[{"containerPort":80},{"containerPort":81,"protocol":"HTTP"}]}]}}"#],
    );
    assert!(!ok);
    assert!(
        err.contains(r#"spec.containers[0].ports[1].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP""#),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_config_maps_and_secrets_are_checked_as_kube_checks_them() {
    let k = Kube::start().await;
    let services = "/api/v1/namespaces/default/services";
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}});
    let duplicate = invalid(
        "Service",
        "web",
        "spec.ports[1]",
        "FieldValueDuplicate",
        "Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}",
    );
    refused(&k, 1, services, &svc, duplicate).await;
    let (code, _) = k.send(Method::GET, 2, &format!("{services}/web"), None).await;
    assert_eq!(code, 404);

    let key_message = "Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    let bad = k.manifest(
        "bad.yaml",
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: bad
data:
  a b: \"1\"
",
    );
    let (ok, _, err) = k.kubectl("node-2", &["apply", "-f", &bad, "--dry-run=server"]);
    assert!(!ok);
    assert!(
        err.contains(&format!("ConfigMap \"bad\" is invalid: data[a b]: {key_message}")),
        "{err}"
    );
    let cm =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"a b": "1"}});
    let refusal = invalid("ConfigMap", "bad", "data[a b]", "FieldValueInvalid", key_message);
    refused(&k, 2, "/api/v1/namespaces/default/configmaps", &cm, refusal).await;

    let secret = |file: &str, password: &str| {
        k.manifest(
            file,
            &format!(
                "apiVersion: v1
kind: Secret
metadata:
  name: frozen
immutable: true
stringData:
  password: {password}
"
            ),
        )
    };
    k.ok("node-1", &["apply", "-f", &secret("secret.yaml", "one")]);
    let changed = secret("secret2.yaml", "two");
    let (ok, _, err) = k.kubectl("node-3", &["apply", "-f", &changed]);
    assert!(!ok);
    assert!(
        err.contains(
            "The Secret \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        ),
        "{err}"
    );
    let (ok, _, err) = k.kubectl(
        "node-1",
        &["patch", "secret", "frozen", "-p", r#"{"immutable":false}"#],
    );
    assert!(!ok);
    assert!(
        err.contains("The Secret \"frozen\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"),
        "{err}"
    );
    let stored = k.json("node-2", &["get", "secret", "frozen"]);
    assert_eq!(stored["data"]["password"], "b25l");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_selectors_and_job_templates_follow_kubes_rules() {
    let k = Kube::start().await;
    let deploy = k.manifest(
        "deploy.yaml",
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: nginx
        image: nginx
",
    );
    let (ok, _, err) = k.kubectl("node-1", &["apply", "-f", &deploy]);
    assert!(!ok);
    assert!(
        err.contains("The Deployment \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"api\"}: `selector` does not match template `labels`"),
        "{err}"
    );
    let (ok, _, err) = k.kubectl("node-1", &["get", "deployment", "web"]);
    assert!(!ok && err.contains("NotFound"), "{err}");

    k.ok("node-2", &["create", "job", "pi", "--image=perl"]);
    let (ok, _, err) = k.kubectl("node-3", &["set", "image", "job/pi", "pi=perl:5"]);
    assert!(!ok);
    assert!(
        err.contains("Job.batch \"pi\" is invalid: spec.template: Invalid value: {")
            && err.trim_end().ends_with("}: field is immutable"),
        "{err}"
    );
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "always"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "perl"}]}}}});
    refused(
        &k,
        1,
        jobs,
        &job,
        invalid_in(
            "batch",
            "Job",
            "always",
            "spec.template.spec.restartPolicy",
            "FieldValueRequired",
            "Required value: valid values: \"OnFailure\", \"Never\"",
        ),
    )
    .await;
}

/// A manifest of the Pod `name` with one container `c`, then the spec fields `spec` (YAML
/// lines indented as the spec's).
fn pod_manifest(k: &Kube, name: &str, spec: &str) -> String {
    k.manifest(
        &format!("{name}.yaml"),
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n{spec}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_contexts_affinity_and_spreading_are_checked_as_kube_checks_them() {
    let k = Kube::start().await;
    let refused = |name: &str, spec: &str, expected: &str| {
        let file = pod_manifest(&k, name, spec);
        let (ok, out, err) = k.kubectl("node-2", &["apply", "-f", &file]);
        assert!(!ok, "{out}");
        assert_eq!(err.trim(), expected);
        let (ok, _, err) = k.kubectl("node-3", &["get", "pod", name]);
        assert!(!ok && err.contains("NotFound"), "{err}");
    };

    // A network sysctl in the host's network namespace, and a container's AppArmor profile
    // and /proc mount.
    refused(
        "secure",
        "    securityContext:\n      procMount: Unmasked\n      appArmorProfile: {type: Localhost}\n  hostNetwork: true\n  securityContext:\n    sysctls: [{name: net.core.somaxconn, value: \"1024\"}]\n",
        "The Pod \"secure\" is invalid: \n* spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`\n* spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value: must be set when AppArmor type is Localhost\n* spec.securityContext.sysctls[0].name: Invalid value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is true",
    );

    // Node affinity with a `Gt` of two values, and a pod affinity weighted 0.
    refused(
        "placed",
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: cpus, operator: Gt, values: [\"4\", \"8\"]}]\n    podAffinity:\n      preferredDuringSchedulingIgnoredDuringExecution:\n      - weight: 0\n        podAffinityTerm: {topologyKey: zone, labelSelector: {matchLabels: {app: cache}}}\n",
        "The Pod \"placed\" is invalid: \n* spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'\n* spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
    );

    // A spread constraint without skew, and one that does not say what to do.
    refused(
        "spread",
        "  topologySpreadConstraints:\n  - {maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}\n  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes, minDomains: 2}\n",
        "The Pod \"spread\" is invalid: \n* spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero\n* spec.topologySpreadConstraints[1].whenUnsatisfiable: Unsupported value: \"Sometimes\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"\n* spec.topologySpreadConstraints[1].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not Sometimes",
    );

    // What kube accepts is stored: a restricted security context, affinity and spreading.
    let good = pod_manifest(
        &k,
        "good",
        "    securityContext:\n      allowPrivilegeEscalation: false\n      capabilities: {drop: [ALL]}\n      runAsUser: 1000\n      seccompProfile: {type: RuntimeDefault}\n  securityContext:\n    runAsNonRoot: true\n    fsGroup: 2000\n    sysctls: [{name: net.ipv4.ip_local_port_range, value: \"1024 65535\"}]\n  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: good}}}\n  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: good}}}\n",
    );
    k.ok("node-1", &["apply", "-f", &good]);
    let stored = k.json("node-2", &["get", "pod", "good"]);
    assert_eq!(stored["spec"]["topologySpreadConstraints"][0]["maxSkew"], 1);
    assert_eq!(stored["spec"]["securityContext"]["fsGroup"], 2000);

    // The pod's labels named by `matchLabelKeys` are merged into the selector, as kube merges
    // them on create.
    let merged = k.manifest(
        "merged.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: merged, labels: {app: web}}\nspec:\n  containers:\n  - {name: c, image: busybox}\n  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: front}}, matchLabelKeys: [app]}\n",
    );
    k.ok("node-1", &["create", "-f", &merged]);
    let stored = k.json("node-3", &["get", "pod", "merged"]);
    assert_eq!(
        stored["spec"]["topologySpreadConstraints"][0]["labelSelector"],
        json!({"matchLabels": {"tier": "front"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]})
    );

    // A deprecated AppArmor annotation becomes the container's field, as kube's pod strategy
    // copies it; one that disagrees with the field is refused.
    let annotated = |name: &str, container_sc: &str| {
        k.manifest(
            &format!("{name}.yaml"),
            &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{container.apparmor.security.beta.kubernetes.io/c: localhost/k8s-nginx}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n{container_sc}"),
        )
    };
    k.ok("node-3", &["create", "-f", &annotated("armored", "")]);
    let stored = k.json("node-1", &["get", "pod", "armored"]);
    assert_eq!(
        stored["spec"]["containers"][0]["securityContext"]["appArmorProfile"],
        json!({"type": "Localhost", "localhostProfile": "k8s-nginx"})
    );
    let (ok, _, err) = k.kubectl(
        "node-2",
        &[
            "create",
            "-f",
            &annotated(
                "clashing",
                "    securityContext:\n      appArmorProfile: {type: RuntimeDefault}\n",
            ),
        ],
    );
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "The Pod \"clashing\" is invalid: spec.containers[0].securityContext.appArmorProfile.type: Forbidden: apparmor type in annotation and field must match"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_volume_sources_and_node_affinity_are_checked_as_kube_checks_them() {
    let k = Kube::start().await;
    let pvs = "/api/v1/persistentvolumes";
    let pv = |name: &str, source: Value| {
        let mut pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
        for (k, v) in source.as_object().expect("an object") {
            pv["spec"][k] = v.clone();
        }
        pv
    };
    // An NFS export named by a relative path, over plain HTTP: kube's cause and reason.
    refused(
        &k,
        1,
        pvs,
        &pv(
            "exports",
            json!({"nfs": {"server": "nfs.example.com", "path": "exports"}}),
        ),
        invalid(
            "PersistentVolume",
            "exports",
            "spec.nfs.path",
            "FieldValueInvalid",
            "Invalid value: \"exports\": must be an absolute path",
        ),
    )
    .await;

    // Through kubectl: a CSI volume without a handle, and a local volume whose node affinity
    // has no term.
    let file = k.manifest(
        "csi.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: csi}\nspec:\n  accessModes: [ReadWriteOnce]\n  capacity: {storage: 1Gi}\n  csi: {driver: ebs.csi.aws.com}\n",
    );
    let (ok, out, err) = k.kubectl("node-2", &["apply", "-f", &file]);
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The PersistentVolume \"csi\" is invalid: spec.csi.volumeHandle: Required value"
    );
    let file = k.manifest(
        "local.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: local}\nspec:\n  accessModes: [ReadWriteOnce]\n  capacity: {storage: 1Gi}\n  local: {path: /mnt/../etc}\n  nodeAffinity:\n    required: {nodeSelectorTerms: []}\n",
    );
    let (ok, out, err) = k.kubectl("node-3", &["create", "-f", &file, "--dry-run=server"]);
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The PersistentVolume \"local\" is invalid: \n* spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term\n* spec.local.path: Invalid value: \"/mnt/../etc\": must not contain '..'"
    );
    for name in ["exports", "csi", "local"] {
        let (ok, _, err) = k.kubectl("node-1", &["get", "pv", name]);
        assert!(!ok && err.contains("NotFound"), "{err}");
    }

    // What kube accepts is stored.
    let good = k.manifest(
        "good.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: good}\nspec:\n  accessModes: [ReadWriteOnce]\n  capacity: {storage: 1Gi}\n  local: {path: /mnt/disks/ssd1}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-1]}]\n",
    );
    k.ok("node-1", &["apply", "-f", &good]);
    let stored = k.json("node-2", &["get", "pv", "good"]);
    assert_eq!(stored["spec"]["local"]["path"], "/mnt/disks/ssd1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_volumes_and_claims_keep_what_kube_keeps_on_update() {
    let k = Kube::start().await;
    let file = k.manifest(
        "pv.yaml",
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: share}\nspec:\n  accessModes: [ReadWriteMany]\n  capacity: {storage: 1Gi}\n  nfs: {server: nfs.example.com, path: /exports/a}\n",
    );
    k.ok("node-1", &["apply", "-f", &file]);
    // A new source path and volume mode are refused; the reclaim policy may change.
    let (ok, out, err) = k.kubectl(
        "node-2",
        &[
            "patch",
            "pv",
            "share",
            "--type=merge",
            "-p",
            r#"{"spec":{"nfs":{"path":"/exports/b"},"volumeMode":"Block"}}"#,
        ],
    );
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The PersistentVolume \"share\" is invalid: \n* spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n- {\"nfs\":{\"path\":\"/exports/a\",\"server\":\"nfs.example.com\"}}\n+ {\"nfs\":{\"path\":\"/exports/b\",\"server\":\"nfs.example.com\"}}\n* volumeMode: Invalid value: \"Block\": field is immutable"
    );
    k.ok(
        "node-3",
        &[
            "patch",
            "pv",
            "share",
            "--type=merge",
            "-p",
            r#"{"spec":{"persistentVolumeReclaimPolicy":"Delete"}}"#,
        ],
    );
    assert_eq!(
        k.json("node-1", &["get", "pv", "share"])["spec"]["nfs"]["path"],
        "/exports/a"
    );

    // A claim: its access modes are fixed; once bound it may grow, not below its capacity.
    let claim = k.manifest(
        "pvc.yaml",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 2Gi}}\n",
    );
    k.ok("node-1", &["apply", "-f", &claim]);
    let (ok, out, err) = k.kubectl(
        "node-2",
        &[
            "patch",
            "pvc",
            "data",
            "--type=merge",
            "-p",
            r#"{"spec":{"accessModes":["ReadWriteMany"]}}"#,
        ],
    );
    assert!(!ok, "{out}");
    assert!(
        err.starts_with("The PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n- {\"accessModes\":[\"ReadWriteOnce\"],"),
        "{err}"
    );
    k.ok(
        "node-3",
        &[
            "patch",
            "pvc",
            "data",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Bound","capacity":{"storage":"2Gi"}}}"#,
        ],
    );
    k.ok(
        "node-1",
        &[
            "patch",
            "pvc",
            "data",
            "--type=merge",
            "-p",
            r#"{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}"#,
        ],
    );
    let path = "/api/v1/namespaces/default/persistentvolumeclaims/data";
    let (_, mut stored) = k.send(Method::GET, 1, path, None).await;
    stored["spec"]["resources"]["requests"]["storage"] = json!("1Gi");
    let (code, status) = k.send(Method::PUT, 2, path, Some(&stored)).await;
    assert_eq!(
        (code, status),
        (
            422,
            invalid(
                "PersistentVolumeClaim",
                "data",
                "spec.resources.requests.storage",
                "FieldValueForbidden",
                "Forbidden: field can not be less than status.capacity",
            )
        )
    );
    assert_eq!(
        k.json("node-3", &["get", "pvc", "data"])["spec"]["resources"]["requests"]["storage"],
        "3Gi"
    );
}

/// A PEM certificate signing request made by rcgen, base64 as `spec.request` holds it.
fn signing_request() -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["jane".to_string()]).unwrap();
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests_are_checked_as_kube_checks_them() {
    let k = Kube::start().await;
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csr = |name: &str, request: &str| {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": {"request": request,
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}})
    };
    // A request that is not PEM, over plain HTTP.
    refused(
        &k,
        1,
        csrs,
        &csr("hello", "aGVsbG8="),
        invalid_in(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            "hello",
            "spec.request",
            "FieldValueInvalid",
            "Invalid value: \"aGVsbG8=\": PEM block type must be CERTIFICATE REQUEST",
        ),
    )
    .await;

    // Through kubectl: a good request with a short life, a usage named twice and no signer.
    let request = signing_request();
    let file = k.manifest(
        "short.yaml",
        &format!("apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: short}}\nspec:\n  request: {request}\n  signerName: example.com\n  expirationSeconds: 60\n  usages: [client auth, client auth]\n"),
    );
    let (ok, out, err) = k.kubectl("node-2", &["create", "-f", &file]);
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The CertificateSigningRequest \"short\" is invalid: \n* spec.usages[1]: Duplicate value: \"client auth\"\n* spec.signerName: Invalid value: \"example.com\": must be a fully qualified domain and path of the form 'example.com/signer-name'\n* spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"
    );
    let (ok, _, err) = k.kubectl("node-3", &["get", "csr", "short"]);
    assert!(!ok && err.contains("NotFound"), "{err}");

    // A good request is stored; its status may not approve it, its approval may not both
    // approve and deny it.
    let (code, _) = k.send(Method::POST, 1, csrs, Some(&csr("jane", &request))).await;
    assert_eq!(code, 201);
    let (ok, out, err) = k.kubectl(
        "node-3",
        &[
            "patch",
            "csr",
            "jane",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Approved","status":"True"}]}}"#,
        ],
    );
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The CertificateSigningRequest \"jane\" is invalid: status.conditions: Forbidden: updates may not add a condition of type \"Approved\""
    );
    let approval = format!("{csrs}/jane/approval");
    let (_, mut stored) = k.send(Method::GET, 2, &format!("{csrs}/jane"), None).await;
    stored["status"]["conditions"] =
        json!([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]);
    let (code, status) = k.send(Method::PUT, 2, &approval, Some(&stored)).await;
    assert_eq!(
        (code, status),
        (
            422,
            invalid_in(
                "certificates.k8s.io",
                "CertificateSigningRequest",
                "jane",
                "status.conditions",
                "FieldValueInvalid",
                "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
            )
        )
    );
    k.ok("node-1", &["certificate", "approve", "jane"]);
    let approved = k.json("node-2", &["get", "csr", "jane"]);
    assert_eq!(
        approved["status"]["conditions"][0]["type"], "Approved",
        "{approved}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_resources_addresses_and_pod_cidrs_are_checked_as_kube_checks_them() {
    let k = Kube::start().await;
    let nodes = "/api/v1/nodes";
    let node = |name: &str, spec: Value, status: Value| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec, "status": status});
    refused(
        &k,
        1,
        nodes,
        &node(
            "worker-0",
            json!({}),
            json!({"capacity": {"pods": "1500m"}, "allocatable": {"pods": "100"}}),
        ),
        invalid(
            "Node",
            "worker-0",
            "status.capacity.pods",
            "FieldValueInvalid",
            "Invalid value: \"1500m\": must be an integer",
        ),
    )
    .await;
    let file = k.manifest(
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: worker-1}\nspec:\n  podCIDRs: [10.0.1.0/24, 10.0.2.0/24]\n",
    );
    let (ok, out, err) = k.kubectl("node-2", &["create", "-f", &file]);
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The Node \"worker-1\" is invalid: spec.podCIDRs: Invalid value: [\"10.0.1.0/24\",\"10.0.2.0/24\"]: may specify no more than one CIDR for each IP family"
    );
    let (code, _) = k
        .send(
            Method::POST,
            1,
            nodes,
            Some(&node(
                "worker-2",
                json!({"podCIDRs": ["10.0.1.0/24", "fd00::/64"]}),
                json!({}),
            )),
        )
        .await;
    assert_eq!(code, 201);
    let (ok, out, err) = k.kubectl(
        "node-3",
        &["patch", "node", "worker-2", "--subresource=status", "--type=merge", "-p",
          r#"{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.2"},{"type":"InternalIP","address":"10.0.0.2"}]}}"#],
    );
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The Node \"worker-2\" is invalid: status.addresses[1]: Duplicate value: {\"Type\":\"InternalIP\",\"Address\":\"10.0.0.2\"}"
    );
    k.ok(
        "node-1",
        &["patch", "node", "worker-2", "--subresource=status", "--type=merge", "-p",
          r#"{"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.2"}],"capacity":{"pods":"110"}}}"#],
    );
    assert_eq!(
        k.json("node-2", &["get", "node", "worker-2"])["status"]["capacity"]["pods"],
        "110"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_schedules_and_time_zones_are_checked_as_kube_checks_them() {
    let k = Kube::start().await;
    let cron = |name: &str, schedule: &str, zone: Option<&str>| {
        let mut cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        if let Some(zone) = zone {
            cron["spec"]["timeZone"] = json!(zone);
        }
        cron
    };
    let cronjobs = "/apis/batch/v1/namespaces/default/cronjobs";
    refused(
        &k,
        1,
        cronjobs,
        &cron("tz", "TZ=UTC 0 * * * *", None),
        invalid_in(
            "batch",
            "CronJob",
            "tz",
            "spec.schedule",
            "FieldValueInvalid",
            "Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
    )
    .await;
    let file = k.manifest(
        "cron.yaml",
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: \"0 25 * * *\"\n  timeZone: Mars/Olympus\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers: [{name: c, image: busybox}]\n",
    );
    let (ok, out, err) = k.kubectl("node-2", &["apply", "-f", &file]);
    assert!(!ok, "{out}");
    assert_eq!(
        err.trim(),
        "The CronJob \"nightly\" is invalid: \n* spec.schedule: Invalid value: \"0 25 * * *\": end of range (25) above maximum (23): 25\n* spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"
    );
    let (ok, _, err) = k.kubectl("node-3", &["get", "cronjob", "nightly"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
    let (code, _) = k
        .send(
            Method::POST,
            2,
            cronjobs,
            Some(&cron("berlin", "@daily", Some("Europe/Berlin"))),
        )
        .await;
    assert_eq!(code, 201);
    assert_eq!(
        k.json("node-3", &["get", "cronjob", "berlin"])["spec"]["timeZone"],
        "Europe/Berlin"
    );
}
