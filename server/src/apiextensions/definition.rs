//! The CustomResourceDefinition itself: what kube-apiserver's apiextensions strategy defaults,
//! the validation that keeps a definition servable, and the status its controllers would set
//! (accepted names, `NamesAccepted` and `Established`, stored versions) — set here as part of
//! the write, so that a definition is established the moment it is stored.

use serde_json::{json, Value};

use crate::machinery::meta::dns1035_label_reasons;
use crate::machinery::timestamp::now_rfc3339;
use crate::webhook;

/// The finalizer that keeps a definition until its objects are deleted.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Most selectable fields a version may declare (kube-apiserver's limit).
const MAX_SELECTABLE_FIELDS: usize = 8;

/// The annotation a definition in a Kubernetes-owned group must carry.
const APPROVAL: &str = "api-approved.kubernetes.io";

/// Lower-case DNS-1035 label (plural and singular names).
fn is_dns_label(s: &str) -> bool {
    dns1035_label_reasons(s.as_bytes()).is_empty()
}

/// A kind-like name: starts with a letter, letters and digits only.
fn is_kind(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic()) && s.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The causes that make a definition invalid (empty when it is valid), as kube-apiserver's
/// validation words them.
pub fn validate(crd: &Value) -> Vec<(String, String)> {
    let mut causes: Vec<(String, String)> = Vec::new();
    let mut cause = |field: &str, message: String| causes.push((field.to_string(), message));
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    if group.is_empty() {
        cause("spec.group", "Required value".into());
    } else if !group.contains('.') {
        cause(
            "spec.group",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        );
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if name != format!("{plural}.{group}") {
        cause(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        );
    }
    let protected = group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io");
    if protected
        && crd["metadata"]["annotations"][APPROVAL]
            .as_str()
            .is_none_or(str::is_empty)
    {
        cause(
            &format!("metadata.annotations[{APPROVAL}]"),
            format!("Required value: protected groups must have approval annotation {APPROVAL:?}, see https://github.com/kubernetes/enhancements/pull/1111"),
        );
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        Some(other) => cause(
            "spec.scope",
            format!("Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""),
        ),
        None => cause("spec.scope", "Required value".into()),
    }
    if plural.is_empty() {
        cause("spec.names.plural", "Required value".into());
    } else if !is_dns_label(plural) {
        cause(
            "spec.names.plural",
            format!("Invalid value: {plural:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"),
        );
    }
    if let Some(singular) = names["singular"].as_str().filter(|s| !is_dns_label(s)) {
        cause(
            "spec.names.singular",
            format!("Invalid value: {singular:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"),
        );
    }
    match names["kind"].as_str() {
        None | Some("") => cause("spec.names.kind", "Required value".into()),
        Some(k) if !is_kind(k) => cause(
            "spec.names.kind",
            format!("Invalid value: {k:?}: may have mixed case, but should otherwise match: ^[a-zA-Z][a-zA-Z0-9]*$"),
        ),
        Some(_) => {}
    }
    if let Some(k) = names["listKind"].as_str().filter(|k| !is_kind(k)) {
        cause(
            "spec.names.listKind",
            format!("Invalid value: {k:?}: may have mixed case, but should otherwise match: ^[a-zA-Z][a-zA-Z0-9]*$"),
        );
    }
    let versions = spec["versions"].as_array().map(Vec::as_slice).unwrap_or_default();
    if versions.is_empty() {
        cause(
            "spec.versions",
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        );
    }
    let storage = versions.iter().filter(|v| v["storage"] == true).count();
    if !versions.is_empty() && storage != 1 {
        cause(
            "spec.versions",
            format!(
                "Invalid value: {}: must have exactly one version marked as storage version",
                json!(versions)
            ),
        );
    }
    if !versions.is_empty() && !versions.iter().any(|v| v["served"] == true) {
        cause(
            "spec.versions",
            format!(
                "Invalid value: {}: must have at least one version marked as served",
                json!(versions)
            ),
        );
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        match v["name"].as_str() {
            None | Some("") => cause(&format!("{at}.name"), "Required value".into()),
            Some(n) if !is_dns_label(n) => cause(
                &format!("{at}.name"),
                format!("Invalid value: {n:?}: a DNS-1035 label must consist of lower case alphanumeric characters or '-'"),
            ),
            Some(n) if seen.contains(&n) => cause(&format!("{at}.name"), format!("Duplicate value: {n:?}")),
            Some(n) => seen.push(n),
        }
        let schema = &v["schema"]["openAPIV3Schema"];
        if !schema.is_object() {
            cause(
                &format!("{at}.schema.openAPIV3Schema"),
                "Required value: schemas are required".into(),
            );
        } else if schema["type"] != "object" {
            cause(
                &format!("{at}.schema.openAPIV3Schema.type"),
                match schema["type"].as_str() {
                    None => "Required value: must not be empty at the root".into(),
                    Some(t) => format!("Invalid value: {t:?}: must be object at the root"),
                },
            );
        }
        for (field, message) in
            super::structural::invalid_patterns(schema, &format!("{at}.schema.openAPIV3Schema"))
        {
            cause(&field, message);
        }
        // kube checks a schema all versions share once, under `spec.validation`.
        let shared = versions.iter().all(|o| o["schema"]["openAPIV3Schema"] == *schema);
        if !shared || i == 0 {
            let rules_at = if shared {
                "spec.validation.openAPIV3Schema".to_string()
            } else {
                format!("{at}.schema.openAPIV3Schema")
            };
            for (field, message) in super::rules::check(schema, &rules_at) {
                cause(&field, message);
            }
        }
        for (j, column) in v["additionalPrinterColumns"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let at = format!("{at}.additionalPrinterColumns[{j}]");
            if column["name"].as_str().is_none_or(str::is_empty) {
                cause(&format!("{at}.name"), "Required value".into());
            }
            if column["jsonPath"].as_str().is_none_or(str::is_empty) {
                cause(&format!("{at}.JSONPath"), "Required value".into());
            }
            match column["type"].as_str() {
                Some("integer" | "number" | "string" | "boolean" | "date") => {}
                other => cause(
                    &format!("{at}.type"),
                    format!(
                        "Unsupported value: {:?}: supported values: \"boolean\", \"date\", \"integer\", \"number\", \"string\"",
                        other.unwrap_or_default()
                    ),
                ),
            }
        }
        let selectable = v["selectableFields"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if selectable.len() > MAX_SELECTABLE_FIELDS {
            cause(
                &format!("{at}.selectableFields"),
                format!(
                    "Too many: {}: must have at most {MAX_SELECTABLE_FIELDS} items",
                    selectable.len()
                ),
            );
        }
        for (j, field) in selectable.iter().enumerate() {
            let path = field["jsonPath"].as_str().unwrap_or_default();
            if super::field_path(path).is_none() {
                cause(
                    &format!("{at}.selectableFields[{j}].jsonPath"),
                    format!("Invalid value: {path:?}: must be a simple json path starting with ."),
                );
            }
        }
        if let Some(scale) = v["subresources"].get("scale") {
            for (field, required) in [
                ("specReplicasPath", true),
                ("statusReplicasPath", true),
                ("labelSelectorPath", false),
            ] {
                match scale[field].as_str() {
                    None if !required => {}
                    None => cause(
                        &format!("{at}.subresources.scale.{field}"),
                        "Required value".into(),
                    ),
                    Some(p) if super::field_path(p).is_none() => cause(
                        &format!("{at}.subresources.scale.{field}"),
                        format!("Invalid value: {p:?}: should be a json path under either .spec or .status"),
                    ),
                    Some(_) => {}
                }
            }
        }
    }
    conversion(&spec["conversion"], &mut causes);
    causes
}

/// The ConversionReview versions kube speaks.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// kube's `validateCustomResourceConversion` (its fields named as in the internal version, as
/// kube's messages name them): a `Webhook` strategy needs a client configuration and review
/// versions naming one kube speaks; `None` may have neither.
fn conversion(conversion: &Value, causes: &mut Vec<(String, String)>) {
    const AT: &str = "spec.conversion";
    let webhook = &conversion["webhook"];
    let client = webhook.get("clientConfig").filter(|c| c.is_object());
    let versions = webhook["conversionReviewVersions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut cause = |field: &str, message: String| causes.push((format!("{AT}.{field}"), message));
    match conversion["strategy"].as_str().unwrap_or("None") {
        "Webhook" => {}
        "None" => {
            let forbidden = "Forbidden: should not be set when strategy is not set to Webhook";
            if client.is_some() {
                cause("webhookClientConfig", forbidden.into());
            }
            if !versions.is_empty() {
                cause("conversionReviewVersions", forbidden.into());
            }
            return;
        }
        other => {
            cause(
                "strategy",
                format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
            );
            return;
        }
    }
    match client {
        None => causes.push((
            format!("{AT}.webhookClientConfig"),
            "Required value: required when strategy is set to Webhook".into(),
        )),
        Some(cc) => match (
            cc.get("url").and_then(Value::as_str),
            cc.get("service").filter(|s| s.is_object()),
        ) {
            (Some(url), None) => webhook::validate_url(url, &format!("{AT}.webhookClientConfig.url"), causes),
            (None, Some(svc)) => {
                webhook::validate_service(svc, &format!("{AT}.webhookClientConfig.service"), causes)
            }
            _ => causes.push((
                format!("{AT}.webhookClientConfig"),
                "Required value: exactly one of url or service is required".into(),
            )),
        },
    }
    let at = format!("{AT}.conversionReviewVersions");
    if versions.is_empty() {
        causes.push((at, "Required value".into()));
        return;
    }
    for (i, v) in versions.iter().enumerate() {
        let text = v.as_str().unwrap_or_default();
        if versions[..i].contains(v) {
            causes.push((
                format!("{at}[{i}]"),
                format!("Invalid value: {text:?}: duplicate version"),
            ));
        } else {
            for why in dns1035_label_reasons(text.as_bytes()) {
                causes.push((format!("{at}[{i}]"), format!("Invalid value: {text:?}: {why}")));
            }
        }
    }
    if !versions
        .iter()
        .any(|v| v.as_str().is_some_and(|v| REVIEW_VERSIONS.contains(&v)))
    {
        let shown: Vec<String> = versions
            .iter()
            .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
            .collect();
        causes.push((
            at,
            format!(
                "Invalid value: []string{{{}}}: must include at least one of {}",
                shown.join(", "),
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// The causes that make an update of `old` to `new` invalid beyond [`validate`]: the scope is
/// immutable, and a version objects may be stored in cannot be removed.
pub fn validate_update(old: &Value, new: &Value) -> Vec<(String, String)> {
    let mut causes = validate(new);
    if old["spec"]["scope"] != new["spec"]["scope"] {
        causes.push((
            "spec.scope".into(),
            format!("Invalid value: {}: field is immutable", new["spec"]["scope"]),
        ));
    }
    let versions: Vec<&str> = new["spec"]["versions"]
        .as_array()
        .map(|v| v.iter().filter_map(|v| v["name"].as_str()).collect())
        .unwrap_or_default();
    for stored in old["status"]["storedVersions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if let Some(s) = stored.as_str().filter(|s| !versions.contains(s)) {
            causes.push((
                "status.storedVersions".into(),
                format!("Invalid value: {}: must appear in spec.versions", json!([s])),
            ));
        }
    }
    causes
}

/// kube-apiserver's defaults for a definition: `singular` and `listKind` names, the `None`
/// conversion strategy, and the cleanup finalizer on a new one.
pub fn apply_defaults(crd: &mut Value, creating: bool) {
    if !crd["spec"]["names"].is_object() {
        return;
    }
    if let Some(kind) = crd["spec"]["names"]["kind"].as_str().map(str::to_string) {
        if crd["spec"]["names"]["singular"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            crd["spec"]["names"]["singular"] = json!(kind.to_ascii_lowercase());
        }
        if crd["spec"]["names"]["listKind"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            crd["spec"]["names"]["listKind"] = json!(format!("{kind}List"));
        }
    }
    if !crd["spec"]["conversion"].is_object() {
        crd["spec"]["conversion"] = json!({"strategy": "None"});
    }
    if creating {
        let finalizers = &mut crd["metadata"]["finalizers"];
        if !finalizers.is_array() {
            *finalizers = json!([]);
        }
        if let Some(list) = finalizers.as_array_mut() {
            if !list.iter().any(|f| f == CLEANUP_FINALIZER) {
                list.push(json!(CLEANUP_FINALIZER));
            }
        }
    }
}

/// The status of a stored definition: its names accepted, established (or terminating), and
/// every version objects may have been stored in. `old` is the status before the write.
pub fn status(crd: &Value, old: Option<&Value>) -> Value {
    let names = &crd["spec"]["names"];
    let mut accepted = json!({
        "plural": names["plural"], "singular": names["singular"],
        "kind": names["kind"], "listKind": names["listKind"],
    });
    for optional in ["shortNames", "categories"] {
        if names[optional].is_array() {
            accepted[optional] = names[optional].clone();
        }
    }
    let now = now_rfc3339();
    let since = |kind: &str, status: &str| -> Value {
        old.and_then(|o| o["conditions"].as_array())
            .and_then(|c| c.iter().find(|c| c["type"] == kind && c["status"] == status))
            .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone())
    };
    let mut conditions = vec![
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
               "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted", "True")}),
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
               "message": "the initial names have been accepted", "lastTransitionTime": since("Established", "True")}),
    ];
    if crd["metadata"]["deletionTimestamp"].is_string() {
        conditions.push(json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress", "lastTransitionTime": since("Terminating", "True")}));
    }
    let mut stored: Vec<Value> = old
        .and_then(|o| o["storedVersions"].as_array())
        .cloned()
        .unwrap_or_default();
    let storage = crd["spec"]["versions"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["storage"] == true))
        .map(|v| v["name"].clone());
    if let Some(s) = storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    json!({"acceptedNames": accepted, "conditions": conditions, "storedVersions": stored})
}

#[cfg(test)]
mod tests {
    use super::super::tests::crontab_crd;
    use super::*;

    #[test]
    fn a_good_definition_validates_and_gets_defaults_and_status() {
        let mut crd = crontab_crd();
        assert!(validate(&crd).is_empty(), "{:?}", validate(&crd));
        apply_defaults(&mut crd, true);
        assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList");
        assert_eq!(crd["spec"]["conversion"]["strategy"], "None");
        assert_eq!(crd["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
        let s = status(&crd, None);
        assert_eq!(s["acceptedNames"]["shortNames"], json!(["ct"]));
        assert_eq!(s["storedVersions"], json!(["v1"]));
        assert_eq!(s["conditions"][1]["type"], "Established");
        let again = status(&crd, Some(&s));
        assert_eq!(again["conditions"], s["conditions"], "transition times are kept");
        crd["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let deleting = status(&crd, Some(&s));
        assert_eq!(deleting["conditions"][2]["type"], "Terminating");
        assert_eq!(deleting["conditions"][2]["reason"], "InstanceDeletionInProgress");
    }

    #[test]
    fn bad_definitions_name_every_problem() {
        let mut crd = crontab_crd();
        crd["metadata"]["name"] = json!("crontabs");
        crd["spec"]["group"] = json!("example");
        crd["spec"]["scope"] = json!("Global");
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][1]["schema"] = json!({});
        crd["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": "spec.image"}]);
        let fields: Vec<String> = validate(&crd).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.group",
                "metadata.name",
                "spec.scope",
                "spec.versions",
                "spec.versions[0].selectableFields[0].jsonPath",
                "spec.versions[1].schema.openAPIV3Schema"
            ]
        );
        let mut bad_pattern = crontab_crd();
        bad_pattern["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["image"]["pattern"] = json!("([a-z");
        let causes = validate(&bad_pattern);
        assert_eq!(
            causes[0].0,
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[image].pattern"
        );
        assert!(
            causes[0]
                .1
                .starts_with("Invalid value: \"([a-z\": must be a valid regular expression"),
            "{causes:?}"
        );
        let mut protected = crontab_crd();
        protected["spec"]["group"] = json!("stable.k8s.io");
        protected["metadata"]["name"] = json!("crontabs.stable.k8s.io");
        assert_eq!(
            validate(&protected)[0].0,
            "metadata.annotations[api-approved.kubernetes.io]"
        );
        let old = json!({"spec": {"scope": "Namespaced"}, "status": {"storedVersions": ["v0", "v1"]}});
        let mut new = crontab_crd();
        new["spec"]["versions"].as_array_mut().unwrap().truncate(2);
        let fields: Vec<String> = validate_update(&old, &new).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["status.storedVersions"]);
    }
}
