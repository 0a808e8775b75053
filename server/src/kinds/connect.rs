//! Where a pod's streams lead (kube's `ExecLocation`, `AttachLocation`,
//! `PortForwardLocation` and `LogLocation`): the kubelet of the pod's node, at the address and
//! port its Node publishes, with the container and the options in the kubelet's terms. A pod
//! that does not exist is `404`, one with no node `400` (its log is then empty), a container
//! that is not the pod's `400`, log options kube refuses `422`, all in kube's words; a Node
//! without an address the server can use is kube's `500`.

use serde_json::Value;

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::Causes;
use crate::machinery::net::join_host_port;
use crate::registry::strategy::{Location, Via};
use crate::registry::ResourceRequest;
use crate::store::{keys, Store};

/// The port kubelets serve on when their Node does not say (kube's `--kubelet-port`).
const KUBELET_PORT: i64 = 10250;

/// The node address types tried, in kube-apiserver's default order
/// (`--kubelet-preferred-address-types`).
const PREFERRED_ADDRESS_TYPES: [&str; 5] = [
    "Hostname",
    "InternalDNS",
    "InternalIP",
    "ExternalDNS",
    "ExternalIP",
];

/// The kubelet URL of the stream `req` opens or reads (`exec`, `attach`, `portforward` or
/// `log` of a pod), for `options` (a `PodExecOptions`, `PodAttachOptions`,
/// `PodPortForwardOptions` or `PodLogOptions`); `None` for the log of a pod with no node.
pub async fn location(store: &Store, req: &ResourceRequest, options: &Value) -> ApiResult<Option<Location>> {
    let name = req.name.as_deref().unwrap_or_default();
    let sub = req.subresource.as_deref().unwrap_or_default();
    if sub == "log" {
        let causes = log_option_causes(options);
        if !causes.is_empty() {
            return Err(ApiError::invalid("", "PodLogOptions", name, &causes));
        }
    }
    let key = keys::object("", "pods", req.namespace.as_deref(), name);
    let pod = store
        .get(&key, true)
        .await?
        .ok_or_else(|| ApiError::not_found("", "pods", name))?
        .obj;
    let namespace = req.namespace.as_deref().unwrap_or_default();
    let path = match sub {
        "portforward" => format!("/portForward/{namespace}/{name}"),
        "log" => {
            let container = container(&pod, name, options["container"].as_str().unwrap_or(""))?;
            format!("/containerLogs/{namespace}/{name}/{container}")
        }
        _ => {
            let container = container(&pod, name, options["container"].as_str().unwrap_or(""))?;
            format!("/{sub}/{namespace}/{name}/{container}")
        }
    };
    let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
    if node.is_empty() && sub == "log" {
        return Ok(None);
    }
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let kubelet = kubelet_of(store, node).await?;
    let query = serde_urlencoded::to_string(kubelet_params(options))
        .map_err(|e| ApiError::internal(format!("the kubelet's parameters: {e}")))?;
    let url = if query.is_empty() {
        format!("https://{kubelet}{path}")
    } else {
        format!("https://{kubelet}{path}?{query}")
    };
    Ok(Some(Location {
        url,
        via: Via::Kubelet,
    }))
}

/// What kube's `ValidatePodLogOptions` refuses in a pod's log options.
fn log_option_causes(options: &Value) -> Causes {
    let mut causes = Causes::new();
    let number = |field: &str| options[field].as_i64();
    if let Some(n) = number("tailLines").filter(|n| *n < 0) {
        causes.push((
            "tailLines".into(),
            format!("Invalid value: {n}: must be greater than or equal to 0"),
        ));
    }
    if let Some(n) = number("limitBytes").filter(|n| *n < 1) {
        causes.push((
            "limitBytes".into(),
            format!("Invalid value: {n}: must be greater than 0"),
        ));
    }
    match (number("sinceSeconds"), options.get("sinceTime")) {
        (Some(_), Some(_)) => causes.push((
            String::new(),
            "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
        )),
        (Some(n), None) if n < 1 => causes.push((
            "sinceSeconds".into(),
            format!("Invalid value: {n}: must be greater than 0"),
        )),
        _ => {}
    }
    causes
}

/// The container the stream is for (kube's `validateContainer`): the one named, which must be
/// one of the pod's (init and ephemeral containers included), or the pod's only container.
fn container(pod: &Value, name: &str, wanted: &str) -> ApiResult<String> {
    let names_in = |field: &str| -> Vec<String> {
        pod["spec"][field]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let regular = names_in("containers");
    let mut all = names_in("initContainers");
    all.extend(regular.iter().cloned());
    all.extend(names_in("ephemeralContainers"));
    if !wanted.is_empty() {
        return if all.iter().any(|c| c == wanted) {
            Ok(wanted.to_string())
        } else {
            Err(ApiError::bad_request(format!(
                "container {wanted} is not valid for pod {name}"
            )))
        };
    }
    match regular.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        _ => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            all.join(" ")
        ))),
    }
}

/// `host:port` of the kubelet of `node`.
async fn kubelet_of(store: &Store, node: &str) -> ApiResult<String> {
    let (address, port) = kubelet_address(store, node).await?;
    Ok(join_host_port(&address, &port.to_string()))
}

