//! `ServiceAccount`: every pod runs as a ServiceAccount and finds its token where clients look
//! for it, as kube-apiserver's plugin of that name arranges it.
//!
//! On create, a pod without `serviceAccountName` gets `default` (and the deprecated
//! `serviceAccount` with it, as kube-apiserver's conversion shows both); the ServiceAccount it
//! names must exist — in the replica's watch cache, else by a linearizable read — or the pod
//! is refused with kube-apiserver's `403` (`error looking up service account NS/NAME:
//! serviceaccount "NAME" not found`). Unless the pod, or else its ServiceAccount, says
//! `automountServiceAccountToken: false`, the pod gets the projected volume
//! `kube-api-access-<5 random characters>` (a bound token valid 3607 s, the cluster CA from the
//! `kube-root-ca.crt` ConfigMap, the pod's namespace), and every init container and container
//! that mounts nothing at `/var/run/secrets/kubernetes.io/serviceaccount` mounts it there
//! read-only. (Ephemeral containers join a running pod through a subresource and never get
//! it, as in kube.) A pod without `imagePullSecrets` takes its ServiceAccount's. The
//! validating half checks the ServiceAccount again and, when it asks for it
//! (`kubernetes.io/enforce-mountable-secrets`), that the pod references only the secrets it
//! lists. Mirror pods (a kubelet's static pods) are left as they are, and may reference
//! neither ServiceAccounts nor secrets. Updates are not looked at: a pod's spec is fixed.
//!
//! **The wait for `default`.** A pod created right after its namespace may arrive before the
//! leader's ServiceAccount controller has created the namespace's `default` ServiceAccount.
//! kube-apiserver's plugin polls the API for it (ten reads 100–200 ms apart) before refusing
//! the pod; here the plugin instead watches the replica's watch cache for it, for at most
//! [`DEFAULT_WAIT`], and is answered the moment it is applied — no reads in a loop. Only then
//! is the pod refused, with kube's message. A missing ServiceAccount of any other name is
//! refused at once (after the one linearizable read), as in kube.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::{self, error::RecvError};

use super::{Attributes, Mutating, Operation, Validating};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::{generate_name, meta_str};
use crate::store::cacher::Published;
use crate::store::{keys, Store};

/// The plugin.
pub struct ServiceAccount;

/// The ServiceAccount of a pod that names none.
const DEFAULT: &str = "default";
/// Where containers find the token, the CA and the namespace.
const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The name of the token volume, before its random suffix.
const VOLUME_PREFIX: &str = "kube-api-access-";
/// The lifetime of the projected token: kube's `WarnOnlyBoundTokenExpirationSeconds` (an hour
/// and seven seconds, by which the API server recognises tokens of this volume).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The annotation that marks a mirror pod.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The ServiceAccount annotation that limits its pods to the secrets it lists.
const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";
/// How long a pod waits for its namespace's `default` ServiceAccount to appear.
const DEFAULT_WAIT: Duration = Duration::from_secs(2);

impl Mutating for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn admit<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(admit(store, attrs, obj))
    }
}

impl Validating for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn validate<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(validate(store, attrs, obj))
    }
}

/// Whether the plugin looks at a write: the creation of a pod (not of one of its subresources).
fn handles(attrs: &Attributes<'_>) -> bool {
    attrs.operation == Operation::Create
        && (attrs.group, attrs.resource) == ("", "pods")
        && attrs.subresource.is_none()
}

fn forbid(attrs: &Attributes<'_>, why: &str) -> ApiError {
    ApiError::forbidden(attrs.group, attrs.resource, attrs.name, why)
}

/// Defaults the pod's ServiceAccount, mounts its token and checks what the pod references.
async fn admit(store: &Store, attrs: &Attributes<'_>, pod: &mut Value) -> ApiResult<()> {
    if !handles(attrs) {
        return Ok(());
    }
    if is_mirror(pod) {
        return check_mirror(pod).map_err(|why| forbid(attrs, &why));
    }
    let Some(spec) = spec_mut(pod) else {
        return Ok(());
    };
    let namespace = attrs.namespace.unwrap_or_default();
    let account = default_service_account(spec);
    let sa = lookup(store, namespace, &account)
        .await
        .map_err(|why| forbid(attrs, &why))?;
    provide(spec, &sa, || generate_name(VOLUME_PREFIX));
    check_secrets(&pod["spec"], &sa).map_err(|why| forbid(attrs, &why))
}

