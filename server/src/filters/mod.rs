//! Filters: tower layers that every request passes before it reaches an endpoint, assembled
//! in one ordered function, `server::router::router`.

pub mod audit_id;
pub mod compression;
pub mod request_info;
