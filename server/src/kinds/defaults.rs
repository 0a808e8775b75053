//! Scheme defaulting: the field defaults kube-apiserver 1.35 fills in whenever it decodes an
//! object of a built-in type (create, update and patch alike), so `kubectl get -o yaml` shows
//! what a real cluster shows.
//!
//! Defaults are data: each type has a list of [`Rule`]s, each naming where in the object it
//! applies (a dotted path; `[]` walks every element of a list) and what it does there. Shared
//! shapes — the pod spec inside every workload template, containers, probes, volumes, claim
//! specs — are rule lists reused through [`Op::Nested`].

use serde_json::{json, Map, Value};

use crate::scheme::ResourceType;

/// A literal default value.
#[derive(Debug, Clone, Copy)]
pub enum Lit {
    /// A string.
    Str(&'static str),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An empty object (a Go struct that always serializes, e.g. `securityContext: {}`).
    Object,
}

impl Lit {
    fn value(self) -> Value {
        match self {
            Lit::Str(s) => json!(s),
            Lit::Int(i) => json!(i),
            Lit::Bool(b) => json!(b),
            Lit::Object => json!({}),
        }
    }
}

/// What a rule does to each object its path reaches.
#[derive(Clone, Copy)]
pub enum Op {
    /// Sets a field to a literal when it is unset (absent, null or "").
    Set(&'static str, Lit),
    /// Like [`Op::Set`], but a zero also counts as unset (Go `int32` fields defaulted on 0).
    SetNonZero(&'static str, Lit),
    /// Sets a field to a value computed from the object when it is unset; `None` leaves it.
    SetWith(&'static str, fn(&Map<String, Value>) -> Option<Value>),
    /// Any other adjustment of the object.
    Adjust(fn(&mut Map<String, Value>)),
    /// Applies another rule list to the object.
    Nested(&'static [Rule]),
}

/// One default: an operation applied at every object a path reaches.
#[derive(Clone, Copy)]
pub struct Rule {
    at: &'static str,
    op: Op,
}

const fn at(at: &'static str, op: Op) -> Rule {
    Rule { at, op }
}

use Lit::{Bool, Int, Object, Str};
use Op::{Adjust, Nested, Set, SetNonZero, SetWith};

fn is_unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null)) || v.and_then(Value::as_str) == Some("")
}

fn is_zero(v: Option<&Value>) -> bool {
    v.and_then(Value::as_i64) == Some(0)
}

/// Visits every object reached from `root` by `path`. Missing or mistyped steps visit nothing.
fn visit(root: &mut Value, path: &str, f: &mut dyn FnMut(&mut Value)) {
    if path.is_empty() {
        if root.is_object() {
            f(root);
        }
        return;
    }
    let (head, rest) = path.split_once('.').unwrap_or((path, ""));
    let (key, each) = match head.strip_suffix("[]") {
        Some(k) => (k, true),
        None => (head, false),
    };
    let Some(next) = root.get_mut(key) else {
        return;
    };
    if !each {
        visit(next, rest, f);
    } else if let Some(items) = next.as_array_mut() {
        for item in items {
            visit(item, rest, f);
        }
    }
}

/// Applies a rule list to `root`.
pub fn run(rules: &[Rule], root: &mut Value) {
    for rule in rules {
        visit(root, rule.at, &mut |target| apply_op(rule.op, target));
    }
}

fn apply_op(op: Op, target: &mut Value) {
    if let Nested(rules) = op {
        run(rules, target);
        return;
    }
    let Some(map) = target.as_object_mut() else {
        return;
    };
    match op {
        Set(field, lit) => {
            if is_unset(map.get(field)) {
                map.insert(field.into(), lit.value());
            }
        }
        SetNonZero(field, lit) => {
            if is_unset(map.get(field)) || is_zero(map.get(field)) {
                map.insert(field.into(), lit.value());
            }
        }
        SetWith(field, compute) => {
            if is_unset(map.get(field)) {
                if let Some(v) = compute(map) {
                    map.insert(field.into(), v);
                }
            }
        }
        Adjust(f) => f(map),
        Nested(_) => {}
    }
}

/// The image pull policy kube-apiserver picks: `Always` for `:latest` or an untagged image
/// without a digest, `IfNotPresent` otherwise.
pub fn pull_policy(image: &str) -> &'static str {
    if image.is_empty() {
        return "IfNotPresent";
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.split_once(':').map(|(_, t)| t);
    match (tag, digest) {
        (Some("latest"), _) | (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

fn container_pull_policy(c: &Map<String, Value>) -> Option<Value> {
    Some(json!(pull_policy(
        c.get("image").and_then(Value::as_str).unwrap_or("")
    )))
}

const HTTP_GET: &[Rule] = &[at("", Set("path", Str("/"))), at("", Set("scheme", Str("HTTP")))];

const PROBE: &[Rule] = &[
    at("", SetNonZero("timeoutSeconds", Int(1))),
    at("", SetNonZero("periodSeconds", Int(10))),
    at("", SetNonZero("successThreshold", Int(1))),
    at("", SetNonZero("failureThreshold", Int(3))),
    at("httpGet", Nested(HTTP_GET)),
];

const FIELD_REF: &[Rule] = &[at("", Set("apiVersion", Str("v1")))];

const CONTAINER: &[Rule] = &[
    at("", SetWith("imagePullPolicy", container_pull_policy)),
    at("", Set("terminationMessagePath", Str("/dev/termination-log"))),
    at("", Set("terminationMessagePolicy", Str("File"))),
    at("", Set("resources", Object)),
    at("ports[]", Set("protocol", Str("TCP"))),
    at("env[].valueFrom.fieldRef", Nested(FIELD_REF)),
    at("livenessProbe", Nested(PROBE)),
    at("readinessProbe", Nested(PROBE)),
    at("startupProbe", Nested(PROBE)),
    at("lifecycle.postStart.httpGet", Nested(HTTP_GET)),
    at("lifecycle.preStop.httpGet", Nested(HTTP_GET)),
];

/// A volume that names no source is an `emptyDir`.
fn empty_dir_without_source(v: &mut Map<String, Value>) {
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
}

const PVC_SPEC: &[Rule] = &[at("", Set("volumeMode", Str("Filesystem")))];

const VOLUME: &[Rule] = &[
    at("", Adjust(empty_dir_without_source)),
    at("hostPath", Set("type", Str(""))),
    at("secret", Set("defaultMode", Int(420))),
    at("configMap", Set("defaultMode", Int(420))),
    at("downwardAPI", Set("defaultMode", Int(420))),
    at("downwardAPI.items[].fieldRef", Nested(FIELD_REF)),
    at("projected", Set("defaultMode", Int(420))),
    at(
        "projected.sources[].downwardAPI.items[].fieldRef",
        Nested(FIELD_REF),
    ),
    at(
        "projected.sources[].serviceAccountToken",
        Set("expirationSeconds", Int(3600)),
    ),
    at("ephemeral.volumeClaimTemplate.spec", Nested(PVC_SPEC)),
];

/// `serviceAccount` is the deprecated twin of `serviceAccountName`; conversion keeps them equal.
fn mirror_service_account(spec: &mut Map<String, Value>) {
    let name = spec
        .get("serviceAccountName")
        .filter(|v| !is_unset(Some(v)))
        .cloned();
    let old = spec.get("serviceAccount").filter(|v| !is_unset(Some(v))).cloned();
    match (name, old) {
        (Some(n), _) => {
            spec.insert("serviceAccount".into(), n);
        }
        (None, Some(o)) => {
            spec.insert("serviceAccountName".into(), o);
        }
        (None, None) => {}
    }
}

/// Defaults of every pod spec, in pods and in workload templates alike.
pub const POD_SPEC: &[Rule] = &[
    at("", Set("dnsPolicy", Str("ClusterFirst"))),
    at("", Set("restartPolicy", Str("Always"))),
    at("", Set("securityContext", Object)),
    at("", Set("terminationGracePeriodSeconds", Int(30))),
    at("", Set("schedulerName", Str("default-scheduler"))),
    at("", Adjust(mirror_service_account)),
    at("containers[]", Nested(CONTAINER)),
    at("initContainers[]", Nested(CONTAINER)),
    at("ephemeralContainers[]", Nested(CONTAINER)),
    at("volumes[]", Nested(VOLUME)),
];

const POD_TEMPLATE: &[Rule] = &[at("spec", Nested(POD_SPEC))];

/// Container resource requests default to the limits (pods only, not templates).
fn requests_from_limits(container: &mut Map<String, Value>) {
    let Some(res) = container.get_mut("resources").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let requests = res.entry("requests").or_insert_with(|| json!({}));
    if requests.is_null() {
        *requests = json!({});
    }
    if let Some(requests) = requests.as_object_mut() {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// With host networking, container ports default their host port to the container port.
fn host_network_ports(spec: &mut Map<String, Value>) {
    if spec.get("hostNetwork").and_then(Value::as_bool) != Some(true) {
        return;
    }
    for list in ["containers", "initContainers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) else {
                continue;
            };
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                let unset = is_unset(p.get("hostPort")) || is_zero(p.get("hostPort"));
                if let (true, Some(cp)) = (unset, p.get("containerPort").cloned()) {
                    p.insert("hostPort".into(), cp);
                }
            }
        }
    }
}

const POD: &[Rule] = &[
    at("spec.containers[]", Adjust(requests_from_limits)),
    at("spec.initContainers[]", Adjust(requests_from_limits)),
    at("spec", Set("enableServiceLinks", Bool(true))),
    at("spec", Adjust(host_network_ports)),
    at("spec", Nested(POD_SPEC)),
];

fn rolling_update(strategy: &mut Map<String, Value>, max_unavailable: Value, max_surge: Value) {
    if strategy.get("type").and_then(Value::as_str) != Some("RollingUpdate") {
        return;
    }
    let ru = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
    if ru.is_null() {
        *ru = json!({});
    }
    if let Some(ru) = ru.as_object_mut() {
        if is_unset(ru.get("maxUnavailable")) {
            ru.insert("maxUnavailable".into(), max_unavailable);
        }
        if is_unset(ru.get("maxSurge")) {
            ru.insert("maxSurge".into(), max_surge);
        }
    }
}

fn deployment_rolling_update(strategy: &mut Map<String, Value>) {
    rolling_update(strategy, json!("25%"), json!("25%"));
}

fn daemonset_rolling_update(strategy: &mut Map<String, Value>) {
    rolling_update(strategy, json!(1), json!(0));
}

fn statefulset_update_strategy(strategy: &mut Map<String, Value>) {
    if is_unset(strategy.get("type")) {
        strategy.insert("type".into(), json!("RollingUpdate"));
        if is_unset(strategy.get("rollingUpdate")) {
            strategy.insert("rollingUpdate".into(), json!({}));
        }
    }
    if strategy.get("type").and_then(Value::as_str) != Some("RollingUpdate") {
        return;
    }
    if let Some(ru) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
        if is_unset(ru.get("partition")) {
            ru.insert("partition".into(), json!(0));
        }
        // MaxUnavailableStatefulSet is beta, on by default, in 1.35.
        if is_unset(ru.get("maxUnavailable")) {
            ru.insert("maxUnavailable".into(), json!(1));
        }
    }
}

const DEPLOYMENT: &[Rule] = &[
    at("", Set("spec", Object)),
    at("spec", Set("replicas", Int(1))),
    at("spec", Set("strategy", Object)),
    at("spec.strategy", Set("type", Str("RollingUpdate"))),
    at("spec.strategy", Adjust(deployment_rolling_update)),
    at("spec", Set("revisionHistoryLimit", Int(10))),
    at("spec", Set("progressDeadlineSeconds", Int(600))),
    at("spec.template", Nested(POD_TEMPLATE)),
];

const REPLICA_SET: &[Rule] = &[
    at("", Set("spec", Object)),
    at("spec", Set("replicas", Int(1))),
    at("spec.template", Nested(POD_TEMPLATE)),
];

const DAEMON_SET: &[Rule] = &[
    at("", Set("spec", Object)),
    at("spec", Set("updateStrategy", Object)),
    at("spec.updateStrategy", Set("type", Str("RollingUpdate"))),
    at("spec.updateStrategy", Adjust(daemonset_rolling_update)),
    at("spec", Set("revisionHistoryLimit", Int(10))),
    at("spec.template", Nested(POD_TEMPLATE)),
];

const PVC: &[Rule] = &[
    at("spec", Nested(PVC_SPEC)),
    at("", Set("status", Object)),
    at("status", Set("phase", Str("Pending"))),
];

const STATEFUL_SET: &[Rule] = &[
    at("", Set("spec", Object)),
    at("spec", Set("podManagementPolicy", Str("OrderedReady"))),
    at("spec", Set("updateStrategy", Object)),
    at("spec.updateStrategy", Adjust(statefulset_update_strategy)),
    at("spec", Set("persistentVolumeClaimRetentionPolicy", Object)),
    at(
        "spec.persistentVolumeClaimRetentionPolicy",
        Set("whenDeleted", Str("Retain")),
    ),
    at(
        "spec.persistentVolumeClaimRetentionPolicy",
        Set("whenScaled", Str("Retain")),
    ),
    at("spec", Set("replicas", Int(1))),
    at("spec", Set("revisionHistoryLimit", Int(10))),
    at("spec.template", Nested(POD_TEMPLATE)),
    at("spec.volumeClaimTemplates[]", Nested(PVC)),
];

/// The labels map of `obj.metadata`, created when absent; `None` when metadata or labels are
/// not objects.
fn labels_mut(obj: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if meta.is_null() {
        *meta = json!({});
    }
    let labels = meta.as_object_mut()?.entry("labels").or_insert_with(|| json!({}));
    if labels.is_null() {
        *labels = json!({});
    }
    labels.as_object_mut()
}

fn template_labels(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    obj.get("spec")?
        .get("template")?
        .get("metadata")?
        .get("labels")?
        .as_object()
        .filter(|l| !l.is_empty())
        .cloned()
}

/// An object without labels takes its template's labels (Jobs and ReplicationControllers).
fn labels_from_template(obj: &mut Map<String, Value>) {
    let Some(template) = template_labels(obj) else {
        return;
    };
    if let Some(labels) = labels_mut(obj).filter(|l| l.is_empty()) {
        *labels = template;
    }
}

fn job_parallelism(spec: &mut Map<String, Value>) {
    if is_unset(spec.get("completions")) && is_unset(spec.get("parallelism")) {
        spec.insert("completions".into(), json!(1));
    }
    if is_unset(spec.get("parallelism")) {
        spec.insert("parallelism".into(), json!(1));
    }
}

fn job_backoff_limit(spec: &Map<String, Value>) -> Option<Value> {
    Some(if is_unset(spec.get("backoffLimitPerIndex")) {
        json!(6)
    } else {
        json!(i32::MAX)
    })
}

fn job_pod_replacement_policy(spec: &Map<String, Value>) -> Option<Value> {
    Some(if is_unset(spec.get("podFailurePolicy")) {
        json!("TerminatingOrFailed")
    } else {
        json!("Failed")
    })
}

const JOB: &[Rule] = &[
    at("", Set("spec", Object)),
    at("", Adjust(labels_from_template)),
    at("spec", Adjust(job_parallelism)),
    at("spec", SetWith("backoffLimit", job_backoff_limit)),
    at("spec", Set("completionMode", Str("NonIndexed"))),
    at("spec", Set("suspend", Bool(false))),
    at(
        "spec.podFailurePolicy.rules[].onPodConditions[]",
        Set("status", Str("True")),
    ),
    at(
        "spec",
        SetWith("podReplacementPolicy", job_pod_replacement_policy),
    ),
    at("spec.template", Nested(POD_TEMPLATE)),
];

const CRON_JOB: &[Rule] = &[
    at("", Set("spec", Object)),
    at("spec", Set("concurrencyPolicy", Str("Allow"))),
    at("spec", Set("suspend", Bool(false))),
    at("spec", Set("successfulJobsHistoryLimit", Int(3))),
    at("spec", Set("failedJobsHistoryLimit", Int(1))),
    at("spec.jobTemplate.spec.template", Nested(POD_TEMPLATE)),
];

fn rc_selector_and_labels(rc: &mut Map<String, Value>) {
    let Some(template) = template_labels(rc) else {
        return;
    };
    if let Some(spec) = rc.get_mut("spec").and_then(Value::as_object_mut) {
        if spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(|s| s.is_empty())
        {
            spec.insert("selector".into(), Value::Object(template));
        }
    }
    labels_from_template(rc);
}

const REPLICATION_CONTROLLER: &[Rule] = &[
    at("", Set("spec", Object)),
    at("", Adjust(rc_selector_and_labels)),
    at("spec", Set("replicas", Int(1))),
    at("spec.template", Nested(POD_TEMPLATE)),
];

fn session_affinity(spec: &mut Map<String, Value>) {
    if is_unset(spec.get("sessionAffinity")) {
        spec.insert("sessionAffinity".into(), json!("None"));
    }
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"));
            if is_unset(timeout) {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
}

fn service_target_port(port: &mut Map<String, Value>) {
    let target = port.get("targetPort");
    if is_unset(target) || is_zero(target) {
        if let Some(p) = port.get("port").cloned() {
            port.insert("targetPort".into(), p);
        }
    }
}

fn service_traffic_policies(spec: &mut Map<String, Value>) {
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible =
        ty == "LoadBalancer" || ty == "NodePort" || (ty == "ClusterIP" && has_external_ips);
    if externally_accessible && is_unset(spec.get("externalTrafficPolicy")) {
        spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer")
        && is_unset(spec.get("internalTrafficPolicy"))
    {
        spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if ty == "LoadBalancer" && is_unset(spec.get("allocateLoadBalancerNodePorts")) {
        spec.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
}

const SERVICE: &[Rule] = &[
    at("", Set("spec", Object)),
    at("spec", Adjust(session_affinity)),
    at("spec", Set("type", Str("ClusterIP"))),
    at("spec.ports[]", Set("protocol", Str("TCP"))),
    at("spec.ports[]", Adjust(service_target_port)),
    at("spec", Adjust(service_traffic_policies)),
];

const PERSISTENT_VOLUME: &[Rule] = &[
    at("spec", Set("persistentVolumeReclaimPolicy", Str("Retain"))),
    at("spec", Set("volumeMode", Str("Filesystem"))),
    at("spec.hostPath", Set("type", Str(""))),
    at("", Set("status", Object)),
    at("status", Set("phase", Str("Pending"))),
];

const ENDPOINTS: &[Rule] = &[at("subsets[].ports[]", Set("protocol", Str("TCP")))];

fn empty_string(_: &Map<String, Value>) -> Option<Value> {
    Some(json!(""))
}

const ENDPOINT_SLICE: &[Rule] = &[
    at("ports[]", Set("protocol", Str("TCP"))),
    at("ports[]", SetWith("name", empty_string)),
];

fn namespace_name_label(ns: &mut Map<String, Value>) {
    let Some(name) = ns
        .get("metadata")
        .and_then(|m| m.get("name"))
        .filter(|n| !is_unset(Some(n)))
        .cloned()
    else {
        return;
    };
    if let Some(labels) = labels_mut(ns) {
        labels.insert("kubernetes.io/metadata.name".into(), name);
    }
}

const NAMESPACE: &[Rule] = &[
    at("", Adjust(namespace_name_label)),
    at("", Set("status", Object)),
    at("status", Set("phase", Str("Active"))),
];

fn node_allocatable(status: &mut Map<String, Value>) {
    if is_unset(status.get("allocatable")) {
        if let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned() {
            status.insert("allocatable".into(), capacity);
        }
    }
}

const NODE: &[Rule] = &[at("status", Adjust(node_allocatable))];

/// Standard base64 with padding, as Secret `data` carries bytes.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `stringData` is a write-only convenience: its entries move into `data`, base64-encoded,
/// overriding keys of the same name.
fn secret_string_data(secret: &mut Map<String, Value>) {
    let Some(Value::Object(strings)) = secret.remove("stringData") else {
        return;
    };
    let data = secret.entry("data").or_insert_with(|| json!({}));
    if data.is_null() {
        *data = json!({});
    }
    if let Some(data) = data.as_object_mut() {
        for (k, v) in strings {
            if let Some(text) = v.as_str() {
                data.insert(k, json!(base64(text.as_bytes())));
            }
        }
    }
}

const SECRET: &[Rule] = &[
    at("", Adjust(secret_string_data)),
    at("", Set("type", Str("Opaque"))),
];

/// For `Container` limits: the default limit comes from the max, the default request from the
/// default limit, then from the min.
fn limit_range_item(item: &mut Map<String, Value>) {
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let get = |item: &Map<String, Value>, k: &str| item.get(k).and_then(Value::as_object).cloned();
    let max = get(item, "max").unwrap_or_default();
    let min = get(item, "min").unwrap_or_default();
    let mut default = get(item, "default").unwrap_or_default();
    for (k, v) in max {
        default.entry(k).or_insert(v);
    }
    let mut request = get(item, "defaultRequest").unwrap_or_default();
    for (k, v) in default.iter().chain(min.iter()) {
        request.entry(k.clone()).or_insert(v.clone());
    }
    item.insert("default".into(), Value::Object(default));
    item.insert("defaultRequest".into(), Value::Object(request));
}

const LIMIT_RANGE: &[Rule] = &[at("spec.limits[]", Adjust(limit_range_item))];

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn rbac_subject_group(subject: &mut Map<String, Value>) {
    let kind = subject.get("kind").and_then(Value::as_str);
    if matches!(kind, Some("User" | "Group")) && is_unset(subject.get("apiGroup")) {
        subject.insert("apiGroup".into(), json!(RBAC_GROUP));
    }
}

const ROLE_BINDING: &[Rule] = &[
    at("roleRef", Set("apiGroup", Str(RBAC_GROUP))),
    at("subjects[]", Adjust(rbac_subject_group)),
];

fn network_policy_types(spec: &mut Map<String, Value>) {
    if spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
        return;
    }
    let mut types = vec![json!("Ingress")];
    if spec
        .get("egress")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty())
    {
        types.push(json!("Egress"));
    }
    spec.insert("policyTypes".into(), Value::Array(types));
}

const NETWORK_POLICY: &[Rule] = &[
    at("spec.ingress[].ports[]", Set("protocol", Str("TCP"))),
    at("spec.egress[].ports[]", Set("protocol", Str("TCP"))),
    at("spec", Adjust(network_policy_types)),
];

const STORAGE_CLASS: &[Rule] = &[
    at("", Set("reclaimPolicy", Str("Delete"))),
    at("", Set("volumeBindingMode", Str("Immediate"))),
];

/// An APIService's backend is reached on port 443 unless it names another.
const API_SERVICE: &[Rule] = &[at("spec.service", Set("port", Int(443)))];

const PRIORITY_CLASS: &[Rule] = &[at("", Set("preemptionPolicy", Str("PreemptLowerPriority")))];

fn hpa_metrics(spec: &mut Map<String, Value>) {
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(|m| m.is_empty())
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
}

fn hpa_scaling_rules(rules: &mut Map<String, Value>, window: i64, policies: Value) {
    if is_unset(rules.get("stabilizationWindowSeconds")) {
        rules.insert("stabilizationWindowSeconds".into(), json!(window));
    }
    if is_unset(rules.get("selectPolicy")) {
        rules.insert("selectPolicy".into(), json!("Max"));
    }
    if rules
        .get("policies")
        .and_then(Value::as_array)
        .is_none_or(|p| p.is_empty())
    {
        rules.insert("policies".into(), policies);
    }
}

fn hpa_behavior(behavior: &mut Map<String, Value>) {
    for (key, window, policies) in [
        (
            "scaleUp",
            0,
            json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]),
        ),
        (
            "scaleDown",
            300,
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
        ),
    ] {
        let rules = behavior.entry(key).or_insert_with(|| json!({}));
        if rules.is_null() {
            *rules = json!({});
        }
        if let Some(rules) = rules.as_object_mut() {
            hpa_scaling_rules(rules, window, policies);
        }
    }
}

const HORIZONTAL_POD_AUTOSCALER: &[Rule] = &[
    at("spec", Set("minReplicas", Int(1))),
    at("spec", Adjust(hpa_metrics)),
    at("spec.behavior", Adjust(hpa_behavior)),
];

const FLOW_SCHEMA: &[Rule] = &[at("spec", SetNonZero("matchingPrecedence", Int(1000)))];

/// A limited level's shares default only when absent: an explicit 0 is kept (v1).
const PRIORITY_LEVEL_CONFIGURATION: &[Rule] = &[
    at("spec.limited", Set("nominalConcurrencyShares", Int(30))),
    at("spec.limited", Set("lendablePercent", Int(0))),
    at(
        "spec.limited.limitResponse.queuing",
        SetNonZero("handSize", Int(8)),
    ),
    at(
        "spec.limited.limitResponse.queuing",
        SetNonZero("queues", Int(64)),
    ),
    at(
        "spec.limited.limitResponse.queuing",
        SetNonZero("queueLengthLimit", Int(50)),
    ),
    at("spec.exempt", Set("nominalConcurrencyShares", Int(0))),
    at("spec.exempt", Set("lendablePercent", Int(0))),
];

/// The defaults of each built-in type, keyed by API group and kind.
const TYPES: &[(&str, &str, &[Rule])] = &[
    ("", "Pod", POD),
    ("", "PodTemplate", &[at("template", Nested(POD_TEMPLATE))]),
    ("", "ReplicationController", REPLICATION_CONTROLLER),
    ("", "Service", SERVICE),
    ("", "Secret", SECRET),
    ("", "PersistentVolumeClaim", PVC),
    ("", "PersistentVolume", PERSISTENT_VOLUME),
    ("", "Endpoints", ENDPOINTS),
    ("", "Namespace", NAMESPACE),
    ("", "Node", NODE),
    ("", "LimitRange", LIMIT_RANGE),
    ("apps", "Deployment", DEPLOYMENT),
    ("apps", "ReplicaSet", REPLICA_SET),
    ("apps", "StatefulSet", STATEFUL_SET),
    ("apps", "DaemonSet", DAEMON_SET),
    ("batch", "Job", JOB),
    ("batch", "CronJob", CRON_JOB),
    ("discovery.k8s.io", "EndpointSlice", ENDPOINT_SLICE),
    ("rbac.authorization.k8s.io", "RoleBinding", ROLE_BINDING),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", ROLE_BINDING),
    ("networking.k8s.io", "NetworkPolicy", NETWORK_POLICY),
    ("storage.k8s.io", "StorageClass", STORAGE_CLASS),
    ("scheduling.k8s.io", "PriorityClass", PRIORITY_CLASS),
    ("apiregistration.k8s.io", "APIService", API_SERVICE),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema", FLOW_SCHEMA),
    (
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        PRIORITY_LEVEL_CONFIGURATION,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        HORIZONTAL_POD_AUTOSCALER,
    ),
];

/// `autoscaling/v1`'s HorizontalPodAutoscaler defaults only `minReplicas`; the CPU target it
/// lacks is filled in when it is converted to the storage version.
const HORIZONTAL_POD_AUTOSCALER_V1: &[Rule] = &[at("spec", Set("minReplicas", Int(1)))];

/// The defaults of kinds served in versions that default differently, keyed by group,
/// version and kind; they replace the kind's defaults in [`TYPES`] for that version.
const VERSIONS: &[(&str, &str, &str, &[Rule])] = &[(
    "autoscaling",
    "v1",
    "HorizontalPodAutoscaler",
    HORIZONTAL_POD_AUTOSCALER_V1,
)];

/// Fills in the defaults of `rt`'s type (a no-op for types without any).
pub fn apply(rt: &ResourceType, obj: &mut Value) {
    let version = VERSIONS
        .iter()
        .find(|(group, version, kind, _)| (*group, *version, *kind) == (&*rt.group, &*rt.version, &*rt.kind));
    if let Some((_, _, _, rules)) = version {
        run(rules, obj);
        return;
    }
    for (group, kind, rules) in TYPES {
        if *group == &*rt.group && *kind == &*rt.kind {
            run(rules, obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Registry;

    fn defaulted(group: &str, plural: &str, mut obj: Value) -> Value {
        let r = Registry::new();
        apply(r.lookup(group, group_version(group), plural).unwrap(), &mut obj);
        obj
    }

    fn group_version(group: &str) -> &'static str {
        match group {
            "autoscaling" => "v2",
            _ => "v1",
        }
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        assert_eq!(pull_policy("nginx"), "Always");
        assert_eq!(pull_policy("nginx:latest"), "Always");
        assert_eq!(pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(pull_policy("registry:5000/team/app"), "Always");
        assert_eq!(pull_policy("registry:5000/team/app:v2"), "IfNotPresent");
        assert_eq!(pull_policy("app@sha256:abcd"), "IfNotPresent");
        assert_eq!(pull_policy(""), "IfNotPresent");
    }

    #[test]
    fn pods_get_pod_spec_container_and_volume_defaults() {
        let pod = defaulted(
            "",
            "pods",
            json!({"metadata": {"name": "p"}, "spec": {
                "serviceAccountName": "robot",
                "containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": "1"}},
                    "readinessProbe": {"httpGet": {"port": 80}, "periodSeconds": 0}}],
                "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "x"}}]}}),
        );
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["securityContext"], json!({}));
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["serviceAccount"], "robot");
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["resources"]["requests"]["cpu"], "1");
        let probe = &c["readinessProbe"];
        assert_eq!(
            (probe["periodSeconds"].clone(), probe["timeoutSeconds"].clone()),
            (json!(10), json!(1))
        );
        assert_eq!(probe["httpGet"]["scheme"], "HTTP");
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["configMap"]["defaultMode"], 420);
    }