/// Checks that the pod's ServiceAccount exists and allows what the pod references.
async fn validate(store: &Store, attrs: &Attributes<'_>, pod: &Value) -> ApiResult<()> {
    if !handles(attrs) {
        return Ok(());
    }
    if is_mirror(pod) {
        return check_mirror(pod).map_err(|why| forbid(attrs, &why));
    }
    let namespace = attrs.namespace.unwrap_or_default();
    let account = pod["spec"]["serviceAccountName"].as_str().unwrap_or("");
    if account.is_empty() {
        let name = meta_str(pod, "name").unwrap_or_default();
        return Err(forbid(
            attrs,
            &format!("no service account specified for pod {namespace}/{name}"),
        ));
    }
    let sa = lookup(store, namespace, account)
        .await
        .map_err(|why| forbid(attrs, &why))?;
    check_secrets(&pod["spec"], &sa).map_err(|why| forbid(attrs, &why))
}

/// The ServiceAccount `name` of `namespace`, or kube-apiserver's reason why there is none.
async fn lookup(store: &Store, namespace: &str, name: &str) -> Result<Value, String> {
    service_account(store, namespace, name)
        .await
        .map_err(|why| format!("error looking up service account {namespace}/{name}: {why}"))
}

/// The ServiceAccount from the watch cache, else a linearizable read; the `default` one is
/// also waited for (see the module doc).
async fn service_account(store: &Store, namespace: &str, name: &str) -> Result<Value, String> {
    let key = keys::object("", "serviceaccounts", Some(namespace), name);
    if let Ok(Some(cached)) = store.cache().get(&key) {
        return Ok(cached.value());
    }
    // Subscribed before the read, so that a `default` written after it is not missed.
    let changes = (name == DEFAULT).then(|| store.cache().list_and_watch(&key).1);
    match store.get(&key, true).await {
        Ok(Some(stored)) => return Ok(stored.obj),
        Ok(None) => {}
        Err(e) => return Err(e.message),
    }
    if let Some(changes) = changes {
        if let Some(sa) = appeared(store, &key, changes).await {
            return Ok(sa);
        }
    }
    Err(format!("serviceaccount \"{name}\" not found"))
}

/// The object at `key` once the watch cache holds it, waiting at most [`DEFAULT_WAIT`].
async fn appeared(
    store: &Store,
    key: &str,
    mut changes: broadcast::Receiver<Arc<Published>>,
) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + DEFAULT_WAIT;
    loop {
        let touched = match tokio::time::timeout_at(deadline, changes.recv()).await {
            Err(_) | Ok(Err(RecvError::Closed)) => return None,
            Ok(Err(RecvError::Lagged(_))) => true,
            Ok(Ok(batch)) => match &*batch {
                Published::Changes { events, .. } => events.iter().any(|e| e.key == key),
                Published::Reset => true,
            },
        };
        if touched {
            if let Ok(Some(sa)) = store.cache().get(key) {
                return Some(sa.value());
            }
        }
    }
}

/// The pod's spec (made when absent); `None` when it is not an object.
fn spec_mut(pod: &mut Value) -> Option<&mut Map<String, Value>> {
    let spec = pod.as_object_mut()?.entry("spec").or_insert_with(|| json!({}));
    if spec.is_null() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

/// The pod's ServiceAccount, `default` when it names none.
fn default_service_account(spec: &mut Map<String, Value>) -> String {
    let named = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    match named {
        Some(n) => n.to_string(),
        None => {
            spec.insert("serviceAccountName".into(), json!(DEFAULT));
            spec.insert("serviceAccount".into(), json!(DEFAULT));
            DEFAULT.to_string()
        }
    }
}

/// What the ServiceAccount `sa` gives the pod: its token, mounted (unless automounting is
/// off) on a volume named `volume_name()`, and its image pull secrets.
fn provide(spec: &mut Map<String, Value>, sa: &Value, volume_name: impl FnOnce() -> String) {
    if should_automount(spec, sa) {
        mount_token(spec, volume_name);
    }
    copy_pull_secrets(spec, sa);
}

/// Whether the token is mounted: the pod's choice, else its ServiceAccount's, else yes.
fn should_automount(spec: &Map<String, Value>, sa: &Value) -> bool {
    spec.get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true)
}

