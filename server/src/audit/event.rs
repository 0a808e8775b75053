//! The audit event: kube-apiserver's `audit.k8s.io/v1` `Event`, serialized as one JSON line
//! with its fields in kube's order (the order of its Go struct), empty optional fields left
//! out as kube leaves them out, and timestamps as kube's `MicroTime`
//! (`2026-11-25T14:53:10.123456Z`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::audit::policy::{Level, Stage};
use crate::authentication::UserInfo;
use crate::machinery::errors::ResponseStatus;
use crate::machinery::timestamp;

/// `apiVersion` of every event.
pub const API_VERSION: &str = "audit.k8s.io/v1";

/// A point in time as kube's `metav1.MicroTime` writes it: UTC, RFC 3339 with microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MicroTime(pub SystemTime);

impl MicroTime {
    /// The text kube writes.
    pub fn text(self) -> String {
        timestamp::format_micro_time(self.0.into())
    }
}

impl Serialize for MicroTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

/// A user as the event names it (kube's `authentication/v1` `UserInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventUser {
    /// The user name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The user's uid.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The user's groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// What the authenticator added.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<&UserInfo> for EventUser {
    fn from(user: &UserInfo) -> EventUser {
        EventUser {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        }
    }
}

/// The object a request is for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource (plural).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid (from the request's object).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The API group (`""` for core).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's resourceVersion (from the request's object).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The subresource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// An empty `metadata` (`{}`), as kube writes a Status's list metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmptyMeta {}

/// The outcome of a request (kube's `metav1.Status`, the fields an audit event keeps).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EventStatus {
    /// Always `{}`.
    pub metadata: EmptyMeta,
    /// `Success` or `Failure`, when the response was a Status.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The Status's message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The Status's reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The Status's details, fields in kube's order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<RawValue>>,
    /// The HTTP status code.
    #[serde(skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

impl EventStatus {
    /// The status of a response with `code`, and the Status it carried if any.
    pub fn new(code: u16, status: Option<&ResponseStatus>) -> EventStatus {
        let Some(s) = status else {
            return EventStatus {
                code,
                ..EventStatus::default()
            };
        };
        EventStatus {
            metadata: EmptyMeta {},
            status: s.status.clone(),
            message: s.message.clone(),
            reason: s.reason.clone(),
            details: s.details_json().and_then(|d| RawValue::from_string(d).ok()),
            code,
        }
    }
}

