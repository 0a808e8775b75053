//! Authentication: who a request is from. Each authenticator turns credentials (a verified
//! client certificate, a bearer token) into a [`UserInfo`]; a request with none is anonymous.

pub mod user;

pub use user::UserInfo;
