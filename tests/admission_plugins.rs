//! The built-in admission plugins as a user meets them through `kubectl` on a real
//! three-replica cluster: PodSecurity (refusals in kube's words, warnings for warn-level
//! namespaces and pod controllers, existing pods named when a namespace is tightened, label
//! validation), LimitRanger (defaults and maxima for pods and claims) and DefaultStorageClass.
//! Each object a plugin reads is written through one replica and used through another.

mod support;

use std::time::Duration;

use support::kube::Kube;

const PRIVILEGED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: NAME
  namespace: strict
spec:
  containers:
  - name: c
    image: nginx
    securityContext:
      privileged: true
";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: strict
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
";

const HOST_NETWORK_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: hostnet
  namespace: lenient
spec:
  hostNetwork: true
  containers:
  - name: c
    image: nginx
";

/// kube-apiserver's refusal of a privileged container `c` at `restricted:latest`.
const RESTRICTED_VIOLATIONS: &str = "privileged (container \"c\" must not set securityContext.privileged=true), \
allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_refuses_and_warns_in_kubes_words() {
    let k = Kube::start().await;
    for ns in ["strict", "lenient"] {
        k.ok("node-1", &["create", "namespace", ns]);
        k.wait_namespace_populated(ns).await;
    }
    let old = k.manifest("old.yaml", &PRIVILEGED_POD.replace("NAME", "old"));
    k.ok("node-1", &["create", "-f", &old]);

    // Tightening the namespace names the pods that would be refused now.
    let (ok, _, err) = k.kubectl(
        "node-2",
        &[
            "label",
            "namespace",
            "strict",
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/warn=restricted",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            "Warning: existing pods in namespace \"strict\" violate the new PodSecurity enforce level \"restricted:latest\"",
            "Warning: old: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
        ]
    );

    // A privileged pod is refused through another replica, as kube-apiserver refuses it.
    let bad = k.manifest("bad.yaml", &PRIVILEGED_POD.replace("NAME", "bad"));
    let (ok, _, err) = k.kubectl("node-3", &["create", "-f", &bad]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        format!(
            "Error from server (Forbidden): error when creating \"{bad}\": pods \"bad\" is forbidden: \
             violates PodSecurity \"restricted:latest\": {RESTRICTED_VIOLATIONS}"
        )
    );

    // A Deployment is only warned about: its pods are what enforcement refuses.
    let deployment = k.manifest("web.yaml", DEPLOYMENT);
    let (ok, out, err) = k.kubectl("node-3", &["create", "-f", &deployment]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "deployment.apps/web created");
    assert_eq!(
        err.trim(),
        "Warning: would violate PodSecurity \"restricted:latest\": \
         allowPrivilegeEscalation != false (container \"web\" must set securityContext.allowPrivilegeEscalation=false), \
         unrestricted capabilities (container \"web\" must set securityContext.capabilities.drop=[\"ALL\"]), \
         runAsNonRoot != true (pod or container \"web\" must set securityContext.runAsNonRoot=true), \
         seccompProfile (pod or container \"web\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );

    // A warn-level namespace lets the pod in with a warning.
    k.ok(
        "node-1",
        &[
            "label",
            "namespace",
            "lenient",
            "pod-security.kubernetes.io/warn=baseline",
        ],
    );
    let hostnet = k.manifest("hostnet.yaml", HOST_NETWORK_POD);
    let (ok, out, err) = k.kubectl("node-2", &["create", "-f", &hostnet]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/hostnet created");
    assert_eq!(
        err.trim(),
        "Warning: would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork)"
    );

    // Level labels are validated.
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "label",
            "namespace",
            "lenient",
            "pod-security.kubernetes.io/enforce=strict",
        ],
    );
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "The Namespace \"lenient\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: \
         Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );
}

const LIMITS: &str = "apiVersion: v1
kind: LimitRange
metadata:
  name: limits
  namespace: limited
