//! A container's resource requirements, as kube's `ValidateResourceRequirements` checks them:
//! each resource name valid for a container (a standard one — `cpu`, `memory`,
//! `ephemeral-storage`, `hugepages-<size>` — or a fully qualified extended resource), no
//! quantity negative, a request no larger than its limit (equal to it for a
//! resource that cannot be overcommitted: extended resources and huge pages, whose requests
//! need a limit), and huge pages only with cpu or memory. Quantities are shown as kube shows
//! them (`500m` for `0.5`).

use serde_json::{Map, Value};

use crate::machinery::errors::go_quote;
use crate::machinery::meta::{qualified_name_error, Causes};
use crate::machinery::qos::{format_quantity, quantity_value};

/// The resources a container may name without a domain.
const CONTAINER_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];
/// Other resource names kube calls standard (quota and limit names), which a container may
/// still not use.
const STANDARD_RESOURCES: [&str; 19] = [
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "requests.storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "services.nodeports",
    "services.loadbalancers",
    "count/pods",
    "resourceclaims",
];
const HUGE_PAGES: &str = "hugepages-";

/// A resource in the `kubernetes.io` domain or without one.
fn native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn huge_pages(name: &str) -> bool {
    name.starts_with(HUGE_PAGES)
}

/// kube's `IsOvercommitAllowed`.
fn overcommit_allowed(name: &str) -> bool {
    native(name) && !huge_pages(name)
}

/// kube's `validateContainerResourceName`.
fn name_errors(name: &str, path: &str, causes: &mut Causes) {
    let invalid = |why: &str| {
        (
            path.to_string(),
            format!("Invalid value: {}: {why}", go_quote(name)),
        )
    };
    if let Some(e) = qualified_name_error(name) {
        causes.push((path.to_string(), e));
        return;
    }
    if !name.contains('/') {
        let standard = CONTAINER_RESOURCES.contains(&name)
            || STANDARD_RESOURCES.contains(&name)
            || huge_pages(name)
            || name.strip_prefix("requests.").is_some_and(huge_pages);
        if !standard {
            causes.push(invalid("must be a standard resource type or fully qualified"));
        }
        if !(CONTAINER_RESOURCES.contains(&name) || huge_pages(name)) {
            causes.push(invalid("must be a standard resource for containers"));
        }
    } else if !native(name) {
        let extended =
            !name.starts_with("requests.") && qualified_name_error(&format!("requests.{name}")).is_none();
        if !extended {
            causes.push(invalid("doesn't follow extended resource name standard"));
        }
    }
}

/// A list of quantities by resource name, each with its value and how kube shows it (`None`:
/// not a quantity, which kube refuses when it decodes the object, not here).
fn quantities(list: Option<&Map<String, Value>>) -> Vec<(&str, Option<(i128, String)>)> {
    list.into_iter()
        .flatten()
        .map(|(name, v)| {
            let parsed = quantity_value(v).map(|(q, binary)| (q, format_quantity(q, binary)));
            (name.as_str(), parsed)
        })
        .collect()
}

/// Checks the `resources` of a container at `path`.
pub fn requirements(resources: &Value, path: &str, causes: &mut Causes) {
    let limits_path = format!("{path}.limits");
    let requests_path = format!("{path}.requests");
    let limits = quantities(resources.get("limits").and_then(Value::as_object));
    let requests = quantities(resources.get("requests").and_then(Value::as_object));
    let mut compute = false;
    let mut pages = false;
    let mut quantity = |name: &str, parsed: &Option<(i128, String)>, here: String, causes: &mut Causes| {
        name_errors(name, &here, causes);
        if let Some((_, shown)) = parsed.as_ref().filter(|(q, _)| *q < 0) {
            causes.push((
                here,
                format!(
                    "Invalid value: {}: must be greater than or equal to 0",
                    go_quote(shown)
                ),
            ));
        }
        compute |= ["cpu", "memory"].contains(&name);
        pages |= huge_pages(name);
    };
    for (name, parsed) in &limits {
        quantity(name, parsed, format!("{limits_path}[{name}]"), causes);
    }
    for (name, request) in &requests {
        quantity(name, request, format!("{requests_path}[{name}]"), causes);
        let limit = limits.iter().find(|(l, _)| l == name);
        match (request, limit) {
            (Some((r, shown)), Some((_, Some((l, limit_shown))))) => {
                if r != l && !overcommit_allowed(name) {
                    causes.push((
                        requests_path.clone(),
                        format!(
                            "Invalid value: {}: must be equal to {name} limit of {limit_shown}",
                            go_quote(shown)
                        ),
                    ));
                } else if r > l {
                    causes.push((
                        requests_path.clone(),
                        format!(
                            "Invalid value: {}: must be less than or equal to {name} limit of {limit_shown}",
                            go_quote(shown)
                        ),
                    ));
                }
            }
            (_, None) if !overcommit_allowed(name) => causes.push((
                limits_path.clone(),
                "Required value: Limit must be set for non overcommitable resources".to_string(),
            )),
            _ => {}
        }
    }
    if pages && !compute {
        causes.push((
            path.to_string(),
            "Forbidden: HugePages require cpu or memory".to_string(),
        ));
    }
}

/// The resources whose quantities kube counts in whole units (`IsIntegerResourceName`), beside
/// extended resources.
const INTEGER_RESOURCES: [&str; 9] = [
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// kube's `IsExtendedResourceName`: outside `kubernetes.io`, and `requests.` before it a
/// qualified name.
fn extended(name: &str) -> bool {
    !native(name)
        && !name.starts_with("requests.")
        && qualified_name_error(&format!("requests.{name}")).is_none()
}

/// kube's `ValidateResourceQuantityValue` of the quantity `value` of `name` at `path`: not
/// negative, and whole for a resource counted in units.
pub fn quantity(name: &str, value: &Value, path: &str, causes: &mut Causes) {
    let Some((q, binary)) = quantity_value(value) else {
        return;
    };
    let shown = go_quote(&format_quantity(q, binary));
    if q < 0 {
        causes.push((
            path.to_string(),
            format!("Invalid value: {shown}: must be greater than or equal to 0"),
        ));
    }
    let whole = q % 1_000_000_000 == 0;
    if (INTEGER_RESOURCES.contains(&name) || extended(name)) && !whole {
        causes.push((
            path.to_string(),
            format!("Invalid value: {shown}: must be an integer"),
        ));
    }
}
