//! The priority and fairness configuration kube-apiserver keeps: its configuration producer
//! creates every default FlowSchema and PriorityLevelConfiguration that is missing (a deleted
//! suggested one comes back), keeps the mandatory ones as they are, keeps a suggested one
//! current while its `apf.kubernetes.io/autoupdate-spec` annotation is `"true"` (or, without
//! the annotation, until someone changes it: it is then marked `"false"` and left alone), and
//! deletes the objects it once wrote that are no longer defaults. Its configuration consumer
//! tells, in each FlowSchema's `Dangling` condition, whether the priority level it names exists.
//!
//! Runs on the leader, at once, after every change to either type, and every
//! [`RESYNC`](super::RESYNC).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::flowcontrol::defaults::{self, AUTOUPDATE_ANNOTATION};
use crate::flowcontrol::GROUP;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::{Decoded, Directive};
use crate::machinery::query::parse_bool;
use crate::machinery::timestamp::now_rfc3339;
use crate::registry::create;
use crate::registry::delete::{self, DeleteOptions};
use crate::registry::options::{PatchOptions, WriteOptions};
use crate::registry::update::{self, PatchType};
use crate::scheme::{LiveRegistry, Registry};
use crate::store::{keys, Store};

/// Whose writes the defaults are, in `managedFields`.
const PRODUCER: &str = "api-priority-and-fairness-config-producer-v1";
/// Whose writes the `Dangling` conditions are.
const CONSUMER: &str = "api-priority-and-fairness-config-consumer-v1";
const FLOW_SCHEMAS: &str = "flowschemas";
const PRIORITY_LEVELS: &str = "prioritylevelconfigurations";

fn plural_of(kind: &str) -> &'static str {
    match kind {
        "FlowSchema" => FLOW_SCHEMAS,
        _ => PRIORITY_LEVELS,
    }
}

/// The annotation's value as Go's `strconv.ParseBool` reads it.
fn annotation(object: &Value) -> Option<bool> {
    object["metadata"]["annotations"][AUTOUPDATE_ANNOTATION]
        .as_str()
        .and_then(parse_bool)
}

/// kube's defaults of a spec, filled in where it leaves them out, and `clusterScope: false`
/// (which kube's encoding omits) dropped: two specs that mean the same compare equal.
fn defaulted(kind: &str, spec: &Value) -> Value {
    let mut spec = spec.clone();
    let fill = |v: &mut Value, field: &str, default: Value| {
        if let Some(o) = v.as_object_mut() {
            o.entry(field).or_insert(default);
        }
    };
    if kind == "FlowSchema" {
        fill(&mut spec, "matchingPrecedence", json!(1000));
        for rule in spec["rules"].as_array_mut().into_iter().flatten() {
            for r in rule["resourceRules"].as_array_mut().into_iter().flatten() {
                if r["clusterScope"] == json!(false) {
                    r.as_object_mut().map(|o| o.remove("clusterScope"));
                }
            }
        }
    } else if spec["limited"].is_object() {
        let limited = &mut spec["limited"];
        fill(limited, "nominalConcurrencyShares", json!(30));
        fill(limited, "lendablePercent", json!(0));
        if limited["limitResponse"]["type"] == "Queue" {
            let queuing = &mut limited["limitResponse"]["queuing"];
            if queuing.is_null() {
                *queuing = json!({});
            }
            fill(queuing, "queues", json!(64));
            fill(queuing, "handSize", json!(8));
            fill(queuing, "queueLengthLimit", json!(50));
        }
    } else if spec["exempt"].is_object() {
        fill(&mut spec["exempt"], "nominalConcurrencyShares", json!(0));
        fill(&mut spec["exempt"], "lendablePercent", json!(0));
    }
    spec
}

