//! The `paths` of the OpenAPI documents: one entry per collection, object and subresource path
//! of every served kind, with the operations kube-apiserver lists for them.
//!
//! kubectl reads these: `kubectl explain` finds a resource's kind through the operations'
//! `x-kubernetes-group-version-kind`, and kubectl's field-validation probe looks for the
//! `fieldValidation` query parameter on the PATCH operation: finding it, kubectl leaves
//! unknown-field checks to the server (`fieldValidation=Strict`) instead of validating
//! client-side against `/openapi/v2`.

use serde_json::{json, Map, Value};

use crate::machinery::definitions::{ServedKind, DELETE_OPTIONS, PATCH, SCALE, STATUS, V2_REF, V3_REF};

/// A query or path parameter.
struct Param {
    name: &'static str,
    kind: &'static str,
    description: &'static str,
}

const fn param(name: &'static str, kind: &'static str, description: &'static str) -> Param {
    Param {
        name,
        kind,
        description,
    }
}

const NAME: Param = param("name", "string", "name of the object");
const NAMESPACE: Param = param(
    "namespace",
    "string",
    "object name and auth scope, such as for teams and projects",
);
const PRETTY: Param = param(
    "pretty",
    "string",
    "If 'true', then the output is pretty printed.",
);
const ALLOW_BOOKMARKS: Param = param(
    "allowWatchBookmarks",
    "boolean",
    "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
);
const CONTINUE: Param = param("continue", "string", "The continue option should be set when retrieving more results from the server, with the token from the previous list.");
const FIELD_SELECTOR: Param = param(
    "fieldSelector",
    "string",
    "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
);
const LABEL_SELECTOR: Param = param(
    "labelSelector",
    "string",
    "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
);
const LIMIT: Param = param(
    "limit",
    "integer",
    "limit is a maximum number of responses to return for a list call.",
);
const RESOURCE_VERSION: Param = param(
    "resourceVersion",
    "string",
    "resourceVersion sets a constraint on what resource versions a request may be served from.",
);
const RESOURCE_VERSION_MATCH: Param = param(
    "resourceVersionMatch",
    "string",
    "resourceVersionMatch determines how resourceVersion is applied to list calls.",
);
const SEND_INITIAL_EVENTS: Param = param("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true` to start the watch with synthetic events for the current state.");
const TIMEOUT_SECONDS: Param = param("timeoutSeconds", "integer", "Timeout for the list/watch call.");
const WATCH: Param = param("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.");
const DRY_RUN: Param = param(
    "dryRun",
    "string",
    "When present, indicates that modifications should not be persisted. The only valid value is: All",
);
const FIELD_MANAGER: Param = param(
    "fieldManager",
    "string",
    "fieldManager is a name associated with the actor or entity that is making these changes.",
);
const FIELD_VALIDATION: Param = param(
    "fieldValidation",
    "string",
    "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default. - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
);
const FORCE: Param = param(
    "force",
    "boolean",
    "Force is going to \"force\" Apply requests. It must be unset for non-apply patch requests.",
);
const GRACE_PERIOD: Param = param(
    "gracePeriodSeconds",
    "integer",
    "The duration in seconds before the object should be deleted.",
);
const ORPHAN: Param = param(
    "orphanDependents",
    "boolean",
    "Deprecated: please use the PropagationPolicy.",
);
const PROPAGATION: Param = param(
    "propagationPolicy",
    "string",
    "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.",
);

const LIST_PARAMS: &[&Param] = &[
    &ALLOW_BOOKMARKS,
    &CONTINUE,
    &FIELD_SELECTOR,
    &LABEL_SELECTOR,
    &LIMIT,
    &RESOURCE_VERSION,
    &RESOURCE_VERSION_MATCH,
    &SEND_INITIAL_EVENTS,
    &TIMEOUT_SECONDS,
    &WATCH,
];
const WRITE_PARAMS: &[&Param] = &[&DRY_RUN, &FIELD_MANAGER, &FIELD_VALIDATION];
const PATCH_PARAMS: &[&Param] = &[&DRY_RUN, &FIELD_MANAGER, &FIELD_VALIDATION, &FORCE];
const DELETE_PARAMS: &[&Param] = &[&DRY_RUN, &GRACE_PERIOD, &ORPHAN, &PROPAGATION];
const DELETE_COLLECTION_PARAMS: &[&Param] = &[
    &CONTINUE,
    &DRY_RUN,
    &FIELD_SELECTOR,
    &GRACE_PERIOD,
    &LABEL_SELECTOR,
    &LIMIT,
    &ORPHAN,
    &PROPAGATION,
    &RESOURCE_VERSION,
    &RESOURCE_VERSION_MATCH,
    &SEND_INITIAL_EVENTS,
    &TIMEOUT_SECONDS,
];

