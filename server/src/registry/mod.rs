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

use std::sync::Arc;

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
