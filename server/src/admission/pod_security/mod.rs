//! `PodSecurity`: the Pod Security Standards per namespace, as kube-apiserver's built-in
//! pod-security-admission applies them. A namespace's `pod-security.kubernetes.io/enforce`,
//! `audit` and `warn` labels (each with an optional `-version`, `latest` or `v1.x`) name a level
//! (`privileged`, `baseline`, `restricted`); a pod that violates the enforce level is refused
//! (`403`), one that violates the warn level gets a warning; pod controllers (Deployments, Jobs,
//! ...) are only warned about, their templates checked. Label values are validated on the
//! namespace (`422`), and a namespace whose enforce level is tightened warns about the pods it
//! holds that would now be refused. The admission configuration's `PodSecurityConfiguration`
//! ([`PodSecurityConfig`]) gives the levels of a namespace without labels and exempts users,
//! runtime classes and namespaces, as kube's does.
//!
//! The namespace is read linearizably, so a label written through any replica applies to the
//! next pod on every replica.

mod checks;

use futures::future::BoxFuture;
use serde_json::Value;

use super::audit_annotations::annotate;
use super::warnings::warn;
use super::{Attributes, Operation, Validating};
use crate::machinery::errors::{go_quote, ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::store::{keys, Store};
use checks::{evaluate, forbidden_detail, forbidden_reason, Level, PodView};

/// The plugin.
pub struct PodSecurity;

impl Validating for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
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

/// The labels' prefix.
const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

/// The modes, in the order kube reads their labels.
const MODES: [&str; 3] = ["enforce", "audit", "warn"];
/// The audit annotation naming the enforced policy a pod was checked against.
const ENFORCE_POLICY: &str = "pod-security.kubernetes.io/enforce-policy";
/// The audit annotation with a pod's violations of the namespace's audit level.
const AUDIT_VIOLATIONS: &str = "pod-security.kubernetes.io/audit-violations";

/// How many existing pods a tightened enforce level is checked against, as kube bounds it.
const MAX_PODS_TO_CHECK: usize = 3000;

/// Pod subresources that cannot change what the policy looks at.
const IGNORED_POD_SUBRESOURCES: [&str; 8] = [
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// The audit annotation naming why a request was exempt (`namespace`, `user`, `runtimeClass`).
const EXEMPT: &str = "pod-security.kubernetes.io/exempt";

/// kube's `PodSecurityConfiguration`: the levels of a namespace without the labels, and what
/// is exempt from every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSecurityConfig {
    /// enforce, audit and warn, in [`MODES`] order.
    defaults: [LevelVersion; 3],
    usernames: Vec<String>,
    runtime_classes: Vec<String>,
    namespaces: Vec<String>,
}

impl Default for PodSecurityConfig {
    fn default() -> Self {
        PodSecurityConfig {
            defaults: [LevelVersion::PRIVILEGED; 3],
            usernames: Vec::new(),
            runtime_classes: Vec::new(),
            namespaces: Vec::new(),
        }
    }
}

impl PodSecurityConfig {
    /// Reads a `pod-security.admission.config.k8s.io` `PodSecurityConfiguration`; the message
    /// names the first field that is wrong.
    pub fn parse(v: &Value) -> Result<PodSecurityConfig, String> {
        let api_version = v["apiVersion"].as_str().unwrap_or_default();
        let known = ["v1", "v1beta1", "v1alpha1"]
            .iter()
            .any(|version| api_version == format!("pod-security.admission.config.k8s.io/{version}"));
        if !known || v["kind"] != "PodSecurityConfiguration" {
            return Err(format!(
                "expected pod-security.admission.config.k8s.io/v1 PodSecurityConfiguration, got {api_version}/{}",
                v["kind"].as_str().unwrap_or_default()
            ));
        }
        let defaults = &v["defaults"];
        let (policy, errors) = policy_from(
            |key| defaults[key].as_str(),
            |key| format!("defaults.{key}"),
            PodSecurityConfig::default().defaults,
        );
        if let Some((field, message)) = errors.into_iter().next() {
            return Err(format!("{field}: {message}"));
        }
        let list = |field: &str| -> Result<Vec<String>, String> {
            match &v["exemptions"][field] {
                Value::Null => Ok(Vec::new()),
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("exemptions.{field}: expected strings"))
                    })
                    .collect(),
                _ => Err(format!("exemptions.{field}: expected a list")),
            }
        };
        Ok(PodSecurityConfig {
            defaults: [policy.enforce, policy.audit, policy.warn],
            usernames: list("usernames")?,
            runtime_classes: list("runtimeClasses")?,
            namespaces: list("namespaces")?,
        })
    }

    /// Why the request is exempt, if it is, checked in kube's order: its namespace, its user,
    /// then the pod's runtime class.
    fn exemption(&self, attrs: &Attributes<'_>, pod_spec: Option<&Value>) -> Option<&'static str> {
        let listed = |list: &[String], item: &str| !item.is_empty() && list.iter().any(|l| l == item);
        if listed(&self.namespaces, attrs.namespace.unwrap_or_default()) {
            return Some("namespace");
        }
        if listed(&self.usernames, attrs.user.map_or("", |u| u.name.as_str())) {
            return Some("user");
        }
        let runtime_class = pod_spec
            .and_then(|s| s["runtimeClassName"].as_str())
            .unwrap_or_default();
        listed(&self.runtime_classes, runtime_class).then_some("runtimeClass")
    }
}

