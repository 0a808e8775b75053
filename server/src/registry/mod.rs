//! The generic store, kube-apiserver's `registry/generic`: get, list, create, update, patch
//! and delete of any type, in one code path driven by the type's data ([`crate::scheme`]) and
//! its [`strategy`] — the behaviour that `kinds` (built-in types) and `apiextensions` (custom
//! resources) attach to the types they serve. Nothing here names a kind.

pub mod create;
pub mod delete;
pub mod options;
pub mod read;
pub mod reply;
pub mod scale;
pub mod strategy;
pub mod update;
pub mod versions;

use std::sync::Arc;

use serde_json::Value;

use crate::admission::{Attributes, Operation};
use crate::authentication::UserInfo;
use crate::authorization::Authorizer;
use crate::scheme::ResourceType;

/// A request for a collection, an object or an object's subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRequest {
    /// The resource type.
    pub rt: ResourceType,
    /// The namespace in the path (`None` for cluster-scoped paths and all-namespace lists).
    pub namespace: Option<String>,
    /// The object name (`None` for a collection).
    pub name: Option<String>,
    /// `status`, `scale`, … (`None` for the main resource).
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix was used.
    pub watch_path: bool,
    /// Who asks (`None` for the server's own controllers, which may do anything).
    pub requester: Option<Requester>,
}

impl ResourceRequest {
    /// What the admission chain is told of a write of this request to the object `name` (as
    /// the request gave it; empty for `generateName`), stored as `old` before it.
    pub fn admission<'a>(
        &'a self,
        operation: Operation,
        name: &'a str,
        dry_run: bool,
        old: Option<&'a Value>,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            group: &self.rt.group,
            version: &self.rt.version,
            kind: &self.rt.kind,
            resource: &self.rt.plural,
            namespaced: self.rt.namespaced,
            namespace: self.namespace.as_deref(),
            name,
            subresource: self.subresource.as_deref(),
            dry_run,
            user: self.requester.as_ref().map(|r| &*r.user),
            authorizer: self.requester.as_ref().map(|r| &r.authorizer),
            versions: Some(&self.rt),
            old,
        }
    }
}

/// Who makes a request, with the authorizer that knows what they hold: the registry refuses
/// writes that would grant more than that (RBAC escalation prevention).
#[derive(Debug, Clone)]
pub struct Requester {
    /// The request's user.
    pub user: Arc<UserInfo>,
    /// The replica's authorizer.
    pub authorizer: Authorizer,
}

impl PartialEq for Requester {
    fn eq(&self, other: &Self) -> bool {
        self.user == other.user
    }
}
