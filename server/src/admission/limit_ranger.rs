//! `LimitRanger`: the LimitRanges of a namespace applied to what is created in it, as
//! kube-apiserver's plugin applies them. Mutating, a new pod's containers get the `default`
//! limits and `defaultRequest` requests of `Container` limits they do not set (recorded in the
//! `kubernetes.io/limit-ranger` annotation); validating, `min`, `max` and
//! `maxLimitRequestRatio` are enforced per container and per pod, and `min`/`max` storage per
//! PersistentVolumeClaim — a violation is a `403` in kube's words
//! (`maximum cpu usage per Container is 1, but limit is 2`).
//!
//! The LimitRanges are read linearizably, so one created through any replica applies to the
//! next write on every replica. Quantities are compared exactly and shown as written.

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

use super::{Attributes, Mutating, Operation, Validating};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::machinery::qos::{format_quantity, pod_qos, quantity_value};
use crate::store::{keys, Store};

/// The plugin.
pub struct LimitRanger;

/// The annotation that says what the plugin set.
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

impl Mutating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn admit<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if !applies(attrs) || attrs.resource != "pods" {
                return Ok(());
            }
            for range in limit_ranges(store, attrs).await? {
                set_defaults(&range, obj);
            }
            Ok(())
        })
    }
}

impl Validating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn validate<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if !applies(attrs) {
                return Ok(());
            }
            let check: fn(&Value, &Value) -> Vec<String> = match attrs.resource {
                "pods" => pod_violations,
                "persistentvolumeclaims" => claim_violations,
                _ => return Ok(()),
            };
            let mut found = Vec::new();
            for range in limit_ranges(store, attrs).await? {
                for v in check(&range, obj) {
                    if !found.contains(&v) {
                        found.push(v);
                    }
                }
            }
            if found.is_empty() {
                return Ok(());
            }
            // Go's aggregate error: one message alone, several in brackets.
            let why = match found.as_slice() {
                [one] => one.clone(),
                many => format!("[{}]", many.join(", ")),
            };
            let name = meta_str(obj, "name").unwrap_or(attrs.name);
            Err(ApiError::forbidden("", attrs.resource, name, &why))
        })
    }
}

/// Creates of pods, resizes of their containers (`pods/resize`), and creates and updates of
/// claims (nothing else changes a pod's containers).
fn applies(attrs: &Attributes<'_>) -> bool {
    if !attrs.group.is_empty() {
        return false;
    }
    matches!(
        (attrs.resource, attrs.subresource, attrs.operation),
        ("pods", None, Operation::Create)
            | ("pods", Some("resize"), Operation::Update)
            | (
                "persistentvolumeclaims",
                None,
                Operation::Create | Operation::Update
            )
    )
}

/// The LimitRanges of the request's namespace (read linearizably).
async fn limit_ranges(store: &Store, attrs: &Attributes<'_>) -> ApiResult<Vec<Value>> {
    let Some(ns) = attrs.namespace else {
        return Ok(Vec::new());
    };
    let prefix = keys::object("", "limitranges", Some(ns), "");
    let (found, _) = store.list(&prefix, true).await?;
    Ok(found.into_iter().map(|s| s.obj).collect())
}

/// The range's items of one type (`Container`, `Pod`, `PersistentVolumeClaim`).
fn items<'a>(range: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(kind))
}

fn resources<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

/// A quantity as kube shows it (canonical: `1Gi` for `1024Mi`, `500m` for `0.5`) and its
/// value in billionths.
fn quantity(v: &Value) -> Option<(String, i128)> {
    let (q, binary) = quantity_value(v)?;
    Some((format_quantity(q, binary), q))
}

/// Fills in the default limits and requests of the range's `Container` items.
fn set_defaults(range: &Value, pod: &mut Value) {
    let mut limits = Map::new();
    let mut requests = Map::new();
    for item in items(range, "Container") {
        limits.extend(resources(item, "default").cloned().unwrap_or_default());
        requests.extend(resources(item, "defaultRequest").cloned().unwrap_or_default());
    }
    if limits.is_empty() && requests.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (key, what) in [("containers", "container"), ("initContainers", "init container")] {
        let Some(list) = pod
            .pointer_mut(&format!("/spec/{key}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in list {
            merge(c, &requests, &limits, what, &mut notes);
        }
    }
    if notes.is_empty() {
        return;
    }
    if let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[ANNOTATION] = json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
    // The QoS class follows the resources the pod now has, as kube computes it after admission.
    let qos = pod_qos(pod.get("spec").unwrap_or(&Value::Null));
    if let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("qosClass".into(), json!(qos));
    }
}