/// One audit event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Always `Event`.
    pub kind: &'static str,
    /// Always `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// The level the policy gave the request.
    pub level: Level,
    /// The request's `Audit-Id`.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this event was written at.
    pub stage: Stage,
    /// The path and query as the client sent them.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The request's verb (kube's request info verb, or the lower-cased method).
    pub verb: String,
    /// The authenticated user (empty when authentication failed).
    pub user: EventUser,
    /// The user the request was made as, when it impersonated one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<EventUser>,
    /// Where the request came from.
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The client's `User-Agent`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// The object, for a resource request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The outcome, once there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<EventStatus>,
    /// The request's body (level `Request` and above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Box<RawValue>>,
    /// The response's body (level `RequestResponse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Box<RawValue>>,
    /// When the request arrived.
    pub request_received_timestamp: MicroTime,
    /// When this stage was reached.
    pub stage_timestamp: MicroTime,
    /// What the filters noted (`authorization.k8s.io/decision`, `authorization.k8s.io/reason`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// An event at `level` for a request received at `received`, at its first stage.
    pub fn new(level: Level, received: SystemTime) -> Event {
        Event {
            kind: "Event",
            api_version: API_VERSION,
            level,
            audit_id: String::new(),
            stage: Stage::RequestReceived,
            request_uri: String::new(),
            verb: String::new(),
            user: EventUser::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: MicroTime(received),
            stage_timestamp: MicroTime(received),
            annotations: BTreeMap::new(),
        }
    }

    /// The event as one line of the log (JSON and a newline).
    pub fn line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = serde_json::to_vec(self)?;
        line.push(b'\n');
        Ok(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(micros: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_micros(micros)
    }

    #[test]
    fn timestamps_are_utc_with_microseconds() {
        assert_eq!(MicroTime(at(0)).text(), "1970-01-01T00:00:00.000000Z");
        // 2026-11-25T14:53:10.123456Z
        assert_eq!(
            MicroTime(at(1_795_618_390_123_456)).text(),
            "2026-11-25T14:53:10.123456Z"
        );
    }

    #[test]
    fn an_event_has_kubes_field_order_and_leaves_out_what_is_empty() {
        let mut e = Event::new(Level::RequestResponse, at(1_000_000));
        e.audit_id = "a1".into();
        e.stage = Stage::ResponseComplete;
        e.stage_timestamp = MicroTime(at(1_500_000));
        e.request_uri = "/api/v1/namespaces/shop/configmaps?fieldManager=kubectl".into();
        e.verb = "create".into();
        e.user = EventUser {
            username: "admin".into(),
            groups: vec!["system:masters".into()],
            ..EventUser::default()
        };
        e.impersonated_user = Some(EventUser {
            username: "vi".into(),
            ..EventUser::default()
        });
        e.source_ips = vec!["127.0.0.1".into()];
        e.user_agent = "kubectl/v1.35.0".into();
        e.object_ref = Some(ObjectReference {
            resource: "configmaps".into(),
            namespace: "shop".into(),
            name: "app".into(),
            api_version: "v1".into(),
            ..ObjectReference::default()
        });
        let denied = ResponseStatus {
            status: "Failure".into(),
            message: "no".into(),
            reason: "Forbidden".into(),
            details: Some(serde_json::json!({"kind": "configmaps", "name": "app"})),
        };
        e.response_status = Some(EventStatus::new(403, Some(&denied)));
        e.request_object = RawValue::from_string(r#"{"kind":"ConfigMap"}"#.into()).ok();
        e.response_object = RawValue::from_string(r#"{"kind":"Status"}"#.into()).ok();
        e.annotations
            .insert("authorization.k8s.io/reason".into(), "".into());
        e.annotations
            .insert("authorization.k8s.io/decision".into(), "forbid".into());
        let line = String::from_utf8(e.line().unwrap()).unwrap();
        assert_eq!(
            line,
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"a1","#,
                r#""stage":"ResponseComplete","requestURI":"/api/v1/namespaces/shop/configmaps?fieldManager=kubectl","#,
                r#""verb":"create","user":{"username":"admin","groups":["system:masters"]},"#,
                r#""impersonatedUser":{"username":"vi"},"sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.35.0","#,
                r#""objectRef":{"resource":"configmaps","namespace":"shop","name":"app","apiVersion":"v1"},"#,
                r#""responseStatus":{"metadata":{},"status":"Failure","message":"no","reason":"Forbidden","#,
                r#""details":{"name":"app","kind":"configmaps"},"code":403},"#,
                r#""requestObject":{"kind":"ConfigMap"},"responseObject":{"kind":"Status"},"#,
                r#""requestReceivedTimestamp":"1970-01-01T00:00:01.000000Z","stageTimestamp":"1970-01-01T00:00:01.500000Z","#,
                r#""annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":""}}"#,
                "\n"
            )
        );
        let bare = Event::new(Level::Metadata, at(0));
        let line = String::from_utf8(bare.line().unwrap()).unwrap();
        assert_eq!(
            line.trim_end(),
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"","stage":"RequestReceived","requestURI":"","verb":"","user":{},"requestReceivedTimestamp":"1970-01-01T00:00:00.000000Z","stageTimestamp":"1970-01-01T00:00:00.000000Z"}"#
        );
        let ok = EventStatus::new(200, None);
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"metadata":{},"code":200}"#
        );
    }
}