/// The configuration in force.
fn config() -> &'static PodSecurityConfig {
    &super::configuration::current().pod_security
}

/// A level at a policy version (`None`: latest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LevelVersion {
    level: Level,
    version: Option<u32>,
}

impl LevelVersion {
    const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: None,
    };

    /// `restricted:latest`, `baseline:v1.30`.
    fn shown(self) -> String {
        match self.version {
            None => format!("{}:latest", self.level.as_str()),
            Some(minor) => format!("{}:v1.{minor}", self.level.as_str()),
        }
    }

    fn check(self, pod: &PodView<'_>) -> Vec<checks::Violation> {
        evaluate(self.level, self.version.unwrap_or(u32::MAX), pod)
    }
}

/// A namespace's policy: enforce, audit and warn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    enforce: LevelVersion,
    warn: LevelVersion,
    audit: LevelVersion,
}

/// The policy of a namespace with these labels (the configured defaults for those it lacks),
/// and the label errors (`(field, message)`) kube reports.
fn policy(labels: Option<&Value>) -> (Policy, Vec<(String, String)>) {
    policy_from(
        |key| {
            labels
                .and_then(|l| l.get(format!("{LABEL_PREFIX}{key}")))
                .and_then(Value::as_str)
        },
        |key| format!("metadata.labels[{LABEL_PREFIX}{key}]"),
        config().defaults,
    )
}

/// A policy from its six values (`enforce`, `enforce-version`, ... as `get` finds them; one
/// not given keeps `start`'s), with the errors (`(field, message)`, `field` naming each) kube
/// reports. As in kube, a bad enforce level enforces `restricted`, a bad audit or warn level
/// is `privileged`, and a bad version is `latest`.
fn policy_from<'v>(
    get: impl Fn(&str) -> Option<&'v str>,
    field: impl Fn(&str) -> String,
    start: [LevelVersion; 3],
) -> (Policy, Vec<(String, String)>) {
    let mut found = start;
    let mut errors = Vec::new();
    let mut invalid = |key: &str, value: &str, why: &str| {
        errors.push((field(key), format!("Invalid value: {}: {why}", go_quote(value))));
    };
    for (i, mode) in MODES.iter().enumerate() {
        if let Some(value) = get(mode) {
            found[i].level = match value {
                "privileged" => Level::Privileged,
                "baseline" => Level::Baseline,
                "restricted" => Level::Restricted,
                _ => {
                    invalid(mode, value, "must be one of privileged, baseline, restricted");
                    if i == 0 {
                        Level::Restricted
                    } else {
                        Level::Privileged
                    }
                }
            };
        }
        let key = format!("{mode}-version");
        if let Some(value) = get(&key) {
            found[i].version = match parse_version(value) {
                Ok(v) => v,
                Err(()) => {
                    invalid(&key, value, "must be \"latest\" or \"v1.x\"");
                    None
                }
            };
        }
    }
    let [enforce, audit, warn] = found;
    (Policy { enforce, warn, audit }, errors)
}