/// The elements of a list field (none when it is absent or not a list).
fn items(list: Option<&Value>) -> impl Iterator<Item = &Value> {
    list.and_then(Value::as_array).into_iter().flatten()
}

/// A list field of `obj`, made empty when absent or null; `None` when it is something else.
fn list_mut<'a>(obj: &'a mut Map<String, Value>, field: &str) -> Option<&'a mut Vec<Value>> {
    let list = obj.entry(field).or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    list.as_array_mut()
}

/// What the token volume projects: kube's `TokenVolumeSource`.
fn token_volume_source() -> Value {
    json!({
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]
    })
}

/// Mounts the token volume into every init container and container that has nothing at
/// [`MOUNT_PATH`], and adds the volume if one of them needs it. A volume already named
/// `kube-api-access-…` is the token volume; otherwise its name is `volume_name()`.
fn mount_token(spec: &mut Map<String, Value>, volume_name: impl FnOnce() -> String) {
    let existing = items(spec.get("volumes"))
        .filter_map(|v| v["name"].as_str())
        .find(|n| n.starts_with(VOLUME_PREFIX))
        .map(str::to_string);
    let has_volume = existing.is_some();
    let name = existing.unwrap_or_else(volume_name);
    let mount = json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH});
    let mut needed = false;
    for field in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(field).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let Some(mounts) = list_mut(container, "volumeMounts") else {
                continue;
            };
            if !mounts.iter().any(|m| m["mountPath"] == MOUNT_PATH) {
                mounts.push(mount.clone());
                needed = true;
            }
        }
    }
    if needed && !has_volume {
        if let Some(volumes) = list_mut(spec, "volumes") {
            volumes.push(json!({"name": name, "projected": token_volume_source()}));
        }
    }
}

/// A pod without image pull secrets takes its ServiceAccount's (their names).
fn copy_pull_secrets(spec: &mut Map<String, Value>, sa: &Value) {
    if items(spec.get("imagePullSecrets")).next().is_some() {
        return;
    }
    let inherited: Vec<Value> = items(sa.get("imagePullSecrets"))
        .map(|s| match s["name"].as_str().filter(|n| !n.is_empty()) {
            Some(n) => json!({"name": n}),
            None => json!({}),
        })
        .collect();
    if !inherited.is_empty() {
        spec.insert("imagePullSecrets".into(), Value::Array(inherited));
    }
}

