//! The built-in admission plugins as a user meets them through `kubectl` on a real
//! three-replica cluster: PodSecurity (refusals in kube's words, warnings for warn-level
//! namespaces and pod controllers, existing pods named when a namespace is tightened, label
//! validation), LimitRanger (defaults and maxima for pods and claims), DefaultStorageClass and
//! ResourceQuota (never exceeded by concurrent creates through all replicas; compute quotas).
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

/// The quota `q` of namespace `ns` once the controller has filled in its status.
async fn quota_status(k: &Kube, ns: &str, name: &str) -> serde_json::Value {
    support::eventually(Duration::from_secs(20), || async {
        let (code, q) = k
            .send(
                reqwest::Method::GET,
                1,
                &format!("/api/v1/namespaces/{ns}/resourcequotas/{name}"),
                None,
            )
            .await;
        if code == 200 && q["status"]["used"].is_object() {
            Ok(q["status"].clone())
        } else {
            Err(format!("{code}: {q}"))
        }
    })
    .await
}

/// The number of ConfigMaps in `ns`.
async fn configmaps_in(k: &Kube, ns: &str) -> usize {
    let (code, list) = k
        .send(
            reqwest::Method::GET,
            0,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{list}");
    list["items"].as_array().map_or(0, Vec::len)
}

/// `n` ConfigMap creates into `ns` at once, spread over the replicas in turn; each one's
/// status code and body.
async fn create_configmaps_at_once(k: &Kube, ns: &str, n: usize) -> Vec<(u16, serde_json::Value)> {
    let path = format!("/api/v1/namespaces/{ns}/configmaps");
    let creates = (0..n).map(|i| {
        let path = &path;
        async move {
            let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}")}});
            k.send(reqwest::Method::POST, i % 3, path, Some(&body)).await
        }
    });
    futures::future::join_all(creates).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_quotas_are_never_exceeded_by_concurrent_creates_through_every_replica() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "capped"]);
    k.wait_namespace_populated("capped").await;
    // The namespace already holds kube-root-ca.crt: it counts too.
    k.ok(
        "node-1",
        &[
            "create",
            "quota",
            "objects",
            "-n",
            "capped",
            "--hard=count/configmaps=6,configmaps=6",
        ],
    );
    let status = quota_status(&k, "capped", "objects").await;
    assert_eq!(status["hard"]["count/configmaps"], "6", "{status}");
    assert_eq!(status["used"]["count/configmaps"], "1", "{status}");
    assert_eq!(status["used"]["configmaps"], "1", "{status}");

    // 24 creates at once, 8 through each replica: exactly 5 fit.
    let outcomes = create_configmaps_at_once(&k, "capped", 24).await;
    let created = outcomes.iter().filter(|(code, _)| *code == 201).count();
    let refused: Vec<&serde_json::Value> = outcomes
        .iter()
        .filter(|(code, _)| *code == 403)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(created, 5, "{outcomes:?}");
    assert_eq!(
        refused.len(),
        19,
        "every other create is refused by the quota: {outcomes:?}"
    );
    for body in &refused {
        let message = body["message"].as_str().unwrap_or("");
        assert!(
            message.contains("is forbidden: exceeded quota: objects, requested: configmaps=1,count/configmaps=1, used: configmaps=6,count/configmaps=6, limited: configmaps=6,count/configmaps=6"),
            "{body}"
        );
        assert_eq!(body["reason"], "Forbidden", "{body}");
    }
    assert_eq!(configmaps_in(&k, "capped").await, 6);
    for node in ["node-1", "node-2", "node-3"] {
        let q = k.json(node, &["get", "quota", "objects", "-n", "capped"]);
        assert_eq!(q["status"]["used"]["count/configmaps"], "6", "{node}: {q}");
    }

    // Under sustained contention every charge lands or is refused by the quota, never by a
    // conflict between replicas: 90 creates at once, 30 through each replica, into a
    // namespace where 60 fit.
    k.ok("node-1", &["create", "namespace", "busy"]);
    k.wait_namespace_populated("busy").await;
    k.ok(
        "node-2",
        &[
            "create",
            "quota",
            "objects",
            "-n",
            "busy",
            "--hard=count/configmaps=61",
        ],
    );
    let status = quota_status(&k, "busy", "objects").await;
    assert_eq!(status["used"]["count/configmaps"], "1", "{status}");
    let outcomes = create_configmaps_at_once(&k, "busy", 90).await;
    let created = outcomes.iter().filter(|(code, _)| *code == 201).count();
    let others: Vec<&(u16, serde_json::Value)> = outcomes
        .iter()
        .filter(|(code, body)| {
            *code != 201
                && !(*code == 403
                    && body["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("is forbidden: exceeded quota: objects")))
        })
        .collect();
    assert!(others.is_empty(), "only the quota refuses: {others:?}");
    assert_eq!(created, 60, "{outcomes:?}");
    assert_eq!(configmaps_in(&k, "busy").await, 61);
    for node in ["node-1", "node-2", "node-3"] {
        let q = k.json(node, &["get", "quota", "objects", "-n", "busy"]);
        assert_eq!(q["status"]["used"]["count/configmaps"], "61", "{node}: {q}");
    }

    // kubectl shows kube's refusal.
    let (ok, _, err) = k.kubectl("node-2", &["create", "configmap", "one-more", "-n", "capped"]);
    assert!(!ok);
    assert!(
        err.contains("configmaps \"one-more\" is forbidden: exceeded quota: objects"),
        "{err}"
    );

    // A delete gives its unit back (the controller recounts), and the next create fits.
    k.ok(
        "node-3",
        &[
            "delete",
            "configmap",
            "cm-0",
            "cm-1",
            "cm-2",
            "cm-3",
            "cm-4",
            "cm-5",
            "cm-6",
            "cm-7",
            "cm-8",
            "cm-9",
            "cm-10",
            "cm-11",
            "cm-12",
            "cm-13",
            "cm-14",
            "cm-15",
            "cm-16",
            "cm-17",
            "cm-18",
            "cm-19",
            "cm-20",
            "cm-21",
            "cm-22",
            "cm-23",
            "-n",
            "capped",
            "--ignore-not-found",
        ],
    );
    support::eventually(Duration::from_secs(20), || async {
        let s = quota_status(&k, "capped", "objects").await;
        if s["used"]["count/configmaps"] == "1" {
            Ok(())
        } else {
            Err(format!("{s}"))
        }
    })
    .await;
    k.ok("node-3", &["create", "configmap", "after-delete", "-n", "capped"]);
}

const SIZED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: NAME
  namespace: compute
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests: {cpu: CPU, memory: 64Mi}
      limits: {cpu: CPU, memory: 64Mi}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_quotas_charge_pods_and_require_their_resources() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "compute"]);
    k.wait_namespace_populated("compute").await;
    k.ok(
        "node-1",
        &[
            "create",
            "quota",
            "compute",
            "-n",
            "compute",
            "--hard=pods=3,requests.cpu=1,limits.memory=1Gi",
        ],
    );
    quota_status(&k, "compute", "compute").await;

    // A container without the limited resources is refused, naming it.
    let (ok, _, err) = k.kubectl("node-2", &["run", "bare", "-n", "compute", "--image=nginx"]);
    assert!(!ok);
    assert!(
        err.contains("pods \"bare\" is forbidden: failed quota: compute: must specify limits.memory for: bare; requests.cpu for: bare"),
        "{err}"
    );

    let first = k.manifest(
        "first.yaml",
        &SIZED_POD.replace("NAME", "first").replace("CPU", "600m"),
    );
    k.ok("node-2", &["create", "-f", &first]);
    let second = k.manifest(
        "second.yaml",
        &SIZED_POD.replace("NAME", "second").replace("CPU", "600m"),
    );
    let (ok, _, err) = k.kubectl("node-3", &["create", "-f", &second]);
    assert!(!ok);
    assert!(
        err.contains("pods \"second\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"),
        "{err}"
    );
    let smaller = k.manifest(
        "smaller.yaml",
        &SIZED_POD.replace("NAME", "second").replace("CPU", "400m"),
    );
    k.ok("node-3", &["create", "-f", &smaller]);
    let q = k.json("node-1", &["get", "quota", "compute", "-n", "compute"]);
    assert_eq!(
        q["status"]["used"],
        serde_json::json!({"limits.memory": "128Mi", "pods": "2", "requests.cpu": "1"}),
        "{q}"
    );
    let described = k.ok("node-1", &["describe", "quota", "compute", "-n", "compute"]);
    assert!(described.contains("requests.cpu"), "{described}");

    // A pod that finished stops counting its compute resources.
    let finished = k.ok(
        "node-1",
        &[
            "patch",
            "pod",
            "first",
            "-n",
            "compute",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Succeeded"}}"#,
        ],
    );
    assert!(finished.contains("patched"), "{finished}");
    support::eventually(Duration::from_secs(20), || async {
        let s = quota_status(&k, "compute", "compute").await;
        if s["used"]["requests.cpu"] == "400m" && s["used"]["pods"] == "1" {
            Ok(())
        } else {
            Err(format!("{s}"))
        }
    })
    .await;
}

