//! GET and LIST of the generic store: one object or a page of a collection, at the revision
//! the request's resourceVersion asks for, from the watch cache.

use super::reply::{key, name_of, not_found, Reply};
use crate::machinery::errors::ApiResult;
use crate::machinery::query::Query;
use crate::machinery::selector::{FieldSelector, LabelSelector};
use crate::registry::ResourceRequest;
use crate::store::cacher::CachedObject;
use crate::store::delegator;
use crate::store::plans;
use crate::store::Store;
use serde_json::{json, Value};

/// GET of one object (or of its scale subresource), at the revision its resourceVersion asks
/// for, from the watch cache.
pub async fn get(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<Reply> {
    if req.subresource.as_deref() == Some("scale") {
        return crate::registry::scale::get(store, req, q).await;
    }
    let name = name_of(req)?;
    let at = plans::get_plan(q)?;
    let obj = delegator::get(store.cache(), &key(req, name), at)
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
        Some(ns) => format!("{}{ns}/", req.rt.key_prefix()),
        None => req.rt.key_prefix(),
    }
}

/// The selectors of a collection request.
pub(crate) fn selectors(req: &ResourceRequest, q: &Query) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let text = q.get("fieldSelector").map_or("", String::as_str);
    let fields = match &req.rt.custom {
        Some(custom) => FieldSelector::parse_custom(text, &custom.selectable)?,
        None => FieldSelector::parse(text, &req.rt.group, &req.rt.plural)?,
    };
    Ok((labels, fields))
}

/// A page of the collection per the request's resourceVersion, paging and selectors.
pub(crate) async fn select(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<delegator::Page> {
    let plan = plans::list_plan(q)?;
    let (labels, fields) = selectors(req, q)?;
    let selective = !labels.is_empty() || !fields.is_empty();
    let keep = |o: &CachedObject| labels.matches(o) && fields.matches(o);
    delegator::list(store.cache(), &req.rt, &prefix(req), &plan, selective, &keep).await
}

/// LIST of a collection: the list's metadata in `body`, its objects in `items`.
pub async fn list(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<Reply> {
    let page = select(store, req, q).await?;
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
