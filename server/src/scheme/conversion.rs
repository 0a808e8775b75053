//! Types served in several versions but stored in one, kube-apiserver's conversion in the
//! scheme: every object of a collection is stored in its storage version, and a request works
//! in the version it names — a stored object is converted to it when read ([`to_served`]), a
//! written one back when stored ([`to_stored`]). A custom resource's versions differ only in
//! `apiVersion` (the `None` conversion strategy); a built-in type served in another version
//! than its storage one has a pair of conversion functions, as data ([`BUILTIN`]). A built-in
//! type kube stores as another group's kind (events.k8s.io Events are core Events) has its
//! pair there too, and shares that kind's collection: an Event written through either group is
//! one object, read through both (the store's keys follow [`ResourceType::storage_group`]).
//! Admission's equivalent resources convert through the same pairs ([`between_builtin`]).

use serde_json::{json, Value};

use crate::scheme::{autoscaling, events, ResourceType};

/// A built-in kind served as `group/version` and stored as `storage_group/storage_version`.
#[derive(Debug)]
pub struct Conversion {
    /// The group of the kind.
    pub group: &'static str,
    /// The served version that is not the storage version.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The group objects are stored in (kube's).
    pub storage_group: &'static str,
    /// The version objects are stored in.
    pub storage_version: &'static str,
    /// Turns an object of `version` into `storage_version` (fields only; `apiVersion` is set
    /// by the caller).
    pub to_storage: fn(&mut Value),
    /// Turns a stored object into `version`.
    pub from_storage: fn(&mut Value),
}

/// The built-in kinds kube-apiserver 1.35 serves in more than one version or group.
pub const BUILTIN: &[Conversion] = &[
    Conversion {
        group: "autoscaling",
        version: "v1",
        kind: "HorizontalPodAutoscaler",
        storage_group: "autoscaling",
        storage_version: "v2",
        to_storage: autoscaling::v1_to_v2,
        from_storage: autoscaling::v2_to_v1,
    },
    Conversion {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        storage_group: "",
        storage_version: "v1",
        to_storage: events::to_core,
        from_storage: events::from_core,
    },
];

impl Conversion {
    /// The `apiVersion` of the storage kind.
    fn storage_api_version(&self) -> String {
        match self.storage_group {
            "" => self.storage_version.to_string(),
            group => format!("{group}/{}", self.storage_version),
        }
    }
}

/// The conversion of a built-in type to the kind kube stores it as.
pub fn to_storage_kind(rt: &ResourceType) -> Option<&'static Conversion> {
    if rt.custom.is_some() {
        return None;
    }
    BUILTIN
        .iter()
        .find(|c| (c.group, c.version, c.kind) == (&*rt.group, &*rt.version, &*rt.kind))
}

/// The conversion of a built-in type served in another version or group than its storage
/// kind, whose collection it shares.
pub fn builtin(rt: &ResourceType) -> Option<&'static Conversion> {
    to_storage_kind(rt)
}

/// `obj`, of the built-in type `from`, as the equivalent built-in type `to` shows it: through
/// the kind kube stores both as (objects of other kinds or versions are left as they are).
pub fn between_builtin(from: &ResourceType, to: &ResourceType, obj: &Value) -> Value {
    let mut out = obj.clone();
    let is = |o: &Value, api_version: &str, kind: &str| {
        o.get("apiVersion").and_then(Value::as_str) == Some(api_version)
            && o.get("kind").and_then(Value::as_str) == Some(kind)
    };
    if let Some(c) = to_storage_kind(from).filter(|_| is(&out, &from.group_version(), &from.kind)) {
        (c.to_storage)(&mut out);
        out["apiVersion"] = json!(c.storage_api_version());
    }
    if let Some(c) = to_storage_kind(to).filter(|c| is(&out, &c.storage_api_version(), c.kind)) {
        (c.from_storage)(&mut out);
        out["apiVersion"] = json!(to.group_version());
    }
    out
}