/// The host and port of the kubelet of `node` (kube's `NodeConnectionInfoGetter`): the first
/// address of the most preferred type the Node has, and the port it publishes.
pub async fn kubelet_address(store: &Store, node: &str) -> ApiResult<(String, i64)> {
    let obj = store
        .get(&keys::object("", "nodes", None, node), true)
        .await?
        .ok_or_else(|| ApiError::not_found("", "nodes", node))?
        .obj;
    let empty = Vec::new();
    let addresses = obj["status"]["addresses"].as_array().unwrap_or(&empty);
    let address = PREFERRED_ADDRESS_TYPES.iter().find_map(|kind| {
        addresses
            .iter()
            .find(|a| a["type"].as_str() == Some(kind))
            .and_then(|a| a["address"].as_str())
    });
    let Some(address) = address else {
        let known: Vec<String> = addresses
            .iter()
            .map(|a| {
                format!(
                    "{{{} {}}}",
                    a["type"].as_str().unwrap_or(""),
                    a["address"].as_str().unwrap_or("")
                )
            })
            .collect();
        return Err(ApiError::unknown(format!(
            "no preferred addresses found; known addresses: [{}]",
            known.join(" ")
        )));
    };
    let port = obj["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_i64()
        .filter(|p| *p > 0)
        .unwrap_or(KUBELET_PORT);
    Ok((address.to_string(), port))
}

/// The options as the kubelet takes them (kube's `streamParams` and `LogLocation`), sorted by
/// name as Go's `url.Values` encodes them: `input`, `output`, `error` and `tty` as `1`, each
/// `command` word, the forwarded `port`s joined by commas; a log's `follow`, `previous` and
/// `timestamps` as `true` and its numbers and time as given.
fn kubelet_params(options: &Value) -> Vec<(&'static str, String)> {
    let mut params = Vec::new();
    for field in ["follow", "previous", "timestamps"] {
        if options[field].as_bool() == Some(true) {
            params.push((field, "true".to_string()));
        }
    }
    for field in ["sinceSeconds", "tailLines", "limitBytes"] {
        if let Some(n) = options[field].as_i64() {
            params.push((field, n.to_string()));
        }
    }
    if let Some(t) = options["sinceTime"].as_str() {
        params.push(("sinceTime", t.to_string()));
    }
    for (field, param) in [
        ("stdin", "input"),
        ("stdout", "output"),
        ("stderr", "error"),
        ("tty", "tty"),
    ] {
        if options[field].as_bool() == Some(true) {
            params.push((param, "1".to_string()));
        }
    }
    for word in options["command"].as_array().into_iter().flatten() {
        params.push(("command", word.as_str().unwrap_or_default().to_string()));
    }
    if let Some(ports) = options["ports"].as_array().filter(|p| !p.is_empty()) {
        let ports: Vec<String> = ports.iter().map(Value::to_string).collect();
        params.push(("port", ports.join(",")));
    }
    params.sort_by_key(|(name, _)| *name);
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_is_the_named_one_or_the_only_one() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(container(&one, "p", "").unwrap(), "app");
        let two = json!({"spec": {"initContainers": [{"name": "init"}],
                                  "containers": [{"name": "a"}, {"name": "b"}],
                                  "ephemeralContainers": [{"name": "debug"}]}});
        assert_eq!(container(&two, "p", "debug").unwrap(), "debug");
        assert_eq!(
            container(&two, "p", "").unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [init a b debug]"
        );
        let e = container(&two, "p", "nope").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container nope is not valid for pod p")
        );
    }

    #[test]
    fn log_options_are_checked_as_kube_checks_them() {
        assert!(log_option_causes(&json!({"tailLines": 0, "limitBytes": 1, "sinceSeconds": 1})).is_empty());
        let e = ApiError::invalid(
            "",
            "PodLogOptions",
            "p",
            &log_option_causes(&json!({"tailLines": -1, "limitBytes": 0, "sinceSeconds": 5,
                                       "sinceTime": "2026-01-01T00:00:00Z"})),
        );
        assert_eq!(
            e.message,
            "PodLogOptions \"p\" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, \
             limitBytes: Invalid value: 0: must be greater than 0, \
             : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified]"
        );
        let logs = json!({"follow": true, "tailLines": 10, "sinceTime": "2026-01-01T00:00:00Z", "timestamps": false});
        assert_eq!(
            serde_urlencoded::to_string(kubelet_params(&logs)).unwrap(),
            "follow=true&sinceTime=2026-01-01T00%3A00%3A00Z&tailLines=10"
        );
    }

    #[test]
    fn options_reach_the_kubelet_in_its_terms_sorted_by_name() {
        let exec = json!({"stdin": true, "stdout": true, "tty": false, "command": ["sh", "-c", "echo hi"]});
        assert_eq!(
            serde_urlencoded::to_string(kubelet_params(&exec)).unwrap(),
            "command=sh&command=-c&command=echo+hi&input=1&output=1"
        );
        let forward = json!({"ports": [8080, 9090]});
        assert_eq!(
            serde_urlencoded::to_string(kubelet_params(&forward)).unwrap(),
            "port=8080%2C9090"
        );
    }
}