/// The PATCH body types of a built-in kind, in kube-apiserver's order (API clients generated
/// from the document, such as the JavaScript client, send the first one by default).
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
];
/// The PATCH body types of a custom resource (no strategic merge patch: kubectl reads this to
/// choose a merge patch for `apply` and `diff`).
const CUSTOM_PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
];
/// What a built-in kind's operations answer in: every encoding its endpoints negotiate.
const PRODUCES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];
/// A built-in kind's lists, which also watch: the encodings, then the watch streams.
const PRODUCES_WATCH: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/cbor-seq",
];
/// What a custom resource's operations answer in, as kube's CRD document lists it.
const CUSTOM_PRODUCES: &[&str] = &["application/json", "application/yaml"];
/// A custom resource's lists.
const CUSTOM_PRODUCES_WATCH: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json;stream=watch",
];

/// One HTTP operation on a path.
struct Operation {
    method: &'static str,
    id: String,
    description: String,
    action: &'static str,
    gvk: Value,
    query: &'static [&'static Param],
    /// Request body: definition name and accepted media types.
    body: Option<(String, &'static [&'static str])>,
    /// Response code → definition name.
    responses: Vec<(u16, String)>,
    produces: &'static [&'static str],
}

/// One path with its operations.
struct PathItem {
    path: String,
    params: Vec<(&'static Param, &'static str)>,
    ops: Vec<Operation>,
}

/// `s` with its first character mapped by `f`.
fn map_first(s: &str, f: fn(&char) -> char) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => f(&first).to_string() + c.as_str(),
        None => String::new(),
    }
}

/// `apps` → `Apps`, `rbac.authorization.k8s.io` → `RbacAuthorization`, `` → `Core`.
fn group_camel(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    group
        .trim_end_matches(".k8s.io")
        .split('.')
        .map(|part| map_first(part, char::to_ascii_uppercase))
        .collect()
}

fn tag(group: &str, version: &str) -> String {
    format!(
        "{}_{version}",
        map_first(&group_camel(group), char::to_ascii_lowercase)
    )
}

fn operation(
    method: &'static str,
    action: &'static str,
    id: String,
    description: String,
    gvk: &Value,
    produces: &'static [&'static str],
) -> Operation {
    Operation {
        method,
        id,
        description,
        action,
        gvk: gvk.clone(),
        query: &[],
        body: None,
        responses: Vec::new(),
        produces,
    }
}

