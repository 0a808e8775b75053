//! `POST .../serviceaccounts/NAME/token` (TokenRequest, what `kubectl create token` sends): a
//! ServiceAccount token for the audiences and lifetime asked, optionally bound to a Pod or a
//! Secret, answered with kube-apiserver's checks and messages. Nothing is stored: the token
//! is good while it is current and its ServiceAccount (and bound object) exist.

use serde_json::{json, Value};

use crate::authentication::service_account::{
    BoundObject, TokenSpec, DEFAULT_EXPIRATION_SECONDS, ISSUER, MAX_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS,
};
use crate::authentication::Authenticator;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::timestamp;
use crate::registry::options::WriteOptions;
use crate::registry::reply::Reply;
use crate::registry::ResourceRequest;
use crate::store::keys;
use crate::store::Store;

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "authentication.k8s.io",
        "TokenRequest",
        name,
        &[(field.to_string(), message)],
    )
}

/// Issues the token `body` asks for.
pub async fn create(
    authenticator: &Authenticator,
    store: &Store,
    req: &ResourceRequest,
    opts: &WriteOptions,
    mut body: Value,
) -> ApiResult<Reply> {
    let Some(issuer) = authenticator.service_accounts() else {
        return Err(ApiError::method_not_allowed_because(
            "this replica has no service-account signing key (security.serviceAccountKey)",
        ));
    };
    let name = req.name.as_deref().unwrap_or_default();
    let namespace = req.namespace.as_deref().unwrap_or_default();
    if !body.is_object() {
        return Err(ApiError::bad_request("the body must be a TokenRequest object"));
    }
    let spec = &mut body["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    let audiences: Vec<String> = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => vec![ISSUER.to_string()],
    };
    let seconds = match &spec["expirationSeconds"] {
        Value::Null => DEFAULT_EXPIRATION_SECONDS,
        v => v.as_i64().ok_or_else(|| {
            invalid(
                name,
                "spec.expirationSeconds",
                format!("Invalid value: {v}: must be an integer"),
            )
        })?,
    };
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            name,
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            name,
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"),
        ));
    }
    let sa = store
        .get(&keys::object("", "serviceaccounts", Some(namespace), name), true)
        .await?
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let sa_uid = sa.obj["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let mut pod = None;
    let mut secret = None;
    if let Some(bound) = spec.get("boundObjectRef").filter(|b| b.is_object()).cloned() {
        let kind = bound["kind"].as_str().unwrap_or_default();
        let plural = match kind {
            "Pod" => "pods",
            "Secret" => "secrets",
            other => {
                return Err(invalid(
                    name,
                    "spec.boundObjectRef.kind",
                    format!("Unsupported value: {other:?}: supported values: \"Pod\", \"Secret\""),
                ))
            }
        };
        let bound_name = bound["name"].as_str().unwrap_or_default();
        let stored = store
            .get(&keys::object("", plural, Some(namespace), bound_name), true)
            .await?
            .ok_or_else(|| ApiError::not_found("", plural, bound_name))?;
        let uid = stored.obj["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(asked) = bound["uid"].as_str().filter(|u| !u.is_empty()) {
            if asked != uid {
                return Err(ApiError::conflict(
                    "",
                    plural,
                    bound_name,
                    &format!(
                        "the UID in the bound object reference ({asked}) does not match the UID in record. The object might have been deleted and then recreated"
                    ),
                ));
            }
        }
        let object = Some(BoundObject {
            name: bound_name.to_string(),
            uid: uid.clone(),
        });
        spec["boundObjectRef"]["uid"] = json!(uid);
        if kind == "Pod" {
            pod = object;
        } else {
            secret = object;
        }
    }
    let (token, exp) = issuer
        .issue(&TokenSpec {
            namespace,
            name,
            uid: &sa_uid,
            audiences: &audiences,
            expiration_seconds: seconds,
            pod,
            secret,
        })
        .map_err(ApiError::internal)?;
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(seconds);
    let expires = time::OffsetDateTime::from_unix_timestamp(exp)
        .map(timestamp::format_time)
        .unwrap_or_default();
    body["apiVersion"] = json!("authentication.k8s.io/v1");
    body["kind"] = json!("TokenRequest");
    body["metadata"] = json!({"name": name, "namespace": namespace, "creationTimestamp": null});
    // A dry run answers without a token, as kube-apiserver does.
    let dry = opts.dry_run;
    body["status"] = json!({
        "token": if dry { String::new() } else { token },
        "expirationTimestamp": expires,
    });
    Ok(Reply::object(201, body))
}