spec:
  limits:
  - type: Container
    default: {cpu: 500m}
    defaultRequest: {cpu: 250m}
    max: {cpu: \"1\"}
  - type: PersistentVolumeClaim
    max: {storage: 2Gi}
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: NAME
  namespace: limited
spec:
  containers:
  - name: c
    image: nginx
RESOURCES";

const CLAIM: &str = "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: NAME
  namespace: limited
spec:
  accessModes: [ReadWriteOnce]
CLASS  resources:
    requests: {storage: SIZE}
";

fn claim(name: &str, size: &str, class: Option<&str>) -> String {
    let class = class.map(|c| format!("  storageClassName: \"{c}\"\n"));
    CLAIM
        .replace("NAME", name)
        .replace("SIZE", size)
        .replace("CLASS", &class.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_default_and_cap_what_a_namespace_creates() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "limited"]);
    k.wait_namespace_populated("limited").await;
    k.ok("node-1", &["create", "-f", &k.manifest("limits.yaml", LIMITS)]);

    let plain = k.manifest(
        "plain.yaml",
        &POD.replace("NAME", "plain").replace("RESOURCES", ""),
    );
    k.ok("node-2", &["create", "-f", &plain]);
    let pod = k.json("node-3", &["get", "pod", "plain", "-n", "limited"]);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        serde_json::json!({"limits": {"cpu": "500m"}, "requests": {"cpu": "250m"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu request for container c; cpu limit for container c"
    );
    assert_eq!(pod["status"]["qosClass"], "Burstable");

    let big = k.manifest(
        "big.yaml",
        &POD.replace("NAME", "big")
            .replace("RESOURCES", "    resources:\n      limits: {cpu: \"2\"}\n"),
    );
    let (ok, _, err) = k.kubectl("node-2", &["create", "-f", &big]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        format!(
            "Error from server (Forbidden): error when creating \"{big}\": pods \"big\" is forbidden: \
             maximum cpu usage per Container is 1, but limit is 2"
        )
    );

    let huge = k.manifest("huge.yaml", &claim("huge", "5Gi", Some("")));
    let (ok, _, err) = k.kubectl("node-3", &["create", "-f", &huge]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        format!(
            "Error from server (Forbidden): error when creating \"{huge}\": persistentvolumeclaims \"huge\" is forbidden: \
             maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"
        )
    );
    k.ok(
        "node-3",
        &[
            "create",
            "-f",
            &k.manifest("small.yaml", &claim("small", "1Gi", Some(""))),
        ],
    );
}

fn storage_class(name: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {name}
  annotations:
    storageclass.kubernetes.io/is-default-class: \"true\"
provisioner: example.com/disk
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_without_a_class_get_the_newest_default_class() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "limited"]);
    let class_of = |name: &str| {
        k.ok(
            "node-3",
            &[
                "get",
                "pvc",
                name,
                "-n",
                "limited",
                "-o",
                "jsonpath={.spec.storageClassName}",
            ],
        )
    };

    k.ok(
        "node-2",
        &[
            "create",
            "-f",
            &k.manifest("none.yaml", &claim("none", "1Gi", None)),
        ],
    );
    assert_eq!(class_of("none"), "");

    k.ok(
        "node-1",
        &["create", "-f", &k.manifest("fast.yaml", &storage_class("fast"))],
    );
    // Creation timestamps have whole seconds: the second default is newer.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    k.ok(
        "node-1",
        &["create", "-f", &k.manifest("slow.yaml", &storage_class("slow"))],
    );

    k.ok(
        "node-2",
        &[
            "create",
            "-f",
            &k.manifest("auto.yaml", &claim("auto", "1Gi", None)),
        ],
    );
    assert_eq!(class_of("auto"), "slow");
    k.ok(
        "node-2",
        &[
            "create",
            "-f",
            &k.manifest("unclassed.yaml", &claim("unclassed", "1Gi", Some(""))),
        ],
    );
    assert_eq!(class_of("unclassed"), "");
}