/// What the producer does to a default object that exists: `None`, or the object to write.
fn revised(bootstrap: &Value, current: &Value) -> Option<Value> {
    let name = bootstrap["metadata"]["name"].as_str().unwrap_or_default();
    let kind = bootstrap["kind"].as_str().unwrap_or_default();
    let auto_update = defaults::is_mandatory(name)
        || annotation(current).unwrap_or(current["metadata"]["generation"] == json!(1));
    let mut expected = bootstrap["spec"].clone();
    if kind == "PriorityLevelConfiguration" && name == defaults::EXEMPT {
        // The exempt level's own shares and lendable percent are the operator's to set.
        for field in ["nominalConcurrencyShares", "lendablePercent"] {
            if !current["spec"]["exempt"][field].is_null() {
                expected["exempt"][field] = current["spec"]["exempt"][field].clone();
            }
        }
    }
    let spec_changed = auto_update && defaulted(kind, &expected) != defaulted(kind, &current["spec"]);
    let annotation_changed = annotation(current) != Some(auto_update);
    if !spec_changed && !annotation_changed {
        return None;
    }
    let mut next = current.clone();
    next["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!(auto_update.to_string());
    if spec_changed {
        next["spec"] = expected;
    }
    Some(next)
}

/// The `Dangling` condition a FlowSchema that names `level` must carry.
fn dangling(level: &str, exists: bool) -> Value {
    match exists {
        true => json!({"type": "Dangling", "status": "False", "reason": "Found",
            "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists")}),
        false => json!({"type": "Dangling", "status": "True", "reason": "NotFound",
            "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object")}),
    }
}

/// One pass of the producer and the consumer.
pub async fn reconcile(store: &Store, registry: &Registry) -> ApiResult<()> {
    let opts = WriteOptions::by(PRODUCER);
    let bootstrap = defaults::objects().map_err(|e| ApiError::internal(e.to_string()))?;
    let mut current = BTreeMap::new();
    for plural in [FLOW_SCHEMAS, PRIORITY_LEVELS] {
        current.insert(plural, super::stored_by_name(store, GROUP, plural)?);
    }
    for object in bootstrap {
        let plural = plural_of(object["kind"].as_str().unwrap_or_default());
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let existing = current.get(plural).and_then(|c| c.get(name));
        let outcome = match existing {
            None => {
                let req = super::request(registry, (GROUP, plural), None, None)?;
                let body = Decoded {
                    value: object.clone(),
                    duplicates: Vec::new(),
                };
                create::create(store, &req, &opts, body).await.map(drop)
            }
            Some(existing) => match revised(object, existing) {
                None => Ok(()),
                Some(next) => {
                    let req = super::request(registry, (GROUP, plural), None, Some(name))?;
                    let body = Decoded {
                        value: next,
                        duplicates: Vec::new(),
                    };
                    update::update(store, &req, &opts, body).await.map(drop)
                }
            },
        };
        super::settled(outcome)?;
    }
    // What the producer wrote once and kube no longer ships.
    for plural in [FLOW_SCHEMAS, PRIORITY_LEVELS] {
        for (name, object) in current.get(plural).into_iter().flatten() {
            let default = bootstrap.iter().any(|b| {
                plural_of(b["kind"].as_str().unwrap_or_default()) == plural && b["metadata"]["name"] == *name
            });
            if !default && annotation(object) == Some(true) {
                let req = super::request(registry, (GROUP, plural), None, Some(name))?;
                super::settled(
                    delete::delete(store, &req, &DeleteOptions::default())
                        .await
                        .map(drop),
                )?;
            }
        }
    }
    // The consumer's `Dangling` conditions, against the levels as they are now.
    let levels = super::stored_by_name(store, GROUP, PRIORITY_LEVELS)?;
    for (name, schema) in super::stored_by_name(store, GROUP, FLOW_SCHEMAS)? {
        let level = schema["spec"]["priorityLevelConfiguration"]["name"]
            .as_str()
            .unwrap_or_default();
        let mut want = dangling(level, levels.contains_key(level));
        let has = schema["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Dangling");
        let same = has.is_some_and(|c| ["status", "reason", "message"].iter().all(|f| c[*f] == want[*f]));
        if same {
            continue;
        }
        want["lastTransitionTime"] = json!(now_rfc3339());
        let body = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "FlowSchema",
            "metadata": {"name": name}, "status": {"conditions": [want]}});
        let mut req = super::request(registry, (GROUP, FLOW_SCHEMAS), None, Some(&name))?;
        req.subresource = Some("status".into());
        let patch = PatchOptions {
            dry_run: false,
            field_manager: CONSUMER.into(),
            field_validation: Directive::Warn,
            force: true,
        };
        let bytes = serde_json::to_vec(&body).map_err(|e| ApiError::internal(e.to_string()))?;
        super::settled(
            update::patch(store, &req, &patch, PatchType::Apply, &bytes)
                .await
                .map(drop),
        )?;
    }
    Ok(())
}

