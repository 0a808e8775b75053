//! Filters: tower layers that every request passes before it reaches an endpoint, assembled
//! in one ordered function, `server::router::router`. The audit filter's record is filled in
//! by the filters inside it (`audit::authenticated`, `audit::impersonated`,
//! `audit::authorized`).

pub mod aggregator;
pub mod audit;
pub mod audit_id;
pub mod authentication;
pub mod authorization;
pub mod compression;
pub mod impersonation;
pub mod max_in_flight;
pub mod metrics;
pub mod observed_body;
pub mod priority_and_fairness;
pub mod read_vs_write;
pub mod request_info;