/// The admission configuration file of [`pod_security_follows_the_admission_configuration`]:
/// namespaces without labels enforce `baseline`; the `legacy` namespace, the user `deployer`
/// and the `sandboxed` runtime class are exempt (PodSecurity's configuration in a file of
/// its own, as `path` names it).
const ADMISSION_CONFIGURATION: &str = "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: pod-security.yaml
";

const POD_SECURITY_CONFIGURATION: &str = "apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  enforce-version: latest
exemptions:
  usernames: [deployer]
  runtimeClasses: [sandboxed]
  namespaces: [legacy]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_follows_the_admission_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admission.yaml");
    std::fs::write(&config, ADMISSION_CONFIGURATION).unwrap();
    std::fs::write(dir.path().join("pod-security.yaml"), POD_SECURITY_CONFIGURATION).unwrap();
    let k = Kube::start_with(support::Options {
        admission_config: Some(config),
        ..support::Options::default()
    })
    .await;
    for ns in ["strict", "legacy", "open"] {
        k.ok("node-1", &["create", "namespace", ns]);
    }
    k.ok(
        "node-1",
        &[
            "label",
            "namespace",
            "open",
            "pod-security.kubernetes.io/enforce=privileged",
        ],
    );
    let pod = |name: &str, ns: &str, runtime_class: Option<&str>| {
        let mut text = PRIVILEGED_POD
            .replace("NAME", name)
            .replace("namespace: strict", &format!("namespace: {ns}"));
        if let Some(class) = runtime_class {
            text = text.replace("spec:\n", &format!("spec:\n  runtimeClassName: {class}\n"));
        }
        k.manifest(&format!("{name}.yaml"), &text)
    };
    // A namespace without labels enforces the configured default, on every replica.
    for node in ["node-1", "node-2", "node-3"] {
        k.refused(
            node,
            &["create", "-f", &pod("denied", "strict", None)],
            "pods \"denied\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"c\" must not set securityContext.privileged=true)",
        );
    }
    // A label still overrides the default.
    k.ok("node-2", &["create", "-f", &pod("labelled", "open", None)]);
    // The exempt namespace, user and runtime class.
    k.ok("node-3", &["create", "-f", &pod("in-legacy", "legacy", None)]);
    k.ok(
        "node-1",
        &["create", "-f", &pod("sandboxed", "strict", Some("sandboxed"))],
    );
    k.refused(
        "node-1",
        &["create", "-f", &pod("other-class", "strict", Some("runc"))],
        "violates PodSecurity \"baseline:latest\"",
    );
    k.ok(
        "node-1",
        &[
            "-n",
            "strict",
            "create",
            "role",
            "pods",
            "--verb=create",
            "--resource=pods",
        ],
    );
    for user in ["deployer", "someone"] {
        let binding = format!("--user={user}");
        k.ok(
            "node-1",
            &[
                "-n",
                "strict",
                "create",
                "rolebinding",
                user,
                "--role=pods",
                &binding,
            ],
        );
    }
    let deployer = k.kubeconfig_for("deployer", &[]);
    let (ok, _, err) = k.kubectl_with(
        &deployer,
        1,
        &["create", "-f", &pod("by-deployer", "strict", None)],
    );
    assert!(ok, "{err}");
    let someone = k.kubeconfig_for("someone", &[]);
    let (ok, _, err) = k.kubectl_with(&someone, 2, &["create", "-f", &pod("by-someone", "strict", None)]);
    assert!(
        !ok && err.contains("violates PodSecurity \"baseline:latest\""),
        "{err}"
    );
}
