//! The impersonation filter: a request carrying `Impersonate-User` (with optional
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>` headers) is served as
//! that user, once the authorizer allows the real user the `impersonate` verb on each part —
//! `users`, `groups`, `uids` and `userextras/<key>` as kube-apiserver checks them (a
//! ServiceAccount user as `serviceaccounts` in its namespace). `kubectl --as` and `--as-group`
//! send these headers. The audit record notes the user the request is served as
//! (`impersonatedUser`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;

use crate::authentication::user::{AUTHENTICATED, SERVICE_ACCOUNTS};
use crate::authentication::UserInfo;
use crate::authorization::{Attributes, Authorizer, ResourceAttributes};
use crate::endpoints::response::{error_format, error_response};
use crate::filters::audit;
use crate::machinery::errors::{ApiError, ApiResult};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// The impersonation filter.
pub async fn filter(State(authorizer): State<Authorizer>, mut request: Request, next: Next) -> Response {
    let impersonates = request.headers().keys().any(|k| {
        let k = k.as_str();
        k == USER || k == GROUP || k == UID || k.starts_with(EXTRA)
    });
    if !impersonates {
        return next.run(request).await;
    }
    let errors_as = error_format(request.headers());
    let Some(real) = request.extensions().get::<Arc<UserInfo>>().cloned() else {
        return error_response(
            ApiError::internal("impersonation ran before authentication"),
            errors_as,
        );
    };
    match impersonate(&authorizer, &real, request.headers()) {
        Ok(user) => {
            let headers = request.headers_mut();
            let names: Vec<_> = headers
                .keys()
                .filter(|k| {
                    let k = k.as_str();
                    k == USER || k == GROUP || k == UID || k.starts_with(EXTRA)
                })
                .cloned()
                .collect();
            for name in names {
                headers.remove(name);
            }
            audit::impersonated(&request, &user);
            request.extensions_mut().insert(Arc::new(user));
            next.run(request).await
        }
        Err(e) => error_response(e, errors_as),
    }
}

fn values<'a>(headers: &'a HeaderMap, name: &str) -> ApiResult<Vec<&'a str>> {
    headers
        .get_all(name)
        .iter()
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::bad_request(format!("invalid {name} header")))
        })
        .collect()
}

/// The user `headers` ask to act as, if `real` may impersonate every part of it.
fn impersonate(authorizer: &Authorizer, real: &UserInfo, headers: &HeaderMap) -> ApiResult<UserInfo> {
    let name = values(headers, USER)?
        .first()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if name.is_empty() {
        return Err(ApiError::bad_request(
            "requested impersonation of groups, a uid or extra without impersonating a user",
        ));
    }
    let mut user = UserInfo {
        name: name.clone(),
        ..UserInfo::default()
    };
    let check = |resource: &str, group: &str, subresource: &str, namespace: &str, object: &str| {
        let attrs = Attributes::resource(
            real,
            "impersonate",
            ResourceAttributes {
                api_group: group,
                api_version: "",
                resource,
                subresource,
                namespace,
                name: object,
            },
        );
        authorizer.check(&attrs)
    };
    match user.service_account() {
        Some((namespace, sa)) => {
            check("serviceaccounts", "", "", namespace, sa)?;
            user.groups = vec![
                SERVICE_ACCOUNTS.to_string(),
                format!("{SERVICE_ACCOUNTS}:{namespace}"),
            ];
        }
        None => check("users", "", "", "", &name)?,
    }
    for group in values(headers, GROUP)? {
        check("groups", "", "", "", group)?;
        user.groups.push(group.to_string());
    }
    if let Some(uid) = values(headers, UID)?.first() {
        check("uids", "authentication.k8s.io", "", "", uid)?;
        user.uid = uid.to_string();
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, value) in headers {
        if let Some(k) = key.as_str().strip_prefix(EXTRA) {
            let v = value
                .to_str()
                .map_err(|_| ApiError::bad_request(format!("invalid {key} header")))?;
            check("userextras", "authentication.k8s.io", k, "", v)?;
            extra.entry(k.to_string()).or_default().push(v.to_string());
        }
    }
    user.extra = extra;
    // As kube-apiserver: an impersonated user other than anonymous is authenticated.
    if user.name != crate::authentication::user::ANONYMOUS && !user.in_group(AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.to_string());
    }
    Ok(user)
}
