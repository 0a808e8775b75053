//! Per-kind behaviour: the only module that names a built-in kind. Scheme defaults, table
//! printers, QoS classes, Service IP and port allocation, kube's validation, and the strategies that the generic
//! store calls before and after a write — attached to the type table by [`strategy::registry`].

pub mod allocation;
pub mod apparmor;
pub mod binding;
pub mod connect;
pub mod csr;
pub mod defaults;
pub mod eviction;
pub mod job;
pub mod label_keys;
pub mod namespace;
pub mod pod;
pub mod printers;
pub mod proxy;
pub mod replication_controller;
pub mod service;
pub mod strategy;
pub mod validation;
