//! Table printers for the built-in types: the columns `kubectl get` shows for each kind and the
//! cells of one object, as kube-apiserver 1.35's printers produce them. The server always emits
//! the `-o wide` columns too; they carry `priority: 1` and kubectl hides them unless asked.
//!
//! Each printer is data — its column list — plus one function from an object to its cells.
//! Ages are rendered on the server (`5m12s`), as upstream does.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::machinery::age::{human_duration, parse_time, Ctx};
use crate::machinery::selector::selector_string;

/// One column of a Table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

impl Column {
    /// The column as a `TableColumnDefinition`.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.ty,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority: 0,
        description,
    }
}

const fn wide(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority: 1,
        description,
    }
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.";
const CREATED_DOC: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

/// The `Name` column every printer starts with.
pub const NAME: Column = Column {
    name: "Name",
    ty: "string",
    format: "name",
    priority: 0,
    description: NAME_DOC,
};
const AGE: Column = col("Age", "string", CREATED_DOC);
/// The default table's second column, for types without a printer.
pub const CREATED_AT: Column = col("Created At", "date", CREATED_DOC);
const CONTAINERS: Column = wide("Containers", "string", "Names of each container in the template.");
const IMAGES: Column = wide(
    "Images",
    "string",
    "Images referenced by each container in the template.",
);
const SELECTOR: Column = wide(
    "Selector",
    "string",
    "A label query over the objects this one manages.",
);

/// A printer: the columns of one kind and a function from an object to its row cells.
pub struct Printer {
    group: &'static str,
    kind: &'static str,
    /// The column definitions.
    pub columns: &'static [Column],
    /// The cells of one object, one per column.
    pub cells: fn(&Value, &Ctx) -> Vec<Value>,
    /// The order a list's rows are printed in, where kube's list printer sorts them (FlowSchemas
    /// by matching precedence); the list's own order otherwise.
    pub order: Option<fn(&Value, &Value) -> std::cmp::Ordering>,
}

/// The printer of a kind, if it has one (types without use the Name / Created At table).
pub fn lookup(group: &str, kind: &str) -> Option<&'static Printer> {
    PRINTERS.iter().find(|p| p.group == group && p.kind == kind)
}

/// Row conditions: completed pods are marked, as upstream marks them.
pub fn conditions(obj: &Value) -> Option<Value> {
    if obj["kind"] != "Pod" {
        return None;
    }
    match obj["status"]["phase"].as_str() {
        Some("Succeeded") => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}]),
        ),
        Some("Failed") => Some(
            json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]),
        ),
        _ => None,
    }
}

fn at<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    v.pointer(pointer).unwrap_or(&Value::Null)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn len(v: &Value) -> i64 {
    let n = match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    };
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s
    }
}

fn name(obj: &Value) -> Value {
    at(obj, "/metadata/name").clone()
}

fn age(obj: &Value, ctx: &Ctx) -> Value {
    json!(ctx.since(at(obj, "/metadata/creationTimestamp")))
}

/// `k=v,k2=v2` of a label map, sorted by key; `<none>` when empty.
pub fn format_labels(map: &Value) -> String {
    let mut pairs: Vec<String> = map
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
        .unwrap_or_default();
    pairs.sort();
    or_none(pairs.join(","))
}

/// [`selector_string`], or `<none>` when it selects by nothing.
pub fn format_label_selector(selector: &Value) -> String {
    or_none(selector_string(selector))
}

fn containers_and_images(pod_spec: &Value) -> (Value, Value) {
    let containers = pod_spec["containers"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = containers.iter().map(|c| text(&c["name"])).collect();
    let images: Vec<String> = containers.iter().map(|c| text(&c["image"])).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

fn pod_cells(pod: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let phase = text(&status["phase"]);
    let mut reason = match text(&status["reason"]) {
        r if r.is_empty() => phase.clone(),
        r => r,
    };
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    if conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let init_specs = spec["initContainers"].as_array().cloned().unwrap_or_default();
    let restartable = |name: &Value| {
        init_specs
            .iter()
            .any(|c| &c["name"] == name && c["restartPolicy"] == "Always")
    };
    let mut total = len(&spec["containers"]);
    total += i64::try_from(
        init_specs
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count(),
    )
    .unwrap_or(0);
    let mut ready = 0;
    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last_restart: Option<i64> = None;
    let mut last_sidecar_restart: Option<i64> = None;
    let finished = |c: &Value| parse_time(at(c, "/lastState/terminated/finishedAt").as_str().unwrap_or(""));
    let later = |a: Option<i64>, b: Option<i64>| a.max(b);
    let init_statuses = status["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += int(&c["restartCount"]);
        last_restart = later(last_restart, finished(c));
        let sidecar = restartable(&c["name"]);
        if sidecar {
            sidecar_restarts += int(&c["restartCount"]);
            last_sidecar_restart = later(last_sidecar_restart, finished(c));
        }
        let terminated = &c["state"]["terminated"];
        let waiting_reason = text(&c["state"]["waiting"]["reason"]);
        if terminated.is_object() && int(&terminated["exitCode"]) == 0 {
            continue;
        }
        if sidecar && c["started"] == true {
            if c["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = if terminated.is_object() {
            match text(&terminated["reason"]) {
                r if r.is_empty() && int(&terminated["signal"]) != 0 => {
                    format!("Init:Signal:{}", int(&terminated["signal"]))
                }
                r if r.is_empty() => format!("Init:ExitCode:{}", int(&terminated["exitCode"])),
                r => format!("Init:{r}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }
    let initialized = conditions
        .iter()
        .any(|c| c["type"] == "Initialized" && c["status"] == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in status["containerStatuses"].as_array().into_iter().flatten().rev() {
            restarts += int(&c["restartCount"]);
            last_restart = later(last_restart, finished(c));
            let state = &c["state"];
            let waiting = text(&state["waiting"]["reason"]);
            let terminated = &state["terminated"];
            if !waiting.is_empty() {
                reason = waiting;
            } else if terminated.is_object() && !text(&terminated["reason"]).is_empty() {
                reason = text(&terminated["reason"]);
            } else if terminated.is_object() {
                reason = match int(&terminated["signal"]) {
                    0 => format!("ExitCode:{}", int(&terminated["exitCode"])),
                    s => format!("Signal:{s}"),
                };
            } else if c["ready"] == true && state["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    let deleting = !at(pod, "/metadata/deletionTimestamp").is_null();
    if deleting && status["reason"] == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }
    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration(ctx.now_ms.saturating_sub(t) / 1000)
        ),
        _ => restarts.to_string(),
    };
    let ip = or_none(text(&status["podIPs"][0]["ip"]));
    let gates = spec["readinessGates"].as_array().cloned().unwrap_or_default();
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .find(|c| c["type"] == g["conditionType"])
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        name(pod),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        age(pod, ctx),
        json!(ip),
        json!(or_none(text(&spec["nodeName"]))),
        json!(or_none(text(&status["nominatedNodeName"]))),
        json!(gates_cell),
    ]
}

fn int_or_string_or_na(v: &Value) -> Value {
    match v {
        Value::Null => json!("N/A"),
        other => json!(text(other)),
    }
}

fn pdb_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![
        name(o),
        int_or_string_or_na(&o["spec"]["minAvailable"]),
        int_or_string_or_na(&o["spec"]["maxUnavailable"]),
        json!(int(&o["status"]["disruptionsAllowed"])),
        age(o, ctx),
    ]
}

fn replica_cells(o: &Value, ctx: &Ctx, selector: String) -> Vec<Value> {
    let (names, images) = containers_and_images(&o["spec"]["template"]["spec"]);
    vec![
        name(o),
        json!(int(&o["spec"]["replicas"])),
        json!(int(&o["status"]["replicas"])),
        json!(int(&o["status"]["readyReplicas"])),
        age(o, ctx),
        names,
        images,
        json!(selector),
    ]
}

fn rc_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    replica_cells(o, ctx, format_labels(&o["spec"]["selector"]))
}

fn rs_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    replica_cells(o, ctx, format_label_selector(&o["spec"]["selector"]))
}

fn ds_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let s = &o["status"];
    let (names, images) = containers_and_images(&o["spec"]["template"]["spec"]);
    vec![
        name(o),
        json!(int(&s["desiredNumberScheduled"])),
        json!(int(&s["currentNumberScheduled"])),
        json!(int(&s["numberReady"])),
        json!(int(&s["updatedNumberScheduled"])),
        json!(int(&s["numberAvailable"])),
        json!(format_labels(&o["spec"]["template"]["spec"]["nodeSelector"])),
        age(o, ctx),
        names,
        images,
        json!(format_label_selector(&o["spec"]["selector"])),
    ]
}

fn has_condition(o: &Value, ty: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == ty)
        .is_some_and(|c| c["status"] == "True")
}

fn job_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let succeeded = int(&o["status"]["succeeded"]);
    let completions = match spec["completions"].as_i64() {
        Some(c) => format!("{succeeded}/{c}"),
        None => match spec["parallelism"].as_i64().unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = parse_time(o["status"]["startTime"].as_str().unwrap_or(""));
    let end = parse_time(o["status"]["completionTime"].as_str().unwrap_or(""));
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(ctx.now_ms.saturating_sub(s) / 1000),
        (Some(s), Some(e)) => human_duration(e.saturating_sub(s) / 1000),
    };
    let status = if has_condition(o, "Complete") {
        "Complete"
    } else if has_condition(o, "Failed") {
        "Failed"
    } else if !at(o, "/metadata/deletionTimestamp").is_null() {
        "Terminating"
    } else if has_condition(o, "Suspended") {
        "Suspended"
    } else if has_condition(o, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = containers_and_images(&spec["template"]["spec"]);
    vec![
        name(o),
        json!(status),
        json!(completions),
        json!(duration),
        age(o, ctx),
        names,
        images,
        json!(format_label_selector(&spec["selector"])),
    ]
}

fn bool_or_unset(v: &Value) -> String {
    match v.as_bool() {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => "<unset>".into(),
    }
}

fn cronjob_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let last = match &o["status"]["lastScheduleTime"] {
        Value::Null => "<none>".into(),
        t => ctx.since(t),
    };
    let job_spec = &spec["jobTemplate"]["spec"];
    let (names, images) = containers_and_images(&job_spec["template"]["spec"]);
    vec![
        name(o),
        json!(text(&spec["schedule"])),
        json!(or_none(text(&spec["timeZone"]))),
        json!(bool_or_unset(&spec["suspend"])),
        json!(len(&o["status"]["active"])),
        json!(last),
        age(o, ctx),
        names,
        images,
        json!(format_label_selector(&job_spec["selector"])),
    ]
}

