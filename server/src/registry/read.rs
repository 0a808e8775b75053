//! GET and LIST of the generic store: one object or a page of a collection, at the revision
//! the request's resourceVersion asks for, from the watch cache.

use super::reply::{key, name_of, not_found, Reply};
use crate::machinery::errors::ApiResult;
use crate::registry::options::{GetOptions, ListOptions};
use crate::registry::ResourceRequest;
use crate::store::cacher::CachedObject;
use crate::store::delegator;
use crate::store::keys;
use crate::store::Store;
use serde_json::{json, Value};

/// GET of one object (or of its scale subresource), at the revision its resourceVersion asks
/// for, from the watch cache.
pub async fn get(store: &Store, req: &ResourceRequest, opts: &GetOptions) -> ApiResult<Reply> {
    if req.subresource.as_deref() == Some("scale") {
        return crate::registry::scale::get(store, req, opts).await;
    }
    let name = name_of(req)?;
    let obj = delegator::get(store.cache(), &key(req, name), opts.at)
        .await?
        .ok_or_else(|| not_found(&req.rt, name))?;
    // The body is the cached encoding; it is decoded only for representations that need it.
    Ok(Reply {
        code: 200,
        body: Value::Null,
        table_rows: None,
        warnings: Vec::new(),
        items: None,
        cached: Some(obj),
    })
}

/// The key prefix of a collection request.
fn prefix(req: &ResourceRequest) -> String {
    match &req.namespace {
        Some(ns) => format!("{}{ns}/", keys::of_type(&req.rt)),
        None => keys::of_type(&req.rt),
    }
}

/// A page of the collection per the request's resourceVersion, paging and selectors.
pub(crate) async fn select(
    store: &Store,
    req: &ResourceRequest,
    opts: &ListOptions,
) -> ApiResult<delegator::Page> {
    let (labels, fields) = (&opts.labels, &opts.fields);
    let selective = !labels.is_empty() || !fields.is_empty();
    let keep = |o: &CachedObject| labels.matches(o) && fields.matches(o);
    delegator::list(store.cache(), &req.rt, &prefix(req), &opts.plan, selective, &keep).await
}

/// LIST of a collection: the list's metadata in `body`, its objects in `items`.
pub async fn list(store: &Store, req: &ResourceRequest, opts: &ListOptions) -> ApiResult<Reply> {
    let page = select(store, req, opts).await?;
    let mut meta = json!({"resourceVersion": page.revision.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(n) = page.remaining {
        meta["remainingItemCount"] = json!(n);
    }
    Ok(Reply {
        code: 200,
        body: json!({
            "kind": req.rt.list_kind,
            "apiVersion": req.rt.group_version(),
            "metadata": meta,
        }),
        table_rows: None,
        warnings: Vec::new(),
        items: Some(page.items),
        cached: None,
    })
}