/// Whether the ServiceAccount limits its pods to the secrets it lists (the annotation is a
/// Go boolean).
fn enforces_mountable_secrets(sa: &Value) -> bool {
    matches!(
        sa["metadata"]["annotations"][ENFORCE_MOUNTABLE_SECRETS].as_str(),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

/// The names of a list of references.
fn names(list: Option<&Value>) -> HashSet<&str> {
    items(list).filter_map(|r| r["name"].as_str()).collect()
}

/// A reference that is set (present and not null).
fn set(v: &Value) -> Option<&Value> {
    Some(v).filter(|v| !v.is_null())
}

/// Refuses references to secrets the ServiceAccount does not list, when it asks for that;
/// kube-apiserver's messages.
fn check_secrets(spec: &Value, sa: &Value) -> Result<(), String> {
    if !enforces_mountable_secrets(sa) {
        return Ok(());
    }
    let account = meta_str(sa, "name").unwrap_or_default();
    let refused = format!("is not allowed because service account {account} does not reference that secret");
    let mountable = names(sa.get("secrets"));
    for volume in items(spec.get("volumes")) {
        if let Some(secret) = set(&volume["secret"]) {
            let name = secret["secretName"].as_str().unwrap_or("");
            if !mountable.contains(name) {
                return Err(format!("volume with secret.secretName=\"{name}\" {refused}"));
            }
        }
    }
    for (field, what) in [("initContainers", "init container"), ("containers", "container")] {
        for c in items(spec.get(field)) {
            let container = c["name"].as_str().unwrap_or("");
            for env in items(c.get("env")) {
                if let Some(r) = set(&env["valueFrom"]["secretKeyRef"]) {
                    let name = r["name"].as_str().unwrap_or("");
                    if !mountable.contains(name) {
                        let var = env["name"].as_str().unwrap_or("");
                        return Err(format!(
                            "{what} {container} with envVar {var} referencing secret.secretName=\"{name}\" {refused}"
                        ));
                    }
                }
            }
            for from in items(c.get("envFrom")) {
                if let Some(r) = set(&from["secretRef"]) {
                    let name = r["name"].as_str().unwrap_or("");
                    if !mountable.contains(name) {
                        return Err(format!(
                            "{what} {container} with envFrom referencing secret.secretName=\"{name}\" {refused}"
                        ));
                    }
                }
            }
        }
    }
    let pullable = names(sa.get("imagePullSecrets"));
    for (i, r) in items(spec.get("imagePullSecrets")).enumerate() {
        let name = r["name"].as_str().unwrap_or("");
        if !pullable.contains(name) {
            return Err(format!(
                "imagePullSecrets[{i}].name=\"{name}\" is not allowed because service account {account} does not reference that imagePullSecret"
            ));
        }
    }
    Ok(())
}

fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"]
        .get(MIRROR_POD_ANNOTATION)
        .is_some()
}

/// Where a volume references a secret, as kube's `VisitPodSecretNames` looks for them.
const VOLUME_SECRET_REFERENCES: [&str; 9] = [
    "/secret",
    "/cephfs/secretRef",
    "/cinder/secretRef",
    "/flexVolume/secretRef",
    "/rbd/secretRef",
    "/scaleIO/secretRef",
    "/iscsi/secretRef",
    "/storageos/secretRef",
    "/csi/nodePublishSecretRef",
];

/// Whether the pod spec references a secret anywhere.
fn references_secrets(spec: &Value) -> bool {
    let in_containers = ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|field| items(spec.get(field)))
        .any(|c| {
            items(c.get("envFrom")).any(|e| set(&e["secretRef"]).is_some())
                || items(c.get("env")).any(|e| set(&e["valueFrom"]["secretKeyRef"]).is_some())
        });
    let in_volumes = items(spec.get("volumes")).any(|v| {
        VOLUME_SECRET_REFERENCES
            .iter()
            .any(|p| v.pointer(p).and_then(set).is_some())
            || v["azureFile"]["secretName"]
                .as_str()
                .is_some_and(|n| !n.is_empty())
            || items(v.pointer("/projected/sources")).any(|s| set(&s["secret"]).is_some())
    });
    items(spec.get("imagePullSecrets")).next().is_some() || in_containers || in_volumes
}