fn load_balancer_ips(status: &Value) -> Vec<String> {
    let set: BTreeSet<String> = status["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i["ip"]
                .as_str()
                .filter(|s| !s.is_empty())
                .or_else(|| i["hostname"].as_str().filter(|s| !s.is_empty()))
                .map(str::to_string)
        })
        .collect();
    set.into_iter().collect()
}

fn service_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let ty = text(&spec["type"]);
    let external: Vec<String> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    let external_ip = match ty.as_str() {
        "ClusterIP" | "NodePort" => or_none(external.join(",")),
        "LoadBalancer" => {
            let mut all = load_balancer_ips(&o["status"]);
            all.extend(external);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(&spec["externalName"]),
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| match int(&p["nodePort"]) {
            0 => format!("{}/{}", int(&p["port"]), text(&p["protocol"])),
            n => format!("{}:{n}/{}", int(&p["port"]), text(&p["protocol"])),
        })
        .collect();
    vec![
        name(o),
        json!(ty),
        json!(or_none(text(&spec["clusterIPs"][0]))),
        json!(external_ip),
        json!(or_none(ports.join(","))),
        age(o, ctx),
        json!(format_labels(&spec["selector"])),
    ]
}

fn ingress_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let rules = o["spec"]["rules"].as_array().cloned().unwrap_or_default();
    let hosts: Vec<String> = rules
        .iter()
        .map(|r| text(&r["host"]))
        .filter(|h| !h.is_empty())
        .collect();
    let hosts = match hosts.len() {
        0 => "*".to_string(),
        n if n > 3 => format!("{} + {} more...", hosts[..3].join(","), rules.len() - 3),
        _ => hosts.join(","),
    };
    let ports = if len(&o["spec"]["tls"]) > 0 {
        "80, 443"
    } else {
        "80"
    };
    vec![
        name(o),
        json!(or_none(text(&o["spec"]["ingressClassName"]))),
        json!(hosts),
        json!(load_balancer_ips(&o["status"]).join(",")),
        json!(ports),
        age(o, ctx),
    ]
}

fn ingress_class_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let p = &o["spec"]["parameters"];
    let parameters = if p.is_object() {
        let kind = match p["apiGroup"].as_str() {
            Some(g) => format!("{}.{g}", text(&p["kind"])),
            None => text(&p["kind"]),
        };
        format!("{kind}/{}", text(&p["name"]))
    } else {
        "<none>".into()
    };
    vec![
        name(o),
        json!(text(&o["spec"]["controller"])),
        json!(parameters),
        age(o, ctx),
    ]
}

fn statefulset_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let (names, images) = containers_and_images(&o["spec"]["template"]["spec"]);
    vec![
        name(o),
        json!(format!(
            "{}/{}",
            int(&o["status"]["readyReplicas"]),
            int(&o["spec"]["replicas"])
        )),
        age(o, ctx),
        names,
        images,
    ]
}

fn more(list: &[String], count: usize, max: usize, more: bool) -> String {
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - max)
    } else {
        joined
    }
}

fn endpoints_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let subsets = o["subsets"].as_array().cloned().unwrap_or_default();
    let cell = if subsets.is_empty() {
        "<none>".to_string()
    } else {
        let (max, mut list, mut count, mut over) = (3, Vec::new(), 0, false);
        for ss in &subsets {
            let addresses = ss["addresses"].as_array().cloned().unwrap_or_default();
            let ports = ss["ports"].as_array().cloned().unwrap_or_default();
            let pairs: Vec<String> = if ports.is_empty() {
                addresses.iter().map(|a| text(&a["ip"])).collect()
            } else {
                ports
                    .iter()
                    .flat_map(|p| {
                        addresses.iter().map(move |a| {
                            let ip = text(&a["ip"]);
                            if ip.contains(':') {
                                format!("[{ip}]:{}", int(&p["port"]))
                            } else {
                                format!("{ip}:{}", int(&p["port"]))
                            }
                        })
                    })
                    .collect()
            };
            for pair in pairs {
                count += 1;
                if list.len() == max {
                    over = true;
                } else {
                    list.push(pair);
                }
            }
        }
        more(&list, count, max, over)
    };
    vec![name(o), json!(cell), age(o, ctx)]
}

fn unset_if_empty(list: &[String], count: usize, max: usize, over: bool) -> String {
    match more(list, count, max, over) {
        s if s.is_empty() => "<unset>".into(),
        s => s,
    }
}

fn endpoint_slice_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let max = 3;
    let ports: Vec<String> = o["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| match (&p["port"], &p["name"]) {
            (Value::Number(n), _) => n.to_string(),
            (_, Value::String(n)) => n.clone(),
            _ => "*".into(),
        })
        .collect();
    let addresses: Vec<String> = o["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| text(&a))
        .collect();
    let shown = |all: &[String]| unset_if_empty(&all[..all.len().min(max)], all.len(), max, all.len() > max);
    vec![
        name(o),
        json!(text(&o["addressType"])),
        json!(shown(&ports)),
        json!(shown(&addresses)),
        age(o, ctx),
    ]
}

