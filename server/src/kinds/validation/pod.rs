//! kube's rules for pods and the pod templates of every workload (`ValidatePodSpec`,
//! `validateContainerCommon`, `ValidatePodUpdate`): containers named with unique RFC 1123
//! labels and an image, ports in range with a known protocol, lifecycle hooks and probes with
//! one valid handler and no negative timings, volumes named uniquely and mounted by name, a
//! known restart and DNS policy, valid node selector labels — and a pod's spec fixed once
//! created but for its images, deadline, added tolerations and removed scheduling gates. The
//! security contexts, affinity and topology spread constraints have their own modules.

use std::collections::HashSet;

use serde_json::Value;

use super::{
    affinity, label_selector, list_of, one_of, port_name_errors, port_number, security_context, str_of,
    topology,
};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_error, Causes};

/// kube's message for a pod update that changes what a pod may not change (kube adds a Go
/// diff of the specs, which has no equivalent here).
const POD_UPDATE_FORBIDDEN: &str = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// A Pod: its seccomp and AppArmor annotations, then its spec.
pub fn pod(obj: &Value, causes: &mut Causes) {
    let annotations = &obj["metadata"]["annotations"];
    security_context::annotations(annotations, &obj["spec"], "metadata.annotations", causes);
    pod_spec(&obj["spec"], "spec", causes);
}

/// A Pod's create: the profiles its annotations name agree with its fields.
pub fn pod_create(obj: &Value, causes: &mut Causes) {
    security_context::annotations_match_fields(obj, causes);
}

/// A PodTemplate: its `template`.
pub fn pod_template_object(obj: &Value, causes: &mut Causes) {
    pod_template(&obj["template"], "template", causes);
}

/// A pod template at `path`: its labels and annotations (kube names them without
/// `metadata`), then its spec as a pod's.
pub fn pod_template(template: &Value, path: &str, causes: &mut Causes) {
    let meta = &template["metadata"];
    label_selector::labels(&meta["labels"], &format!("{path}.labels"), causes);
    let annotations = &meta["annotations"];
    let at = format!("{path}.annotations");
    security_context::annotations(annotations, &template["spec"], &at, causes);
    pod_spec(&template["spec"], &format!("{path}.spec"), causes);
}

/// kube's `ValidatePodSpec`, for the rules this server checks.
fn pod_spec(spec: &Value, path: &str, causes: &mut Causes) {
    let volumes = volumes(list_of(spec, "volumes"), &format!("{path}.volumes"), causes);
    let host_users = security_context::host_users(spec);
    let containers = list_of(spec, "containers");
    let at = format!("{path}.containers");
    if containers.is_empty() {
        causes.push((at.clone(), "Required value".to_string()));
    }
    let mut names = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let here = format!("{at}[{i}]");
        container(c, &here, &volumes, host_users, true, causes);
        resize_policy(c, &here, str_of(spec, "restartPolicy"), causes);
        let name = str_of(c, "name");
        if !names.insert(name) {
            causes.push((
                format!("{here}.name"),
                format!("Duplicate value: {}", go_quote(name)),
            ));
        }
    }
    let at = format!("{path}.initContainers");
    for (i, c) in list_of(spec, "initContainers").iter().enumerate() {
        let here = format!("{at}[{i}]");
        // Only a sidecar (an init container that keeps running) has hooks and probes.
        let sidecar = str_of(c, "restartPolicy") == "Always";
        container(c, &here, &volumes, host_users, sidecar, causes);
        if !sidecar {
            for field in ["lifecycle"].iter().chain(PROBES.iter().map(|(f, _)| f)) {
                if c.get(*field).is_some_and(|p| !p.is_null()) {
                    causes.push((
                        format!("{here}.{field}"),
                        "Forbidden: may not be set for init containers without restartPolicy=Always"
                            .to_string(),
                    ));
                }
            }
        }
        let name = str_of(c, "name");
        if names.contains(name) {
            causes.push((
                format!("{here}.name"),
                format!("Duplicate value: {}", go_quote(name)),
            ));
        } else if !name.is_empty() {
            names.insert(name);
        }
    }
    one_of(
        str_of(spec, "restartPolicy"),
        &["Always", "OnFailure", "Never"],
        format!("{path}.restartPolicy"),
        causes,
    );
    one_of(
        str_of(spec, "dnsPolicy"),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        format!("{path}.dnsPolicy"),
        causes,
    );
    label_selector::labels(&spec["nodeSelector"], &format!("{path}.nodeSelector"), causes);
    security_context::pod(spec, path, causes);
    affinity::affinity(spec, path, causes);
    topology::spread_constraints(spec, path, causes);
    security_context::host_process(spec, path, causes);
    security_context::own_user_namespace(spec, path, causes);
    security_context::os(spec, path, causes);
}

