//! API machinery: pure functions over Kubernetes objects as `serde_json::Value` — metadata,
//! field sets and managed fields (server-side apply), strategic merge, schemas and field
//! validation, selectors, the protobuf transcoder and the CBOR codec, body decoding, the `Status` error type and
//! the OpenAPI definitions of the built-in types.
//! No I/O, no axum routing, no Raft: everything here is testable without a server.

pub mod age;
pub mod cbor;
pub mod decode;
pub mod definitions;
pub mod duration;
pub mod errors;
pub mod field_path;
pub mod field_validation;
pub mod fieldset;
pub mod go_json;
pub mod managed;
pub mod meta;
pub mod net;
pub mod protobuf;
pub mod qos;
pub mod query;
pub mod schema;
pub mod selector;
pub mod strategic_merge;
pub mod timestamp;
pub mod type_facts;
pub mod version;