fn node_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    }];
    if o["spec"]["unschedulable"] == true {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: BTreeSet<String> = BTreeSet::new();
    for (k, v) in o["metadata"]["labels"].as_object().into_iter().flatten() {
        if let Some(role) = k
            .strip_prefix("node-role.kubernetes.io/")
            .filter(|r| !r.is_empty())
        {
            roles.insert(role.to_string());
        } else if k == "kubernetes.io/role" && !text(v).is_empty() {
            roles.insert(text(v));
        }
    }
    let address = |ty: &str| {
        o["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == ty)
            .map_or("<none>".to_string(), |a| text(&a["address"]))
    };
    let info = &o["status"]["nodeInfo"];
    let unknown = |v: &Value| match text(v) {
        s if s.is_empty() => "<unknown>".to_string(),
        s => s,
    };
    vec![
        name(o),
        json!(status.join(",")),
        json!(or_none(roles.into_iter().collect::<Vec<_>>().join(","))),
        age(o, ctx),
        json!(text(&info["kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(unknown(&info["osImage"])),
        json!(unknown(&info["kernelVersion"])),
        json!(unknown(&info["containerRuntimeVersion"])),
    ]
}

/// Core and `events.k8s.io` Events share one printer; the second name is the events.k8s.io one.
fn event_field<'a>(o: &'a Value, core: &str, events: &str) -> &'a Value {
    match &o[core] {
        Value::Null => &o[events],
        v => v,
    }
}

fn event_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let first_ts = event_field(o, "firstTimestamp", "deprecatedFirstTimestamp");
    let first = if first_ts.is_null() {
        ctx.since(&o["eventTime"])
    } else {
        ctx.since(first_ts)
    };
    let last_ts = event_field(o, "lastTimestamp", "deprecatedLastTimestamp");
    let mut last = if last_ts.is_null() {
        first.clone()
    } else {
        ctx.since(last_ts)
    };
    let mut count = int(event_field(o, "count", "deprecatedCount"));
    if o["series"].is_object() {
        last = ctx.since(&o["series"]["lastObservedTime"]);
        count = int(&o["series"]["count"]);
    } else if count == 0 {
        count = 1;
    }
    let involved = event_field(o, "involvedObject", "regarding");
    let kind = text(&involved["kind"]).to_lowercase();
    let target = match text(&involved["name"]) {
        n if n.is_empty() => kind,
        n => format!("{kind}/{n}"),
    };
    let source = event_field(o, "source", "deprecatedSource");
    let component = match text(&source["component"]) {
        c if c.is_empty() => text(event_field(o, "reportingComponent", "reportingController")),
        c => c,
    };
    let host = match text(&source["host"]) {
        h if h.is_empty() => text(&o["reportingInstance"]),
        h => h,
    };
    let source = if host.is_empty() {
        component
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(text(&o["type"])),
        json!(text(&o["reason"])),
        json!(target),
        json!(text(&involved["fieldPath"])),
        json!(source),
        json!(text(event_field(o, "message", "note")).trim()),
        json!(first),
        json!(count),
        name(o),
    ]
}

fn namespace_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(text(&o["status"]["phase"])), age(o, ctx)]
}

fn secret_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![
        name(o),
        json!(text(&o["type"])),
        json!(len(&o["data"])),
        age(o, ctx),
    ]
}

fn service_account_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(len(&o["secrets"])), age(o, ctx)]
}

fn access_modes(modes: &Value) -> String {
    let modes: Vec<&str> = modes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| modes.contains(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn storage_class_of(o: &Value) -> String {
    match &o["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] {
        Value::String(s) => s.clone(),
        _ => text(&o["spec"]["storageClassName"]),
    }
}

fn terminating_or(o: &Value, phase: &Value) -> String {
    if at(o, "/metadata/deletionTimestamp").is_null() {
        text(phase)
    } else {
        "Terminating".into()
    }
}

fn unset(v: &Value) -> String {
    match text(v) {
        s if s.is_empty() => "<unset>".into(),
        s => s,
    }
}

fn pv_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let claim = if spec["claimRef"].is_object() {
        format!(
            "{}/{}",
            text(&spec["claimRef"]["namespace"]),
            text(&spec["claimRef"]["name"])
        )
    } else {
        String::new()
    };
    vec![
        name(o),
        json!(text(&spec["capacity"]["storage"])),
        json!(access_modes(&spec["accessModes"])),
        json!(text(&spec["persistentVolumeReclaimPolicy"])),
        json!(terminating_or(o, &o["status"]["phase"])),
        json!(claim),
        json!(storage_class_of(o)),
        json!(unset(&spec["volumeAttributesClassName"])),
        json!(text(&o["status"]["reason"])),
        age(o, ctx),
        json!(unset(&spec["volumeMode"])),
    ]
}

fn pvc_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let bound = !text(&spec["volumeName"]).is_empty();
    let (capacity, modes) = if bound {
        (
            text(&o["status"]["capacity"]["storage"]),
            access_modes(&o["status"]["accessModes"]),
        )
    } else {
        (String::new(), String::new())
    };
    vec![
        name(o),
        json!(terminating_or(o, &o["status"]["phase"])),
        json!(text(&spec["volumeName"])),
        json!(capacity),
        json!(modes),
        json!(storage_class_of(o)),
        json!(unset(&spec["volumeAttributesClassName"])),
        age(o, ctx),
        json!(unset(&spec["volumeMode"])),
    ]
}

fn deployment_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let (names, images) = containers_and_images(&o["spec"]["template"]["spec"]);
    vec![
        name(o),
        json!(format!(
            "{}/{}",
            int(&o["status"]["readyReplicas"]),
            int(&o["spec"]["replicas"])
        )),
        json!(int(&o["status"]["updatedReplicas"])),
        json!(int(&o["status"]["availableReplicas"])),
        age(o, ctx),
        names,
        images,
        json!(selector_string(&o["spec"]["selector"])),
    ]
}

fn hpa_metric(spec: &Value, status: Option<&Value>) -> String {
    let unknown = || "<unknown>".to_string();
    let current_of = |source: &str, field: &str| {
        status
            .map(|s| &s[source]["current"][field])
            .filter(|v| !v.is_null())
            .map_or_else(unknown, text)
    };
    match spec["type"].as_str().unwrap_or("") {
        ty @ ("External" | "Object") => {
            let source = if ty == "External" { "external" } else { "object" };
            let target = &spec[source]["target"];
            if target["averageValue"].is_null() {
                format!("{}/{}", current_of(source, "value"), text(&target["value"]))
            } else {
                format!(
                    "{}/{} (avg)",
                    current_of(source, "averageValue"),
                    text(&target["averageValue"])
                )
            }
        }
        "Pods" => format!(
            "{}/{}",
            current_of("pods", "averageValue"),
            text(&spec["pods"]["target"]["averageValue"])
        ),
        ty @ ("Resource" | "ContainerResource") => {
            let source = if ty == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let target = &spec[source]["target"];
            let resource = text(&spec[source]["name"]);
            if !target["averageValue"].is_null() {
                format!(
                    "{resource}: {}/{}",
                    current_of(source, "averageValue"),
                    text(&target["averageValue"])
                )
            } else {
                let current = status
                    .map(|s| &s[source]["current"]["averageUtilization"])
                    .and_then(Value::as_i64)
                    .map_or_else(unknown, |u| format!("{u}%"));
                let goal = target["averageUtilization"]
                    .as_i64()
                    .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                format!("{resource}: {current}/{goal}")
            }
        }
        _ => "<unknown type>".into(),
    }
}

fn hpa_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let statuses = o["status"]["currentMetrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let targets = if metrics.is_empty() {
        "<none>".to_string()
    } else {
        let max = 2;
        let list: Vec<String> = metrics
            .iter()
            .enumerate()
            .take(max)
            .map(|(i, m)| hpa_metric(m, statuses.get(i)))
            .collect();
        match metrics.len() {
            n if n > max => format!("{} + {} more...", list.join(", "), n - max),
            _ => list.join(", "),
        }
    };
    let min = match &spec["minReplicas"] {
        Value::Null => "<unset>".to_string(),
        v => text(v),
    };
    vec![
        name(o),
        json!(format!(
            "{}/{}",
            text(&spec["scaleTargetRef"]["kind"]),
            text(&spec["scaleTargetRef"]["name"])
        )),
        json!(targets),
        json!(min),
        json!(int(&spec["maxReplicas"])),
        json!(int(&o["status"]["currentReplicas"])),
        age(o, ctx),
    ]
}