/// Fields of a container that an ephemeral container may not set, in the order of kube's
/// `EphemeralContainerCommon` (its allow list refuses every other field that is set).
const NOT_FOR_EPHEMERAL: [&str; 8] = [
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];

/// kube's `validateEphemeralContainers` for the pod spec `spec`: each ephemeral container is
/// checked as a container is (name, image, mounts of the pod's volumes, security context, ...),
/// has a name no other container has, targets a container of the pod if any, sets none of
/// [`NOT_FOR_EPHEMERAL`] and mounts no sub-path.
pub fn ephemeral_containers(spec: &Value, causes: &mut Causes) {
    let list = list_of(spec, "ephemeralContainers");
    if list.is_empty() {
        return;
    }
    let volumes = volumes(list_of(spec, "volumes"), "spec.volumes", &mut Causes::new());
    let host_users = security_context::host_users(spec);
    let others: HashSet<&str> = list_of(spec, "containers")
        .iter()
        .chain(list_of(spec, "initContainers"))
        .map(|c| str_of(c, "name"))
        .collect();
    let mut names = others.clone();
    for (i, c) in list.iter().enumerate() {
        let here = format!("spec.ephemeralContainers[{i}]");
        container(c, &here, &volumes, host_users, false, causes);
        let name = str_of(c, "name");
        if !names.insert(name) {
            causes.push((
                format!("{here}.name"),
                format!("Duplicate value: {}", go_quote(name)),
            ));
        }
        let target = str_of(c, "targetContainerName");
        if !target.is_empty() && !others.contains(target) {
            causes.push((
                format!("{here}.targetContainerName"),
                format!("Not found: {}", go_quote(target)),
            ));
        }
        for field in NOT_FOR_EPHEMERAL {
            // kube compares each field with its Go zero value: a list or a pointer (a probe,
            // a hook) is set once present, even empty; `resources` (a struct) once one of
            // its fields is.
            let set = match (field, c.get(field)) {
                (_, None | Some(Value::Null)) => false,
                ("resources", Some(Value::Object(r))) => r.values().any(|v| !v.is_null()),
                _ => true,
            };
            if set {
                causes.push((
                    format!("{here}.{field}"),
                    "Forbidden: cannot be set for an Ephemeral Container".to_string(),
                ));
            }
        }
        for (m, mount) in list_of(c, "volumeMounts").iter().enumerate() {
            for field in ["subPath", "subPathExpr"] {
                if !str_of(mount, field).is_empty() {
                    causes.push((
                        format!("{here}.volumeMounts[{m}].{field}"),
                        "Forbidden: cannot be set for an Ephemeral Container".to_string(),
                    ));
                }
            }
        }
    }
}

/// kube's `ValidateVolumes`: each volume named by a unique RFC 1123 label, with exactly one
/// source. Returns the names of the valid ones, for the containers' mounts.
fn volumes<'a>(list: &'a [Value], path: &str, causes: &mut Causes) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, v) in list.iter().enumerate() {
        let here = format!("{path}[{i}]");
        let before = causes.len();
        let sources: Vec<&String> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, val)| k.as_str() != "name" && !val.is_null())
            .map(|(k, _)| k)
            .collect();
        match sources.as_slice() {
            [] => causes.push((
                here.clone(),
                "Required value: must specify a volume type".to_string(),
            )),
            [_] => {}
            [_, rest @ ..] => {
                for source in rest {
                    causes.push((format!("{here}.{source}"), super::EXTRA_VOLUME_SOURCE.to_string()));
                }
            }
        }
        let name = str_of(v, "name");
        let name_path = format!("{here}.name");
        if name.is_empty() {
            causes.push((name_path.clone(), "Required value".to_string()));
        } else if let Some(e) = dns_label_error(name) {
            causes.push((name_path.clone(), e));
        }
        if names.contains(name) {
            causes.push((name_path, format!("Duplicate value: {}", go_quote(name))));
        }
        if causes.len() == before {
            names.insert(name);
        }
    }
    names
}

