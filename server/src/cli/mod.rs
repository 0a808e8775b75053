//! The commands that are not the server: `cluster up`, `certs`, `endpoint status`, `member`, `snapshot`,
//! the admin-service connection they share, and the kubeconfig they write and read.

pub mod admin;
pub mod certs;
pub mod cluster_up;
pub mod columns;
pub mod endpoint_status;
pub mod kubeconfig;
pub mod member;
pub mod snapshot;