fn config_map_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![
        name(o),
        json!(len(&o["data"]) + len(&o["binaryData"])),
        age(o, ctx),
    ]
}

fn network_policy_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![
        name(o),
        json!(format_label_selector(&o["spec"]["podSelector"])),
        age(o, ctx),
    ]
}

fn role_binding_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in o["subjects"].as_array().into_iter().flatten() {
        match s["kind"].as_str() {
            Some("User") => users.push(text(&s["name"])),
            Some("Group") => groups.push(text(&s["name"])),
            Some("ServiceAccount") => match text(&s["namespace"]) {
                ns if ns.is_empty() => sas.push(text(&s["name"])),
                ns => sas.push(format!("{ns}/{}", text(&s["name"]))),
            },
            _ => {}
        }
    }
    vec![
        name(o),
        json!(format!(
            "{}/{}",
            text(&o["roleRef"]["kind"]),
            text(&o["roleRef"]["name"])
        )),
        age(o, ctx),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(sas.join(", ")),
    ]
}

fn lease_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(text(&o["spec"]["holderIdentity"])), age(o, ctx)]
}

fn storage_class_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let annotations = &o["metadata"]["annotations"];
    let is_default = annotations["storageclass.kubernetes.io/is-default-class"] == "true"
        || annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true";
    let mut shown = text(&o["metadata"]["name"]);
    if is_default {
        shown.push_str(" (default)");
    }
    let or = |v: &Value, d: &str| match text(v) {
        s if s.is_empty() => d.to_string(),
        s => s,
    };
    vec![
        json!(shown),
        json!(text(&o["provisioner"])),
        json!(or(&o["reclaimPolicy"], "Delete")),
        json!(or(&o["volumeBindingMode"], "Immediate")),
        json!(o["allowVolumeExpansion"].as_bool().unwrap_or(false)),
        age(o, ctx),
    ]
}

fn controller_revision_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let controller = o["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == true)
        .map_or("<none>".to_string(), |r| {
            let api_version = text(&r["apiVersion"]);
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let kind = text(&r["kind"]);
            let group_kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            format!("{}/{}", group_kind.to_lowercase(), text(&r["name"]))
        });
    vec![
        name(o),
        json!(controller),
        json!(int(&o["revision"])),
        age(o, ctx),
    ]
}

fn resource_quota_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let hard = o["status"]["hard"].as_object().cloned().unwrap_or_default();
    let used = &o["status"]["used"];
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    let mut names: Vec<&String> = hard.keys().collect();
    names.sort();
    for resource in names {
        let used_q = match &used[resource.as_str()] {
            Value::Null => "0".to_string(),
            v => text(v),
        };
        let entry = format!("{resource}: {used_q}/{}", text(&hard[resource]));
        if resource.split('.').next() == Some("limits") && resource.contains('.') {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    vec![
        name(o),
        json!(requests.join(", ")),
        json!(limits.join(", ")),
        age(o, ctx),
    ]
}

/// The request's state as kube prints it: Denied, Approved or Pending, then Failed and
/// Issued when they apply.
fn csr_condition(o: &Value) -> String {
    let has = |t: &str| {
        o["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == t)
    };
    let mut state = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        state.push_str(",Failed");
    }
    if o["status"]["certificate"].as_str().is_some_and(|c| !c.is_empty()) {
        state.push_str(",Issued");
    }
    state
}

fn csr_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let duration = match spec["expirationSeconds"].as_i64() {
        Some(secs) => human_duration(secs),
        None => "<none>".into(),
    };
    vec![
        name(o),
        age(o, ctx),
        json!(or_none(text(&spec["signerName"]))),
        json!(text(&spec["username"])),
        json!(duration),
        json!(csr_condition(o)),
    ]
}

fn runtime_class_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(text(&o["handler"])), age(o, ctx)]
}

fn ip_address_cells(o: &Value, _ctx: &Ctx) -> Vec<Value> {
    let r = &o["spec"]["parentRef"];
    let shown = if r.is_object() {
        let resource = match text(&r["group"]) {
            g if g.is_empty() => text(&r["resource"]),
            g => format!("{}.{g}", text(&r["resource"])),
        };
        format!("{resource}/{}/{}", text(&r["namespace"]), text(&r["name"]))
    } else {
        "<none>".into()
    };
    vec![name(o), json!(shown)]
}

fn service_cidr_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let cidrs: Vec<String> = o["spec"]["cidrs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    vec![name(o), json!(or_none(cidrs.join(","))), age(o, ctx)]
}

fn pod_template_cells(o: &Value, _ctx: &Ctx) -> Vec<Value> {
    let (containers, images) = containers_and_images(&o["template"]["spec"]);
    vec![
        name(o),
        containers,
        images,
        json!(format_labels(&o["template"]["metadata"]["labels"])),
    ]
}

fn webhook_configuration_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(len(&o["webhooks"])), age(o, ctx)]
}

fn admission_policy_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let kind = &o["spec"]["paramKind"];
    let param_kind = if kind.is_object() {
        format!("{}/{}", text(&kind["apiVersion"]), text(&kind["kind"]))
    } else {
        "<unset>".into()
    };
    vec![
        name(o),
        json!(len(&o["spec"]["validations"])),
        json!(param_kind),
        age(o, ctx),
    ]
}

fn admission_policy_binding_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let r = &o["spec"]["paramRef"];
    let param = match (text(&r["name"]), text(&r["namespace"])) {
        _ if !r.is_object() => "<unset>".to_string(),
        (n, ns) if !n.is_empty() && !ns.is_empty() => format!("{ns}/{n}"),
        // Whether the param is cluster-scoped is not known here, as kube prints it.
        (n, _) if !n.is_empty() => format!("*/{n}"),
        _ if r["selector"].is_object() => format_label_selector(&r["selector"]),
        _ => "<unset>".to_string(),
    };
    vec![
        name(o),
        json!(text(&o["spec"]["policyName"])),
        json!(param),
        age(o, ctx),
    ]
}

fn priority_class_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![
        name(o),
        json!(int(&o["value"])),
        json!(o["globalDefault"].as_bool().unwrap_or(false)),
        age(o, ctx),
        json!(text(&o["preemptionPolicy"])),
    ]
}

/// An APIService: `Local` or the backend Service's `namespace/name`, and its `Available`
/// condition (`True`, or the status with its reason: `False (MissingEndpoints)`).
fn api_service_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let service = &o["spec"]["service"];
    let service = if service.is_object() {
        format!("{}/{}", text(&service["namespace"]), text(&service["name"]))
    } else {
        "Local".to_string()
    };
    let available = o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
        .map_or_else(
            || "Unknown".to_string(),
            |c| {
                let (status, reason) = (text(&c["status"]), text(&c["reason"]));
                if status == "True" || reason.is_empty() {
                    status
                } else {
                    format!("{status} ({reason})")
                }
            },
        );
    vec![name(o), json!(service), json!(available), age(o, ctx)]
}

fn scale_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![
        name(o),
        json!(int(&o["spec"]["replicas"])),
        json!(int(&o["status"]["replicas"])),
        age(o, ctx),
    ]
}

const WEBHOOK_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Webhooks",
        "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
];

const POD_COLUMNS: &[Column] = &[
    NAME,
    col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    col("Status", "string", "The aggregate status of the containers in this pod."),
    col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    AGE,
    wide("IP", "string", "IP address allocated to the pod."),
    wide("Node", "string", "NodeName is the name of the node the pod is scheduled on."),
    wide("Nominated Node", "string", "The node the pod is nominated to run on after preemption."),
    wide("Readiness Gates", "string", "The readiness gates of the pod and how many are met."),
];