/// A container's probes, and whether each must succeed exactly once (`successThreshold: 1`).
const PROBES: [(&str, bool); 3] = [
    ("livenessProbe", true),
    ("readinessProbe", false),
    ("startupProbe", true),
];

/// kube's `validateContainerCommon`, for the rules this server checks; its lifecycle hooks and
/// probes when it is `probed`.
fn container(
    c: &Value,
    path: &str,
    volumes: &HashSet<&str>,
    host_users: bool,
    probed: bool,
    causes: &mut Causes,
) {
    let name = str_of(c, "name");
    if name.is_empty() {
        causes.push((format!("{path}.name"), "Required value".to_string()));
    } else if let Some(e) = dns_label_error(name) {
        causes.push((format!("{path}.name"), e));
    }
    if str_of(c, "image").is_empty() {
        causes.push((format!("{path}.image"), "Required value".to_string()));
    }
    one_of(
        str_of(c, "terminationMessagePolicy"),
        &["File", "FallbackToLogsOnError"],
        format!("{path}.terminationMessagePolicy"),
        causes,
    );
    ports(list_of(c, "ports"), &format!("{path}.ports"), causes);
    for (i, e) in list_of(c, "env").iter().enumerate() {
        if str_of(e, "name").is_empty() {
            causes.push((format!("{path}.env[{i}].name"), "Required value".to_string()));
        }
    }
    let mut mount_points = HashSet::new();
    for (i, m) in list_of(c, "volumeMounts").iter().enumerate() {
        let here = format!("{path}.volumeMounts[{i}]");
        let volume = str_of(m, "name");
        if volume.is_empty() {
            causes.push((format!("{here}.name"), "Required value".to_string()));
        }
        if !volumes.contains(volume) {
            causes.push((format!("{here}.name"), format!("Not found: {}", go_quote(volume))));
        }
        let mount_path = str_of(m, "mountPath");
        if mount_path.is_empty() {
            causes.push((format!("{here}.mountPath"), "Required value".to_string()));
        }
        if !mount_points.insert(mount_path) {
            causes.push((
                format!("{here}.mountPath"),
                format!("Invalid value: {}: must be unique", go_quote(mount_path)),
            ));
        }
    }
    if let Some(r) = c.get("resources").filter(|r| r.is_object()) {
        super::resources::requirements(r, &format!("{path}.resources"), causes);
    }
    one_of(
        str_of(c, "imagePullPolicy"),
        &["Always", "IfNotPresent", "Never"],
        format!("{path}.imagePullPolicy"),
        causes,
    );
    if let Some(sc) = c.get("securityContext").filter(|sc| sc.is_object()) {
        security_context::container(sc, &format!("{path}.securityContext"), host_users, causes);
    }
    for hook in ["postStart", "preStop"].iter().filter(|_| probed) {
        if let Some(h) = c["lifecycle"].get(*hook).filter(|h| h.is_object()) {
            let kinds = ["exec", "httpGet", "tcpSocket", "sleep"];
            one_handler(h, &kinds, &format!("{path}.lifecycle.{hook}"), causes);
        }
    }
    for (field, once) in PROBES.iter().filter(|_| probed) {
        if let Some(p) = c.get(*field).filter(|p| p.is_object()) {
            probe(p, &format!("{path}.{field}"), *once, causes);
        }
    }
}

