//! HorizontalPodAutoscaler conversion between `autoscaling/v1` and `autoscaling/v2` (the
//! storage version), as kube-apiserver's `pkg/apis/autoscaling/v1` conversion functions do it:
//! v1's `targetCPUUtilizationPercentage` and `currentCPUUtilizationPercentage` are a Resource
//! `cpu` metric of v2, and what v1 has no field for (other metrics, their statuses, the
//! conditions, the scaling behavior) travels in kube's `autoscaling.alpha.kubernetes.io/*`
//! annotations, so that v2 → v1 → v2 loses nothing.
//!
//! The functions work on JSON objects; a field of the wrong shape converts as if absent.

use serde_json::{json, Map, Value};

/// Other metrics than the CPU utilization target (`autoscaling.MetricSpecsAnnotation`).
pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// The current metrics (`autoscaling.MetricStatusesAnnotation`).
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// The status conditions (`autoscaling.HorizontalPodAutoscalerConditionsAnnotation`).
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// The scaling behavior (`autoscaling.BehaviorSpecsAnnotation`), in the field names of kube's
/// internal type (`ScaleUp`, `StabilizationWindowSeconds`, ...), as kube writes it.
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";

const ROUND_TRIP: [&str; 4] = [
    METRICS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
];

/// kube's default CPU utilization target (`autoscaling.DefaultCPUUtilization`).
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// A v2 object as `autoscaling/v1` shows it.
pub fn v2_to_v1(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let mut annotations = take_annotations(o);
    // What a v1 reader sees in them is derived afresh from the stored fields.
    for key in ROUND_TRIP {
        annotations.remove(key);
    }
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = array(spec.remove("metrics"));
        let behavior = spec.remove("behavior").filter(|b| !b.is_null());
        let cpu = metrics
            .iter()
            .find(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu");
        if let Some(target) = cpu.and_then(|m| m["resource"]["target"].get("averageUtilization")) {
            spec.insert("targetCPUUtilizationPercentage".into(), target.clone());
        }
        let others: Vec<Value> = metrics
            .iter()
            .filter(|m| !is_cpu_utilization_target(m))
            .map(metric_spec_to_v1)
            .collect();
        if !others.is_empty() {
            annotations.insert(METRICS_ANNOTATION.into(), encode(&Value::Array(others)));
        }
        if let Some(behavior) = behavior {
            annotations.insert(
                BEHAVIOR_ANNOTATION.into(),
                encode(&behavior_to_internal(&behavior)),
            );
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        let current = array(status.remove("currentMetrics"));
        let conditions = array(status.remove("conditions"));
        for m in current
            .iter()
            .filter(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
        {
            if let Some(u) = m["resource"]["current"].get("averageUtilization") {
                status.insert("currentCPUUtilizationPercentage".into(), u.clone());
            }
        }
        if !current.is_empty() {
            let v1: Vec<Value> = current.iter().map(metric_status_to_v1).collect();
            annotations.insert(CURRENT_METRICS_ANNOTATION.into(), encode(&Value::Array(v1)));
        }
        if !conditions.is_empty() {
            annotations.insert(CONDITIONS_ANNOTATION.into(), encode(&Value::Array(conditions)));
        }
    }
    put_annotations(o, annotations);
}

/// A v1 object as stored (`autoscaling/v2`).
pub fn v1_to_v2(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let mut annotations = take_annotations(o);
    let mut decoded = |key: &str| -> Option<Value> {
        let text = annotations.remove(key)?;
        serde_json::from_str(text.as_str()?).ok()
    };
    let other_metrics = decoded(METRICS_ANNOTATION);
    let current_metrics = decoded(CURRENT_METRICS_ANNOTATION);
    let conditions = decoded(CONDITIONS_ANNOTATION);
    let behavior = decoded(BEHAVIOR_ANNOTATION);
    for key in ROUND_TRIP {
        annotations.remove(key);
    }
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let mut metrics: Vec<Value> = array(other_metrics).iter().map(metric_spec_to_v2).collect();
        if let Some(cpu) = spec
            .remove("targetCPUUtilizationPercentage")
            .filter(|v| !v.is_null())
        {
            metrics.push(cpu_metric(cpu));
        }
        if metrics.is_empty() {
            metrics.push(cpu_metric(json!(DEFAULT_CPU_UTILIZATION)));
        }
        spec.insert("metrics".into(), Value::Array(metrics));
        if let Some(behavior) = behavior
            .map(|b| behavior_from_internal(&b))
            .filter(|b| !is_empty(b))
        {
            spec.insert("behavior".into(), behavior);
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        let cpu = status
            .remove("currentCPUUtilizationPercentage")
            .filter(|v| !v.is_null());
        let current = match (current_metrics, cpu) {
            (Some(all), _) => array(Some(all)).iter().map(metric_status_to_v2).collect(),
            (None, Some(u)) => vec![
                json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": u}}}),
            ],
            (None, None) => Vec::new(),
        };
        if !current.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(current));
        }
        if let Some(conditions) = conditions.filter(Value::is_array) {
            status.insert("conditions".into(), conditions);
        }
    }
    put_annotations(o, annotations);
}

