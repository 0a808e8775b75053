//! API errors as Kubernetes `Status` objects, with the codes and reasons kube-apiserver uses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// A failed API request; renders as a `Status` body with the matching HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, …).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), if any.
    pub details: Option<Value>,
    /// Seconds the client should wait before retrying (sets `Retry-After`).
    pub retry_after: Option<u64>,
    /// `metadata.continue` of the Status: the token an expired list can go on with.
    pub continue_token: Option<String>,
}

/// The encodings kuberaft reads and writes objects in, as kube-apiserver's serializers list them
/// in its `406` and `415` answers.
const SERVED_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor";

/// Result of an API operation.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = json!({"kind": kind});
        if !name.is_empty() {
            d["name"] = json!(name);
        }
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized: credentials were presented and are not valid, or none were and the
    /// path is not open to anonymous requests.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden with the authorizer's message (no details, as kube-apiserver's
    /// authorization filter answers).
    pub fn forbidden_message(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 404 NotFound for `plural "name"`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let what = qualified(group, plural);
        Self::new(404, "NotFound", format!("{what} \"{name}\" not found")).with_details(group, plural, name)
    }

    /// 404 NotFound for a path that serves nothing.
    pub fn no_route() -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        e.details = Some(json!({}));
        e
    }

    /// 405 MethodNotAllowed for a verb the path does not serve, worded as kube-apiserver's
    /// router answers it (`DELETE pods/NAME/status`, `POST configmaps/NAME`).
    pub fn method_not_allowed() -> Self {
        let mut e = Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        );
        e.details = Some(json!({}));
        e
    }

    /// 405 MethodNotAllowed with a message of its own (a create under a terminating
    /// definition, a write to a read-only document).
    pub fn method_not_allowed_because(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let what = qualified(group, plural);
        Self::new(409, "AlreadyExists", format!("{what} \"{name}\" already exists"))
            .with_details(group, plural, name)
    }

    /// 409 Conflict on a stale resourceVersion or precondition.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let what = qualified(group, plural);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {what} \"{name}\": {why}"),
        )
        .with_details(group, plural, name)
    }

    /// 403 Forbidden for `plural "name"` (for `plural` alone when the request named none, a
    /// create with `generateName`), as kube-apiserver words it.
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let what = qualified(group, plural);
        let message = if name.is_empty() {
            format!("{what} is forbidden: {why}")
        } else {
            format!("{what} \"{name}\" is forbidden: {why}")
        };
        Self::new(403, "Forbidden", message).with_details(group, plural, name)
    }

    /// 422 Invalid with field causes `(field, message)`; each cause's reason is the one the
    /// message's kind of error has (`Required value` is `FieldValueRequired`).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &[(String, String)]) -> Self {
        let summary: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let shown = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let what = qualified(group, kind);
        let mut e = Self::new(422, "Invalid", format!("{what} \"{name}\" is invalid: {shown}"))
            .with_details(group, kind, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = causes
                .iter()
                .map(|(f, m)| json!({"reason": cause_reason(m), "message": m, "field": f}))
                .collect();
        }
        e
    }

    /// 422 Invalid for a strategic merge patch whose result cannot be turned into the type
    /// (`why`, the converter's words), as kube-apiserver answers it: no kind or name, the
    /// field `patch`, and the patch as Go prints a decoded map (`map[data:x]`).
    pub fn invalid_patch(patch: &Value, why: &str) -> Self {
        let shown = go_quote(&go_print(patch));
        let body = format!("Invalid value: {shown}: {why}");
        let mut e = Self::new(422, "Invalid", format!(" \"\" is invalid: patch: {body}"));
        e.details =
            Some(json!({"causes": [{"reason": "FieldValueInvalid", "message": body, "field": "patch"}]}));
        e
    }

    /// 406 NotAcceptable: none of the `Accept` header's media types is served here. kube-apiserver
    /// names the encodings its serializers offer, in their order.
    pub fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!("only the following media types are accepted: {SERVED_MEDIA_TYPES}"),
        )
    }

    /// 415 UnsupportedMediaType: a request body in an encoding kuberaft does not read, answered
    /// with the encodings it does, in kube-apiserver's words and order.
    pub fn unsupported_media_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {SERVED_MEDIA_TYPES}"),
        )
    }

    /// 415 UnsupportedMediaType for a patch type the resource does not take, listing those it
    /// takes in kube-apiserver's order (`strategic`: a built-in type, which also takes strategic
    /// merge patches; custom resources do not).
    pub fn unsupported_patch_type(strategic: bool) -> Self {
        let strategic = if strategic {
            "application/strategic-merge-patch+json, "
        } else {
            ""
        };
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, {strategic}application/apply-patch+yaml, application/apply-patch+cbor"),
        )
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// 500 with no reason: what kube-apiserver answers for an error its storage returned
    /// without a `Status` (kube's `StatusReasonUnknown`), the error's text as the message.
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// kube's `NewGenericServerResponse` (no verb): what another server answered with `code`
    /// (a kubelet's log refusal), named as a failure of `resource` `name` in `group`; a
    /// `500` and a `400` are kube's internal and bad-request errors of the server's words.
    pub fn generic_server_response(code: u16, group: &str, resource: &str, name: &str, said: &str) -> Self {
        let (reason, what) = match code {
            400 => return Self::bad_request(said),
            500 => return Self::internal(format!("Internal error occurred: {said}")),
            401 => ("Unauthorized", "the server has asked for the client to provide credentials".into()),
            403 => ("Forbidden", "the server does not allow access to the requested resource".into()),
            404 => ("NotFound", "the server could not find the requested resource".into()),
            405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource".into()),
            409 => ("Conflict", "the server reported a conflict".into()),
            422 => ("Invalid", "the server rejected our request due to an error in our request".into()),
            429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later".into()),
            503 => ("ServiceUnavailable", "the server is currently unable to handle the request".into()),
            504 => ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request".into()),
            c if c >= 500 => ("InternalError", format!("an error on the server ({}) has prevented the request from succeeding", go_quote(said))),
            c => ("", format!("the server responded with the status code {c} but did not return more information")),
        };
        let resource_name = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        Self::new(code, reason, format!("{what} ( {resource_name} {name})"))
            .with_details(group, resource, name)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 500 InternalError for a stored object that cannot be decoded, worded as
    /// kube-apiserver's storage error for a corrupt object.
    pub fn corrupt_object(key: &str, why: &str) -> Self {
        Self::internal(format!(
            "Internal error occurred: StorageError: corrupt object, Code: 7, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {why}"
        ))
    }

    /// 500 StorageReadError: a list met objects it cannot decode; one cause per object
    /// (`field` is its storage key), as kube-apiserver reports corrupt objects in a list.
    pub fn store_read_error(group: &str, plural: &str, corrupt: &[(String, String)]) -> Self {
        let what = qualified(group, plural);
        let mut e = Self::new(
            500,
            "StorageReadError",
            format!("failed to read one or more {what} from the storage"),
        )
        .with_details(group, plural, "");
        if let Some(d) = e.details.as_mut() {
            d["causes"] = corrupt
                .iter()
                .map(|(key, why)| json!({"reason": "UnexpectedServerResponse", "message": why, "field": key}))
                .collect();
        }
        e
    }

    /// 503 ServiceUnavailable for what stands behind this server (a proxied Service with no
    /// endpoints, a backend that cannot be reached), without a retry hint.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// 503 ServiceUnavailable (no leader, quorum lost).
    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut e = Self::new(503, "ServiceUnavailable", message);
        e.retry_after = Some(1);
        e
    }

    /// 504 Timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        let mut e = Self::new(504, "Timeout", message);
        e.retry_after = Some(1);
        e
    }

    /// 504 Timeout for a read at a resourceVersion this replica has not reached, the way
    /// kube-apiserver's watch cache answers it (cause `ResourceVersionTooLarge`, retry after 1 s).
    pub fn too_large_resource_version(requested: i64, current: i64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        e.retry_after = Some(1);
        e.details = Some(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        e
    }

    /// 410 Gone (reason `Expired`): the requested resourceVersion was compacted.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 422 Invalid on `ListOptions.meta.k8s.io`, as kube-apiserver answers list and watch
    /// options that contradict each other. Each cause is `(field, reason, message)`.
    pub fn invalid_list_options(causes: &[(&str, &'static str, String)]) -> Self {
        let shown: Vec<String> = causes.iter().map(|(f, _, m)| format!("{f}: {m}")).collect();
        let shown = if shown.len() == 1 {
            shown[0].clone()
        } else {
            format!("[{}]", shown.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("ListOptions.meta.k8s.io \"\" is invalid: {shown}"),
        );
        e.details = Some(json!({
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": causes
                .iter()
                .map(|(f, r, m)| json!({"reason": r, "message": m, "field": f}))
                .collect::<Vec<_>>(),
        }));
        e
    }

    /// The `Status` object.
    pub fn body(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        if let Some(c) = &self.continue_token {
            v["metadata"] = json!({"continue": c});
        }
        v
    }
}

/// A decoded JSON value as Go's `fmt` prints it with `%+v`: maps as `map[k:v ...]` in key
/// order, slices as `[a b]`, strings bare, null as `<nil>`, floats in `%g` form.
/// The cause type of a field error from the words its message starts with, as kube's
/// `field.ErrorType` prints them.
fn cause_reason(message: &str) -> &'static str {
    const REASONS: [(&str, &str); 9] = [
        ("Required value", "FieldValueRequired"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
        ("Internal error", "InternalError"),
        ("Invalid value", "FieldValueInvalid"),
    ];
    REASONS
        .iter()
        .find(|(words, _)| message.starts_with(words))
        .map_or("FieldValueInvalid", |(_, reason)| reason)
}

fn go_print(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_print).collect::<Vec<_>>().join(" ")),
        Value::Object(fields) => format!(
            "map[{}]",
            fields
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// A float as Go's `%v` prints it (`strconv`'s `'g'` with the shortest digits): plain, or in
/// exponent form (`1e+06`, `1.5e-07`) when the exponent is below -4 or 6 and up.
fn go_float(f: f64) -> String {
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        f.to_string()
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// A string quoted as Go's `%q` quotes it.
/// `s` as Go's `%q` prints it.
pub fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// The `Status` object with its fields in kube-apiserver's order (`kind`, `apiVersion`,
/// `metadata`, `status`, `message`, `reason`, `details`, `code`; inside `details`: `name`,
/// `group`, `kind`, `uid`, `causes`), which a `Value` (sorted keys) cannot keep.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: StatusMeta<'a>,
    status: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<StatusDetails<'a>>,
    code: u16,
}

#[derive(serde::Serialize)]
struct StatusMeta<'a> {
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    continue_token: Option<&'a str>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusDetails<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    causes: Option<Vec<StatusCause<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<&'a Value>,
}

impl<'a> StatusDetails<'a> {
    fn of(d: &'a Value) -> StatusDetails<'a> {
        StatusDetails {
            name: d.get("name"),
            group: d.get("group"),
            kind: d.get("kind"),
            uid: d.get("uid"),
            causes: d.get("causes").and_then(Value::as_array).map(|causes| {
                causes
                    .iter()
                    .map(|c| StatusCause {
                        reason: c.get("reason"),
                        message: c.get("message"),
                        field: c.get("field"),
                    })
                    .collect()
            }),
            retry_after_seconds: d.get("retryAfterSeconds"),
        }
    }
}

#[derive(serde::Serialize)]
struct StatusCause<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a Value>,
}

impl ApiError {
    /// The `Status` object as JSON text, fields in kube-apiserver's order.
    pub fn body_json(&self) -> String {
        let details = self.details.as_ref().map(StatusDetails::of);
        let body = StatusBody {
            kind: "Status",
            api_version: "v1",
            metadata: StatusMeta {
                continue_token: self.continue_token.as_deref(),
            },
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details,
            code: self.code,
        };
        crate::machinery::go_json::encode(&body, false)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| self.body().to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            // kube-apiserver's JSON encoder ends every object with a newline.
            self.body_json() + "\n",
        )
            .into_response();
        if let Some(s) = self.retry_after {
            if let Ok(v) = s.to_string().parse() {
                resp.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
            }
        }
        resp.extensions_mut().insert(ResponseStatus::from(self));
        resp
    }
}

/// The `Status` a response is — an error's, or the success a delete answers with — kept in
/// the response's extensions so that a layer outside the endpoints (the audit log's
/// `responseStatus`) has it without decoding the body, whatever its encoding.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseStatus {
    /// `Success` or `Failure`.
    pub status: String,
    /// The human-readable message (may be empty).
    pub message: String,
    /// The machine-readable reason (may be empty).
    pub reason: String,
    /// `details`, when the Status has them.
    pub details: Option<Value>,
}