/// What a mirror pod may not do.
fn check_mirror(pod: &Value) -> Result<(), String> {
    let spec = &pod["spec"];
    if spec["serviceAccountName"].as_str().is_some_and(|n| !n.is_empty()) {
        return Err("a mirror pod may not reference service accounts".into());
    }
    if references_secrets(spec) {
        return Err("a mirror pod may not reference secrets".into());
    }
    let projects_token = items(spec.get("volumes"))
        .flat_map(|v| items(v.pointer("/projected/sources")))
        .any(|s| set(&s["serviceAccountToken"]).is_some());
    if projects_token {
        return Err("a mirror pod may not use ServiceAccountToken volume projections".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::tests::pod_create;

    /// `spec` as admission leaves it for the ServiceAccount `sa`, with the token volume named
    /// `kube-api-access-abcde`.
    fn admitted(spec: Value, sa: &Value) -> Value {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": spec});
        let Some(spec) = spec_mut(&mut pod) else {
            panic!("a pod spec");
        };
        default_service_account(spec);
        provide(spec, sa, || "kube-api-access-abcde".to_string());
        pod["spec"].clone()
    }

    fn mount() -> Value {
        json!({"name": "kube-api-access-abcde", "readOnly": true,
               "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
    }

    #[test]
    fn a_pod_runs_as_default_with_the_token_volume_mounted_everywhere() {
        let spec = admitted(
            json!({"initContainers": [{"name": "init", "image": "busybox"}],
                   "containers": [{"name": "a", "image": "nginx"},
                                  {"name": "b", "image": "nginx", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                   "volumes": [{"name": "data", "emptyDir": {}}]}),
            &json!({"metadata": {"name": "default"}}),
        );
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([mount()]));
        assert_eq!(spec["containers"][0]["volumeMounts"], json!([mount()]));
        assert_eq!(
            spec["containers"][1]["volumeMounts"],
            json!([{"name": "data", "mountPath": "/data"}, mount()])
        );
        assert_eq!(
            spec["volumes"],
            json!([
                {"name": "data", "emptyDir": {}},
                {"name": "kube-api-access-abcde", "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                    ]}}
            ])
        );
        assert!(spec.get("imagePullSecrets").is_none());
    }

    #[test]
    fn a_named_service_account_is_kept() {
        let spec = admitted(
            json!({"serviceAccountName": "robot", "serviceAccount": "robot", "containers": []}),
            &json!({}),
        );
        assert_eq!(
            (&spec["serviceAccountName"], &spec["serviceAccount"]),
            (&json!("robot"), &json!("robot"))
        );
        assert!(spec.get("volumes").is_none(), "no container needs the token");
    }

    #[test]
    fn automount_is_the_pods_choice_else_the_service_accounts() {
        let containers = json!([{"name": "c", "image": "nginx"}]);
        let off = json!({"automountServiceAccountToken": false});
        let on = json!({"automountServiceAccountToken": true});
        let pod_off = admitted(
            json!({"automountServiceAccountToken": false, "containers": containers}),
            &json!({}),
        );
        assert!(pod_off.get("volumes").is_none() && pod_off["containers"][0].get("volumeMounts").is_none());
        let sa_off = admitted(json!({"containers": containers}), &off);
        assert!(sa_off.get("volumes").is_none() && sa_off["containers"][0].get("volumeMounts").is_none());
        let pod_wins = admitted(
            json!({"automountServiceAccountToken": true, "containers": containers}),
            &off,
        );
        assert_eq!(pod_wins["containers"][0]["volumeMounts"], json!([mount()]));
        let pod_off_wins = admitted(
            json!({"automountServiceAccountToken": false, "containers": containers}),
            &on,
        );
        assert!(pod_off_wins.get("volumes").is_none());
    }

    #[test]
    fn a_mount_at_the_token_path_is_kept_and_an_existing_token_volume_reused() {
        let own = json!({"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
        let all_own = admitted(
            json!({"containers": [{"name": "c", "volumeMounts": [own]}],
                   "volumes": [{"name": "mine", "secret": {"secretName": "s"}}]}),
            &json!({}),
        );
        assert_eq!(all_own["containers"][0]["volumeMounts"], json!([own]));
        assert_eq!(
            all_own["volumes"].as_array().map(Vec::len),
            Some(1),
            "no token volume"
        );
        let mixed = admitted(
            json!({"containers": [{"name": "c", "volumeMounts": [own]}, {"name": "d"}]}),
            &json!({}),
        );
        assert_eq!(mixed["containers"][0]["volumeMounts"], json!([own]));
        assert_eq!(mixed["containers"][1]["volumeMounts"], json!([mount()]));
        assert_eq!(mixed["volumes"][0]["name"], "kube-api-access-abcde");
        let mut again = json!({"metadata": {}, "spec": mixed});
        let Some(spec) = spec_mut(&mut again) else {
            panic!("a pod spec");
        };
        mount_token(spec, || panic!("the existing volume is reused"));
        assert_eq!(again["spec"]["volumes"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn pull_secrets_come_from_the_service_account_unless_the_pod_has_some() {
        let sa = json!({"imagePullSecrets": [{"name": "registry"}]});
        let inherited = admitted(json!({"containers": []}), &sa);
        assert_eq!(inherited["imagePullSecrets"], json!([{"name": "registry"}]));
        let own = admitted(json!({"imagePullSecrets": [{"name": "mine"}]}), &sa);
        assert_eq!(own["imagePullSecrets"], json!([{"name": "mine"}]));
    }

    #[test]
    fn an_enforcing_service_account_limits_the_secrets_of_its_pods() {
        let sa = json!({"metadata": {"name": "robot",
                        "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}},
                        "secrets": [{"name": "ok"}], "imagePullSecrets": [{"name": "pull"}]});
        let allowed = json!({"volumes": [{"name": "v", "secret": {"secretName": "ok"}}],
            "containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "ok", "key": "k"}}}]}],
            "imagePullSecrets": [{"name": "pull"}]});
        assert_eq!(check_secrets(&allowed, &sa), Ok(()));
        let cases = [
            (
                json!({"volumes": [{"name": "v", "secret": {"secretName": "other"}}]}),
                "volume with secret.secretName=\"other\" is not allowed because service account robot does not reference that secret",
            ),
            (
                json!({"initContainers": [{"name": "i", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "other"}}}]}]}),
                "init container i with envVar E referencing secret.secretName=\"other\" is not allowed because service account robot does not reference that secret",
            ),
            (
                json!({"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "other"}}]}]}),
                "container c with envFrom referencing secret.secretName=\"other\" is not allowed because service account robot does not reference that secret",
            ),
            (
                json!({"imagePullSecrets": [{"name": "pull"}, {"name": "other"}]}),
                "imagePullSecrets[1].name=\"other\" is not allowed because service account robot does not reference that imagePullSecret",
            ),
        ];
        for (spec, message) in cases {
            assert_eq!(check_secrets(&spec, &sa), Err(message.to_string()), "{spec}");
            assert_eq!(
                check_secrets(&spec, &json!({"metadata": {"name": "robot"}})),
                Ok(())
            );
        }
    }

    #[test]
    fn mirror_pods_reference_neither_service_accounts_nor_secrets() {
        let mirror = |spec: Value| json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}, "spec": spec});
        assert!(is_mirror(&mirror(json!({}))));
        assert!(!is_mirror(&json!({"metadata": {"annotations": {"other": "x"}}})));
        assert_eq!(
            check_mirror(&mirror(json!({"containers": [{"name": "c"}]}))),
            Ok(())
        );
        let cases = [
            (
                json!({"serviceAccountName": "default"}),
                "a mirror pod may not reference service accounts",
            ),
            (
                json!({"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}),
                "a mirror pod may not reference secrets",
            ),
            (
                json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}]}),
                "a mirror pod may not reference secrets",
            ),
            (
                json!({"ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "s"}}]}]}),
                "a mirror pod may not reference secrets",
            ),
            (
                json!({"imagePullSecrets": [{"name": "s"}]}),
                "a mirror pod may not reference secrets",
            ),
            (
                json!({"volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}),
                "a mirror pod may not use ServiceAccountToken volume projections",
            ),
        ];
        for (spec, message) in cases {
            assert_eq!(
                check_mirror(&mirror(spec.clone())),
                Err(message.to_string()),
                "{spec}"
            );
        }
    }

    #[test]
    fn only_pod_creations_are_looked_at() {
        assert!(handles(&pod_create()));
        let update = Attributes {
            operation: Operation::Update,
            ..pod_create()
        };
        let status = Attributes {
            subresource: Some("status"),
            ..pod_create()
        };
        let config_map = Attributes {
            resource: "configmaps",
            ..pod_create()
        };
        for attrs in [update, status, config_map] {
            assert!(!handles(&attrs), "{attrs:?}");
        }
    }

    #[test]
    fn refusals_are_kube_apiservers_forbidden() {
        let e = forbid(
            &pod_create(),
            "error looking up service account ns/nope: serviceaccount \"nope\" not found",
        );
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: error looking up service account ns/nope: serviceaccount \"nope\" not found"
        );
        let generated = Attributes {
            name: "",
            ..pod_create()
        };
        assert!(forbid(&generated, "x").message.starts_with("pods is forbidden: "));
    }
}