fn cpu_metric(utilization: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// The metric v1's `targetCPUUtilizationPercentage` holds (it is left out of the annotation).
fn is_cpu_utilization_target(m: &Value) -> bool {
    m["type"] == "Resource"
        && m["resource"]["name"] == "cpu"
        && m["resource"]["target"]
            .get("averageUtilization")
            .is_some_and(|u| !u.is_null())
}

fn take_annotations(o: &mut Map<String, Value>) -> Map<String, Value> {
    o.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("annotations"))
        .and_then(|a| match a {
            Value::Object(a) => Some(a),
            _ => None,
        })
        .unwrap_or_default()
}

fn put_annotations(o: &mut Map<String, Value>, annotations: Map<String, Value>) {
    if annotations.is_empty() {
        return;
    }
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
}

fn array(v: Option<Value>) -> Vec<Value> {
    match v {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    }
}

fn encode(v: &Value) -> Value {
    Value::String(v.to_string())
}

fn is_empty(v: &Value) -> bool {
    v.as_object().is_none_or(Map::is_empty)
}

/// One field of a metric source or status: its path in v1 and in v2. A `required` one is a
/// Go `resource.Quantity` that is not a pointer on both sides, written as `"0"` when unset.
struct Field {
    v1: &'static str,
    v2: &'static str,
    required: bool,
}

const fn f(v1: &'static str, v2: &'static str) -> Field {
    Field {
        v1,
        v2,
        required: false,
    }
}

const fn required(v1: &'static str, v2: &'static str) -> Field {
    Field {
        v1,
        v2,
        required: true,
    }
}

/// The fields of a v1 metric source (`MetricSpec`) of each type, with their v2 paths, as
/// kube's conversion functions map them.
fn source_fields(ty: &str) -> &'static [Field] {
    match ty {
        "Resource" | "ContainerResource" => {
            const FIELDS: &[Field] = &[
                f("name", "name"),
                f("targetAverageUtilization", "target.averageUtilization"),
                f("targetAverageValue", "target.averageValue"),
                f("container", "container"),
            ];
            FIELDS
        }
        "Pods" => {
            const FIELDS: &[Field] = &[
                f("metricName", "metric.name"),
                required("targetAverageValue", "target.averageValue"),
                f("selector", "metric.selector"),
            ];
            FIELDS
        }
        "Object" => {
            const FIELDS: &[Field] = &[
                f("target", "describedObject"),
                f("metricName", "metric.name"),
                required("targetValue", "target.value"),
                f("selector", "metric.selector"),
                f("averageValue", "target.averageValue"),
            ];
            FIELDS
        }
        "External" => {
            const FIELDS: &[Field] = &[
                f("metricName", "metric.name"),
                f("metricSelector", "metric.selector"),
                f("targetValue", "target.value"),
                f("targetAverageValue", "target.averageValue"),
            ];
            FIELDS
        }
        _ => &[],
    }
}

