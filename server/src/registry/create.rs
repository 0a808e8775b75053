//! POST of the generic store: a new object through type checks, field validation, the type's
//! strategy, managed fields and the admission chain, then one conditional write (with the
//! quotas the object is charged to).

use super::options::WriteOptions;
use super::reply::{check_grant, key, with_rv, Reply};
use crate::admission::resource_quota::Charge;
use crate::admission::{self, Operation};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::{self, Decoded};
use crate::machinery::managed::{self, Part};
use crate::machinery::meta::{check_type, meta_str, prepare_create};
use crate::registry::strategy;
use crate::registry::ResourceRequest;
use crate::store::{Alongside, Cas, Store};

/// POST to a collection, or to a subresource of one object that the type's strategy serves
/// (a pod's `eviction` and `binding`).
pub async fn create(
    store: &Store,
    req: &ResourceRequest,
    opts: &WriteOptions,
    body: Decoded,
) -> ApiResult<Reply> {
    if let (Some(name), Some(sub)) = (req.name.as_deref(), req.subresource.as_deref()) {
        return match strategy::of(&req.rt).create_subresource(store, req, opts, body.value) {
            Some(created) => created.await,
            None => Err(ApiError::not_found(
                &req.rt.group,
                &format!("{}/{sub}", req.rt.plural),
                name,
            )),
        };
    }
    if req.name.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let dry = opts.dry_run;
    let mut obj = body.value;
    check_type(&req.rt, &mut obj)?;
    let warnings = field_validation::check(&req.rt, &mut obj, &body.duplicates, opts.field_validation)?;
    let manager = &opts.field_manager;
    let requested = obj["metadata"].get("managedFields").cloned();
    let given_name = meta_str(&obj, "name").unwrap_or_default().to_string();
    let name = prepare_create(&req.rt, &mut obj, req.namespace.as_deref())?;
    if req.rt.namespaced && req.namespace.is_none() {
        return Err(ApiError::bad_request(
            "a namespaced object must be created in a namespace",
        ));
    }
    let attrs = req.admission(Operation::Create, &given_name, dry, None);
    strategy::prepare_for_create(&req.rt, &mut obj);
    if let Some(r) = &req.requester {
        strategy::of(&req.rt).prepare_for_create_by(&mut obj, &r.user);
    }
    // The writer owns what it sent (and the defaults), not what admission adds, as in
    // kube-apiserver, whose field manager runs before the admission chain: a pod's
    // ServiceAccount, token volume and tolerations belong to no manager, so an apply that
    // sets them otherwise conflicts with nobody.
    managed::record_update(&req.rt, Part::Main, None, &mut obj, manager, requested.as_ref());
    admission::chain().admit(store, &attrs, &mut obj).await?;
    strategy::of(&req.rt).validate(&req.rt, None, &obj)?;
    admission::chain().validate(store, &attrs, &obj).await?;
    check_grant(req, &obj, None)?;
    let key = key(req, &name);
    let quota = Charge::new(&attrs);
    if dry {
        return match store.get(&key, true).await? {
            Some(_) => Err(ApiError::already_exists(&req.rt.group, &req.rt.plural, &name)),
            None => {
                quota.plan(store, &obj).await?;
                strategy::of(&req.rt).preview(store, &key, &mut obj).await?;
                Ok(Reply::object(201, obj).with_warnings(warnings))
            }
        };
    }
    match strategy::of(&req.rt)
        .write(store, &req.rt, &key, &mut obj, None, &quota)
        .await?
    {
        Cas::Done(rev) => Ok(Reply::object(201, with_rv(obj, rev)).with_warnings(warnings)),
        Cas::Failed(_) => Err(ApiError::already_exists(&req.rt.group, &req.rt.plural, &name)),
    }
}
