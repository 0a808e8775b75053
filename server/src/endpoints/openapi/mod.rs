//! `/openapi/v2` and `/openapi/v3`: the schemas of the served types, as kube-apiserver publishes
//! them, so that `kubectl explain` and kubectl's client-side validation work.
//!
//! - `/openapi/v2`: one Swagger 2.0 document, as JSON or in gnostic's protobuf encoding (which
//!   kubectl downloads for `--validate=strict`, its default, when the server does not advertise
//!   server-side field validation).
//! - `/openapi/v3`: an index of one document per group-version; each document's URL carries
//!   its hash and is served with immutable caching, as kube-apiserver does.
//!
//! The built-in types' documents are generated once on first use and kept as serialized bytes;
//! `/openapi/v3` also lists one document per custom resource group-version, built from the
//! stored definitions when asked for, and `/openapi/v2` adds the custom resources and the
//! aggregated APIs' Swagger documents to the built-in one (kept until they change).

mod custom;
mod paths;
mod proto;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha512};

use super::Api;
use crate::endpoints::discovery::KUBE_VERSION;
use crate::endpoints::negotiation::choose;
use crate::machinery::definitions;
use crate::machinery::errors::ApiError;
use crate::machinery::schema::schemas;
use crate::scheme::{Registry, ResourceType};

/// The protobuf media types kube-apiserver accepts for `/openapi/v2`.
pub const V2_PROTOBUF: &[&str] = &[
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// Building the documents failed (a bug, not a client error).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// JSON serialization failed.
    #[error("serializing an OpenAPI document: {0}")]
    Json(#[from] serde_json::Error),
    /// The protobuf form could not be written.
    #[error(transparent)]
    Protobuf(#[from] proto::EncodeError),
}

/// One serialized document and its hash.
#[derive(Debug, Clone)]
struct Doc {
    body: Bytes,
    /// Upper-case hex SHA-512 of `body`, as kube-apiserver computes it.
    hash: String,
}

impl Doc {
    fn new(body: Vec<u8>) -> Doc {
        let hash = Sha512::digest(&body).iter().map(|b| format!("{b:02X}")).collect();
        Doc {
            body: Bytes::from(body),
            hash,
        }
    }

    fn etag(&self) -> String {
        format!("\"{}\"", self.hash)
    }
}

/// Every OpenAPI document of this server, serialized.
#[derive(Debug)]
pub struct Documents {
    v2_json: Doc,
    v2_protobuf: Doc,
    v3_index: Doc,
    /// Keyed by `api/v1` or `apis/<group>/<version>`.
    v3: BTreeMap<String, Doc>,
}

fn info() -> Value {
    json!({"title": "Kubernetes", "version": format!("v{}.{}.0", KUBE_VERSION.0, KUBE_VERSION.1)})
}

/// `api/v1` or `apis/<group>/<version>`.
fn group_version_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The Swagger 2.0 document as a JSON value.
fn v2_value(defs: &definitions::Definitions) -> Value {
    json!({
        "swagger": "2.0",
        "info": info(),
        "paths": paths::v2(&defs.kinds),
        "definitions": defs.schemas,
    })
}

/// The OpenAPI 3.0 documents, keyed like the `/openapi/v3` index.
fn v3_values(defs: &definitions::Definitions) -> BTreeMap<String, Value> {
    let mut by_gv: BTreeMap<String, Vec<&definitions::ServedKind>> = BTreeMap::new();
    for k in &defs.kinds {
        by_gv
            .entry(group_version_key(&k.rt.group, &k.rt.version))
            .or_default()
            .push(k);
    }
    let mut out = BTreeMap::new();
    for (key, kinds) in by_gv {
        let mut roots: Vec<&str> = vec![
            definitions::STATUS,
            definitions::DELETE_OPTIONS,
            definitions::PATCH,
            definitions::WATCH_EVENT,
        ];
        for k in &kinds {
            roots.push(&k.name);
            if !k.rt.review {
                roots.push(&k.list_name);
            }
        }
        if kinds.iter().any(|k| k.rt.has_scale) {
            roots.push(definitions::SCALE);
        }
        let schemas: Map<String, Value> = definitions::closure(&defs.schemas, &roots)
            .into_iter()
            .map(|(name, schema)| (name.to_string(), definitions::to_v3(name, schema)))
            .collect();
        let doc = json!({
            "openapi": "3.0.0",
            "info": info(),
            "paths": paths::v3(&kinds),
            "components": {"schemas": schemas},
        });
        out.insert(key, doc);
    }
    out
}

/// Generates and serializes every document.
pub fn build(registry: &Registry) -> Result<Documents, BuildError> {
    let defs = definitions::build(registry);
    let v2 = v2_value(&defs);
    let v2_json = Doc::new(serde_json::to_vec(&v2)?);
    let v2_protobuf = Doc::new(proto::encode(&v2)?);
    drop(v2);
    let mut v3 = BTreeMap::new();
    let mut index = Map::new();
    for (key, doc) in v3_values(&defs) {
        let doc = Doc::new(serde_json::to_vec(&doc)?);
        index.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash)}),
        );
        v3.insert(key, doc);
    }
    let v3_index = Doc::new(serde_json::to_vec(&json!({ "paths": index }))?);
    Ok(Documents {
        v2_json,
        v2_protobuf,
        v3_index,
        v3,
    })
}