const REPLICA_COLUMNS: &[Column] = &[
    NAME,
    col("Desired", "integer", "Number of desired replicas."),
    col("Current", "integer", "Number of replicas that exist."),
    col("Ready", "integer", "Number of ready replicas."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const EVENT_COLUMNS: &[Column] = &[
    col(
        "Last Seen",
        "string",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    col("Type", "string", "Type of this event (Normal, Warning)."),
    col(
        "Reason",
        "string",
        "The reason for the transition into the object's current status.",
    ),
    col("Object", "string", "The object that this event is about."),
    wide(
        "Subobject",
        "string",
        "The field of the object the event is about.",
    ),
    wide("Source", "string", "The component reporting this event."),
    col(
        "Message",
        "string",
        "A human-readable description of the status of this operation.",
    ),
    wide(
        "First Seen",
        "string",
        "The time at which the event was first recorded.",
    ),
    wide("Count", "string", "The number of times this event has occurred."),
    Column {
        name: "Name",
        ty: "string",
        format: "name",
        priority: 1,
        description: NAME_DOC,
    },
];

const ROLE_BINDING_COLUMNS: &[Column] = &[
    NAME,
    col("Role", "string", "The role referenced by the binding."),
    AGE,
    wide("Users", "string", "Users in the binding."),
    wide("Groups", "string", "Groups in the binding."),
    wide("ServiceAccounts", "string", "ServiceAccounts in the binding."),
];

fn csi_node_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(len(&o["spec"]["drivers"])), age(o, ctx)]
}

fn csi_driver_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let flag = |field: &str, default: bool| json!(spec[field].as_bool().unwrap_or(default));
    let modes: Vec<String> = spec["volumeLifecycleModes"]
        .as_array()
        .map(|m| m.iter().map(text).collect())
        .unwrap_or_default();
    let token_requests = match spec["tokenRequests"].as_array() {
        Some(requests) => requests
            .iter()
            .map(|t| text(&t["audience"]))
            .collect::<Vec<_>>()
            .join(","),
        None => "<unset>".into(),
    };
    vec![
        name(o),
        flag("attachRequired", true),
        flag("podInfoOnMount", false),
        flag("storageCapacity", false),
        json!(token_requests),
        flag("requiresRepublish", false),
        json!(or_none(modes.join(","))),
        age(o, ctx),
    ]
}

fn csi_storage_capacity_cells(o: &Value, _ctx: &Ctx) -> Vec<Value> {
    let capacity = match text(&o["capacity"]) {
        c if c.is_empty() => "<unset>".to_string(),
        c => c,
    };
    vec![name(o), json!(text(&o["storageClassName"])), json!(capacity)]
}

fn volume_attachment_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    vec![
        name(o),
        json!(text(&spec["attacher"])),
        json!(text(&spec["source"]["persistentVolumeName"])),
        json!(text(&spec["nodeName"])),
        json!(o["status"]["attached"].as_bool().unwrap_or(false)),
        age(o, ctx),
    ]
}

fn driver_name_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), json!(text(&o["driverName"])), age(o, ctx)]
}

fn flow_schema_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    let distinguisher = match text(&spec["distinguisherMethod"]["type"]) {
        t if spec["distinguisherMethod"].is_object() => t,
        _ => "<none>".into(),
    };
    let missing = o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"))
        .map_or_else(|| "?".to_string(), |c| text(&c["status"]));
    vec![
        name(o),
        json!(text(&spec["priorityLevelConfiguration"]["name"])),
        json!(int(&spec["matchingPrecedence"])),
        json!(distinguisher),
        age(o, ctx),
        json!(missing),
    ]
}

fn priority_level_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let limited = &o["spec"]["limited"];
    let queuing = &limited["limitResponse"]["queuing"];
    let number = |v: &Value, present: bool| if present { json!(int(v)) } else { json!("<none>") };
    vec![
        name(o),
        json!(text(&o["spec"]["type"])),
        number(&limited["nominalConcurrencyShares"], limited.is_object()),
        number(&queuing["queues"], queuing.is_object()),
        number(&queuing["handSize"], queuing.is_object()),
        number(&queuing["queueLengthLimit"], queuing.is_object()),
        age(o, ctx),
    ]
}

fn name_age_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    vec![name(o), age(o, ctx)]
}

/// A ResourceClaim's state as kube sums it up: `deleted`, `pending`, `allocated`, `reserved`.
fn resource_claim_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let deleting = !o["metadata"]["deletionTimestamp"].is_null();
    let mut states = Vec::new();
    if deleting {
        states.push("deleted");
    }
    if o["status"]["allocation"].is_null() {
        if !deleting {
            states.push("pending");
        }
    } else {
        states.push("allocated");
        if len(&o["status"]["reservedFor"]) > 0 {
            states.push("reserved");
        }
    }
    vec![name(o), json!(states.join(",")), age(o, ctx)]
}

fn resource_slice_cells(o: &Value, ctx: &Ctx) -> Vec<Value> {
    let spec = &o["spec"];
    vec![
        name(o),
        json!(text(&spec["nodeName"])),
        json!(text(&spec["driver"])),
        json!(text(&spec["pool"]["name"])),
        age(o, ctx),
    ]
}

const fn printer(
    group: &'static str,
    kind: &'static str,
    columns: &'static [Column],
    cells: fn(&Value, &Ctx) -> Vec<Value>,
) -> Printer {
    Printer {
        group,
        kind,
        columns,
        cells,
        order: None,
    }
}

impl Printer {
    /// This printer, with its rows sorted by `order`.
    const fn sorted(mut self, order: fn(&Value, &Value) -> std::cmp::Ordering) -> Printer {
        self.order = Some(order);
        self
    }
}

/// kube's `FlowSchemaSequence`: by matching precedence, then by name.
fn by_precedence(a: &Value, b: &Value) -> std::cmp::Ordering {
    let precedence = |o: &Value| int(&o["spec"]["matchingPrecedence"]);
    precedence(a)
        .cmp(&precedence(b))
        .then_with(|| text(&a["metadata"]["name"]).cmp(&text(&b["metadata"]["name"])))
}

