//! Per-kind behaviour: the only module that names a kind. Scheme defaults, table printers,
//! QoS classes, Service IP and port allocation, and the strategy that the generic store calls
//! before and after a write.

pub mod allocation;
pub mod defaults;
pub mod printers;
pub mod qos;
pub mod strategy;