impl ResponseStatus {
    /// The Status `body` is, when it is one (`kind: Status`).
    pub fn of(body: &Value) -> Option<ResponseStatus> {
        if body.get("kind").and_then(Value::as_str) != Some("Status") {
            return None;
        }
        let text = |field: &str| {
            body.get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Some(ResponseStatus {
            status: text("status"),
            message: text("message"),
            reason: text("reason"),
            details: body.get("details").cloned(),
        })
    }

    /// `details` as JSON with kube's field order (`name`, `group`, `kind`, `uid`, `causes`,
    /// `retryAfterSeconds`).
    pub fn details_json(&self) -> Option<String> {
        let details = self.details.as_ref()?;
        serde_json::to_string(&StatusDetails::of(details)).ok()
    }
}

impl From<ApiError> for ResponseStatus {
    fn from(e: ApiError) -> ResponseStatus {
        ResponseStatus {
            status: "Failure".into(),
            message: e.message,
            reason: e.reason.into(),
            details: e.details,
        }
    }
}

#[cfg(test)]
mod status_tests {
    use super::{ApiError, ResponseStatus};
    use axum::response::IntoResponse;

    #[test]
    fn status_fields_come_in_kube_apiservers_order() {
        assert_eq!(
            ApiError::unauthorized().body_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        assert_eq!(
            ApiError::not_found("apps", "deployments", "web").body_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"web\" not found","reason":"NotFound","details":{"name":"web","group":"apps","kind":"deployments"},"code":404}"#
        );
    }

