//! The Service strategy: a new Service starts with an empty load-balancer status, claims its
//! cluster IP and node ports in the same transaction as its write, keeps them on update, and
//! releases them when it is deleted ([`crate::kinds::allocation`]).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::config::ServiceRanges;
use crate::kinds::strategy::Builtin;
use crate::kinds::{allocation, proxy};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::registry::strategy::{Location, Strategy};
use crate::registry::ResourceRequest;
use crate::scheme::ResourceType;
use crate::store::{Alongside, Cas, Store};

/// What Services share with the other built-in kinds.
const SERVICE: Builtin = Builtin {
    initial_status: Some(|| json!({"loadBalancer": {}})),
    returns_deleted_object: true,
    ..Builtin::new("", "Service")
};

/// Services, allocated from `ranges`.
pub struct Service {
    /// The cluster IP and node port ranges.
    pub ranges: ServiceRanges,
}

impl Strategy for Service {
    fn prepare_for_create(&self, rt: &ResourceType, obj: &mut Value) {
        SERVICE.prepare_for_create(rt, obj);
    }

    fn prepare_for_update(&self, rt: &ResourceType, old: &Value, new: &mut Value) -> ApiResult<()> {
        SERVICE.prepare_for_update(rt, old, new)?;
        allocation::keep_allocated(old, new).map_err(|causes| {
            ApiError::invalid(&rt.group, &rt.kind, meta_str(old, "name").unwrap_or(""), &causes)
        })
    }

    fn write<'a>(
        &'a self,
        store: &'a Store,
        _rt: &'a ResourceType,
        key: &'a str,
        obj: &'a mut Value,
        rev: Option<i64>,
        alongside: &'a dyn Alongside,
    ) -> BoxFuture<'a, ApiResult<Cas>> {
        Box::pin(allocation::write(store, &self.ranges, key, obj, rev, alongside))
    }

    fn preview<'a>(
        &'a self,
        store: &'a Store,
        key: &'a str,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move { allocation::plan(store, &self.ranges, key, obj).await.map(drop) })
    }

    fn after_delete<'a>(&'a self, store: &'a Store, obj: &'a Value) -> BoxFuture<'a, ()> {
        Box::pin(allocation::release(store, &self.ranges, obj))
    }

    fn returns_deleted_object(&self) -> bool {
        SERVICE.returns_deleted_object
    }

    fn validate(&self, rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
        SERVICE.validate(rt, old, obj)
    }

    fn stream_location<'a>(
        &'a self,
        store: &'a Store,
        req: &'a ResourceRequest,
        _options: &'a Value,
    ) -> Option<BoxFuture<'a, ApiResult<Option<Location>>>> {
        Some(Box::pin(proxy::service(store, req)))
    }
}