/// The paths of one served kind: collection, object, `status` and `scale`, and the
/// all-namespaces list of a namespaced kind; for a review, only its create.
fn kind_paths(k: &ServedKind) -> Vec<PathItem> {
    let rt = &k.rt;
    let prefix = if rt.group.is_empty() {
        format!("/api/{}", rt.version)
    } else {
        format!("/apis/{}/{}", rt.group, rt.version)
    };
    let ns = if rt.namespaced { "Namespaced" } else { "" };
    let id_base = format!(
        "{}{}",
        group_camel(&rt.group),
        map_first(&rt.version, char::to_ascii_uppercase)
    );
    let gvk = json!({"group": rt.group, "kind": rt.kind, "version": rt.version});
    let kind = &rt.kind;
    let (produces, produces_watch) = match rt.custom {
        Some(_) => (CUSTOM_PRODUCES, CUSTOM_PRODUCES_WATCH),
        None => (PRODUCES, PRODUCES_WATCH),
    };
    let collection = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
    } else {
        format!("{prefix}/{}", rt.plural)
    };
    let scope: Vec<(&'static Param, &'static str)> = if rt.namespaced {
        vec![(&NAMESPACE, "path")]
    } else {
        Vec::new()
    };
    let with_pretty = |mut v: Vec<(&'static Param, &'static str)>| {
        v.push((&PRETTY, "query"));
        v
    };
    let mut out = Vec::new();

    let mut list = operation(
        "get",
        "list",
        format!("list{id_base}{ns}{kind}"),
        format!("list or watch objects of kind {kind}"),
        &gvk,
        produces,
    );
    list.query = LIST_PARAMS;
    list.responses = vec![(200, k.list_name.clone())];
    list.produces = produces_watch;
    let mut create = operation(
        "post",
        "post",
        format!("create{id_base}{ns}{kind}"),
        format!("create a {kind}"),
        &gvk,
        produces,
    );
    create.query = WRITE_PARAMS;
    create.body = Some((k.name.clone(), &[]));
    create.responses = vec![
        (200, k.name.clone()),
        (201, k.name.clone()),
        (202, k.name.clone()),
    ];
    let mut delete_collection = operation(
        "delete",
        "deletecollection",
        format!("delete{id_base}Collection{ns}{kind}"),
        format!("delete collection of {kind}"),
        &gvk,
        produces,
    );
    delete_collection.query = DELETE_COLLECTION_PARAMS;
    delete_collection.body = Some((DELETE_OPTIONS.to_string(), &[]));
    delete_collection.responses = vec![(200, STATUS.to_string())];
    if rt.review {
        // A review is only created: one path, one operation.
        out.push(PathItem {
            path: collection,
            params: with_pretty(scope),
            ops: vec![create],
        });
        return out;
    }
    out.push(PathItem {
        path: collection.clone(),
        params: with_pretty(scope.clone()),
        ops: vec![list, create, delete_collection],
    });

    let mut object_params = vec![(&NAME, "path")];
    object_params.extend(scope.iter().copied());
    let object_params = with_pretty(object_params);
    let object = |suffix: &str, what: &str, def: &str, gvk: &Value| -> PathItem {
        let sub = if suffix.is_empty() {
            String::new()
        } else {
            format!("/{suffix}")
        };
        let id_sub = map_first(suffix, char::to_ascii_uppercase);
        let of = if suffix.is_empty() {
            String::new()
        } else {
            format!("{suffix} of ")
        };
        let mut read = operation(
            "get",
            "get",
            format!("read{id_base}{ns}{kind}{id_sub}"),
            format!("read {of}the specified {what}"),
            gvk,
            produces,
        );
        read.responses = vec![(200, def.to_string())];
        let mut replace = operation(
            "put",
            "put",
            format!("replace{id_base}{ns}{kind}{id_sub}"),
            format!("replace {of}the specified {what}"),
            gvk,
            produces,
        );
        replace.query = WRITE_PARAMS;
        replace.body = Some((def.to_string(), &[]));
        replace.responses = vec![(200, def.to_string()), (201, def.to_string())];
        let mut patch = operation(
            "patch",
            "patch",
            format!("patch{id_base}{ns}{kind}{id_sub}"),
            format!("partially update {of}the specified {what}"),
            gvk,
            produces,
        );
        patch.query = PATCH_PARAMS;
        let patch_types = if rt.custom.is_some() {
            CUSTOM_PATCH_TYPES
        } else {
            PATCH_TYPES
        };
        patch.body = Some((PATCH.to_string(), patch_types));
        patch.responses = vec![(200, def.to_string()), (201, def.to_string())];
        PathItem {
            path: format!("{collection}/{{name}}{sub}"),
            params: object_params.clone(),
            ops: vec![read, replace, patch],
        }
    };

    let mut main = object("", kind, &k.name, &gvk);
    let mut delete = operation(
        "delete",
        "delete",
        format!("delete{id_base}{ns}{kind}"),
        format!("delete a {kind}"),
        &gvk,
        produces,
    );
    delete.query = DELETE_PARAMS;
    delete.body = Some((DELETE_OPTIONS.to_string(), &[]));
    delete.responses = vec![(200, STATUS.to_string()), (202, STATUS.to_string())];
    main.ops.push(delete);
    out.push(main);
    if rt.has_status {
        out.push(object("status", kind, &k.name, &gvk));
    }
    if rt.has_scale {
        let scale_gvk = json!({"group": "autoscaling", "kind": "Scale", "version": "v1"});
        out.push(object("scale", kind, SCALE, &scale_gvk));
    }
    if rt.namespaced {
        let mut all = operation(
            "get",
            "list",
            format!("list{id_base}{kind}ForAllNamespaces"),
            format!("list or watch objects of kind {kind}"),
            &gvk,
            produces,
        );
        all.query = LIST_PARAMS;
        all.responses = vec![(200, k.list_name.clone())];
        all.produces = produces_watch;
        out.push(PathItem {
            path: format!("{prefix}/{}", rt.plural),
            params: vec![(&PRETTY, "query")],
            ops: vec![all],
        });
    }
    out
}

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        _ => "",
    }
}

