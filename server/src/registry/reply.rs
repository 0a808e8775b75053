//! What a verb of the generic store answers ([`Reply`]) and the small facts every verb
//! shares: the object's key and name, its resourceVersion precondition, dry runs.

use crate::authorization::escalation::RbacWrite;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::registry::ResourceRequest;
use crate::scheme::{conversion, ResourceType};
use crate::store::cacher::CachedObject;
use crate::store::keys;
use serde_json::{json, Value};
use std::sync::Arc;

/// How many times a write retries a lost compare-and-swap before giving up.
pub(crate) const MAX_CAS_RETRIES: usize = 64;

/// An API result body and its HTTP code.
pub struct Reply {
    /// HTTP status code.
    pub code: u16,
    /// The object, list or Status.
    pub body: Value,
    /// Objects to render when the client asked for a Table (get only; a list's rows are its
    /// `items`).
    pub table_rows: Option<(Vec<Value>, String)>,
    /// Texts of `Warning: 299` headers (e.g. unknown fields that were dropped).
    pub warnings: Vec<String>,
    /// A list's items, kept apart from `body` so that they are encoded from the cached
    /// objects' shared encodings instead of being copied into one big value.
    pub items: Option<Vec<Arc<CachedObject>>>,
    /// The cached object `body` is (a get), whose shared JSON encoding can be sent as is.
    pub cached: Option<Arc<CachedObject>>,
}

impl Reply {
    pub(crate) fn object(code: u16, body: Value) -> Self {
        Reply {
            code,
            body,
            table_rows: None,
            warnings: Vec::new(),
            items: None,
            cached: None,
        }
    }

    /// The same reply carrying `warnings` as well.
    pub(super) fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings.extend(warnings);
        self
    }
}

/// Refuses a write of a Role, ClusterRole, RoleBinding or ClusterRoleBinding that would grant
/// permissions its requester does not hold (RBAC escalation prevention, dry runs included);
/// every other write, and the server's own (no requester), passes.
pub(crate) fn check_grant(req: &ResourceRequest, new: &Value, old: Option<&Value>) -> ApiResult<()> {
    let Some(r) = &req.requester else {
        return Ok(());
    };
    r.authorizer.check_write(
        &r.user,
        &RbacWrite {
            group: &req.rt.group,
            resource: &req.rt.plural,
            namespace: req.namespace.as_deref().unwrap_or_default(),
            new,
            old,
        },
    )
}

pub(crate) fn name_of(req: &ResourceRequest) -> ApiResult<&str> {
    req.name.as_deref().ok_or_else(ApiError::method_not_allowed)
}

pub(crate) fn key(req: &ResourceRequest, name: &str) -> String {
    keys::of_object(&req.rt, req.namespace.as_deref(), name)
}

pub(crate) fn not_found(rt: &ResourceType, name: &str) -> ApiError {
    ApiError::not_found(&rt.group, &rt.plural, name)
}

/// The client's resourceVersion precondition in a body, if any.
pub(crate) fn precondition(obj: &Value) -> ApiResult<Option<i64>> {
    match meta_str(obj, "resourceVersion") {
        // "0" names no revision: an update carrying it is unconditional, as in kube-apiserver.
        None | Some("") | Some("0") => Ok(None),
        Some(rv) => rv.parse::<i64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resourceVersion {rv:?}: must be a decimal revision"
            ))
        }),
    }
}

/// An object as a list item: kube-apiserver leaves out `kind` and `apiVersion`.
pub(crate) fn strip_type(mut obj: Value) -> Value {
    if let Some(o) = obj.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    obj
}

pub(crate) fn with_rv(mut obj: Value, rev: i64) -> Value {
    obj["metadata"]["resourceVersion"] = json!(rev.to_string());
    obj
}

/// A cached object as read through `rt`, given `rt`'s served type fields
/// ([`conversion::served_type_fields`]): a custom resource stored in another version has its
/// `apiVersion` changed (its encoding is shared), a built-in type's object is converted.
pub fn served_cached(
    type_fields: Option<&str>,
    rt: &ResourceType,
    obj: &Arc<CachedObject>,
) -> Arc<CachedObject> {
    match type_fields {
        Some(fields) if obj.type_fields() != fields => match conversion::builtin(rt) {
            Some(_) => obj.converted(|v| conversion::to_served(rt, v)),
            None => obj.with_type(&rt.kind, &rt.group_version()),
        },
        _ => obj.clone(),
    }
}