/// kube's `validateResizePolicy` for a container at `path` of a pod restarted by
/// `restart_policy`: one policy per resource, each for cpu or memory, and none restarting a
/// container of a pod that is never restarted.
fn resize_policy(c: &Value, path: &str, restart_policy: &str, causes: &mut Causes) {
    let at = format!("{path}.resizePolicy");
    let mut seen = HashSet::new();
    for (i, p) in list_of(c, "resizePolicy").iter().enumerate() {
        let (resource, policy) = (str_of(p, "resourceName"), str_of(p, "restartPolicy"));
        if !seen.insert(resource) {
            causes.push((
                format!("{at}[{i}]"),
                format!("Duplicate value: {}", go_quote(resource)),
            ));
        }
        match resource {
            "" => causes.push((at.clone(), "Required value".to_string())),
            "cpu" | "memory" => {}
            other => causes.push((at.clone(), super::not_supported(other, &["cpu", "memory"]))),
        }
        match policy {
            "" => causes.push((at.clone(), "Required value".to_string())),
            "NotRequired" => {}
            "RestartContainer" if restart_policy == "Never" => causes.push((
                at.clone(),
                format!(
                    "Invalid value: {}: must be 'NotRequired' when `restartPolicy` is 'Never'",
                    go_quote(policy)
                ),
            )),
            "RestartContainer" => {}
            other => causes.push((
                at.clone(),
                super::not_supported(other, &["NotRequired", "RestartContainer"]),
            )),
        }
    }
}

/// kube's `validateProbe` (and, for a liveness or startup probe, its `successThreshold` of 1):
/// exactly one handler, each valid, and no negative count or duration.
fn probe(p: &Value, path: &str, success_once: bool, causes: &mut Causes) {
    one_handler(p, &["exec", "httpGet", "tcpSocket", "grpc"], path, causes);
    for field in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if let Some(n) = p.get(field).and_then(Value::as_i64).filter(|n| *n < 0) {
            causes.push((
                format!("{path}.{field}"),
                format!("Invalid value: {n}: must be greater than or equal to 0"),
            ));
        }
    }
    if let Some(n) = p
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .filter(|n| *n <= 0)
    {
        causes.push((
            format!("{path}.terminationGracePeriodSeconds"),
            format!("Invalid value: {n}: must be greater than 0"),
        ));
    }
    if success_once {
        if let Some(n) = p
            .get("successThreshold")
            .and_then(Value::as_i64)
            .filter(|n| *n != 1)
        {
            causes.push((
                format!("{path}.successThreshold"),
                format!("Invalid value: {n}: must be 1"),
            ));
        }
    }
}

/// kube's `validateHandler`: exactly one of the handler `kinds` in `h`, and that one valid.
fn one_handler(h: &Value, kinds: &[&str], path: &str, causes: &mut Causes) {
    let set: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|k| h.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    match set.as_slice() {
        [] => causes.push((
            path.to_string(),
            "Required value: must specify a handler type".to_string(),
        )),
        [first, rest @ ..] => {
            handler(first, &h[*first], &format!("{path}.{first}"), causes);
            for extra in rest {
                causes.push((
                    format!("{path}.{extra}"),
                    "Forbidden: may not specify more than 1 handler type".to_string(),
                ));
            }
        }
    }
}

/// One handler: an exec's command, an HTTP GET's path, port and scheme, a TCP or gRPC port
/// (a lifecycle hook's sleep is left to the kubelet).
fn handler(kind: &str, h: &Value, path: &str, causes: &mut Causes) {
    match kind {
        "exec" if list_of(h, "command").is_empty() => {
            causes.push((format!("{path}.command"), "Required value".to_string()));
        }
        "httpGet" => {
            if str_of(h, "path").is_empty() {
                causes.push((format!("{path}.path"), "Required value".to_string()));
            }
            port_num_or_name(&h["port"], &format!("{path}.port"), causes);
            one_of(
                str_of(h, "scheme"),
                &["HTTP", "HTTPS"],
                format!("{path}.scheme"),
                causes,
            );
        }
        "tcpSocket" => port_num_or_name(&h["port"], &format!("{path}.port"), causes),
        "grpc" => port_number(h["port"].as_i64().unwrap_or(0), format!("{path}.port"), causes),
        _ => {}
    }
}

