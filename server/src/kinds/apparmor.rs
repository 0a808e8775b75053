//! The AppArmor version skew of kube's pod strategy (`applyAppArmorVersionSkew`): a new pod
//! whose deprecated `container.apparmor.security.beta.kubernetes.io/<container>` annotation
//! names a profile the container's `appArmorProfile` field does not, gets the field, so that
//! clients written before the field existed keep working. Windows pods, invalid profiles and a
//! profile the pod already sets for all its containers are left alone.

use serde_json::{json, Map, Value};

const ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The profile field an annotation's value stands for (kube's `ApparmorFieldForAnnotation`),
/// if it is a valid one (kube skips a `localhost/` without a name, or padded with spaces).
fn field_for(annotation: &str) -> Option<Value> {
    match annotation {
        "runtime/default" => Some(json!({"type": "RuntimeDefault"})),
        "unconfined" => Some(json!({"type": "Unconfined"})),
        _ => annotation
            .strip_prefix("localhost/")
            .filter(|name| !name.is_empty() && name.trim() == *name && name.len() <= 4095)
            .map(|name| json!({"type": "Localhost", "localhostProfile": name})),
    }
}

/// Copies the AppArmor annotations of the new pod `pod` to its containers' fields.
pub fn fields_from_annotations(pod: &mut Value) {
    if pod["spec"]["os"]["name"] == "windows" {
        return;
    }
    let annotations = pod["metadata"]["annotations"].clone();
    let pod_profile = pod["spec"]["securityContext"]["appArmorProfile"].clone();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(containers) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let Some(annotation) = annotations
                .get(format!("{ANNOTATION}{name}"))
                .and_then(Value::as_str)
            else {
                continue;
            };
            let has_field = c
                .get("securityContext")
                .and_then(|sc| sc.get("appArmorProfile"))
                .is_some_and(|p| !p.is_null());
            match field_for(annotation) {
                Some(profile) if !has_field && profile != pod_profile => {
                    let sc = c
                        .entry("securityContext")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !sc.is_object() {
                        *sc = Value::Object(Map::new());
                    }
                    sc["appArmorProfile"] = profile;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::fields_from_annotations;

    #[test]
    fn annotations_become_fields_where_the_container_has_none() {
        let mut pod = json!({
            "metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/a": "localhost/k8s-nginx",
                "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
                "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
                "container.apparmor.security.beta.kubernetes.io/d": "localhost/",
                "container.apparmor.security.beta.kubernetes.io/i": "unconfined"}},
            "spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                "initContainers": [{"name": "i"}],
                "containers": [{"name": "a"}, {"name": "b"},
                    {"name": "c", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
                    {"name": "d"}, {"name": "e"}]}});
        fields_from_annotations(&mut pod);
        assert_eq!(
            pod["spec"]["initContainers"],
            json!([{"name": "i", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}])
        );
        assert_eq!(
            pod["spec"]["containers"],
            json!([
                {"name": "a", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-nginx"}}},
                {"name": "b"},
                {"name": "c", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
                {"name": "d"},
                {"name": "e"},
            ])
        );
        let mut windows = json!({"metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/a": "unconfined"}},
            "spec": {"os": {"name": "windows"}, "containers": [{"name": "a"}]}});
        let before = windows.clone();
        fields_from_annotations(&mut windows);
        assert_eq!(windows, before);
    }
}