/// `latest` (`None`) or `v1.x` (`Some(x)`; no leading zeros).
fn parse_version(v: &str) -> Result<Option<u32>, ()> {
    if v == "latest" {
        return Ok(None);
    }
    let minor = v.strip_prefix("v1.").ok_or(())?;
    let well_formed = !minor.is_empty()
        && minor.bytes().all(|b| b.is_ascii_digit())
        && (minor == "0" || !minor.starts_with('0'));
    if !well_formed {
        return Err(());
    }
    minor.parse().map(Some).map_err(|_| ())
}

async fn validate(store: &Store, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
    if !matches!(attrs.operation, Operation::Create | Operation::Update) {
        return Ok(());
    }
    match (attrs.group, attrs.resource) {
        ("", "namespaces") => validate_namespace(store, attrs, obj).await,
        ("", "pods") => validate_pod(store, attrs, obj).await,
        (group, resource) => match template(group, resource, obj) {
            Some(found) if attrs.subresource.is_none() => validate_controller(store, attrs, found).await,
            _ => Ok(()),
        },
    }
}

/// The pod template of a pod controller (`Some(None)` when the controller has none), `None`
/// for other resources.
fn template<'a>(group: &str, resource: &str, obj: &'a Value) -> Option<Option<&'a Value>> {
    let path = match (group, resource) {
        ("", "podtemplates") => "/template",
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => "/spec/template",
        ("batch", "cronjobs") => "/spec/jobTemplate/spec/template",
        _ => return None,
    };
    Some(obj.pointer(path).filter(|t| t.is_object()))
}

/// The name the refusal names: the object's (generated names included), else the request's.
fn object_name<'a>(attrs: &Attributes<'a>, obj: &'a Value) -> &'a str {
    meta_str(obj, "name").unwrap_or(attrs.name)
}

/// The policy of the request's namespace (read linearizably).
async fn namespace_policy(store: &Store, attrs: &Attributes<'_>) -> ApiResult<Policy> {
    let ns = attrs.namespace.unwrap_or_default();
    let key = keys::object("", "namespaces", None, ns);
    match store.get(&key, true).await? {
        Some(found) => Ok(policy(found.obj.pointer("/metadata/labels")).0),
        None => Err(ApiError::internal(format!("failed to lookup namespace {ns}"))),
    }
}

fn view(obj: &Value) -> PodView<'_> {
    static EMPTY: Value = Value::Null;
    PodView {
        meta: obj.get("metadata").unwrap_or(&EMPTY),
        spec: obj.get("spec").unwrap_or(&EMPTY),
    }
}

async fn validate_pod(store: &Store, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
    if attrs
        .subresource
        .is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s))
    {
        return Ok(());
    }
    if let Some(why) = config().exemption(attrs, obj.get("spec")) {
        annotate(EXEMPT, why.to_string());
        return Ok(());
    }
    let policy = namespace_policy(store, attrs).await?;
    if [policy.enforce, policy.audit, policy.warn]
        .iter()
        .all(|lv| lv.level == Level::Privileged)
    {
        return Ok(());
    }
    if let Some(old) = attrs.old {
        if !significant_update(obj, old) {
            return Ok(());
        }
    }
    let pod = view(obj);
    annotate(ENFORCE_POLICY, policy.enforce.shown());
    if policy.audit.level != Level::Privileged {
        let violations = policy.audit.check(&pod);
        if !violations.is_empty() {
            annotate(
                AUDIT_VIOLATIONS,
                format!(
                    "would violate PodSecurity {}: {}",
                    go_quote(&policy.audit.shown()),
                    forbidden_detail(&violations)
                ),
            );
        }
    }
    let refused = policy.enforce.check(&pod);
    if !refused.is_empty() {
        return Err(ApiError::forbidden(
            "",
            "pods",
            object_name(attrs, obj),
            &format!(
                "violates PodSecurity {}: {}",
                go_quote(&policy.enforce.shown()),
                forbidden_detail(&refused)
            ),
        ));
    }
    if policy.warn != policy.enforce {
        warn_about(policy.warn, &pod);
    }
    Ok(())
}