/// The fields of a v1 metric status (`MetricStatus`) of each type, with their v2 paths.
fn status_fields(ty: &str) -> &'static [Field] {
    match ty {
        "Resource" | "ContainerResource" => {
            const FIELDS: &[Field] = &[
                f("name", "name"),
                f("currentAverageUtilization", "current.averageUtilization"),
                required("currentAverageValue", "current.averageValue"),
                f("container", "container"),
            ];
            FIELDS
        }
        "Pods" => {
            const FIELDS: &[Field] = &[
                f("metricName", "metric.name"),
                required("currentAverageValue", "current.averageValue"),
                f("selector", "metric.selector"),
            ];
            FIELDS
        }
        "Object" => {
            const FIELDS: &[Field] = &[
                f("target", "describedObject"),
                f("metricName", "metric.name"),
                required("currentValue", "current.value"),
                f("selector", "metric.selector"),
                f("averageValue", "current.averageValue"),
            ];
            FIELDS
        }
        "External" => {
            const FIELDS: &[Field] = &[
                f("metricName", "metric.name"),
                f("metricSelector", "metric.selector"),
                required("currentValue", "current.value"),
                f("currentAverageValue", "current.averageValue"),
            ];
            FIELDS
        }
        _ => &[],
    }
}

/// The field of a `MetricSpec`/`MetricStatus` that holds a source of type `ty`.
fn field_of(ty: &str) -> Option<&'static str> {
    Some(match ty {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return None,
    })
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(v, |v, step| v.get(step))
        .filter(|v| !v.is_null())
}

fn insert(v: &mut Value, path: &str, value: Value) {
    let mut at = v;
    for step in path.split('.') {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        at = &mut at[step];
    }
    *at = value;
}

/// A metric (spec or status) converted by `fields` from one version's paths to the other's.
fn metric(m: &Value, fields: fn(&str) -> &'static [Field], to_v2: bool) -> Value {
    let ty = m["type"].as_str().unwrap_or_default();
    let mut out = json!({"type": ty});
    let Some(field) = field_of(ty) else {
        return out;
    };
    let mut source = json!({});
    for fl in fields(ty) {
        let (from, to) = if to_v2 { (fl.v1, fl.v2) } else { (fl.v2, fl.v1) };
        match lookup(&m[field], from) {
            Some(v) => insert(&mut source, to, v.clone()),
            None if fl.required => insert(&mut source, to, json!("0")),
            None => {}
        }
    }
    out[field] = source;
    out
}

/// A v2 `MetricSpec` as v1's annotation holds it.
fn metric_spec_to_v1(m: &Value) -> Value {
    metric(m, source_fields, false)
}

/// A v1 `MetricSpec` (from the annotation) as v2 has it, with the target type kube derives
/// from which values are set.
fn metric_spec_to_v2(m: &Value) -> Value {
    let mut out = metric(m, source_fields, true);
    let ty = m["type"].as_str().unwrap_or_default();
    if let Some(field) = field_of(ty) {
        let target = &mut out[field]["target"];
        if !target.is_object() {
            *target = json!({});
        }
        let has = |k: &str| target.get(k).is_some();
        let kind = match ty {
            "Resource" | "ContainerResource" if has("averageUtilization") => "Utilization",
            "Object" if !has("averageValue") => "Value",
            "External" if has("value") => "Value",
            _ => "AverageValue",
        };
        target["type"] = json!(kind);
    }
    out
}

/// A v2 `MetricStatus` as v1's annotation holds it.
fn metric_status_to_v1(m: &Value) -> Value {
    metric(m, status_fields, false)
}

/// A v1 `MetricStatus` (from the annotation) as v2 has it.
fn metric_status_to_v2(m: &Value) -> Value {
    metric(m, status_fields, true)
}

/// The internal type's field names of a behavior (`scaleUp` → `ScaleUp`); kube's annotation
/// is the internal Go struct marshalled without JSON tags, so every field is present, `null`
/// when unset.
const BEHAVIOR_FIELDS: &[&str] = &["scaleUp", "scaleDown"];
const RULES_FIELDS: &[&str] = &[
    "stabilizationWindowSeconds",
    "selectPolicy",
    "policies",
    "tolerance",
];
const POLICY_FIELDS: &[&str] = &["type", "value", "periodSeconds"];