static DOCUMENTS: OnceLock<Result<Documents, String>> = OnceLock::new();

/// The documents of the built-in registry, built on first use off the async workers.
async fn documents() -> Result<&'static Documents, ApiError> {
    let built = match DOCUMENTS.get() {
        Some(d) => d,
        None => tokio::task::spawn_blocking(|| {
            DOCUMENTS.get_or_init(|| build(&Registry::new()).map_err(|e| e.to_string()))
        })
        .await
        .map_err(|e| ApiError::internal(format!("building OpenAPI documents: {e}")))?,
    };
    built.as_ref().map_err(|e| ApiError::internal(e.clone()))
}

fn not_acceptable(offered: &[&str]) -> Response {
    (
        StatusCode::NOT_ACCEPTABLE,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!(
            "406 Not Acceptable: available media types are {}\n",
            offered.join(", ")
        ),
    )
        .into_response()
}

fn matches_etag(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == etag
        })
}

/// Serves `doc` with its ETag, answering a matching `If-None-Match` with 304.
fn serve(
    headers: &HeaderMap,
    doc: &Doc,
    content_type: &str,
    extra: &[(header::HeaderName, String)],
) -> Response {
    let etag = doc.etag();
    let mut response = if matches_etag(headers, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = doc.body.clone().into_response();
        if let Ok(v) = HeaderValue::from_str(content_type) {
            r.headers_mut().insert(header::CONTENT_TYPE, v);
        }
        r
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    for (name, value) in extra {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name.clone(), v);
        }
    }
    response
}