async fn validate_controller(
    store: &Store,
    attrs: &Attributes<'_>,
    template: Option<&Value>,
) -> ApiResult<()> {
    if let Some(why) = config().exemption(attrs, template.and_then(|t| t.get("spec"))) {
        annotate(EXEMPT, why.to_string());
        return Ok(());
    }
    let policy = namespace_policy(store, attrs).await?;
    if policy.warn.level == Level::Privileged && policy.audit.level == Level::Privileged {
        return Ok(());
    }
    if let Some(t) = template {
        warn_about(policy.warn, &view(t));
    }
    Ok(())
}

/// Warns when the pod would violate `lv`.
fn warn_about(lv: LevelVersion, pod: &PodView<'_>) {
    let violations = lv.check(pod);
    if !violations.is_empty() {
        warn(format!(
            "would violate PodSecurity {}: {}",
            go_quote(&lv.shown()),
            forbidden_detail(&violations)
        ));
    }
}

/// Whether a pod update changes anything the policy looks at (images, containers, seccomp
/// annotations), as kube decides it; other updates pass unchecked.
fn significant_update(new: &Value, old: &Value) -> bool {
    const POD_SECCOMP: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_SECCOMP: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let annotation = |o: &Value, k: &str| o.pointer("/metadata/annotations").and_then(|a| a.get(k)).cloned();
    let list = |o: &Value, k: &str| {
        o.pointer(&format!("/spec/{k}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let changed = |c: &Value, oc: &Value| {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let key = format!("{CONTAINER_SECCOMP}{name}");
        c.get("image") != oc.get("image") || annotation(new, &key) != annotation(old, &key)
    };
    if annotation(new, POD_SECCOMP) != annotation(old, POD_SECCOMP) {
        return true;
    }
    for k in ["containers", "initContainers"] {
        let (n, o) = (list(new, k), list(old, k));
        if n.len() != o.len() || n.iter().zip(&o).any(|(c, oc)| changed(c, oc)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| {
        match old_ephemeral.iter().find(|o| o.get("name") == c.get("name")) {
            Some(oc) => changed(c, oc),
            None => true,
        }
    })
}

async fn validate_namespace(store: &Store, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
    if attrs.subresource.is_some() {
        return Ok(());
    }
    let name = object_name(attrs, obj);
    let (new, errors) = policy(obj.pointer("/metadata/labels"));
    let invalid = || Err(ApiError::invalid("", "Namespace", name, &errors));
    let Some(old) = attrs.old else {
        return if errors.is_empty() { Ok(()) } else { invalid() };
    };
    let (before, old_errors) = policy(old.pointer("/metadata/labels"));
    if !errors.is_empty() && errors != old_errors {
        return invalid();
    }
    let tightened = new.enforce != before.enforce
        && new.enforce.level != Level::Privileged
        && (new.enforce.version != before.enforce.version || new.enforce.level > before.enforce.level);
    if tightened {
        for w in existing_pod_warnings(store, name, new.enforce).await {
            warn(w);
        }
    }
    Ok(())
}

/// What kube warns when a namespace's enforce level becomes `enforce`: which existing pods
/// would be refused now, grouped by what they violate.
async fn existing_pod_warnings(store: &Store, ns: &str, enforce: LevelVersion) -> Vec<String> {
    let prefix = keys::object("", "pods", Some(ns), "");
    let Ok((pods, _)) = store.list(&prefix, true).await else {
        return vec!["failed to list pods while checking new PodSecurity enforce level".into()];
    };
    let total = pods.len();
    // Each distinct summary: the lexically first pod with it, and how many have it.
    let mut groups: Vec<(String, String, usize)> = Vec::new();
    for p in pods.iter().take(MAX_PODS_TO_CHECK) {
        let violations = enforce.check(&view(&p.obj));
        if violations.is_empty() {
            continue;
        }
        let summary = forbidden_reason(&violations);
        let pod = meta_str(&p.obj, "name").unwrap_or_default().to_string();
        match groups.iter_mut().find(|(s, _, _)| *s == summary) {
            Some((_, first, count)) => {
                if pod < *first {
                    *first = pod;
                }
                *count += 1;
            }
            None => groups.push((summary, pod, 1)),
        }
    }
    let mut warnings = Vec::new();
    if total > MAX_PODS_TO_CHECK {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {MAX_PODS_TO_CHECK} of {total} existing pods"
        ));
    }
    if !groups.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {} violate the new PodSecurity enforce level {}",
            go_quote(ns),
            go_quote(&enforce.shown())
        ));
    }
    let mut per_pod: Vec<String> = groups
        .into_iter()
        .map(|(summary, pod, count)| match count {
            1 => format!("{pod}: {summary}"),
            2 => format!("{pod} (and 1 other pod): {summary}"),
            n => format!("{pod} (and {} other pods): {summary}", n - 1),
        })
        .collect();
    per_pod.sort();
    warnings.extend(per_pod);
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_make_the_policy_and_bad_values_are_named_as_kube_names_them() {
        let (p, errors) = policy(Some(&json!({
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "v1.30",
            "pod-security.kubernetes.io/warn": "baseline",
        })));
        assert!(errors.is_empty());
        assert_eq!(p.enforce.shown(), "restricted:v1.30");
        assert_eq!(p.warn.shown(), "baseline:latest");
        assert_eq!(p.audit, LevelVersion::PRIVILEGED);
        let (p, errors) = policy(Some(&json!({
            "pod-security.kubernetes.io/enforce": "strict",
            "pod-security.kubernetes.io/warn": "loose",
            "pod-security.kubernetes.io/warn-version": "v1.01",
        })));
        assert_eq!(p.enforce.level, Level::Restricted);
        assert_eq!(p.warn, LevelVersion::PRIVILEGED);
        assert_eq!(
            errors,
            [
                (
                    "metadata.labels[pod-security.kubernetes.io/enforce]".to_string(),
                    "Invalid value: \"strict\": must be one of privileged, baseline, restricted".to_string()
                ),
                (
                    "metadata.labels[pod-security.kubernetes.io/warn]".to_string(),
                    "Invalid value: \"loose\": must be one of privileged, baseline, restricted".to_string()
                ),
                (
                    "metadata.labels[pod-security.kubernetes.io/warn-version]".to_string(),
                    "Invalid value: \"v1.01\": must be \"latest\" or \"v1.x\"".to_string()
                ),
            ]
        );
        assert_eq!(parse_version("v1.0"), Ok(Some(0)));
        assert_eq!(parse_version("v2.1"), Err(()));
    }

    #[test]
    fn only_image_container_and_seccomp_changes_are_significant() {
        let pod = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let mut relabelled = pod.clone();
        relabelled["metadata"]["labels"]["a"] = json!("c");
        assert!(!significant_update(&relabelled, &pod));
        let mut new_image = pod.clone();
        new_image["spec"]["containers"][0]["image"] = json!("y");
        assert!(significant_update(&new_image, &pod));
        let mut debugged = pod.clone();
        debugged["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "busybox"}]);
        assert!(significant_update(&debugged, &pod));
    }

    #[test]
    fn controllers_have_their_template_checked() {
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        assert!(template("batch", "cronjobs", &cron).is_some_and(|t| t.is_some()));
        assert_eq!(template("apps", "deployments", &json!({})), Some(None));
        assert_eq!(template("", "configmaps", &json!({})), None);
    }
}