/// kube's `ValidatePortNumOrName`: a port number in range, or a valid port name.
fn port_num_or_name(port: &Value, path: &str, causes: &mut Causes) {
    match port {
        Value::String(name) => {
            for e in port_name_errors(name) {
                causes.push((
                    path.to_string(),
                    format!("Invalid value: {}: {e}", go_quote(name)),
                ));
            }
        }
        other => port_number(other.as_i64().unwrap_or(0), path.to_string(), causes),
    }
}

/// kube's `validateContainerPorts`.
fn ports(list: &[Value], path: &str, causes: &mut Causes) {
    let mut names = HashSet::new();
    for (i, p) in list.iter().enumerate() {
        let here = format!("{path}[{i}]");
        let name = str_of(p, "name");
        if !name.is_empty() {
            let errors = port_name_errors(name);
            if !errors.is_empty() {
                for e in errors {
                    causes.push((
                        format!("{here}.name"),
                        format!("Invalid value: {}: {e}", go_quote(name)),
                    ));
                }
            } else if !names.insert(name) {
                causes.push((
                    format!("{here}.name"),
                    format!("Duplicate value: {}", go_quote(name)),
                ));
            }
        }
        match p.get("containerPort").and_then(Value::as_i64).unwrap_or(0) {
            0 => causes.push((format!("{here}.containerPort"), "Required value".to_string())),
            port => port_number(port, format!("{here}.containerPort"), causes),
        }
        match p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) {
            0 => {}
            port => port_number(port, format!("{here}.hostPort"), causes),
        }
        protocol(p, &here, causes);
    }
}

/// A port's protocol: required, one of kube's supported ones.
pub fn protocol(port: &Value, path: &str, causes: &mut Causes) {
    one_of(
        str_of(port, "protocol"),
        &["SCTP", "TCP", "UDP"],
        format!("{path}.protocol"),
        causes,
    );
}

/// kube's `ValidatePodUpdate`: the spec as stored, but for what a pod may change (images,
/// the deadline, added tolerations, a negative grace period set to 1, removed scheduling
/// gates; ephemeral containers change through their subresource).
pub fn pod_update(old: &Value, new: &Value, causes: &mut Causes) {
    security_context::annotation_updates(old, new, causes);
    let (before, after) = (&old["spec"], &new["spec"]);
    let mut munged = after.clone();
    for list in ["containers", "initContainers"] {
        let (old_list, new_list) = (list_of(before, list), list_of(&munged, list));
        if old_list.len() != new_list.len() {
            continue;
        }
        let images: Vec<Value> = old_list
            .iter()
            .map(|c| c.get("image").cloned().unwrap_or(Value::Null))
            .collect();
        if let Some(items) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (c, image) in items.iter_mut().zip(images) {
                if let Some(c) = c.as_object_mut() {
                    match image {
                        Value::Null => c.remove("image"),
                        image => c.insert("image".into(), image),
                    };
                }
            }
        }
    }
    let grace = |spec: &Value| spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    let keep_grace = grace(before).is_some_and(|g| g < 0) && grace(after) == Some(1);
    let tolerations_added = list_of(before, "tolerations")
        .iter()
        .all(|t| list_of(after, "tolerations").contains(t));
    let gates_removed = list_of(after, "schedulingGates")
        .iter()
        .all(|g| list_of(before, "schedulingGates").contains(g));
    let taken_from_old = [
        ("activeDeadlineSeconds", true),
        ("ephemeralContainers", true),
        ("terminationGracePeriodSeconds", keep_grace),
        ("tolerations", tolerations_added),
        ("schedulingGates", gates_removed),
    ];
    if let Some(m) = munged.as_object_mut() {
        for (field, _) in taken_from_old.into_iter().filter(|(_, taken)| *taken) {
            match before.get(field) {
                Some(v) => {
                    m.insert(field.into(), v.clone());
                }
                None => {
                    m.remove(field);
                }
            }
        }
    }
    if munged != *before {
        causes.push(("spec".to_string(), POD_UPDATE_FORBIDDEN.to_string()));
    }
}
