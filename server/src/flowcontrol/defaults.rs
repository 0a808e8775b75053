//! kube-apiserver's default priority and fairness configuration, as data (`defaults.yaml`):
//! the mandatory FlowSchemas and PriorityLevelConfigurations (`exempt`, `catch-all`) that the
//! dispatcher imagines while they are missing and the configuration producer always restores,
//! and the suggested ones it creates and keeps current while their
//! `apf.kubernetes.io/autoupdate-spec` annotation lets it.

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

/// The configuration, as data.
const DEFAULTS: &str = include_str!("defaults.yaml");

/// The annotation that says whether the configuration producer may rewrite an object's spec.
pub const AUTOUPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";
/// The names of the mandatory objects (a FlowSchema and a priority level each).
pub const MANDATORY: [&str; 2] = ["exempt", "catch-all"];
/// The FlowSchema and priority level of requests from `system:masters`.
pub const EXEMPT: &str = "exempt";
/// The FlowSchema and priority level of what no other FlowSchema matches.
pub const CATCH_ALL: &str = "catch-all";

/// The embedded configuration does not parse (a defect of the build, reported, not panicked on).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the default priority and fairness configuration does not parse: {0}")]
pub struct DefaultsError(String);

/// The default objects, each with the autoupdate annotation set to `"true"`, in kube's order
/// (mandatory priority levels and FlowSchemas, then the suggested ones). Parsed once, on first
/// use.
pub fn objects() -> Result<&'static [Value], DefaultsError> {
    static PARSED: OnceLock<Result<Vec<Value>, DefaultsError>> = OnceLock::new();
    PARSED
        .get_or_init(|| {
            yaml_serde::Deserializer::from_str(DEFAULTS)
                .map(|doc| {
                    let mut v = Value::deserialize(doc).map_err(|e| DefaultsError(e.to_string()))?;
                    v["metadata"]["annotations"] = serde_json::json!({AUTOUPDATE_ANNOTATION: "true"});
                    Ok(v)
                })
                .collect()
        })
        .as_deref()
        .map_err(Clone::clone)
}

/// Whether `name` is one of the mandatory objects.
pub fn is_mandatory(name: &str) -> bool {
    MANDATORY.contains(&name)
}

/// The default FlowSchema named `name` (a mandatory one, for the dispatcher to imagine).
pub fn flow_schema(name: &str) -> Option<FlowSchema> {
    typed("FlowSchema", name)
}

/// The default priority level named `name`.
pub fn priority_level(name: &str) -> Option<PriorityLevelConfiguration> {
    typed("PriorityLevelConfiguration", name)
}

fn typed<T: serde::de::DeserializeOwned>(kind: &str, name: &str) -> Option<T> {
    objects()
        .ok()?
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .and_then(|o| T::deserialize(o).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_parse_as_kube_lists_them() {
        let objects = objects().expect("the defaults parse");
        let names = |kind: &str| -> Vec<String> {
            objects
                .iter()
                .filter(|o| o["kind"] == kind)
                .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(
            names("PriorityLevelConfiguration"),
            [
                "catch-all",
                "exempt",
                "system",
                "node-high",
                "leader-election",
                "workload-high",
                "workload-low",
                "global-default"
            ]
        );
        assert_eq!(
            names("FlowSchema"),
            [
                "exempt",
                "catch-all",
                "system-nodes",
                "system-node-high",
                "probes",
                "system-leader-election",
                "kube-controller-manager",
                "kube-scheduler",
                "kube-system-service-accounts",
                "service-accounts",
                "global-default"
            ]
        );
        for o in objects {
            assert_eq!(o["metadata"]["annotations"][AUTOUPDATE_ANNOTATION], "true");
        }
        let shares: i64 = objects
            .iter()
            .filter_map(|o| {
                o["spec"]["limited"]["nominalConcurrencyShares"]
                    .as_i64()
                    .or(o["spec"]["exempt"]["nominalConcurrencyShares"].as_i64())
            })
            .sum();
        assert_eq!(shares, 245, "kube's share sum");
        assert!(flow_schema(CATCH_ALL).is_some() && priority_level(EXEMPT).is_some());
    }
}