/// The `apiVersion` objects of `rt` are stored with, when reading or writing them through `rt`
/// may need a conversion (a custom resource, or a built-in type served in a version other
/// than its storage one).
pub fn storage_api_version(rt: &ResourceType) -> Option<String> {
    match (&rt.custom, builtin(rt)) {
        (Some(custom), _) => Some(format!("{}/{}", rt.group, custom.storage_version)),
        (None, Some(c)) => Some(c.storage_api_version()),
        (None, None) => None,
    }
}

/// The type fields (`"kind":…,"apiVersion":…`) every object read through `rt` must show, when
/// objects of its collection may be stored in another version; `None` when they are stored
/// as they are served.
pub fn served_type_fields(rt: &ResourceType) -> Option<String> {
    storage_api_version(rt)?;
    Some(format!(
        "\"kind\":{},\"apiVersion\":{}",
        json!(rt.kind),
        json!(rt.group_version())
    ))
}

/// A stored object as read through `rt` (objects of other kinds, and objects already in
/// `rt`'s version, are left as they are).
pub fn to_served(rt: &ResourceType, obj: &mut Value) {
    if storage_api_version(rt).is_none()
        || obj.get("kind").and_then(Value::as_str) != Some(&*rt.kind)
        || obj.get("apiVersion").and_then(Value::as_str) == Some(&rt.group_version())
    {
        return;
    }
    if let Some(c) = builtin(rt) {
        (c.from_storage)(obj);
    }
    obj["apiVersion"] = json!(rt.group_version());
}

/// An object written through `rt` as it is stored, when that differs.
pub fn to_stored(rt: &ResourceType, obj: &Value) -> Option<Value> {
    let stored = storage_api_version(rt)?;
    if obj.get("apiVersion").and_then(Value::as_str) == Some(&stored)
        || obj.get("kind").and_then(Value::as_str) != Some(&*rt.kind)
    {
        return None;
    }
    let mut out = obj.clone();
    if let Some(c) = builtin(rt) {
        (c.to_storage)(&mut out);
    }
    out["apiVersion"] = Value::String(stored);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Registry;

    #[test]
    fn a_v1_autoscaler_is_stored_as_v2_and_read_back_as_v1() {
        let r = Registry::new();
        let v1 = r.lookup("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let v2 = r.lookup("autoscaling", "v2", "horizontalpodautoscalers").unwrap();
        assert!(storage_api_version(v2).is_none(), "v2 is stored as it is served");
        let written = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"maxReplicas": 5, "targetCPUUtilizationPercentage": 70,
                "scaleTargetRef": {"kind": "Deployment", "name": "web"}}});
        let stored = to_stored(v1, &written).unwrap();
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(
            stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            70
        );
        let mut read = stored.clone();
        to_served(v1, &mut read);
        assert_eq!(read, written);
        let mut through_v2 = stored.clone();
        to_served(v2, &mut through_v2);
        assert_eq!(through_v2, stored);
    }

    /// A core Event as events.k8s.io/v1 shows it, and back; an autoscaling/v1 autoscaler as
    /// v2; events.k8s.io Events are stored as core Events, in their collection.
    #[test]
    fn equivalent_builtin_types_convert_through_their_storage_kind() {
        let r = Registry::new();
        let core = r.lookup("", "v1", "events").unwrap();
        let events = r.lookup("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(core.storage_kind(), events.storage_kind());
        assert_eq!(storage_api_version(events).as_deref(), Some("v1"));
        assert_eq!(storage_api_version(core), None);
        assert_eq!((core.storage_group(), events.storage_group()), ("", ""));
        let written = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "web"}, "message": "hello"});
        let seen = between_builtin(core, events, &written);
        assert_eq!(
            seen,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
                "regarding": {"kind": "Pod", "name": "web"}, "note": "hello"})
        );
        assert_eq!(between_builtin(events, core, &seen), written);
        let v1 = r.lookup("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let v2 = r.lookup("autoscaling", "v2", "horizontalpodautoscalers").unwrap();
        let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "spec": {"maxReplicas": 5, "targetCPUUtilizationPercentage": 70}});
        let as_v2 = between_builtin(v1, v2, &hpa);
        assert_eq!(as_v2["apiVersion"], "autoscaling/v2");
        assert_eq!(between_builtin(v2, v1, &as_v2), hpa);
    }
}
