//! The CEL `authorizer` variables of admission expressions (webhooks' `matchConditions` and
//! ValidatingAdmissionPolicies): the replica's authorizer asked on behalf of the request's
//! user, or of a service account the expression names, as kube binds them. The server's own
//! writes are made by its privileged loopback identity, which kube's authorizer allows
//! everything; so are they here.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::admission::Attributes;
use crate::authentication::user::{SERVICE_ACCOUNTS, SERVICE_ACCOUNT_PREFIX};
use crate::authentication::UserInfo;
use crate::authorization::{self, Authorizer, ResourceAttributes};
use crate::cel::authz::{self, Authorize, Check, Verdict};
use crate::cel::{self, AUTHORIZER, REQUEST_RESOURCE};

/// Who a check is made for.
#[derive(Debug)]
enum Principal {
    /// A user, and the authorizer that knows what they hold.
    User(Authorizer, UserInfo),
    /// The server itself.
    Server,
}

impl Authorize for Principal {
    fn authorize(&self, check: &Check) -> Verdict {
        let Principal::User(authorizer, user) = self else {
            return Verdict {
                allowed: true,
                reason: String::new(),
                error: None,
            };
        };
        let decision = match check {
            Check::Path { path, verb } => {
                authorizer.authorize(&authorization::Attributes::non_resource(user, verb, path))
            }
            Check::Resource {
                group,
                resource,
                subresource,
                namespace,
                name,
                verb,
            } => authorizer.authorize(&authorization::Attributes::resource(
                user,
                verb,
                ResourceAttributes {
                    api_group: group,
                    api_version: "*",
                    resource,
                    subresource,
                    namespace,
                    name,
                },
            )),
        };
        Verdict {
            allowed: decision.is_allowed(),
            reason: decision.reason().to_string(),
            error: None,
        }
    }

    /// kube's `ServiceAccountInfo.UserInfo()`: the account's user name and its two groups.
    fn service_account(&self, namespace: &str, name: &str) -> Arc<dyn Authorize> {
        match self {
            Principal::User(authorizer, _) => Arc::new(Principal::User(
                authorizer.clone(),
                UserInfo {
                    name: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
                    uid: String::new(),
                    groups: vec![
                        SERVICE_ACCOUNTS.to_string(),
                        format!("{SERVICE_ACCOUNTS}:{namespace}"),
                    ],
                    extra: BTreeMap::new(),
                },
            )),
            Principal::Server => Arc::new(Principal::Server),
        }
    }
}

/// `authorizer` and `authorizer.requestResource` for a request.
pub fn variables(attrs: &Attributes<'_>) -> [(&'static str, cel::Value); 2] {
    let principal: Arc<dyn Authorize> = match (attrs.authorizer, attrs.user) {
        (Some(authorizer), Some(user)) => Arc::new(Principal::User(authorizer.clone(), user.clone())),
        _ => Arc::new(Principal::Server),
    };
    let request_resource = authz::request_resource(
        principal.clone(),
        attrs.group,
        attrs.resource,
        attrs.subresource.unwrap_or_default(),
        attrs.namespace.unwrap_or_default(),
        attrs.name,
    );
    [
        (AUTHORIZER, authz::authorizer(principal)),
        (REQUEST_RESOURCE, request_resource),
    ]
}