/// Whether a cache key is a FlowSchema or a priority level.
fn relevant(key: &str) -> bool {
    key.starts_with(&keys::type_prefix(GROUP, FLOW_SCHEMAS))
        || key.starts_with(&keys::type_prefix(GROUP, PRIORITY_LEVELS))
}

/// Runs the producer and consumer while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>) {
    super::run_while_leader(store, "priority-and-fairness-config", move |store| {
        let live = live.clone();
        async move {
            super::run_passes(&store, "priority-and-fairness-config", relevant, || {
                let (store, live) = (&store, &live);
                async move { reconcile(store, &live.current()).await }
            })
            .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_object(kind: &str, name: &str) -> Value {
        defaults::objects()
            .expect("defaults")
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
            .expect("a default")
    }

    #[test]
    fn mandatory_objects_are_restored_and_suggested_ones_follow_their_annotation() {
        let catch_all = default_object("PriorityLevelConfiguration", "catch-all");
        let mut changed = catch_all.clone();
        changed["spec"]["limited"]["nominalConcurrencyShares"] = json!(99);
        changed["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("false");
        let restored = revised(&catch_all, &changed).expect("restored");
        assert_eq!(restored["spec"], catch_all["spec"]);
        assert_eq!(restored["metadata"]["annotations"][AUTOUPDATE_ANNOTATION], "true");

        let system = default_object("PriorityLevelConfiguration", "system");
        assert!(revised(&system, &system).is_none(), "as shipped: nothing to do");
        let mut edited = system.clone();
        edited["spec"]["limited"]["nominalConcurrencyShares"] = json!(5);
        assert_eq!(
            revised(&system, &edited).expect("reverted")["spec"],
            system["spec"],
            "annotation true: reverted"
        );
        edited["metadata"]["annotations"][AUTOUPDATE_ANNOTATION] = json!("False");
        assert!(
            revised(&system, &edited).is_none(),
            "annotation false: left alone"
        );
        // No annotation: generation 1 is still the producer's; later, the user's.
        let mut unmarked = edited.clone();
        unmarked["metadata"]["annotations"] = json!({});
        unmarked["metadata"]["generation"] = json!(2);
        let marked = revised(&system, &unmarked).expect("marked");
        assert_eq!(marked["metadata"]["annotations"][AUTOUPDATE_ANNOTATION], "false");
        assert_eq!(marked["spec"]["limited"]["nominalConcurrencyShares"], 5);

        // The exempt level keeps the operator's shares.
        let exempt = default_object("PriorityLevelConfiguration", "exempt");
        let mut shared = exempt.clone();
        shared["spec"]["exempt"]["nominalConcurrencyShares"] = json!(10);
        assert!(revised(&exempt, &shared).is_none());
    }

    #[test]
    fn specs_compare_with_kubes_defaults_filled_in() {
        let spec = json!({"limited": {"limitResponse": {"type": "Queue"}}});
        let full = json!({"limited": {"nominalConcurrencyShares": 30, "lendablePercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}});
        assert_eq!(defaulted("PriorityLevelConfiguration", &spec), full);
        let fs = json!({"rules": [{"resourceRules": [{"clusterScope": false, "verbs": ["*"]}]}]});
        assert_eq!(
            defaulted("FlowSchema", &fs),
            json!({"matchingPrecedence": 1000, "rules": [{"resourceRules": [{"verbs": ["*"]}]}]})
        );
    }

    #[test]
    fn the_dangling_condition_says_whether_the_level_exists() {
        assert_eq!(
            dangling("exempt", true)["message"],
            "This FlowSchema references the PriorityLevelConfiguration object named \"exempt\" and it exists"
        );
        assert_eq!(dangling("x", false)["reason"], "NotFound");
    }
}