    #[test]
    fn explicit_values_are_kept() {
        let pod = defaulted(
            "",
            "pods",
            json!({"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "x", "imagePullPolicy": "Never"}]}}),
        );
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 0);
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Never");
    }

    #[test]
    fn deployments_get_strategy_and_template_defaults() {
        let d = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        );
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "Always");
        assert!(
            pod.get("enableServiceLinks").is_none(),
            "pod-only default stays out of templates"
        );
        let recreate = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"strategy": {"type": "Recreate"}}}),
        );
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn statefulsets_daemonsets_jobs_and_cronjobs() {
        let sts = defaulted(
            "apps",
            "statefulsets",
            json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]}}),
        );
        assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            sts["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}})
        );
        assert_eq!(
            sts["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["status"]["phase"],
            "Pending"
        );
        let ds = defaulted("apps", "daemonsets", json!({}));
        assert_eq!(
            ds["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"maxUnavailable": 1, "maxSurge": 0})
        );
        let job = defaulted(
            "batch",
            "jobs",
            json!({"spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {}}}}),
        );
        assert_eq!(
            (
                job["spec"]["completions"].clone(),
                job["spec"]["parallelism"].clone()
            ),
            (json!(1), json!(1))
        );
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert_eq!(job["spec"]["completionMode"], "NonIndexed");
        assert_eq!(job["spec"]["suspend"], false);
        assert_eq!(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(job["metadata"]["labels"], json!({"a": "b"}));
        let cj = defaulted(
            "batch",
            "cronjobs",
            json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}),
        );
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
    }

    #[test]
    fn services_get_type_ports_and_traffic_policies() {
        let svc = defaulted(
            "",
            "services",
            json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}],
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}}),
        );
        let spec = &svc["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert!(spec.get("sessionAffinityConfig").is_none());
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert!(spec.get("externalTrafficPolicy").is_none());
        assert_eq!(
            spec["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(spec["ports"][1]["targetPort"], "dns");
        let lb = defaulted(
            "",
            "services",
            json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP"}}),
        );
        assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(
            lb["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10800
        );
    }

    #[test]
    fn other_core_and_group_types() {
        let pvc = defaulted("", "persistentvolumeclaims", json!({"spec": {}}));
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"]["phase"], "Pending");
        let rc = defaulted(
            "",
            "replicationcontrollers",
            json!({"spec": {"template": {"metadata": {"labels": {"app": "x"}}}}}),
        );
        assert_eq!(rc["spec"]["selector"], json!({"app": "x"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        let ns = defaulted("", "namespaces", json!({"metadata": {"name": "team"}}));
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "team");
        assert_eq!(ns["status"]["phase"], "Active");
        let secret = defaulted("", "secrets", json!({}));
        assert_eq!(secret["type"], "Opaque");
        let secret = defaulted(
            "",
            "secrets",
            json!({"data": {"a": "eA==", "user": "old"}, "stringData": {"user": "admin", "k": "ab"}}),
        );
        assert_eq!(
            secret["data"],
            json!({"a": "eA==", "user": "YWRtaW4=", "k": "YWI="})
        );
        assert!(secret.get("stringData").is_none());
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"abc"), "YWJj");
        let rb = defaulted(
            "rbac.authorization.k8s.io",
            "rolebindings",
            json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
        );
        assert_eq!(rb["roleRef"]["apiGroup"], RBAC_GROUP);
        assert_eq!(rb["subjects"][0]["apiGroup"], RBAC_GROUP);
        assert!(rb["subjects"][1].get("apiGroup").is_none());
        let np = defaulted(
            "networking.k8s.io",
            "networkpolicies",
            json!({"spec": {"egress": [{}]}}),
        );
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        let cm = defaulted("", "configmaps", json!({"data": {"a": "b"}}));
        assert_eq!(cm, json!({"data": {"a": "b"}}));
    }

    #[test]
    fn defaulting_is_idempotent() {
        let once = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        );
        let twice = defaulted("apps", "deployments", once.clone());
        assert_eq!(once, twice);
    }
}