/// Sets what the container lacks of the defaults, noting it as kube does.
fn merge(
    container: &mut Value,
    requests: &Map<String, Value>,
    limits: &Map<String, Value>,
    what: &str,
    notes: &mut Vec<String>,
) {
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(c) = container.as_object_mut() else {
        return;
    };
    let res = c.entry("resources").or_insert_with(|| json!({}));
    if !res.is_object() {
        *res = json!({});
    }
    for (key, defaults, noun) in [("requests", requests, "request"), ("limits", limits, "limit")] {
        let list = &mut res[key];
        if !list.is_object() {
            *list = json!({});
        }
        let mut set = Vec::new();
        if let Some(list) = list.as_object_mut() {
            for (k, v) in defaults {
                if !list.contains_key(k) {
                    list.insert(k.clone(), v.clone());
                    set.push(k.clone());
                }
            }
        }
        if !set.is_empty() {
            set.sort();
            notes.push(format!("{} {noun} for {what} {name}", set.join(", ")));
        }
    }
}

/// A kind's observed requests and limits of the resources a limit names.
struct Observed<'a> {
    kind: &'a str,
    requests: Map<String, Value>,
    limits: Map<String, Value>,
}

impl Observed<'_> {
    fn request(&self, k: &str) -> Option<(String, i128)> {
        self.requests.get(k).and_then(quantity)
    }

    fn limit(&self, k: &str) -> Option<(String, i128)> {
        self.limits.get(k).and_then(quantity)
    }

    /// What `min`, `max` and `maxLimitRequestRatio` of `item` find wrong here.
    fn check(&self, item: &Value, out: &mut Vec<String>) {
        let kind = self.kind;
        for (k, v) in resources(item, "min").into_iter().flatten() {
            let Some((shown, min)) = quantity(v) else { continue };
            match (self.request(k), self.limit(k)) {
                (None, _) => out.push(format!(
                    "minimum {k} usage per {kind} is {shown}.  No request is specified"
                )),
                (Some((req, r)), _) if r < min => out.push(format!(
                    "minimum {k} usage per {kind} is {shown}, but request is {req}"
                )),
                (_, Some((lim, l))) if l < min => out.push(format!(
                    "minimum {k} usage per {kind} is {shown}, but limit is {lim}"
                )),
                _ => {}
            }
        }
        for (k, v) in resources(item, "max").into_iter().flatten() {
            let Some((shown, max)) = quantity(v) else { continue };
            match (self.request(k), self.limit(k)) {
                (_, None) => out.push(format!(
                    "maximum {k} usage per {kind} is {shown}.  No limit is specified"
                )),
                (_, Some((lim, l))) if l > max => out.push(format!(
                    "maximum {k} usage per {kind} is {shown}, but limit is {lim}"
                )),
                (Some((req, r)), _) if r > max => out.push(format!(
                    "maximum {k} usage per {kind} is {shown}, but request is {req}"
                )),
                _ => {}
            }
        }
        for (k, v) in resources(item, "maxLimitRequestRatio").into_iter().flatten() {
            let Some((shown, ratio)) = quantity(v) else {
                continue;
            };
            let req = self.request(k).map(|(_, r)| r).filter(|r| *r != 0);
            let lim = self.limit(k).map(|(_, l)| l).filter(|l| *l != 0);
            match (req, lim) {
                (None, _) => out.push(format!(
                    "{k} max limit to request ratio per {kind} is {shown}, but no request is specified or request is 0"
                )),
                (_, None) => out.push(format!(
                    "{k} max limit to request ratio per {kind} is {shown}, but no limit is specified or limit is 0"
                )),
                (Some(r), Some(l)) => {
                    // l / r > ratio (in billionths), without division.
                    if l.saturating_mul(1_000_000_000) > ratio.saturating_mul(r) {
                        let observed = l as f64 / r as f64;
                        out.push(format!(
                            "{k} max limit to request ratio per {kind} is {shown}, but provided ratio is {observed:.6}"
                        ));
                    }
                }
            }
        }
    }
}