/// Every built-in printer.
static PRINTERS: &[Printer] = &[
    printer("", "Pod", POD_COLUMNS, pod_cells),
    printer(
        "policy",
        "PodDisruptionBudget",
        &[
            NAME,
            col("Min Available", "string", "The minimum number of pods that must be available."),
            col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
            col(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            AGE,
        ],
        pdb_cells,
    ),
    printer("", "ReplicationController", REPLICA_COLUMNS, rc_cells),
    printer("apps", "ReplicaSet", REPLICA_COLUMNS, rs_cells),
    printer(
        "apps",
        "DaemonSet",
        &[
            NAME,
            col("Desired", "integer", "The number of nodes that should be running the daemon pod."),
            col("Current", "integer", "The number of nodes running at least one daemon pod."),
            col("Ready", "integer", "The number of nodes with a ready daemon pod."),
            col("Up-to-date", "integer", "The number of nodes running the updated daemon pod."),
            col("Available", "integer", "The number of nodes with an available daemon pod."),
            col("Node Selector", "string", "The node selector of the pod template."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        ds_cells,
    ),
    printer(
        "batch",
        "Job",
        &[
            NAME,
            col("Status", "string", "Status of the job."),
            col("Completions", "string", "The number of succeeded pods out of the completions wanted."),
            col("Duration", "string", "Time required to complete the job."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        job_cells,
    ),
    printer(
        "batch",
        "CronJob",
        &[
            NAME,
            col("Schedule", "string", "The schedule in Cron format."),
            col("Timezone", "string", "The time zone of the schedule."),
            col("Suspend", "boolean", "Whether subsequent executions are suspended."),
            col("Active", "integer", "The number of running jobs."),
            col("Last Schedule", "string", "When the job was last scheduled."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        cronjob_cells,
    ),
    printer(
        "",
        "Service",
        &[
            NAME,
            col("Type", "string", "How the Service is exposed."),
            col("Cluster-IP", "string", "The IP address of the service inside the cluster."),
            col("External-IP", "string", "The addresses the service is reachable at from outside."),
            col("Port(s)", "string", "The ports the service exposes."),
            AGE,
            wide("Selector", "string", "The labels of the pods the service routes to."),
        ],
        service_cells,
    ),
    printer(
        "networking.k8s.io",
        "Ingress",
        &[
            NAME,
            col(
                "Class",
                "string",
                "The name of the IngressClass resource that should be used for additional configuration",
            ),
            col(
                "Hosts",
                "string",
                "Hosts that incoming requests are matched against before the ingress rule",
            ),
            col(
                "Address",
                "string",
                "Address is a list containing ingress points for the load-balancer",
            ),
            col("Ports", "string", "Ports of TLS configurations that open"),
            AGE,
        ],
        ingress_cells,
    ),
    printer(
        "networking.k8s.io",
        "IngressClass",
        &[
            NAME,
            col("Controller", "string", "Controller that is responsible for handling this class"),
            col("Parameters", "string", "A reference to a resource with additional parameters"),
            AGE,
        ],
        ingress_class_cells,
    ),
    printer(
        "apps",
        "StatefulSet",
        &[
            NAME,
            col("Ready", "string", "Number of the pod with ready state"),
            AGE,
            CONTAINERS,
            IMAGES,
        ],
        statefulset_cells,
    ),
    printer(
        "",
        "Endpoints",
        &[
            NAME,
            col("Endpoints", "string", "The addresses and ports of the endpoints."),
            AGE,
        ],
        endpoints_cells,
    ),
    printer(
        "",
        "Node",
        &[
            NAME,
            col("Status", "string", "The status of the node"),
            col("Roles", "string", "The roles of the node"),
            AGE,
            col("Version", "string", "Kubelet Version reported by the node."),
            wide("Internal-IP", "string", "The node's internal IP address."),
            wide("External-IP", "string", "The node's external IP address."),
            wide("OS-Image", "string", "OS Image reported by the node."),
            wide("Kernel-Version", "string", "Kernel Version reported by the node."),
            wide("Container-Runtime", "string", "ContainerRuntime Version reported by the node."),
        ],
        node_cells,
    ),
    printer("", "Event", EVENT_COLUMNS, event_cells),
    printer("events.k8s.io", "Event", EVENT_COLUMNS, event_cells),
    printer(
        "",
        "Namespace",
        &[NAME, col("Status", "string", "The status of the namespace"), AGE],
        namespace_cells,
    ),
    printer(
        "",
        "Secret",
        &[
            NAME,
            col("Type", "string", "Used to facilitate programmatic handling of secret data."),
            col("Data", "string", "The number of keys in the secret."),
            AGE,
        ],
        secret_cells,
    ),
    printer(
        "",
        "ServiceAccount",
        &[
            NAME,
            col("Secrets", "string", "The number of secrets of the service account."),
            AGE,
        ],
        service_account_cells,
    ),
    printer(
        "",
        "PersistentVolume",
        &[
            NAME,
            col("Capacity", "string", "The storage capacity of the volume."),
            col("Access Modes", "string", "The ways the volume can be mounted."),
            col("Reclaim Policy", "string", "What happens to the volume when released from its claim."),
            col("Status", "string", "The phase of the volume."),
            col("Claim", "string", "The claim bound to the volume."),
            col("StorageClass", "string", "StorageClass of the pv"),
            col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
            col("Reason", "string", "Why the volume is in this phase."),
            AGE,
            wide("VolumeMode", "string", "Whether the volume is a filesystem or a raw block device."),
        ],
        pv_cells,
    ),
    printer(
        "",
        "PersistentVolumeClaim",
        &[
            NAME,
            col("Status", "string", "The phase of the claim."),
            col("Volume", "string", "The volume bound to the claim."),
            col("Capacity", "string", "The capacity of the bound volume."),
            col("Access Modes", "string", "The ways the bound volume can be mounted."),
            col("StorageClass", "string", "StorageClass of the pvc"),
            col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
            AGE,
            wide("VolumeMode", "string", "Whether the volume is a filesystem or a raw block device."),
        ],
        pvc_cells,
    ),
    printer(
        "apps",
        "Deployment",
        &[
            NAME,
            col("Ready", "string", "Number of the pod with ready state"),
            col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            AGE,
            CONTAINERS,
            IMAGES,
            SELECTOR,
        ],
        deployment_cells,
    ),
    printer(
        "autoscaling",
        "HorizontalPodAutoscaler",
        &[
            NAME,
            col("Reference", "string", "The scaled resource."),
            col("Targets", "string", "The current and target metric values."),
            col("MinPods", "string", "The lower limit of replicas."),
            col("MaxPods", "string", "The upper limit of replicas."),
            col("Replicas", "string", "The current number of replicas."),
            AGE,
        ],
        hpa_cells,
    ),
    printer(
        "",
        "ConfigMap",
        &[NAME, col("Data", "string", "The number of keys in the config map."), AGE],
        config_map_cells,
    ),
    printer(
        "networking.k8s.io",
        "NetworkPolicy",
        &[
            NAME,
            col("Pod-Selector", "string", "The pods the policy applies to."),
            AGE,
        ],
        network_policy_cells,
    ),
    printer(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        ROLE_BINDING_COLUMNS,
        role_binding_cells,
    ),
    printer(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        ROLE_BINDING_COLUMNS,
        role_binding_cells,
    ),
    printer(
        "coordination.k8s.io",
        "Lease",
        &[
            NAME,
            col("Holder", "string", "The identity of the holder of the lease."),
            AGE,
        ],
        lease_cells,
    ),
    printer(
        "storage.k8s.io",
        "StorageClass",
        &[
            NAME,
            col("Provisioner", "string", "The volume plugin that provisions volumes of the class."),
            col("ReclaimPolicy", "string", "What happens to volumes of the class when released."),
            col("VolumeBindingMode", "string", "When volumes of the class are bound."),
            col("AllowVolumeExpansion", "string", "Whether volumes of the class can be expanded."),
            AGE,
        ],
        storage_class_cells,
    ),
    printer(
        "apps",
        "ControllerRevision",
        &[
            NAME,
            col("Controller", "string", "Controller of the object"),
            col("Revision", "string", "The revision number of the state."),
            AGE,
        ],
        controller_revision_cells,
    ),
    printer(
        "",
        "ResourceQuota",
        &[
            NAME,
            col(
                "Request",
                "string",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            col(
                "Limit",
                "string",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
            AGE,
        ],
        resource_quota_cells,
    ),
    printer(
        "certificates.k8s.io",
        "CertificateSigningRequest",
        &[
            NAME,
            AGE,
            col("SignerName", "string", "The requested signer of the certificate."),
            col("Requestor", "string", "The user that created the request."),
            col("RequestedDuration", "string", "The requested duration of validity of the certificate."),
            col("Condition", "string", "Whether the request is approved or denied, and issued."),
        ],
        csr_cells,
    ),
    printer(
        "node.k8s.io",
        "RuntimeClass",
        &[
            NAME,
            col("Handler", "string", "The underlying runtime and configuration that handles pods of the class."),
            AGE,
        ],
        runtime_class_cells,
    ),
    printer(
        "networking.k8s.io",
        "IPAddress",
        &[NAME, col("ParentRef", "string", "The object the address is allocated to.")],
        ip_address_cells,
    ),
    printer(
        "networking.k8s.io",
        "ServiceCIDR",
        &[
            NAME,
            col("CIDRs", "string", "The IP ranges of the ServiceCIDR."),
            AGE,
        ],
        service_cidr_cells,
    ),
    printer(
        "",
        "PodTemplate",
        &[
            NAME,
            col("Containers", "string", "Names of each container in the template."),
            col("Images", "string", "Images referenced by each container in the template."),
            col("Pod Labels", "string", "The labels of the pod template."),
        ],
        pod_template_cells,
    ),
    printer(
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        WEBHOOK_COLUMNS,
        webhook_configuration_cells,
    ),
    printer(
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        WEBHOOK_COLUMNS,
        webhook_configuration_cells,
    ),
    printer(
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        &[
            NAME,
            col("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration"),
            col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
            AGE,
        ],
        admission_policy_cells,
    ),
    printer(
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
        &[
            NAME,
            col("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
            col("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
            AGE,
        ],
        admission_policy_binding_cells,
    ),
    printer(
        "scheduling.k8s.io",
        "PriorityClass",
        &[
            NAME,
            col("Value", "integer", "The priority of pods of the class."),
            col("Global-Default", "boolean", "Whether the class is the default for pods without one."),
            AGE,
            col("PreemptionPolicy", "string", "Whether pods of the class may preempt others."),
        ],
        priority_class_cells,
    ),
    printer(
        "apiregistration.k8s.io",
        "APIService",
        &[
            NAME,
            col("Service", "string", "The reference to the service that hosts this API endpoint."),
            col("Available", "string", "Whether this service is available."),
            AGE,
        ],
        api_service_cells,
    ),
    printer(
        "discovery.k8s.io",
        "EndpointSlice",
        &[
            NAME,
            col("AddressType", "string", "The type of address carried by the slice."),
            col("Ports", "string", "The ports of the slice."),
            col("Endpoints", "string", "The endpoints of the slice."),
            AGE,
        ],
        endpoint_slice_cells,
    ),
    printer(
        "autoscaling",
        "Scale",
        &[
            Column {
                name: "Name",
                ty: "string",
                format: "",
                priority: 0,
                description: NAME_DOC,
            },
            col("Desired", "integer", "The desired number of replicas."),
            col("Available", "integer", "The actual number of replicas."),
            AGE,
        ],
        scale_cells,
    ),
    printer(
        "storage.k8s.io",
        "CSINode",
        &[
            NAME,
            col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
            AGE,
        ],
        csi_node_cells,
    ),
    printer(
        "storage.k8s.io",
        "CSIDriver",
        &[
            NAME,
            col("AttachRequired", "boolean", "Whether the driver needs an attach operation."),
            col("PodInfoOnMount", "boolean", "Whether the driver gets pod information on mount."),
            col("StorageCapacity", "boolean", "Whether the driver reports storage capacity."),
            col("TokenRequests", "string", "The audiences of the service account tokens the driver gets."),
            col("RequiresRepublish", "boolean", "Whether the driver wants NodePublishVolume called periodically."),
            col("Modes", "string", "The volume lifecycle modes the driver supports."),
            AGE,
        ],
        csi_driver_cells,
    ),
    printer(
        "storage.k8s.io",
        "CSIStorageCapacity",
        &[
            NAME,
            col("StorageClassName", "string", "The name of the StorageClass the capacity applies to."),
            col("Capacity", "string", "The capacity reported by the driver."),
        ],
        csi_storage_capacity_cells,
    ),
    printer(
        "storage.k8s.io",
        "VolumeAttachment",
        &[
            NAME,
            Column {
                name: "Attacher",
                ty: "string",
                format: "name",
                priority: 0,
                description: "Attacher indicates the name of the volume driver that MUST handle this request.",
            },
            col("PV", "string", "The name of the persistent volume to attach."),
            col("Node", "string", "The node that the volume should be attached to."),
            col("Attached", "boolean", "Indicates the volume is successfully attached."),
            AGE,
        ],
        volume_attachment_cells,
    ),
    printer(
        "storage.k8s.io",
        "VolumeAttributesClass",
        &[
            NAME,
            col("DriverName", "string", "The name of the CSI driver of the class."),
            AGE,
        ],
        driver_name_cells,
    ),
    printer(
        "flowcontrol.apiserver.k8s.io",
        "FlowSchema",
        &[
            NAME,
            col("PriorityLevel", "string", "The name of the priority level configuration."),
            col("MatchingPrecedence", "string", "The precedence of the flow schema among those that match."),
            col("DistinguisherMethod", "string", "How requests are split into flows."),
            AGE,
            col("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration"),
        ],
        flow_schema_cells,
    )
    .sorted(by_precedence),
    printer(
        "flowcontrol.apiserver.k8s.io",
        "PriorityLevelConfiguration",
        &[
            NAME,
            col("Type", "string", "Whether the priority level is exempt or limited."),
            col("NominalConcurrencyShares", "string", "The share of the server's concurrency the level gets."),
            col("Queues", "string", "The number of queues of the level."),
            col("HandSize", "string", "The number of queues a flow is shuffle-sharded to."),
            col("QueueLengthLimit", "string", "The most requests waiting in one queue."),
            AGE,
        ],
        priority_level_cells,
    ),
    printer("resource.k8s.io", "DeviceClass", &[NAME, AGE], name_age_cells),
    printer(
        "resource.k8s.io",
        "ResourceClaim",
        &[
            NAME,
            col("State", "string", "A summary of the current state (allocated, pending, reserved, etc.)."),
            AGE,
        ],
        resource_claim_cells,
    ),
    printer("resource.k8s.io", "ResourceClaimTemplate", &[NAME, AGE], name_age_cells),
    printer(
        "resource.k8s.io",
        "ResourceSlice",
        &[
            NAME,
            col("Node", "string", "The node the devices of the slice are on."),
            col("Driver", "string", "The DRA driver that publishes the slice."),
            col("Pool", "string", "The name of the pool the slice belongs to."),
            AGE,
        ],
        resource_slice_cells,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2025-06-01T12:00:00Z";

    fn ctx() -> Ctx {
        Ctx {
            now_ms: parse_time(NOW).unwrap(),
        }
    }

    fn cells(group: &str, kind: &str, obj: Value) -> Vec<Value> {
        let p = lookup(group, kind).unwrap();
        let cells = (p.cells)(&obj, &ctx());
        assert_eq!(cells.len(), p.columns.len(), "{kind}: one cell per column");
        cells
    }

    #[test]
    fn selectors_format_sorted() {
        let sel = json!({"matchLabels": {"tier": "web", "app": "x"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}, {"key": "legacy", "operator": "DoesNotExist"}]});
        assert_eq!(selector_string(&sel), "app=x,env in (dev,prod),!legacy,tier=web");
        assert_eq!(format_label_selector(&json!({})), "<none>");
        assert_eq!(format_labels(&json!({"b": "2", "a": "1"})), "a=1,b=2");
        assert_eq!(format_labels(&Value::Null), "<none>");
    }

    /// The storage, flow-control and dynamic-resource printers, cell for cell as kube's.
    #[test]
    fn storage_flowcontrol_and_resource_rows() {
        let created = "2025-06-01T11:59:00Z";
        assert_eq!(
            cells(
                "storage.k8s.io",
                "CSIDriver",
                json!({"metadata": {"name": "d", "creationTimestamp": created},
                    "spec": {"tokenRequests": [{"audience": "a"}, {"audience": "b"}], "volumeLifecycleModes": ["Persistent", "Ephemeral"]}}),
            ),
            vec![
                json!("d"),
                json!(true),
                json!(false),
                json!(false),
                json!("a,b"),
                json!(false),
                json!("Persistent,Ephemeral"),
                json!("60s")
            ]
        );
        let bare = cells(
            "storage.k8s.io",
            "CSIDriver",
            json!({"metadata": {"name": "d"}, "spec": {"attachRequired": false}}),
        );
        assert_eq!(
            (&bare[1], &bare[4], &bare[6]),
            (&json!(false), &json!("<unset>"), &json!("<none>"))
        );
        assert_eq!(
            cells(
                "storage.k8s.io",
                "CSIStorageCapacity",
                json!({"metadata": {"name": "c"}, "storageClassName": "fast"})
            ),
            vec![json!("c"), json!("fast"), json!("<unset>")]
        );
        assert_eq!(
            cells(
                "storage.k8s.io",
                "VolumeAttachment",
                json!({"metadata": {"name": "v", "creationTimestamp": created},
                    "spec": {"attacher": "csi.x", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}}),
            ),
            vec![
                json!("v"),
                json!("csi.x"),
                json!("pv1"),
                json!("n1"),
                json!(true),
                json!("60s")
            ]
        );
        let fs = cells(
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema",
            json!({"metadata": {"name": "f"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 9000,
                "distinguisherMethod": {"type": "ByUser"}}, "status": {"conditions": [{"type": "Dangling", "status": "False"}]}}),
        );
        assert_eq!(
            (&fs[1], &fs[2], &fs[3], &fs[5]),
            (
                &json!("workload-low"),
                &json!(9000),
                &json!("ByUser"),
                &json!("False")
            )
        );
        let fs = cells(
            "flowcontrol.apiserver.k8s.io",
            "FlowSchema",
            json!({"metadata": {"name": "f"}, "spec": {}}),
        );
        assert_eq!((&fs[3], &fs[5]), (&json!("<none>"), &json!("?")));
        let exempt = cells(
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
            json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}}),
        );
        assert_eq!(
            exempt[1..6],
            [
                json!("Exempt"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let limited = cells(
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
            json!({"metadata": {"name": "l"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 30,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}}}}),
        );
        assert_eq!(limited[2..6], [json!(30), json!(64), json!(6), json!(50)]);
        let claim = |status: Value, deleting: bool| {
            let mut o = json!({"metadata": {"name": "c"}, "status": status});
            if deleting {
                o["metadata"]["deletionTimestamp"] = json!(NOW);
            }
            cells("resource.k8s.io", "ResourceClaim", o)[1].clone()
        };
        assert_eq!(claim(json!({}), false), "pending");
        assert_eq!(claim(json!({}), true), "deleted");
        assert_eq!(
            claim(json!({"allocation": {}, "reservedFor": [{"name": "p"}]}), false),
            "allocated,reserved"
        );
        assert_eq!(claim(json!({"allocation": {}}), true), "deleted,allocated");
        assert_eq!(
            cells(
                "resource.k8s.io",
                "ResourceSlice",
                json!({"metadata": {"name": "s"}, "spec": {"nodeName": "n1", "driver": "gpu.x", "pool": {"name": "p1"}}})
            )[..4],
            [json!("s"), json!("n1"), json!("gpu.x"), json!("p1")]
        );
    }

    #[test]
    fn pod_rows() {
        let pending = cells(
            "",
            "Pod",
            json!({"metadata": {"name": "p", "creationTimestamp": "2025-06-01T11:59:00Z"},
                "spec": {"containers": [{"name": "a"}, {"name": "b"}]}, "status": {"phase": "Pending"}}),
        );
        assert_eq!(
            pending,
            vec![
                json!("p"),
                json!("0/2"),
                json!("Pending"),
                json!("0"),
                json!("60s"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let running = cells(
            "",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "a"}]},
                "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}], "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                     "lastState": {"terminated": {"finishedAt": "2025-06-01T11:00:00Z"}}}]}}),
        );
        assert_eq!(running[1], "1/1");
        assert_eq!(running[2], "Running");
        assert_eq!(running[3], "2 (60m ago)");
        assert_eq!(running[5], "10.0.0.5");
        assert_eq!(running[6], "n1");
        let crash = cells(
            "",
            "Pod",
            json!({"metadata": {"name": "p", "deletionTimestamp": NOW}, "spec": {"containers": [{"name": "a"}]},
                "status": {"phase": "Running", "containerStatuses": [{"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
        );
        assert_eq!(crash[2], "Terminating");
        let init = cells(
            "",
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}]},
                "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}}),
        );
        assert_eq!(init[2], "Init:0/1");
        assert_eq!(
            conditions(&json!({"kind": "Pod", "status": {"phase": "Succeeded"}})).unwrap()[0]["reason"],
            "Succeeded"
        );
    }

    #[test]
    fn workload_rows() {
        let d = cells(
            "apps",
            "Deployment",
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}}},
                "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}),
        );
        assert_eq!(
            d,
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("<unknown>"),
                json!("nginx,side"),
                json!("nginx:1,busybox"),
                json!("app=web")
            ]
        );
        let sts = cells(
            "apps",
            "StatefulSet",
            json!({"metadata": {"name": "db"}, "spec": {"replicas": 2}}),
        );
        assert_eq!(sts[1], "0/2");
        let job = cells(
            "batch",
            "Job",
            json!({"metadata": {"name": "pi"}, "spec": {"completions": 1},
                "status": {"succeeded": 1, "startTime": "2025-06-01T11:00:00Z", "completionTime": "2025-06-01T11:00:30Z",
                    "conditions": [{"type": "Complete", "status": "True"}]}}),
        );
        assert_eq!(
            (job[1].clone(), job[2].clone(), job[3].clone()),
            (json!("Complete"), json!("1/1"), json!("30s"))
        );
        let cj = cells(
            "batch",
            "CronJob",
            json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "suspend": false}}),
        );
        assert_eq!(
            cj[1..6].to_vec(),
            vec![
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(0),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn service_and_other_rows() {
        let svc = cells(
            "",
            "Service",
            json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIPs": ["10.96.1.2"],
                "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}], "selector": {"app": "web"}}}),
        );
        assert_eq!(
            svc[1..5].to_vec(),
            vec![
                json!("NodePort"),
                json!("10.96.1.2"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        assert_eq!(svc[6], "app=web");
        let lb = cells(
            "",
            "Service",
            json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"}}),
        );
        assert_eq!(lb[3], "<pending>");
        assert_eq!(lb[4], "<none>");
        let secret = cells(
            "",
            "Secret",
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "", "b": ""}}),
        );
        assert_eq!(secret[1..3].to_vec(), vec![json!("Opaque"), json!(2)]);
        let cm = cells(
            "",
            "ConfigMap",
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": ""}}),
        );
        assert_eq!(cm[1], 2);
        let ev = cells(
            "events.k8s.io",
            "Event",
            json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Scheduled", "note": " hi ",
                "regarding": {"kind": "Pod", "name": "p"}, "eventTime": "2025-06-01T11:59:30.000000Z", "reportingController": "sched"}),
        );
        assert_eq!(
            ev[..7].to_vec(),
            vec![
                json!("30s"),
                json!("Normal"),
                json!("Scheduled"),
                json!("pod/p"),
                json!(""),
                json!("sched"),
                json!("hi")
            ]
        );
        assert_eq!(ev[8], 1);
        let rb = cells(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "ns"}]}),
        );
        assert_eq!(
            (rb[1].clone(), rb[3].clone(), rb[5].clone()),
            (json!("Role/r"), json!("u"), json!("ns/s"))
        );
        let pvc = cells(
            "",
            "PersistentVolumeClaim",
            json!({"metadata": {"name": "d"}, "spec": {"volumeName": "pv1", "storageClassName": "fast", "volumeMode": "Filesystem"},
                "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadWriteOncePod"]}}),
        );
        assert_eq!(
            pvc[1..7].to_vec(),
            vec![
                json!("Bound"),
                json!("pv1"),
                json!("1Gi"),
                json!("RWO,RWOP"),
                json!("fast"),
                json!("<unset>")
            ]
        );
        let node = cells(
            "",
            "Node",
            json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert_eq!(
            node[1..3].to_vec(),
            vec![json!("Ready,SchedulingDisabled"), json!("control-plane")]
        );
        let quota = cells(
            "",
            "ResourceQuota",
            json!({"metadata": {"name": "q"}, "status": {"hard": {"pods": "10", "limits.cpu": "2"}, "used": {"pods": "1"}}}),
        );
        assert_eq!(
            quota[1..3].to_vec(),
            vec![json!("pods: 1/10"), json!("limits.cpu: 0/2")]
        );
        assert!(lookup("rbac.authorization.k8s.io", "Role").is_none());
    }

    #[test]
    fn wide_columns_have_priority_one() {
        let p = lookup("apps", "Deployment").unwrap();
        let wide: Vec<&str> = p
            .columns
            .iter()
            .filter(|c| c.priority == 1)
            .map(|c| c.name)
            .collect();
        assert_eq!(wide, vec!["Containers", "Images", "Selector"]);
        assert_eq!(NAME.definition()["format"], "name");
    }
}