/// `GET /openapi/v2`: JSON, or protobuf when asked for it; the built-in types' document, with
/// the custom resources served now and the available aggregated APIs' documents added.
pub async fn v2(State(api): State<Api>, headers: HeaderMap) -> Response {
    let docs = match documents().await {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let registry = api.registry.current();
    let types: Vec<&ResourceType> = registry.all().filter(|t| t.custom.is_some()).collect();
    let mut added = Vec::new();
    if !types.is_empty() {
        added.push(custom::v2_parts(&types));
    }
    added.extend(
        api.aggregated
            .served()
            .into_iter()
            .filter_map(|served| served.openapi_v2),
    );
    let merged = if added.is_empty() {
        None
    } else {
        match v2_with(docs, added).await {
            Ok(merged) => Some(merged),
            Err(e) => return e.into_response(),
        }
    };
    let (json_doc, protobuf_doc) = match &merged {
        Some(merged) => (&merged.json, &merged.protobuf),
        None => (&docs.v2_json, &docs.v2_protobuf),
    };
    let offered = ["application/json", V2_PROTOBUF[0], V2_PROTOBUF[1]];
    match choose(&headers, &offered) {
        Some("application/json") => serve(&headers, json_doc, "application/json", &[]),
        // Answered with the dotted form whichever spelling was asked for: the `@` of the
        // older one is not a token character, and Go's mime parser (kubectl's) rejects it.
        Some(_) => serve(&headers, protobuf_doc, V2_PROTOBUF[1], &[]),
        None => not_acceptable(&offered),
    }
}

/// The Swagger 2.0 document with custom resources or aggregated APIs, in both encodings.
struct V2Doc {
    json: Doc,
    protobuf: Doc,
}

/// The last document with additions, by the hash of what was added: built again only when
/// the definitions or the aggregated APIs' documents change.
static V2_WITH: Mutex<Option<(String, Arc<V2Doc>)>> = Mutex::new(None);

/// `(paths, definitions)` of a Swagger 2.0 document.
type SwaggerParts = (Map<String, Value>, Map<String, Value>);

/// The built-in document with each of `added` merged in, in order, as kube-aggregator merges
/// its backends' documents: a path or definition already there is kept, and the rest is
/// added; a backend's part the protobuf form cannot carry is left out whole. The custom
/// resources' part comes first, so a custom group-version shadows an aggregated one. Built off
/// the async workers: the document is megabytes.
async fn v2_with(docs: &'static Documents, added: Vec<SwaggerParts>) -> Result<Arc<V2Doc>, ApiError> {
    let serialized = serde_json::to_vec(&added).map_err(|e| ApiError::internal(e.to_string()))?;
    let key = Doc::new(serialized).hash;
    let last = V2_WITH.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some((_, doc)) = last.filter(|(k, _)| *k == key) {
        return Ok(doc);
    }
    let doc = tokio::task::spawn_blocking(move || -> Result<V2Doc, BuildError> {
        let mut v2: Value = serde_json::from_slice(&docs.v2_json.body)?;
        for (paths, definitions) in added {
            let part = json!({"swagger": "2.0", "info": info(), "paths": paths, "definitions": definitions});
            if let Err(e) = proto::encode(&part) {
                tracing::warn!(error = %e, "an added Swagger document is left out of /openapi/v2");
                continue;
            }
            for (key, part) in [("paths", paths), ("definitions", definitions)] {
                if let Some(Value::Object(all)) = v2.get_mut(key) {
                    for (name, value) in part {
                        all.entry(name).or_insert(value);
                    }
                }
            }
        }
        Ok(V2Doc {
            json: Doc::new(serde_json::to_vec(&v2)?),
            protobuf: Doc::new(proto::encode(&v2)?),
        })
    })
    .await
    .map_err(|e| ApiError::internal(format!("building the OpenAPI v2 document: {e}")))?
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let doc = Arc::new(doc);
    *V2_WITH.lock().unwrap_or_else(|p| p.into_inner()) = Some((key, doc.clone()));
    Ok(doc)
}

/// The documents of the custom resource group-versions served now and of the available
/// aggregated ones that serve one (a served group-version shadows an aggregated one), keyed
/// like the index.
fn custom_documents(api: &Api) -> BTreeMap<String, Doc> {
    let mut docs = custom_resource_documents(api);
    for served in api.aggregated.served() {
        let key = group_version_key(&served.backend.group, &served.backend.version);
        let Some(doc) = &served.openapi_v3 else { continue };
        if docs.contains_key(&key) {
            continue;
        }
        if let Ok(body) = serde_json::to_vec(doc) {
            docs.insert(key, Doc::new(body));
        }
    }
    docs
}

/// The documents of the custom resource group-versions served now, keyed like the index.
fn custom_resource_documents(api: &Api) -> BTreeMap<String, Doc> {
    let registry = api.registry.current();
    let mut by_gv: BTreeMap<String, Vec<&ResourceType>> = BTreeMap::new();
    for rt in registry.all().filter(|t| t.custom.is_some()) {
        by_gv
            .entry(group_version_key(&rt.group, &rt.version))
            .or_default()
            .push(rt);
    }
    let builtin = schemas().definitions();
    by_gv
        .into_iter()
        .filter_map(|(key, types)| {
            let body = serde_json::to_vec(&custom::document(&types, builtin)).ok()?;
            Some((key, Doc::new(body)))
        })
        .collect()
}

/// `GET /openapi/v3`: where each group-version's document is.
pub async fn v3_index(State(api): State<Api>, headers: HeaderMap) -> Response {
    let docs = match documents().await {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let Some(ct) = choose(&headers, &["application/json"]) else {
        return not_acceptable(&["application/json"]);
    };
    let custom = custom_documents(&api);
    if custom.is_empty() {
        return serve(&headers, &docs.v3_index, ct, &[]);
    }
    let mut index: Value =
        serde_json::from_slice(&docs.v3_index.body).unwrap_or_else(|_| json!({"paths": {}}));
    for (key, doc) in &custom {
        index["paths"][key.as_str()] =
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash)});
    }
    match serde_json::to_vec(&index) {
        Ok(body) => serve(&headers, &Doc::new(body), ct, &[]),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// `GET /openapi/v3/<api/v1 | apis/group/version>[?hash=...]`.
///
/// With the current hash the response may be cached forever; with a stale one the client is
/// redirected to the current URL.
pub async fn v3_group_version(State(api): State<Api>, uri: Uri, headers: HeaderMap) -> Response {
    let docs = match documents().await {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let key = uri
        .path()
        .trim_start_matches("/openapi/v3/")
        .trim_end_matches('/');
    let custom;
    let doc = match docs.v3.get(key) {
        Some(doc) => doc,
        None => {
            custom = custom_documents(&api);
            match custom.get(key) {
                Some(doc) => doc,
                None => return ApiError::no_route().into_response(),
            }
        }
    };
    let Some(ct) = choose(&headers, &["application/json"]) else {
        return not_acceptable(&["application/json"]);
    };
    let hash = serde_urlencoded::from_str::<Vec<(String, String)>>(uri.query().unwrap_or(""))
        .ok()
        .and_then(|q| q.into_iter().find(|(k, _)| k == "hash").map(|(_, v)| v));
    match hash {
        Some(h) if h != doc.hash => {
            let location = format!("/openapi/v3/{key}?hash={}", doc.hash);
            (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, location)]).into_response()
        }
        Some(_) => {
            let expires = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(365 * 24 * 3600));
            let extra = [
                (header::CACHE_CONTROL, "public, immutable".to_string()),
                (header::EXPIRES, expires),
            ];
            serve(&headers, doc, ct, &extra)
        }
        None => serve(&headers, doc, ct, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> &'static Documents {
        static DOCS: OnceLock<Documents> = OnceLock::new();
        DOCS.get_or_init(|| build(&Registry::new()).expect("documents build"))
    }

    fn json_of(doc: &Doc) -> Value {
        serde_json::from_slice(&doc.body).unwrap()
    }

    #[test]
    fn deployment_has_its_group_version_kind_and_a_list() {
        let v2 = json_of(&docs().v2_json);
        let defs = &v2["definitions"];
        let d = &defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            d["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(
            d["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(
            d.get("required").is_none(),
            "metadata is not required upstream: {d}"
        );
        assert_eq!(
            defs["io.k8s.api.core.v1.Event"]["required"],
            json!(["involvedObject", "metadata"])
        );
        let list = &defs["io.k8s.api.apps.v1.DeploymentList"];
        assert_eq!(
            list["properties"]["items"]["items"]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.Deployment"
        );
        assert_eq!(
            list["x-kubernetes-group-version-kind"][0]["kind"],
            "DeploymentList"
        );
        assert_eq!(list["required"], json!(["items"]));
        let spec = &defs["io.k8s.api.apps.v1.DeploymentSpec"];
        assert_eq!(spec["properties"]["replicas"]["format"], "int32");
    }

    #[test]
    fn special_types_have_the_upstream_shapes() {
        let v2 = json_of(&docs().v2_json);
        let defs = &v2["definitions"];
        let ios = &defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!(ios["type"], "string");
        assert_eq!(ios["format"], "int-or-string");
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"],
            "string"
        );
        let time = &defs["io.k8s.apimachinery.pkg.apis.meta.v1.Time"];
        assert_eq!(
            (time["type"].as_str(), time["format"].as_str()),
            (Some("string"), Some("date-time"))
        );
        let json_any = &defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"];
        assert!(json_any.get("type").is_none() && json_any["description"].is_string());

        let core = json_of(&docs().v3["api/v1"]);
        let schemas = &core["components"]["schemas"];
        let ios = &schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
        assert_eq!(ios["x-kubernetes-int-or-string"], true);
        assert_eq!(ios["oneOf"], json!([{"type": "integer"}, {"type": "string"}]));
        assert!(ios.get("type").is_none());
        assert_eq!(
            schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]["oneOf"],
            json!([{"type": "string"}, {"type": "number"}])
        );
        let meta = &schemas["io.k8s.api.core.v1.Pod"]["properties"]["metadata"];
        assert_eq!(
            meta["allOf"],
            json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}])
        );
        assert!(meta.get("$ref").is_none());
    }

    #[test]
    fn merge_metadata_comes_from_the_type_facts() {
        let v2 = json_of(&docs().v2_json);
        let defs = &v2["definitions"];
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        let volumes = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["volumes"];
        assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
        let ports = &defs["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["port", "protocol"]));
        assert_eq!(
            defs["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"]["x-kubernetes-map-type"],
            "atomic"
        );

        let apps = json_of(&docs().v3["apis/apps/v1"]);
        let pod_spec = &apps["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"];
        assert_eq!(
            pod_spec["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
    }

    #[test]
    fn the_v3_index_lists_every_served_group_version() {
        let registry = Registry::new();
        let index = json_of(&docs().v3_index);
        let paths = index["paths"].as_object().unwrap();
        let mut expected: Vec<String> = registry
            .all()
            .map(|t| group_version_key(&t.group, &t.version))
            .collect();
        expected.sort();
        expected.dedup();
        assert_eq!(paths.keys().cloned().collect::<Vec<_>>(), expected);
        for (key, entry) in paths {
            let doc = &docs().v3[key];
            assert_eq!(
                entry["serverRelativeURL"],
                format!("/openapi/v3/{key}?hash={}", doc.hash)
            );
            assert_eq!(doc.hash.len(), 128);
        }
    }

    #[test]
    fn every_served_kind_has_a_schema_and_paths_kubectl_can_find() {
        let registry = Registry::new();
        let v2 = json_of(&docs().v2_json);
        for t in registry.all() {
            let gvk = json!({"group": t.group, "kind": t.kind, "version": t.version});
            let doc = json_of(&docs().v3[&group_version_key(&t.group, &t.version)]);
            let schemas = doc["components"]["schemas"].as_object().unwrap();
            let with_gvk = |kind: &str| {
                schemas.values().any(|s| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|l| l.iter().any(|g| g["kind"] == kind && g["group"] == *t.group))
                })
            };
            assert!(with_gvk(&t.kind), "{} has no schema", t.kind);
            let prefix = if t.group.is_empty() {
                format!("/api/{}", t.version)
            } else {
                format!("/apis/{}/{}", t.group, t.version)
            };
            if t.review {
                let collection = if t.namespaced {
                    format!("{prefix}/namespaces/{{namespace}}/{}", t.plural)
                } else {
                    format!("{prefix}/{}", t.plural)
                };
                let post = &doc["paths"][&collection]["post"];
                assert_eq!(post["x-kubernetes-group-version-kind"], gvk, "{collection}");
                assert_eq!(
                    doc["paths"][&collection].as_object().map(|o| o.len()),
                    Some(2),
                    "{collection}: post and parameters only"
                );
                continue;
            }
            assert!(with_gvk(&t.list_kind), "{} has no schema", t.list_kind);
            let object = if t.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
            } else {
                format!("{prefix}/{}/{{name}}", t.plural)
            };
            let patch = &doc["paths"][&object]["patch"];
            assert_eq!(patch["x-kubernetes-group-version-kind"], gvk, "{object}");
            assert!(patch["requestBody"]["content"]["application/strategic-merge-patch+json"].is_object());
            assert_eq!(
                v2["paths"][&object]["get"]["x-kubernetes-group-version-kind"],
                gvk
            );
        }
    }

    #[test]
    fn every_reference_resolves() {
        let v2 = json_of(&docs().v2_json);
        let defs = v2["definitions"].as_object().unwrap();
        let mut missing = Vec::new();
        let text = docs().v2_json.body.clone();
        let text = std::str::from_utf8(&text).unwrap();
        for part in text.split("\"#/definitions/").skip(1) {
            let name = part.split('"').next().unwrap_or_default();
            if !defs.contains_key(name) {
                missing.push(name.to_string());
            }
        }
        assert!(missing.is_empty(), "dangling references: {missing:?}");
        for (key, doc) in &docs().v3 {
            let v = json_of(doc);
            let schemas = v["components"]["schemas"].as_object().unwrap();
            let text = std::str::from_utf8(&doc.body).unwrap();
            for part in text.split("\"#/components/schemas/").skip(1) {
                let name = part.split('"').next().unwrap_or_default();
                assert!(schemas.contains_key(name), "{key}: dangling reference {name}");
            }
        }
    }

    #[test]
    fn accept_negotiation_prefers_the_clients_order() {
        let mut h = HeaderMap::new();
        let offered = ["application/json", V2_PROTOBUF[0], V2_PROTOBUF[1]];
        assert_eq!(choose(&h, &offered), Some("application/json"));
        h.insert(header::ACCEPT, HeaderValue::from_static(V2_PROTOBUF[0]));
        assert_eq!(choose(&h, &offered), Some(V2_PROTOBUF[0]));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            ),
        );
        assert_eq!(choose(&h, &offered), Some(V2_PROTOBUF[1]));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        assert_eq!(choose(&h, &offered), None);
        h.insert(header::ACCEPT, HeaderValue::from_static("application/*;q=0.8"));
        assert_eq!(choose(&h, &["application/json"]), Some("application/json"));
    }

    #[test]
    fn the_documents_stay_small() {
        let d = docs();
        let total: usize = d.v2_json.body.len()
            + d.v2_protobuf.body.len()
            + d.v3_index.body.len()
            + d.v3.values().map(|x| x.body.len()).sum::<usize>();
        assert!(total < 32 << 20, "{total} bytes of OpenAPI documents");
        assert!(d.v2_protobuf.body.len() < d.v2_json.body.len());
    }
}