fn container_list<'a>(pod: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> + 'a {
    pod.pointer(&format!("/spec/{key}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn container_resources(c: &Value, key: &str) -> Map<String, Value> {
    c.pointer(&format!("/resources/{key}"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// A pod's effective requests or limits: the containers' sum, or the largest init container's
/// when that is more, plus the pod's overhead.
fn pod_total(pod: &Value, key: &str) -> Map<String, Value> {
    // Each resource's total, and whether the first quantity added was binary (the sum is
    // shown in its format, as Go's quantities add).
    let mut total: Vec<(String, i128, bool)> = Vec::new();
    let mut add = |k: &str, v: &Value, combine: fn(i128, i128) -> i128| {
        let Some((shown, q)) = quantity(v) else { return };
        match total.iter_mut().find(|(n, _, _)| n == k) {
            Some((_, t, _)) => *t = combine(*t, q),
            None => total.push((k.to_string(), q, shown.ends_with('i'))),
        }
    };
    for c in container_list(pod, "containers") {
        for (k, v) in container_resources(c, key) {
            add(&k, &v, i128::saturating_add);
        }
    }
    for c in container_list(pod, "initContainers") {
        for (k, v) in container_resources(c, key) {
            add(&k, &v, i128::max);
        }
    }
    for (k, v) in pod
        .pointer("/spec/overhead")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        add(k, v, i128::saturating_add);
    }
    total
        .into_iter()
        .map(|(k, v, binary)| (k, json!(format_quantity(v, binary))))
        .collect()
}

/// What the range's `Container` and `Pod` limits find wrong with the pod.
fn pod_violations(range: &Value, pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for item in items(range, "Container") {
        for key in ["containers", "initContainers"] {
            for c in container_list(pod, key) {
                Observed {
                    kind: "Container",
                    requests: container_resources(c, "requests"),
                    limits: container_resources(c, "limits"),
                }
                .check(item, &mut out);
            }
        }
    }
    for item in items(range, "Pod") {
        Observed {
            kind: "Pod",
            requests: pod_total(pod, "requests"),
            limits: pod_total(pod, "limits"),
        }
        .check(item, &mut out);
    }
    out
}

/// What the range's `PersistentVolumeClaim` limits find wrong with the claim's requests.
fn claim_violations(range: &Value, claim: &Value) -> Vec<String> {
    const KIND: &str = "PersistentVolumeClaim";
    let requests = claim
        .pointer("/spec/resources/requests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for item in items(range, KIND) {
        // A claim's limits are not the user's to set: min is checked against the request,
        // and so is max.
        let only_min = json!({"min": item.get("min").cloned().unwrap_or_default()});
        Observed {
            kind: KIND,
            requests: requests.clone(),
            limits: Map::new(),
        }
        .check(&only_min, &mut out);
        for (k, v) in resources(item, "max").into_iter().flatten() {
            let Some((shown, max)) = quantity(v) else { continue };
            match requests.get(k).and_then(quantity) {
                None => out.push(format!(
                    "maximum {k} usage per {KIND} is {shown}.  No request is specified"
                )),
                Some((req, r)) if r > max => out.push(format!(
                    "maximum {k} usage per {KIND} is {shown}, but request is {req}"
                )),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(limits: Value) -> Value {
        json!({"spec": {"limits": limits}})
    }

    #[test]
    fn containers_get_the_defaults_they_lack_and_the_annotation_says_which() {
        let r = range(json!([{"type": "Container",
            "default": {"cpu": "500m", "memory": "128Mi"},
            "defaultRequest": {"cpu": "250m", "memory": "64Mi"}}]));
        let mut pod = json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i"}],
                "containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}}]
            },
            "status": {"qosClass": "BestEffort"}
        });
        set_defaults(&r, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "1Gi"}})
        );
        assert_eq!(
            pod["spec"]["initContainers"][0]["resources"]["limits"]["memory"],
            "128Mi"
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu request for container c; cpu limit for container c; \
             cpu, memory request for init container i; cpu, memory limit for init container i"
        );
        assert_eq!(pod["status"]["qosClass"], "Burstable");
    }

    #[test]
    fn min_max_and_ratio_are_enforced_in_kubes_words() {
        let r = range(json!([
            {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}, "maxLimitRequestRatio": {"cpu": "2"}},
            {"type": "Pod", "max": {"memory": "1Gi"}}
        ]));
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2", "memory": "800Mi"}, "requests": {"cpu": "500m", "memory": "32Mi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "800Mi"}, "requests": {"cpu": "1", "memory": "800Mi"}}}
        ]}});
        assert_eq!(
            pod_violations(&r, &pod),
            [
                "minimum memory usage per Container is 64Mi, but request is 32Mi",
                "maximum cpu usage per Container is 1, but limit is 2",
                "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000",
                "maximum memory usage per Pod is 1Gi, but limit is 1600Mi",
            ]
        );
        let bare = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            pod_violations(&range(json!([{"type": "Container", "max": {"cpu": "1"}}])), &bare),
            ["maximum cpu usage per Container is 1.  No limit is specified"]
        );
    }

    #[test]
    fn claims_are_held_to_storage_min_and_max() {
        let r = range(
            json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "2Gi"}}]),
        );
        let claim = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert_eq!(
            claim_violations(&r, &claim("5Gi")),
            ["maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"]
        );
        assert_eq!(
            claim_violations(&r, &claim("500Mi")),
            ["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"]
        );
        assert!(claim_violations(&r, &claim("1Gi")).is_empty());
    }

    #[test]
    fn quantities_are_shown_as_kube_shows_them() {
        let shown = |s: &str| quantity(&json!(s)).map(|(t, _)| t);
        assert_eq!(shown("1024Mi").as_deref(), Some("1Gi"));
        assert_eq!(shown("1536Mi").as_deref(), Some("1536Mi"));
        assert_eq!(shown("0.5").as_deref(), Some("500m"));
        assert_eq!(shown("2000m").as_deref(), Some("2"));
        assert_eq!(shown("1000").as_deref(), Some("1k"));
        assert_eq!(shown("0").as_deref(), Some("0"));
        assert_eq!(quantity(&json!(2)).map(|(t, _)| t).as_deref(), Some("2"));
    }
}