fn go_name(field: &str) -> String {
    let mut chars = field.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// `behavior` with the internal type's field names.
fn behavior_to_internal(behavior: &Value) -> Value {
    let rules = |r: &Value| -> Value {
        if r.is_null() {
            return Value::Null;
        }
        let mut out = Map::new();
        for field in RULES_FIELDS {
            let v = match (*field, r.get(*field)) {
                ("policies", Some(Value::Array(policies))) => Value::Array(
                    policies
                        .iter()
                        .map(|p| {
                            let fields = POLICY_FIELDS
                                .iter()
                                .map(|f| (go_name(f), p.get(*f).cloned().unwrap_or(Value::Null)));
                            Value::Object(fields.collect())
                        })
                        .collect(),
                ),
                (_, v) => v.cloned().unwrap_or(Value::Null),
            };
            out.insert(go_name(field), v);
        }
        Value::Object(out)
    };
    Value::Object(
        BEHAVIOR_FIELDS
            .iter()
            .map(|f| (go_name(f), rules(&behavior[*f])))
            .collect(),
    )
}

/// A behavior from the annotation: Go matches field names case-insensitively; `null`s are unset.
fn behavior_from_internal(encoded: &Value) -> Value {
    let field = |v: &Value, name: &str| -> Option<Value> {
        v.as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_null())
    };
    let copy = |v: &Value, fields: &[&str], nested: &dyn Fn(&str, Value) -> Value| -> Value {
        Value::Object(
            fields
                .iter()
                .filter_map(|f| field(v, f).map(|x| (f.to_string(), nested(f, x))))
                .collect(),
        )
    };
    let policy = |_: &str, p: Value| -> Value {
        match p {
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| copy(i, POLICY_FIELDS, &|_, x| x)).collect())
            }
            other => other,
        }
    };
    let rules = |_: &str, r: Value| {
        copy(&r, RULES_FIELDS, &|f, x| {
            if f == "policies" {
                policy(f, x)
            } else {
                x
            }
        })
    };
    copy(encoded, BEHAVIOR_FIELDS, &rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"team": "shop"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                    {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
                    {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "30"}}},
                    {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "web"},
                        "metric": {"name": "hits"}, "target": {"type": "Value", "value": "2k"}}},
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Min",
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}},
            },
            "status": {
                "currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55, "averageValue": "110m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}],
            },
        })
    }

    #[test]
    fn v2_shows_in_v1_with_kubes_annotations() {
        let mut v1 = v2();
        v2_to_v1(&mut v1);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert!(v1["spec"].get("metrics").is_none() && v1["spec"].get("behavior").is_none());
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 55);
        let annotations = &v1["metadata"]["annotations"];
        assert_eq!(annotations["team"], "shop");
        let others: Value = serde_json::from_str(annotations[METRICS_ANNOTATION].as_str().unwrap()).unwrap();
        assert_eq!(
            others[0],
            json!({"type": "Pods", "pods": {"metricName": "rps", "targetAverageValue": "10"}})
        );
        assert_eq!(others.as_array().unwrap().len(), 3);
        let behavior: Value =
            serde_json::from_str(annotations[BEHAVIOR_ANNOTATION].as_str().unwrap()).unwrap();
        assert_eq!(
            behavior,
            json!({"ScaleUp": null, "ScaleDown": {"StabilizationWindowSeconds": 60, "SelectPolicy": "Min",
                "Policies": [{"Type": "Pods", "Value": 1, "PeriodSeconds": 30}], "Tolerance": null}})
        );
        assert!(annotations[CONDITIONS_ANNOTATION].is_string());
        assert!(annotations[CURRENT_METRICS_ANNOTATION].is_string());
    }

    #[test]
    fn a_round_trip_through_v1_loses_nothing() {
        let mut round = v2();
        v2_to_v1(&mut round);
        round["apiVersion"] = json!("autoscaling/v1");
        v1_to_v2(&mut round);
        round["apiVersion"] = json!("autoscaling/v2");
        let mut expected = v2();
        // The CPU target comes back last, after the metrics the annotation held.
        let metrics = expected["spec"]["metrics"].as_array_mut().unwrap();
        let cpu = metrics.remove(0);
        metrics.push(cpu);
        assert_eq!(round, expected);
    }

    #[test]
    fn a_v1_object_without_a_target_gets_kubes_default() {
        let mut obj = json!({"apiVersion": "autoscaling/v1", "metadata": {"name": "web"},
            "spec": {"maxReplicas": 3, "minReplicas": 1, "scaleTargetRef": {"kind": "Deployment", "name": "web"}},
            "status": {"currentReplicas": 0, "desiredReplicas": 0, "currentCPUUtilizationPercentage": 12}});
        v1_to_v2(&mut obj);
        assert_eq!(obj["spec"]["metrics"], json!([cpu_metric(json!(80))]));
        assert_eq!(
            obj["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
            12
        );
        assert!(obj["metadata"].get("annotations").is_none());
    }
}
