//! The authorization filter: asks the authorizer (RBAC, from the replica's watch cache)
//! whether the request's user may do the request's verb on its resource or path, and answers
//! `403` with kube-apiserver's message when not. It runs after authentication and request
//! info, which stored what it reads. The decision and its reason are annotated on the audit
//! record (`authorization.k8s.io/decision`, `authorization.k8s.io/reason`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::audit::request::RequestInfo as KubeRequestInfo;
use crate::authentication::UserInfo;
use crate::authorization::{forbidden_error, Attributes, Authorizer, ResourceAttributes};
use crate::endpoints::request_info::RequestInfo;
use crate::endpoints::response::{error_format, error_response};
use crate::filters::audit;
use crate::machinery::errors::ApiError;

/// The authorization filter.
pub async fn filter(State(authorizer): State<Authorizer>, request: Request, next: Next) -> Response {
    let errors_as = error_format(request.headers());
    let (Some(user), Some(info)) = (
        request.extensions().get::<Arc<UserInfo>>(),
        request.extensions().get::<RequestInfo>(),
    ) else {
        return error_response(
            ApiError::internal("authorization ran before authentication or request info"),
            errors_as,
        );
    };
    let path = request.uri().path();
    let method: String;
    let named: KubeRequestInfo<'_>;
    let attrs = match info {
        RequestInfo::Resource { request: r, verb } => {
            let name = r.name.as_deref().unwrap_or_default();
            // A namespace is in itself, as kube-apiserver's request info has it: a RoleBinding
            // in `shop` can grant `get namespaces/shop`.
            let namespace = match (&*r.rt.group, &*r.rt.plural) {
                ("", "namespaces") => name,
                _ => r.namespace.as_deref().unwrap_or_default(),
            };
            Attributes::resource(
                user,
                verb.as_str(),
                ResourceAttributes {
                    api_group: &r.rt.group,
                    api_version: &r.rt.version,
                    resource: &r.rt.plural,
                    subresource: r.subresource.as_deref().unwrap_or_default(),
                    namespace,
                    name,
                },
            )
        }
        // The request info filter already spelled a path's verb; discovery's is the method.
        RequestInfo::NonResource { verb, .. } => Attributes::non_resource(user, verb, path),
        RequestInfo::Discovery(_) => {
            method = request.method().as_str().to_ascii_lowercase();
            Attributes::non_resource(user, &method, path)
        }
        // What nothing serves is authorized as kube-apiserver's request info names the path
        // (`nosuchresource` in `default`), so only a user allowed to ask learns it is `404`.
        RequestInfo::Unserved(_) => {
            named = KubeRequestInfo::parse(request.method(), path, request.uri().query());
            match &named.resource {
                Some(r) => Attributes::resource(
                    user,
                    &named.verb,
                    ResourceAttributes {
                        api_group: r.api_group,
                        api_version: r.api_version,
                        resource: r.resource,
                        subresource: r.subresource,
                        namespace: r.namespace,
                        name: r.name,
                    },
                ),
                None => Attributes::non_resource(user, &named.verb, path),
            }
        }
    };
    let decision = authorizer.authorize(&attrs);
    audit::authorized(&request, &decision);
    if decision.is_allowed() {
        return next.run(request).await;
    }
    let e = forbidden_error(&attrs, decision.reason());
    tracing::debug!(user = %user.name, path, message = %e.message, "forbidden");
    error_response(e, errors_as)
}