    #[test]
    fn a_patch_that_cannot_convert_is_shown_as_go_prints_it() {
        let patch =
            serde_json::json!({"data": "x", "n": [1, 1.5, 1000000.0, null, true], "s": {"q": "a\"b"}});
        let e = ApiError::invalid_patch(&patch, "cannot restore map from string");
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            r#" "" is invalid: patch: Invalid value: "map[data:x n:[1 1.5 1e+06 <nil> true] s:map[q:a\"b]]": cannot restore map from string"#
        );
        assert_eq!(
            e.body_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":" \"\" is invalid: patch: Invalid value: \"map[data:x n:[1 1.5 1e+06 \u003cnil\u003e true] s:map[q:a\\\"b]]\": cannot restore map from string","reason":"Invalid","details":{"causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"map[data:x n:[1 1.5 1e+06 \u003cnil\u003e true] s:map[q:a\\\"b]]\": cannot restore map from string","field":"patch"}]},"code":422}"#
        );
    }

    #[test]
    fn a_responses_status_is_kept_for_the_audit_log() {
        let response = ApiError::not_found("apps", "deployments", "web").into_response();
        let status = response.extensions().get::<ResponseStatus>().cloned().unwrap();
        assert_eq!(
            (
                status.status.as_str(),
                status.reason.as_str(),
                status.message.as_str()
            ),
            ("Failure", "NotFound", "deployments.apps \"web\" not found")
        );
        assert_eq!(
            status.details_json().unwrap(),
            r#"{"name":"web","group":"apps","kind":"deployments"}"#
        );
        let deleted = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"name": "a", "kind": "configmaps"}});
        let status = ResponseStatus::of(&deleted).unwrap();
        assert_eq!((status.status.as_str(), status.message.as_str()), ("Success", ""));
        assert_eq!(
            ResponseStatus::of(&serde_json::json!({"kind": "ConfigMap"})),
            None
        );
    }
}
