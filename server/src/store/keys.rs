//! The storage key layout, in one place: every object of type `<group>/<plural>` is stored at
//! `/registry/<group or "core">/<plural>/[<namespace>/]<name>`, so a type's collection (and a
//! namespace's part of it) is a key prefix and a list is a range scan. Records kuberaft keeps
//! for itself live under [`INTERNAL_PREFIX`].

use crate::scheme::ResourceType;

/// Everything the API stores lives under this prefix.
pub const ROOT: &str = "/registry/";

/// Where kuberaft keeps records of its own (e.g. NodePort allocations) that are JSON but not
/// API objects: they have no metadata, and the watch cache leaves them out.
pub const INTERNAL_PREFIX: &str = "/registry/kuberaft/";

/// The prefix of every object of one type.
pub fn type_prefix(group: &str, plural: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{ROOT}{group}/{plural}/")
}

/// The key of one object (`namespace` is `None` for cluster-scoped types).
pub fn object(group: &str, plural: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{}{ns}/{name}", type_prefix(group, plural)),
        None => format!("{}{name}", type_prefix(group, plural)),
    }
}

/// The prefix of every object of `rt` (in the collection of the kind it is stored as:
/// events.k8s.io Events are core Events).
pub fn of_type(rt: &ResourceType) -> String {
    type_prefix(rt.storage_group(), &rt.plural)
}

/// The key of one object of `rt` (the namespace is ignored for cluster-scoped types).
pub fn of_object(rt: &ResourceType, namespace: Option<&str>, name: &str) -> String {
    object(
        rt.storage_group(),
        &rt.plural,
        namespace.filter(|_| rt.namespaced),
        name,
    )
}

/// The `(group, plural)` a storage key belongs to (`/registry/<group|core>/<plural>/...`);
/// kuberaft's own records are group `kuberaft`.
pub fn type_of_key(key: &str) -> (&str, &str) {
    let mut parts = key.strip_prefix(ROOT).unwrap_or("").split('/');
    let group = match parts.next() {
        Some("core") | None => "",
        Some(g) => g,
    };
    (group, parts.next().unwrap_or(""))
}

/// The prefix of kuberaft's own records of one kind (`servicenodeports`, ...).
pub fn internal_prefix(kind: &str) -> String {
    format!("{INTERNAL_PREFIX}{kind}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_registry_layout() {
        assert_eq!(type_prefix("", "pods"), "/registry/core/pods/");
        assert_eq!(
            object("apps", "deployments", Some("shop"), "web"),
            "/registry/apps/deployments/shop/web"
        );
        assert_eq!(
            object("", "namespaces", None, "shop"),
            "/registry/core/namespaces/shop"
        );
        assert!(internal_prefix("servicenodeports").starts_with(INTERNAL_PREFIX));
        assert!(INTERNAL_PREFIX.starts_with(ROOT));
        assert_eq!(
            type_of_key("/registry/apps/deployments/shop/web"),
            ("apps", "deployments")
        );
        assert_eq!(type_of_key("/registry/core/namespaces/shop"), ("", "namespaces"));
    }
}
