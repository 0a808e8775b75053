//! The review resources: created, answered from the request and never stored, as
//! kube-apiserver serves them. `SelfSubjectReview` (what `kubectl auth whoami` posts) and
//! `TokenReview` ask the authenticators; `SubjectAccessReview`, `LocalSubjectAccessReview`,
//! `SelfSubjectAccessReview` (`kubectl auth can-i`) and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`) ask the authorizer, so they answer exactly as a request would
//! be decided.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::authentication::{Authenticator, UserInfo};
use crate::authorization::{Attributes, Authorizer, ResourceAttributes};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::registry::reply::Reply;
use crate::registry::ResourceRequest;

/// Answers the creation of a review `obj` by `user`.
pub fn create(
    authenticator: &Authenticator,
    authorizer: &Authorizer,
    req: &ResourceRequest,
    user: &UserInfo,
    mut obj: Value,
) -> ApiResult<Reply> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let status = match &*req.rt.kind {
        "SelfSubjectReview" => json!({"userInfo": user_json(user)}),
        "TokenReview" => token_review(authenticator, &obj["spec"]),
        "SelfSubjectAccessReview" => access_review(authorizer, user, &obj["spec"], None)?,
        "SubjectAccessReview" => access_review(authorizer, &spec_user(&obj["spec"])?, &obj["spec"], None)?,
        "LocalSubjectAccessReview" => {
            let namespace = req.namespace.as_deref().unwrap_or_default();
            access_review(
                authorizer,
                &spec_user(&obj["spec"])?,
                &obj["spec"],
                Some(namespace),
            )?
        }
        "SelfSubjectRulesReview" => rules_review(authorizer, user, &obj["spec"]),
        other => return Err(ApiError::internal(format!("{other} is not a review"))),
    };
    obj["apiVersion"] = json!(req.rt.group_version());
    obj["kind"] = json!(req.rt.kind);
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    if obj["metadata"].get("creationTimestamp").is_none() {
        obj["metadata"]["creationTimestamp"] = Value::Null;
    }
    obj["status"] = status;
    Ok(Reply::object(201, obj))
}

fn user_json(user: &UserInfo) -> Value {
    let mut v = json!({"username": user.name});
    if !user.uid.is_empty() {
        v["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        v["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        v["extra"] = json!(user.extra);
    }
    v
}

fn token_review(authenticator: &Authenticator, spec: &Value) -> Value {
    let token = spec["token"].as_str().unwrap_or_default();
    match authenticator.authenticate_token(token) {
        Ok(Some(user)) => {
            let mut status = json!({"authenticated": true, "user": user_json(&user)});
            if let Some(a) = spec.get("audiences").filter(|a| a.is_array()) {
                status["audiences"] = a.clone();
            }
            status
        }
        // As kube-apiserver's TokenReview: an unknown token is not an error, only not
        // authenticated (`authenticated: false` is omitted); a refused one says why.
        Ok(None) => json!({"user": {}}),
        Err(e) => json!({"user": {}, "error": e}),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// The user a SubjectAccessReview asks about.
fn spec_user(spec: &Value) -> ApiResult<UserInfo> {
    let name = spec["user"].as_str().unwrap_or_default().to_string();
    let groups = strings(&spec["groups"]);
    if name.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            "SubjectAccessReview",
            "",
            &[(
                "spec.user".to_string(),
                "Invalid value: \"\": at least one of user or group must be specified".to_string(),
            )],
        ));
    }
    let extra: BTreeMap<String, Vec<String>> = spec["extra"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
        .unwrap_or_default();
    Ok(UserInfo {
        name,
        uid: spec["uid"].as_str().unwrap_or_default().to_string(),
        groups,
        extra,
    })
}

fn access_review(
    authorizer: &Authorizer,
    user: &UserInfo,
    spec: &Value,
    local_namespace: Option<&str>,
) -> ApiResult<Value> {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let decision = if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        let mut namespace = s(r, "namespace");
        if let Some(local) = local_namespace {
            if namespace.is_empty() {
                namespace = local.to_string();
            } else if namespace != local {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match metadata.namespace: {namespace:?} != {local:?}"
                )));
            }
        }
        let (verb, group, version, resource, subresource, name) = (
            s(r, "verb"),
            s(r, "group"),
            s(r, "version"),
            s(r, "resource"),
            s(r, "subresource"),
            s(r, "name"),
        );
        authorizer.authorize(&Attributes::resource(
            user,
            &verb,
            ResourceAttributes {
                api_group: &group,
                api_version: &version,
                resource: &resource,
                subresource: &subresource,
                namespace: &namespace,
                name: &name,
            },
        ))
    } else if let Some(n) = spec.get("nonResourceAttributes").filter(|n| n.is_object()) {
        if local_namespace.is_some() {
            return Err(ApiError::bad_request(
                "disallowed on this kind of request: nonResourceAttributes",
            ));
        }
        let (verb, path) = (s(n, "verb"), s(n, "path"));
        authorizer.authorize(&Attributes::non_resource(user, &verb, &path))
    } else {
        return Err(ApiError::bad_request(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let mut status = json!({"allowed": decision.is_allowed()});
    if matches!(decision, crate::authorization::Decision::Deny(_)) {
        status["denied"] = json!(true);
    }
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    Ok(status)
}

fn rules_review(authorizer: &Authorizer, user: &UserInfo, spec: &Value) -> Value {
    let namespace = spec["namespace"].as_str().unwrap_or_default();
    let review = authorizer.rules_for(user, namespace);
    let mut status = json!({
        "resourceRules": serde_json::to_value(&review.resource_rules).unwrap_or_default(),
        "nonResourceRules": serde_json::to_value(&review.non_resource_rules).unwrap_or_default(),
        "incomplete": review.incomplete,
    });
    if !review.evaluation_error.is_empty() {
        status["evaluationError"] = json!(review.evaluation_error);
    }
    status
}
