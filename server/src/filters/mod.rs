//! Filters: tower layers that every request passes before it reaches an endpoint, assembled
//! in one ordered function, `server::router::router`.

pub mod audit_id;
pub mod authentication;
pub mod authorization;
pub mod compression;
pub mod impersonation;
pub mod request_info;