fn v2_param(p: &Param, location: &str) -> Value {
    let mut v = json!({
        "name": p.name,
        "in": location,
        "description": p.description,
        "type": p.kind,
        "uniqueItems": true,
    });
    if location == "path" {
        v["required"] = json!(true);
    }
    v
}

fn v3_param(p: &Param, location: &str) -> Value {
    let mut v = json!({
        "name": p.name,
        "in": location,
        "description": p.description,
        "schema": {"type": p.kind, "uniqueItems": true},
    });
    if location == "path" {
        v["required"] = json!(true);
    }
    v
}

fn v2_operation(op: &Operation, tag: &str) -> Value {
    let mut params: Vec<Value> = Vec::new();
    if let Some((def, _)) = &op.body {
        params.push(json!({
            "name": "body",
            "in": "body",
            "required": true,
            "schema": {"$ref": format!("{V2_REF}{def}")},
        }));
    }
    params.extend(op.query.iter().map(|p| v2_param(p, "query")));
    let mut responses = Map::new();
    for (code, def) in &op.responses {
        responses.insert(
            code.to_string(),
            json!({"description": status_text(*code), "schema": {"$ref": format!("{V2_REF}{def}")}}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut v = json!({
        "tags": [tag],
        "description": op.description,
        "operationId": op.id,
        "produces": op.produces,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
    });
    if let Some((_, types)) = &op.body {
        v["consumes"] = if types.is_empty() {
            json!(["*/*"])
        } else {
            json!(types)
        };
    }
    if !params.is_empty() {
        v["parameters"] = Value::Array(params);
    }
    v
}

fn v3_operation(op: &Operation, tag: &str) -> Value {
    let mut responses = Map::new();
    for (code, def) in &op.responses {
        let content: Map<String, Value> = op
            .produces
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    json!({"schema": {"$ref": format!("{V3_REF}{def}")}}),
                )
            })
            .collect();
        responses.insert(
            code.to_string(),
            json!({"description": status_text(*code), "content": content}),
        );
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut v = json!({
        "tags": [tag],
        "description": op.description,
        "operationId": op.id,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk,
    });
    if !op.query.is_empty() {
        v["parameters"] = op.query.iter().map(|p| v3_param(p, "query")).collect();
    }
    if let Some((def, types)) = &op.body {
        let types: &[&str] = if types.is_empty() { &["*/*"] } else { types };
        let content: Map<String, Value> = types
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    json!({"schema": {"$ref": format!("{V3_REF}{def}")}}),
                )
            })
            .collect();
        v["requestBody"] = json!({"content": content, "required": true});
    }
    v
}

/// The `paths` of the given kinds, with operations and parameters written by `operation` and
/// `param` (Swagger 2.0 or OpenAPI 3.0 form).
fn paths<'a>(
    kinds: impl IntoIterator<Item = &'a ServedKind>,
    operation: fn(&Operation, &str) -> Value,
    param: fn(&Param, &str) -> Value,
) -> Map<String, Value> {
    let mut out = Map::new();
    for k in kinds {
        let tag = tag(&k.rt.group, &k.rt.version);
        for item in kind_paths(k) {
            let mut v = Map::new();
            for op in &item.ops {
                v.insert(op.method.into(), operation(op, &tag));
            }
            let params: Vec<Value> = item.params.iter().map(|(p, at)| param(p, at)).collect();
            v.insert("parameters".into(), Value::Array(params));
            out.insert(item.path, Value::Object(v));
        }
    }
    out
}

/// The Swagger 2.0 `paths` of the given kinds.
pub fn v2(kinds: &[ServedKind]) -> Map<String, Value> {
    paths(kinds, v2_operation, v2_param)
}

/// The OpenAPI 3.0 `paths` of the given kinds.
pub fn v3(kinds: &[&ServedKind]) -> Map<String, Value> {
    paths(kinds.iter().copied(), v3_operation, v3_param)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_follow_the_upstream_pattern() {
        assert_eq!(group_camel("rbac.authorization.k8s.io"), "RbacAuthorization");
        assert_eq!(group_camel(""), "Core");
        assert_eq!(tag("rbac.authorization.k8s.io", "v1"), "rbacAuthorization_v1");
        assert_eq!(tag("", "v1"), "core_v1");
    }
}
