//! The commands that are not the server: `cluster up`, `certs`, `endpoint status`, and the
//! kubeconfig they write and read.

pub mod certs;
pub mod cluster_up;
pub mod endpoint_status;
pub mod kubeconfig;
