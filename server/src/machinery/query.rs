//! A request's query parameters as the client sent them. The verbs read their options from it;
//! `store::plans` turns the read options into typed plans.

use std::collections::HashMap;

/// Query parameters of a request.
pub type Query = HashMap<String, String>;
