//! What `kubectl` shows for the built-in types on a real three-replica cluster: defaults in
//! `-o yaml`, table columns (also `-o wide`), `jsonpath`, `-o name`, `describe`, `-A`, `scale`
//! through the scale subresource, `replace` and generations, Service cluster IPs and node
//! ports that stay unique whichever replica allocates them, from configurable ranges, and the
//! `default/kubernetes` Service that is there as soon as a replica is ready; pods bound,
//! evicted, debugged and drained, and `kubectl exec` and `kubectl logs` reaching the pod's
//! kubelet (a fake one here) through any replica.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};
use support::kube::Kube;
use support::*;

const T: std::time::Duration = std::time::Duration::from_secs(30);

/// The header of a kubectl table, words separated by single spaces.
fn header(table: &str) -> String {
    table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words of the table row whose first (or, with `-A`, second) word is `name`.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|w| w.first().map(String::as_str) == Some(name) || w.get(1).map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

const SHOP: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: v1
kind: Pod
metadata:
  name: debug
  namespace: shop
spec:
  containers:
  - name: shell
    image: busybox
    command: [sleep, \"3600\"]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_defaults_columns_and_every_output_format() {
    let k = Kube::start().await;
    let file = k.manifest("shop.yaml", SHOP);
    let out = k.ok("node-2", &["create", "--validate=false", "-f", &file]);
    for created in [
        "namespace/shop created",
        "deployment.apps/web created",
        "service/web created",
        "pod/debug created",
    ] {
        assert!(out.contains(created), "{out}");
    }

    // Defaults, read back from another replica.
    let d = k.json("node-3", &["-n", "shop", "get", "deployment", "web"]);
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    let template = &d["spec"]["template"]["spec"];
    assert_eq!(template["restartPolicy"], "Always");
    assert_eq!(template["dnsPolicy"], "ClusterFirst");
    assert_eq!(template["schedulerName"], "default-scheduler");
    assert_eq!(template["terminationGracePeriodSeconds"], 30);
    assert_eq!(template["securityContext"], json!({}));
    let c = &template["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(c["resources"], json!({}));
    assert_eq!(d["status"], json!({}));
    let yaml = k.ok(
        "node-1",
        &["-n", "shop", "get", "deployment", "web", "-o", "yaml"],
    );
    for line in [
        "progressDeadlineSeconds: 600",
        "maxSurge: 25%",
        "terminationMessagePolicy: File",
        "restartPolicy: Always",
    ] {
        assert!(yaml.contains(line), "{line} missing from\n{yaml}");
    }

    let pod = k.json("node-1", &["-n", "shop", "get", "pod", "debug"]);
    assert_eq!(
        pod["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
    assert_eq!(pod["metadata"]["generation"], 1);
    assert_eq!(pod["spec"]["enableServiceLinks"], true);
    assert_eq!(pod["spec"]["priority"], 0);
    assert_eq!(pod["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(
        pod["spec"]["containers"][0]["imagePullPolicy"], "Always",
        "an untagged image is pulled always"
    );
    assert_eq!(pod["spec"]["tolerations"].as_array().unwrap().len(), 2);

    let svc = k.json("node-2", &["-n", "shop", "get", "service", "web"]);
    let spec = &svc["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    let ip = spec["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10."), "{ip}");
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert!(svc["metadata"].get("generation").is_none());

    // Tables, with the wide columns only under -o wide.
    let pods = k.ok("node-3", &["-n", "shop", "get", "pods"]);
    assert_eq!(header(&pods), "NAME READY STATUS RESTARTS AGE");
    assert_eq!(row(&pods, "debug")[..4], ["debug", "0/1", "Pending", "0"]);
    let pods = k.ok("node-3", &["-n", "shop", "get", "pods", "-o", "wide"]);
    assert_eq!(
        header(&pods),
        "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
    );
    assert_eq!(row(&pods, "debug")[5..], ["<none>", "<none>", "<none>", "<none>"]);
    let deploys = k.ok("node-1", &["-n", "shop", "get", "deployments"]);
    assert_eq!(header(&deploys), "NAME READY UP-TO-DATE AVAILABLE AGE");
    assert_eq!(row(&deploys, "web")[..4], ["web", "0/2", "0", "0"]);
    let deploys = k.ok("node-1", &["-n", "shop", "get", "deployments", "-o", "wide"]);
    assert_eq!(
        header(&deploys),
        "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR"
    );
    assert_eq!(row(&deploys, "web")[5..], ["nginx", "nginx:1.27", "app=web"]);
    let svcs = k.ok("node-2", &["-n", "shop", "get", "services"]);
    assert_eq!(header(&svcs), "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE");
    assert_eq!(
        row(&svcs, "web")[..5],
        ["web", "ClusterIP", ip.as_str(), "<none>", "80/TCP"]
    );
    let svcs = k.ok("node-2", &["-n", "shop", "get", "services", "-o", "wide"]);
    assert!(header(&svcs).ends_with("AGE SELECTOR"), "{svcs}");
    assert_eq!(row(&svcs, "web")[6], "app=web");
    let namespaces = k.ok("node-1", &["get", "namespaces"]);
    assert_eq!(header(&namespaces), "NAME STATUS AGE");
    assert_eq!(row(&namespaces, "shop")[1], "Active");
    k.ok(
        "node-1",
        &[
            "-n",
            "shop",
            "create",
            "--validate=false",
            "-f",
            &k.manifest(
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1', b: '2'}\n",
            ),
        ],
    );
    let cms = k.ok("node-3", &["-n", "shop", "get", "configmaps"]);
    assert_eq!(header(&cms), "NAME DATA AGE");
    assert_eq!(row(&cms, "settings")[1], "2");
    let all = k.ok("node-2", &["get", "deployments", "-A"]);
    assert_eq!(header(&all), "NAMESPACE NAME READY UP-TO-DATE AVAILABLE AGE");
    assert_eq!(row(&all, "web")[..3], ["shop", "web", "0/2"]);

    // jsonpath, name, describe.
    let replicas = k.ok(
        "node-3",
        &[
            "-n",
            "shop",
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
    );
    assert_eq!(replicas, "2");
    let names = k.ok("node-1", &["-n", "shop", "get", "deploy,svc,pods", "-o", "name"]);
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        ["deployment.apps/web", "service/web", "pod/debug"]
    );
    let described = k.ok("node-2", &["-n", "shop", "describe", "deployment", "web"]);
    assert!(
        described.contains("Replicas:") && described.contains("RollingUpdate"),
        "{described}"
    );
    let described = k.ok("node-3", &["-n", "shop", "describe", "service", "web"]);
    assert!(described.contains(&ip), "{described}");
}

const WEB_V2: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.28
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_replace_and_generations() {
    let k = Kube::start().await;
    k.ok(
        "node-1",
        &["create", "--validate=false", "-f", &k.manifest("shop.yaml", SHOP)],
    );
    let generation = |node: &str| {
        k.ok(
            node,
            &[
                "-n",
                "shop",
                "get",
                "deploy",
                "web",
                "-o",
                "jsonpath={.metadata.generation}",
            ],
        )
    };

    let out = k.ok(
        "node-1",
        &["-n", "shop", "scale", "deployment/web", "--replicas=3"],
    );
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    let replicas = k.ok(
        "node-3",
        &[
            "-n",
            "shop",
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
    );
    assert_eq!(replicas, "3");
    assert_eq!(generation("node-2"), "2");

    let (code, scale) = k
        .send(
            reqwest::Method::GET,
            1,
            "/apis/apps/v1/namespaces/shop/deployments/web/scale",
            None,
        )
        .await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"], json!({"replicas": 0, "selector": "app=web"}));
    let table = k.ok(
        "node-2",
        &["-n", "shop", "get", "deploy", "web", "--subresource=scale"],
    );
    assert_eq!(header(&table), "NAME DESIRED AVAILABLE AGE");
    assert_eq!(row(&table, "web")[..3], ["web", "3", "0"]);

    // With --current-replicas kubectl reads the Scale and writes it back (PUT, resourceVersion
    // precondition).
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "-n",
            "shop",
            "scale",
            "deployment/web",
            "--current-replicas=2",
            "--replicas=4",
        ],
    );
    assert!(!ok, "a wrong --current-replicas must fail: {err}");
    k.ok(
        "node-3",
        &[
            "-n",
            "shop",
            "scale",
            "deployment/web",
            "--current-replicas=3",
            "--replicas=4",
        ],
    );
    assert_eq!(generation("node-1"), "3");
    let stale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": scale["metadata"]["resourceVersion"]},
        "spec": {"replicas": 1}});
    let path = "/apis/apps/v1/namespaces/shop/deployments/web/scale";
    let (code, status) = k.send(reqwest::Method::PUT, 0, path, Some(&stale)).await;
    assert_eq!(
        (code, status["reason"].clone()),
        (409, json!("Conflict")),
        "{status}"
    );
    let negative = json!({"spec": {"replicas": -1}});
    let (code, status) = k.send(reqwest::Method::PUT, 2, path, Some(&negative)).await;
    assert_eq!(
        (code, status["reason"].clone()),
        (422, json!("Invalid")),
        "{status}"
    );
    let (ok, _, err) = k.kubectl(
        "node-1",
        &["-n", "shop", "scale", "deployment/nope", "--replicas=1"],
    );
    assert!(!ok && err.contains("not found"), "{err}");
    let (code, _) = k
        .send(
            reqwest::Method::GET,
            0,
            "/api/v1/namespaces/shop/pods/debug/scale",
            None,
        )
        .await;
    assert_eq!(code, 404, "pods have no scale subresource");

    // replace: a changed spec moves the generation, the same manifest again does not, and
    // neither do label changes nor status writes.
    let v2 = k.manifest("web-v2.yaml", WEB_V2);
    k.ok("node-2", &["replace", "--validate=false", "-f", &v2]);
    assert_eq!(generation("node-3"), "4");
    let image = k.ok(
        "node-1",
        &[
            "-n",
            "shop",
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
    );
    assert_eq!(image, "nginx:1.28");
    k.ok("node-1", &["replace", "--validate=false", "-f", &v2]);
    assert_eq!(generation("node-2"), "4");
    k.ok(
        "node-3",
        &["-n", "shop", "label", "deploy", "web", "tier=frontend"],
    );
    assert_eq!(generation("node-1"), "4");
    let mut d = k.json("node-1", &["-n", "shop", "get", "deploy", "web"]);
    d["status"] = json!({"replicas": 4, "updatedReplicas": 4, "readyReplicas": 3, "availableReplicas": 3});
    // A Deployment's status write keeps its annotations but not its labels (kube's
    // deploymentStatusStrategy); a spec change through it is ignored.
    d["metadata"]["annotations"]["noted-by"] = json!("status-writer");
    d["metadata"]["labels"]["tier"] = json!("backend");
    d["spec"]["replicas"] = json!(9);
    let (code, body) = k
        .send(
            reqwest::Method::PUT,
            1,
            "/apis/apps/v1/namespaces/shop/deployments/web/status",
            Some(&d),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(generation("node-3"), "4");
    assert_eq!(
        body["metadata"]["annotations"]["noted-by"], "status-writer",
        "{body}"
    );
    assert_eq!(body["metadata"]["labels"]["tier"], "frontend", "{body}");
    assert_eq!(body["spec"]["replicas"], 4, "{body}");
    let deploys = k.ok("node-2", &["-n", "shop", "get", "deploy"]);
    assert_eq!(row(&deploys, "web")[..4], ["web", "3/4", "4", "3"]);
    // A pod's status write (a kubelet's) keeps its labels and annotations, never its owner
    // references, and the written labels are owned by the writer's status entry.
    let mut pod = k.json("node-1", &["-n", "shop", "get", "pod", "debug"]);
    pod["metadata"]["labels"] = json!({"probed": "yes"});
    pod["metadata"]["annotations"] = json!({"kubelet.example/last-probe": "ok"});
    pod["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-1"}]);
    pod["status"]["phase"] = json!("Running");
    let (code, body) = k
        .send(
            reqwest::Method::PUT,
            2,
            "/api/v1/namespaces/shop/pods/debug/status?fieldManager=kubelet",
            Some(&pod),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["phase"], "Running");
    assert_eq!(body["metadata"]["labels"], json!({"probed": "yes"}));
    assert_eq!(
        body["metadata"]["annotations"]["kubelet.example/last-probe"],
        "ok"
    );
    assert!(body["metadata"].get("ownerReferences").is_none(), "{body}");
    let kubelet = body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "kubelet")
        .unwrap_or_else(|| panic!("no kubelet entry: {body}"));
    assert_eq!(kubelet["subresource"], "status");
    assert!(
        kubelet["fieldsV1"]["f:metadata"]["f:labels"]["f:probed"].is_object(),
        "{kubelet}"
    );
    let pod_generation = k.ok(
        "node-2",
        &[
            "-n",
            "shop",
            "get",
            "pod",
            "debug",
            "-o",
            "jsonpath={.metadata.generation}",
        ],
    );
    assert_eq!(pod_generation, "1");
}

fn service(name: &str, extra: Value) -> Value {
    let mut svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}});
    if let (Some(spec), Some(extra)) = (svc["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    svc
}

fn in_service_range(ip: &str) -> bool {
    let octets: Vec<u8> = ip.split('.').filter_map(|o| o.parse().ok()).collect();
    octets.len() == 4 && octets[0] == 10 && (96..=111).contains(&octets[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ips_and_node_ports_are_unique_across_replicas() {
    let k = Kube::start().await;
    let path = "/api/v1/namespaces/default/services";
    // Concurrent creates on all three replicas.
    let creates = (0..9).map(|i| {
        let svc = service(&format!("s{i}"), json!({}));
        let k = &k;
        async move { k.send(reqwest::Method::POST, i % 3, path, Some(&svc)).await }
    });
    let results = futures::future::join_all(creates).await;
    let mut ips = HashSet::new();
    for (code, body) in &results {
        assert_eq!(*code, 201, "{body}");
        let ip = body["spec"]["clusterIP"].as_str().unwrap().to_string();
        assert!(in_service_range(&ip), "{ip}");
        assert!(ips.insert(ip.clone()), "{ip} handed out twice");
    }
    let listed = k.json("node-2", &["get", "svc", "-n", "default"]);
    let listed: HashSet<String> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["spec"]["clusterIP"].as_str().unwrap().to_string())
        .collect();
    // With the `kubernetes` Service, which has the range's first address.
    ips.insert("10.96.0.1".to_string());
    assert_eq!(listed, ips);
    ips.remove("10.96.0.1");

    // Asking for a taken IP is refused; once its Service is gone the IP is free again.
    let taken = results[0].1["spec"]["clusterIP"].as_str().unwrap().to_string();
    let (code, status) = k
        .send(
            reqwest::Method::POST,
            1,
            path,
            Some(&service("copy", json!({"clusterIP": taken}))),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("already allocated"),
        "{status}"
    );
    let (code, status) = k
        .send(
            reqwest::Method::POST,
            1,
            path,
            Some(&service("outside", json!({"clusterIP": "192.168.0.1"}))),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    let mut kv = k.cluster.kv(0).await;
    let claim_key = format!("/registry/networking.k8s.io/ipaddresses/{taken}");
    let claim = get(&mut kv, &claim_key, 0, false)
        .await
        .unwrap()
        .expect("the IP is claimed in the store");
    let claim: Value = serde_json::from_slice(&claim).unwrap();
    assert_eq!(claim["kind"], "IPAddress");
    assert_eq!(
        claim["spec"]["parentRef"],
        json!({"group": "", "resource": "services", "namespace": "default", "name": "s0"})
    );
    k.ok("node-3", &["delete", "svc", "s0"]);
    assert!(
        get(&mut kv, &claim_key, 0, false).await.unwrap().is_none(),
        "the claim goes with its Service"
    );
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            2,
            path,
            Some(&service("copy", json!({"clusterIP": taken}))),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["clusterIP"], taken.as_str());

    // Node ports, and a replace that leaves allocated values out keeps them.
    let file = k.manifest(
        "np.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: np, namespace: default}\nspec:\n  type: NodePort\n  selector: {app: np}\n  ports:\n  - port: 80\n",
    );
    k.ok("node-1", &["create", "--validate=false", "-f", &file]);
    let np = k.json("node-2", &["get", "svc", "np"]);
    let node_port = np["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    assert_eq!(np["spec"]["externalTrafficPolicy"], "Cluster");
    let table = k.ok("node-3", &["get", "svc", "np"]);
    assert_eq!(row(&table, "np")[4], format!("80:{node_port}/TCP"));
    k.ok("node-3", &["replace", "--validate=false", "-f", &file]);
    let replaced = k.json("node-1", &["get", "svc", "np"]);
    assert_eq!(replaced["spec"]["clusterIP"], np["spec"]["clusterIP"]);
    assert_eq!(replaced["spec"]["ports"][0]["nodePort"], node_port);
    let mut moved = replaced.clone();
    moved["spec"]["clusterIP"] = json!("10.96.0.200");
    moved["spec"]["clusterIPs"] = json!(["10.96.0.200"]);
    let (code, status) = k
        .send(
            reqwest::Method::PUT,
            0,
            "/api/v1/namespaces/default/services/np",
            Some(&moved),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    let (code, status) = k
        .send(
            reqwest::Method::POST,
            0,
            path,
            Some(&service(
                "np2",
                json!({"type": "NodePort", "ports": [{"port": 81, "nodePort": node_port}]}),
            )),
        )
        .await;
    assert_eq!(code, 422, "the node port is taken: {status}");
    let headless = k
        .send(
            reqwest::Method::POST,
            1,
            path,
            Some(&service("headless", json!({"clusterIP": "None"}))),
        )
        .await;
    assert_eq!(headless.0, 201, "{}", headless.1);
    assert_eq!(headless.1["spec"]["clusterIPs"], json!(["None"]));
    let table = k.ok("node-2", &["get", "svc", "headless"]);
    assert_eq!(row(&table, "headless")[2], "None");
}

/// A GET on replica `i` that must answer 200, with the object.
async fn must_get(http: &reqwest::Client, cluster: &Cluster, i: usize, path: &str) -> Value {
    let r = http
        .get(format!("{}{path}", cluster.base_url(i)))
        .send()
        .await
        .unwrap();
    let code = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(code, 200, "{path} on replica {i}: {body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_replica_has_the_system_namespaces_and_the_kubernetes_service_from_its_ranges() {
    let mut cluster = Cluster::start(Options {
        service_ranges: ("10.20.0.0/24".into(), "31000-31010".into()),
        ..Options::default()
    });
    cluster.wait_leader(T).await;
    // The moment each replica says it is ready, what every cluster has is there: no waiting.
    let http = cluster.http();
    for i in 0..cluster.replicas.len() {
        let url = format!("{}/readyz", cluster.base_url(i));
        eventually(T, || async {
            match http.get(&url).send().await {
                Ok(r) if r.status() == 200 => Ok(()),
                Ok(r) => Err(format!(
                    "{url}: {} {}",
                    r.status(),
                    r.text().await.unwrap_or_default()
                )),
                Err(e) => Err(format!("{url}: {e}")),
            }
        })
        .await;
        let namespaces = must_get(&http, &cluster, i, "/api/v1/namespaces").await;
        let mut names: Vec<&str> = namespaces["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["default", "kube-node-lease", "kube-public", "kube-system"]
        );
        let svc = must_get(
            &http,
            &cluster,
            i,
            "/api/v1/namespaces/default/services/kubernetes",
        )
        .await;
        assert_eq!(svc["spec"]["clusterIP"], "10.20.0.1");
    }
    let api_ports: Vec<u64> = cluster
        .replicas
        .iter()
        .map(|r| r.api_addr.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    let k = Kube::attach(cluster).await;

    // The Service as kube-apiserver makes it, its Endpoints naming every replica, its slice.
    let svc = k.json("node-2", &["get", "svc", "kubernetes"]);
    assert_eq!(
        svc["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    let spec = &svc["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["clusterIPs"], json!(["10.20.0.1"]));
    assert_eq!(spec["ports"][0]["name"], "https");
    assert_eq!(spec["ports"][0]["port"], 443);
    assert!(
        api_ports.contains(&spec["ports"][0]["targetPort"].as_u64().unwrap()),
        "{svc}"
    );
    let table = k.ok("node-3", &["get", "svc", "kubernetes"]);
    assert_eq!(
        row(&table, "kubernetes")[1..5],
        ["ClusterIP", "10.20.0.1", "<none>", "443/TCP"]
    );
    let endpoints = k.json("node-1", &["get", "endpoints", "kubernetes"]);
    assert_eq!(
        endpoints["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"],
        "true"
    );
    let mut listed: Vec<(String, u64)> = endpoints["subsets"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            let port = s["ports"][0]["port"].as_u64().unwrap();
            assert_eq!(s["ports"][0]["name"], "https");
            s["addresses"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |a| (a["ip"].as_str().unwrap().to_string(), port))
        })
        .collect();
    listed.sort();
    let mut expected: Vec<(String, u64)> = api_ports.iter().map(|p| ("127.0.0.1".to_string(), *p)).collect();
    expected.sort();
    assert_eq!(listed, expected);
    let slice = k.json("node-2", &["get", "endpointslices", "kubernetes"]);
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "kubernetes"
    );
    assert_eq!(slice["endpoints"][0]["addresses"], json!(["127.0.0.1"]));
    assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);

    // Services get addresses and node ports from the configured ranges, and only from them.
    let file = k.manifest(
        "np.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: np}\nspec:\n  type: NodePort\n  selector: {app: np}\n  ports:\n  - port: 80\n",
    );
    k.ok("node-1", &["create", "-f", &file]);
    let np = k.json("node-3", &["get", "svc", "np"]);
    let ip = np["spec"]["clusterIP"].as_str().unwrap();
    let last: u8 = ip.strip_prefix("10.20.0.").unwrap().parse().unwrap();
    assert!(
        last > 16,
        "{ip} is in the static band kept for requested addresses"
    );
    let node_port = np["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((31000..=31010).contains(&node_port), "{node_port}");
    let k = &k;
    let refused = |svc: Value, message: String| async move {
        let (code, status) = k
            .send(
                reqwest::Method::POST,
                1,
                "/api/v1/namespaces/default/services",
                Some(&svc),
            )
            .await;
        assert_eq!(
            (code, status["message"].as_str()),
            (422, Some(message.as_str())),
            "{status}"
        );
    };
    refused(
        service("old-range", json!({"clusterIP": "10.96.0.10"})),
        "Service \"old-range\" is invalid: spec.clusterIPs[0]: Invalid value: \"10.96.0.10\": provided IP is not in the valid range. The range of valid IPs is 10.20.0.0/24".into(),
    )
    .await;
    refused(
        service("low-port", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]})),
        "Service \"low-port\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is not in the valid range. The range of valid ports is 31000-31010".into(),
    )
    .await;

    // Deleted, the Service comes back with the same address; so does kube-node-lease.
    k.ok("node-2", &["delete", "svc", "kubernetes"]);
    k.ok("node-3", &["delete", "namespace", "kube-node-lease"]);
    eventually(T, || async {
        let (ok, out, err) = k.kubectl(
            "node-1",
            &["get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"],
        );
        (ok && out == "10.20.0.1")
            .then_some(())
            .ok_or(format!("{out} {err}"))
    })
    .await;
    eventually(T, || async {
        let (ok, out, err) = k.kubectl(
            "node-1",
            &[
                "get",
                "namespace",
                "kube-node-lease",
                "-o",
                "jsonpath={.status.phase}",
            ],
        );
        (ok && out == "Active")
            .then_some(())
            .ok_or(format!("{out} {err}"))
    })
    .await;
}

/// POSTs `body` to `path` on replica `i`; the code, the `Retry-After` header and the body.
async fn post(k: &Kube, i: usize, path: &str, body: &Value) -> (u16, Option<String>, Value) {
    let r = k.http.post(k.url(i, path)).json(body).send().await.unwrap();
    let code = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (code, retry, r.json().await.unwrap())
}

/// What the fake kubelet was asked: the path and query of each stream opened.
type Asked = Arc<Mutex<Vec<String>>>;

/// A kubelet's `exec` stream in the websocket protocol kubectl speaks first
/// (`v5.channel.k8s.io`; kubelets themselves speak SPDY and older websocket versions, and
/// kubectl falls back to SPDY when one refuses v5): the command line echoed on stdout
/// (channel 1), then the status on channel 3 — success, or exit code 3 for `false`.
async fn kubelet_exec(
    State(asked): State<Asked>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    let query = query.unwrap_or_default();
    asked
        .lock()
        .unwrap()
        .push(format!("/exec/{namespace}/{pod}/{container}?{query}"));
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(&query).unwrap();
    let command: Vec<String> = pairs
        .into_iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v)
        .collect();
    ws.protocols(["v5.channel.k8s.io"])
        .on_upgrade(move |mut socket| async move {
            let frame = |channel: u8, data: &[u8]| {
                let mut f = vec![channel];
                f.extend_from_slice(data);
                Message::Binary(f.into())
            };
            let out = format!("{namespace}/{pod}/{container}: {}\n", command.join(" "));
            let status = if command.first().map(String::as_str) == Some("false") {
                json!({"metadata": {}, "status": "Failure", "message": "command terminated with non-zero exit code",
                       "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}})
            } else {
                json!({"metadata": {}, "status": "Success"})
            };
            let _ = socket.send(frame(1, out.as_bytes())).await;
            let _ = socket.send(frame(3, status.to_string().as_bytes())).await;
            let normal = axum::extract::ws::CloseFrame {
                code: 1000,
                reason: "".into(),
            };
            let _ = socket.send(Message::Close(Some(normal))).await;
        })
}

/// A kubelet's `containerLogs`: two lines naming the container and the options, or the
/// kubelet's `400` for the previous instance of a container that never restarted.
async fn kubelet_logs(
    State(asked): State<Asked>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = query.unwrap_or_default();
    asked
        .lock()
        .unwrap()
        .push(format!("/containerLogs/{namespace}/{pod}/{container}?{query}"));
    if query.contains("previous=true") {
        let why = format!("previous terminated container \"{container}\" in pod \"{pod}\" not found");
        return Response::builder().status(400).body(why.into()).unwrap();
    }
    let text = format!("{namespace}/{pod}/{container} started\noptions: {query}\n");
    Response::builder()
        .header("content-type", "text/plain; charset=utf-8")
        .body(text.into())
        .unwrap()
}

/// A fake kubelet serving `exec` (websockets only) and logs over HTTPS that, as kubeadm configures kubelets, only lets
/// in clients with a certificate of the cluster CA (the replicas' kubelet client certificate).
fn fake_kubelet(k: &Kube, asked: Asked) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let app = Router::new()
        .route("/exec/{namespace}/{pod}/{container}", any(kubelet_exec))
        .route("/containerLogs/{namespace}/{pod}/{container}", any(kubelet_logs))
        .with_state(asked);
    let (_, certs, key) = test_server_cert("kubelet-ca", &["127.0.0.1"]);
    let ca = std::fs::read_to_string(k.cluster.pki.ca_cert()).unwrap();
    spawn_https(app, mutual_tls(&ca, certs, key, &[b"http/1.1"]))
}

/// `kubectl exec` through every replica reaches the kubelet of the pod's node (bound to
/// `worker-1`) with the pod's container and kubectl's options, and shows what the kubelet
/// streamed and its exit code; `kubectl logs` reads from it; kube's errors for a container the
/// pod does not have, a command a ValidatingAdmissionPolicy on `CONNECT` refuses, log options
/// kube refuses, a kubelet's refusal, a request that does not upgrade and a kubelet that is
/// down.
async fn exec_reaches_the_kubelet(k: &Kube) {
    let asked = Asked::default();
    let (port, stop) = fake_kubelet(k, asked.clone());
    let status = json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                                   "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}});
    k.ok(
        "node-2",
        &[
            "patch",
            "node",
            "worker-1",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
    );
    for (i, context) in ["node-1", "node-2", "node-3"].iter().enumerate() {
        let n = i.to_string();
        let out = k.ok(context, &["exec", "web-0", "--", "echo", "hi", &n]);
        assert_eq!(out, format!("default/web-0/web-0: echo hi {n}\n"));
    }
    assert_eq!(
        asked.lock().unwrap()[0],
        "/exec/default/web-0/web-0?command=echo&command=hi&command=0&error=1&output=1"
    );
    // Logs stream from the same kubelet, with kubectl's options in the kubelet's terms.
    assert_eq!(
        k.ok("node-3", &["logs", "web-1", "--tail=5", "--timestamps"]),
        "default/web-1/web-1 started\noptions: tailLines=5&timestamps=true\n"
    );
    k.refused(
        "node-1",
        &["logs", "web-1", "--previous"],
        r#"Error from server (BadRequest): previous terminated container "web-1" in pod "web-1" not found"#,
    );
    let (code, body) = k
        .send(
            reqwest::Method::GET,
            2,
            "/api/v1/namespaces/default/pods/web-1/log?tailLines=-1&limitBytes=0",
            None,
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "PodLogOptions \"web-1\" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, \
         limitBytes: Invalid value: 0: must be greater than 0]"
    );
    let (ok, _, err) = k.kubectl("node-3", &["exec", "web-1", "--", "false"]);
    assert!(!ok);
    assert!(err.contains("command terminated with exit code 3"), "{err}");
    k.refused(
        "node-1",
        &["exec", "web-0", "-c", "sidecar", "--", "true"],
        "Error from server (BadRequest): container sidecar is not valid for pod web-0",
    );

    // Admission sees a CONNECT of the options: a policy can refuse a command.
    let policy = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-rm}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec]}
  validations:
  - expression: "object.kind == 'PodExecOptions' && !object.command.exists(w, w == 'rm')"
    message: no rm in exec
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-rm}
spec: {policyName: no-rm, validationActions: [Deny]}
"#;
    k.ok("node-1", &["apply", "-f", &k.manifest("no-rm.yaml", policy)]);
    k.refused(
        "node-2",
        &["exec", "web-0", "--", "rm", "-rf", "/"],
        r#"The pods "web-0" is invalid: : ValidatingAdmissionPolicy 'no-rm' with binding 'no-rm' denied request: no rm in exec"#,
    );
    k.ok("node-3", &["exec", "web-0", "--", "ls"]);
    k.ok("node-1", &["delete", "-f", &k.manifest("no-rm.yaml", policy)]);

    let (code, body) = k
        .send(
            reqwest::Method::POST,
            1,
            "/api/v1/namespaces/default/pods/web-0/exec?command=ls&stdout=true",
            None,
        )
        .await;
    assert_eq!(
        (code, &body["message"]),
        (400, &json!("Upgrade request required")),
        "{body}"
    );
    drop(stop);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    k.refused(
        "node-2",
        &["exec", "web-0", "--", "true"],
        &format!("Error from server: error dialing backend: dial tcp 127.0.0.1:{port}: connect: connection refused"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_evicted_within_their_budget_debugged_and_drained() {
    let k = Kube::start().await;
    let pods = "/api/v1/namespaces/default/pods";
    k.ok(
        "node-1",
        &[
            "create",
            "-f",
            &k.manifest(
                "node.yaml",
                "apiVersion: v1\nkind: Node\nmetadata: {name: worker-1}\n",
            ),
        ],
    );
    for i in 0..3 {
        k.ok(
            "node-2",
            &["run", &format!("web-{i}"), "--image=nginx", "--labels=app=web"],
        );
    }
    k.refused(
        "node-3",
        &["exec", "web-0", "--", "true"],
        "Error from server (BadRequest): pod web-0 does not have a host assigned",
    );
    // Nothing to read before it runs somewhere, as kube-apiserver answers.
    assert_eq!(k.ok("node-1", &["logs", "web-0"]), "");
    let success =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});

    // What a scheduler does: bind each pod to the node.
    for i in 0..3 {
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": format!("web-{i}")},
                             "target": {"kind": "Node", "name": "worker-1"}});
        let (code, _, body) = post(&k, i, &format!("{pods}/web-{i}/binding"), &binding).await;
        assert_eq!((code, &body), (201, &success));
    }
    let bound = k.json("node-3", &["get", "pod", "web-0"]);
    assert_eq!(bound["spec"]["nodeName"], "worker-1");
    exec_reaches_the_kubelet(&k).await;
    let scheduled = bound["status"]["conditions"].as_array().unwrap();
    assert!(
        scheduled
            .iter()
            .any(|c| c["type"] == "PodScheduled" && c["status"] == "True"),
        "{bound}"
    );
    let again = json!({"metadata": {"name": "web-0"}, "target": {"name": "worker-2"}});
    let (code, _, body) = post(&k, 1, &format!("{pods}/web-0/binding"), &again).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on pods/binding \"web-0\": pod web-0 is already assigned to node \"worker-1\""
    );
    let (code, _, body) = post(
        &k,
        2,
        &format!("{pods}/web-0/binding"),
        &json!({"metadata": {"name": "web-1"}}),
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (400, Some("name in URL does not match name in Binding object"))
    );

    // Running and ready, as a kubelet would report them; a budget that allows one disruption,
    // as the disruption controller would compute it.
    for i in 0..3 {
        k.ok(
            "node-1",
            &[
                "patch",
                "pod",
                &format!("web-{i}"),
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
            ],
        );
    }
    k.ok(
        "node-1",
        &[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=2",
        ],
    );
    k.ok(
        "node-2",
        &["patch", "pdb", "web", "--subresource=status", "--type=merge", "-p",
          r#"{"status":{"observedGeneration":1,"currentHealthy":3,"desiredHealthy":2,"disruptionsAllowed":1,"expectedPods":3}}"#],
    );
    let eviction =
        |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});

    // A dry run decides and writes nothing.
    let (code, _, body) = post(
        &k,
        0,
        &format!("{pods}/web-0/eviction?dryRun=All"),
        &eviction("web-0"),
    )
    .await;
    assert_eq!((code, &body), (201, &success));
    let pdb = k.json("node-3", &["get", "pdb", "web"]);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 1, "{pdb}");
    assert!(k.json("node-3", &["get", "pod", "web-0"])["metadata"]
        .get("deletionTimestamp")
        .is_none());

    // The first eviction takes the one disruption; the pod waits for its kubelet.
    let (code, _, body) = post(&k, 1, &format!("{pods}/web-0/eviction"), &eviction("web-0")).await;
    assert_eq!((code, &body), (201, &success));
    let pdb = k.json("node-3", &["get", "pdb", "web"]);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
    assert!(pdb["status"]["disruptedPods"]["web-0"].is_string(), "{pdb}");
    let allowed = &pdb["status"]["conditions"][0];
    assert_eq!(
        (&allowed["type"], &allowed["status"], &allowed["reason"]),
        (
            &json!("DisruptionAllowed"),
            &json!("False"),
            &json!("InsufficientPods")
        )
    );
    let evicted = k.json("node-1", &["get", "pod", "web-0"]);
    assert!(evicted["metadata"]["deletionTimestamp"].is_string(), "{evicted}");
    let target = evicted["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .cloned();
    assert_eq!(
        target.map(|t| t["reason"].clone()),
        Some(json!("EvictionByEvictionAPI"))
    );

    // The second would break the budget.
    let (code, retry, body) = post(&k, 2, &format!("{pods}/web-1/eviction"), &eviction("web-1")).await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(retry, None);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "reason": "TooManyRequests",
               "details": {"causes": [{"reason": "DisruptionBudget",
                                       "message": "The disruption budget web needs 2 healthy pods and has 3 currently"}]},
               "code": 429})
    );
    // A budget whose status has not caught up with its spec stops evictions for a while.
    k.ok(
        "node-1",
        &[
            "patch",
            "pdb",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"minAvailable":1}}"#,
        ],
    );
    let (code, retry, body) = post(&k, 0, &format!("{pods}/web-1/eviction"), &eviction("web-1")).await;
    assert_eq!((code, retry.as_deref()), (429, Some("10")), "{body}");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "The disruption budget web is still being processed by the server."
    );
    // Two budgets for one pod are more than eviction supports.
    k.ok(
        "node-2",
        &[
            "create",
            "poddisruptionbudget",
            "web-too",
            "--selector=app=web",
            "--max-unavailable=1",
        ],
    );
    let (code, _, body) = post(&k, 1, &format!("{pods}/web-2/eviction"), &eviction("web-2")).await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(
        body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    k.ok("node-2", &["delete", "pdb", "web", "web-too"]);

    // Ephemeral containers are added through their subresource and never removed.
    k.ok(
        "node-3",
        &[
            "debug",
            "web-1",
            "--image=busybox",
            "--container=dbg",
            "--profile=general",
        ],
    );
    let debugged = k.json("node-1", &["get", "pod", "web-1"]);
    assert_eq!(
        debugged["spec"]["ephemeralContainers"][0]["name"], "dbg",
        "{debugged}"
    );
    assert_eq!(
        debugged["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    let patch_ephemeral = |context: &str, patch: &str| {
        let args = [
            "patch",
            "pod",
            "web-1",
            "--subresource=ephemeralcontainers",
            "--type=json",
            "-p",
            patch,
        ];
        k.kubectl(context, &args)
    };
    let (ok, _, err) = patch_ephemeral(
        "node-2",
        r#"[{"op":"remove","path":"/spec/ephemeralContainers/0"}]"#,
    );
    assert!(
        !ok && err.contains(
            "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be removed"
        ),
        "{err}"
    );

    // A new ephemeral container is checked as a container is, security context included.
    let (ok, _, err) = patch_ephemeral(
        "node-3",
        r#"[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"dbg2","image":"busybox","securityContext":{"runAsUser":-1},"volumeMounts":[{"name":"nope","mountPath":"/x"}]}}]"#,
    );
    assert!(
        !ok && err.contains("spec.ephemeralContainers[1].volumeMounts[0].name: Not found: \"nope\"")
            && err.contains(
                "spec.ephemeralContainers[1].securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"
            ),
        "{err}"
    );
    assert_eq!(
        k.json("node-1", &["get", "pod", "web-1"])["spec"]["ephemeralContainers"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    // kubectl drain: a server dry run changes nothing; the real one empties the node.
    let out = k.ok("node-1", &["drain", "worker-1", "--force", "--dry-run=server"]);
    assert!(out.contains("node/worker-1 drained (server dry run)"), "{out}");
    assert_eq!(
        k.json("node-2", &["get", "pods", "-l", "app=web"])["items"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    let out = k.ok(
        "node-1",
        &[
            "drain",
            "worker-1",
            "--force",
            "--grace-period=0",
            "--timeout=60s",
        ],
    );
    assert!(
        out.contains("pod/web-2 evicted") && out.contains("node/worker-1 drained"),
        "{out}"
    );
    assert_eq!(
        k.json("node-3", &["get", "pods", "-l", "app=web"])["items"],
        json!([])
    );
    assert_eq!(
        k.json("node-3", &["get", "node", "worker-1"])["spec"]["unschedulable"],
        true
    );
}

/// The resources kube-apiserver 1.35 serves by default (`kubectl api-resources` on a kubeadm
/// cluster, subresources aside), by group/version.
const KUBE_1_35_RESOURCES: &[(&str, &[&str])] = &[
    (
        "v1",
        &[
            "bindings",
            "componentstatuses",
            "configmaps",
            "endpoints",
            "events",
            "limitranges",
            "namespaces",
            "nodes",
            "persistentvolumeclaims",
            "persistentvolumes",
            "pods",
            "podtemplates",
            "replicationcontrollers",
            "resourcequotas",
            "secrets",
            "serviceaccounts",
            "services",
        ],
    ),
    (
        "admissionregistration.k8s.io/v1",
        &[
            "mutatingwebhookconfigurations",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
            "validatingwebhookconfigurations",
        ],
    ),
    ("apiextensions.k8s.io/v1", &["customresourcedefinitions"]),
    ("apiregistration.k8s.io/v1", &["apiservices"]),
    (
        "apps/v1",
        &[
            "controllerrevisions",
            "daemonsets",
            "deployments",
            "replicasets",
            "statefulsets",
        ],
    ),
    (
        "authentication.k8s.io/v1",
        &["selfsubjectreviews", "tokenreviews"],
    ),
    (
        "authorization.k8s.io/v1",
        &[
            "localsubjectaccessreviews",
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews",
        ],
    ),
    ("autoscaling/v1", &["horizontalpodautoscalers"]),
    ("autoscaling/v2", &["horizontalpodautoscalers"]),
    ("batch/v1", &["cronjobs", "jobs"]),
    ("certificates.k8s.io/v1", &["certificatesigningrequests"]),
    ("coordination.k8s.io/v1", &["leases"]),
    ("discovery.k8s.io/v1", &["endpointslices"]),
    ("events.k8s.io/v1", &["events"]),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        &["flowschemas", "prioritylevelconfigurations"],
    ),
    (
        "networking.k8s.io/v1",
        &[
            "ingressclasses",
            "ingresses",
            "ipaddresses",
            "networkpolicies",
            "servicecidrs",
        ],
    ),
    ("node.k8s.io/v1", &["runtimeclasses"]),
    ("policy/v1", &["poddisruptionbudgets"]),
    (
        "rbac.authorization.k8s.io/v1",
        &["clusterrolebindings", "clusterroles", "rolebindings", "roles"],
    ),
    (
        "resource.k8s.io/v1",
        &[
            "deviceclasses",
            "resourceclaims",
            "resourceclaimtemplates",
            "resourceslices",
        ],
    ),
    ("scheduling.k8s.io/v1", &["priorityclasses"]),
    (
        "storage.k8s.io/v1",
        &[
            "csidrivers",
            "csinodes",
            "csistoragecapacities",
            "storageclasses",
            "volumeattachments",
            "volumeattributesclasses",
        ],
    ),
];

/// What kuberaft does not serve yet, each with its reason in the README ("Differences from
/// kube-apiserver").
const NOT_SERVED_YET: &[(&str, &str)] = &[("v1", "bindings"), ("v1", "componentstatuses")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_resources_of_kube_apiserver_are_served_and_work_with_kubectl() {
    let k = Kube::start().await;
    let mut served: Vec<(String, String)> = Vec::new();
    let raw =
        |path: &str| -> Value { serde_json::from_str(&k.ok("node-1", &["get", "--raw", path])).unwrap() };
    let groups = raw("/apis");
    let mut versions = vec!["v1".to_string()];
    for g in groups["groups"].as_array().unwrap() {
        versions.extend(
            g["versions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["groupVersion"].as_str().unwrap().to_string()),
        );
    }
    for gv in &versions {
        let path = if gv == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{gv}")
        };
        let list = raw(&path);
        for r in list["resources"].as_array().unwrap() {
            let name = r["name"].as_str().unwrap();
            if !name.contains('/') {
                served.push((gv.clone(), name.to_string()));
            }
        }
    }
    served.sort();
    let mut expected: Vec<(String, String)> = KUBE_1_35_RESOURCES
        .iter()
        .flat_map(|(gv, names)| names.iter().map(move |n| (gv.to_string(), n.to_string())))
        .filter(|(gv, n)| !NOT_SERVED_YET.contains(&(gv.as_str(), n.as_str())))
        .collect();
    expected.sort();
    assert_eq!(served, expected);

    // kube-apiserver's own objects for its Service range.
    let ips = k.ok("node-3", &["get", "ipaddresses"]);
    assert_eq!(row(&ips, "10.96.0.1")[1], "services/default/kubernetes", "{ips}");
    let cidrs = k.ok("node-3", &["get", "servicecidrs"]);
    assert_eq!(row(&cidrs, "kubernetes")[1], "10.96.0.0/12", "{cidrs}");

    // An object of each type kuberaft serves beyond the common ones, through kubectl.
    let manifests = "apiVersion: v1
kind: PodTemplate
metadata: {name: tpl}
template:
  metadata: {labels: {app: x}}
  spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi.example.com}
spec: {attachRequired: true}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata: {name: fast}
driverName: csi.example.com
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va-1}
spec: {attacher: csi.example.com, nodeName: worker-1, source: {persistentVolumeName: pv-1}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: batch}
spec: {type: Limited, limited: {nominalConcurrencyShares: 10, limitResponse: {type: Reject}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: small-configmaps}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations: [{expression: 'size(object.data) < 100'}]
  paramKind: {apiVersion: v1, kind: ConfigMap}
";
    let out = k.ok("node-1", &["apply", "-f", &k.manifest("types.yaml", manifests)]);
    for created in [
        "podtemplate/tpl created",
        "runtimeclass.node.k8s.io/gvisor created",
        "csidriver.storage.k8s.io/csi.example.com created",
        "volumeattributesclass.storage.k8s.io/fast created",
        "volumeattachment.storage.k8s.io/va-1 created",
        "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/batch created",
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "validatingadmissionpolicy.admissionregistration.k8s.io/small-configmaps created",
    ] {
        assert!(out.contains(created), "{created} in {out}");
    }
    assert_eq!(
        row(&k.ok("node-2", &["get", "podtemplates"]), "tpl")[1..],
        ["c", "nginx", "app=x"]
    );
    assert_eq!(
        row(&k.ok("node-3", &["get", "runtimeclasses"]), "gvisor")[1],
        "runsc"
    );
    assert_eq!(
        row(
            &k.ok("node-2", &["get", "validatingadmissionpolicies"]),
            "small-configmaps"
        )[1..3],
        ["1", "v1/ConfigMap"]
    );
    assert_eq!(
        k.json("node-3", &["get", "volumeattachment", "va-1"])["status"],
        json!({"attached": false})
    );

    // Events are one collection, as in kube: an Event written through core v1 is read through
    // events.k8s.io/v1 (what `kubectl events` reads) in its field names, and the other way.
    let event = "apiVersion: v1\nkind: Event\nmetadata: {name: web.1}\n\
                 involvedObject: {kind: Pod, name: web, namespace: default}\n\
                 reason: Started\nmessage: Started container web\ntype: Normal\n";
    k.ok("node-1", &["create", "-f", &k.manifest("event.yaml", event)]);
    let seen = k.json("node-2", &["get", "events.v1.events.k8s.io", "web.1"]);
    assert_eq!(
        (&seen["apiVersion"], &seen["note"], &seen["regarding"]["name"]),
        (
            &json!("events.k8s.io/v1"),
            &json!("Started container web"),
            &json!("web")
        ),
        "{seen}"
    );
    let modern = "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {name: web.2}\n\
                  regarding: {kind: Pod, name: web, namespace: default}\nreason: Killing\n\
                  note: Stopping container web\ntype: Normal\naction: Kill\n\
                  reportingController: kubelet\nreportingInstance: worker-1\n\
                  eventTime: \"2026-11-26T10:00:00.000000Z\"\n";
    k.ok(
        "node-3",
        &["create", "-f", &k.manifest("modern-event.yaml", modern)],
    );
    let core = k.json("node-1", &["get", "event", "web.2"]);
    assert_eq!(
        (
            &core["apiVersion"],
            &core["message"],
            &core["involvedObject"]["name"]
        ),
        (&json!("v1"), &json!("Stopping container web"), &json!("web")),
        "{core}"
    );
    for (context, resource) in [("node-2", "events"), ("node-3", "events.v1.events.k8s.io")] {
        let names: Vec<Value> = k.json(context, &["get", resource])["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("web.1"), json!("web.2")], "{resource}");
    }

    // A certificate request: pending, approved with kubectl, then issued through /status.
    let (request, certificate) = signed_request("jane");
    let csr = format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {{name: jane}}
spec:
  request: {request}
  username: someone-else
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages: [client auth]
"
    );
    k.ok("node-1", &["create", "-f", &k.manifest("csr.yaml", &csr)]);
    let condition = |table: &str| row(table, "jane").last().cloned().unwrap();
    assert_eq!(condition(&k.ok("node-2", &["get", "csr"])), "Pending");
    k.ok("node-3", &["certificate", "approve", "jane"]);
    let approved = k.json("node-1", &["get", "csr", "jane"]);
    assert_eq!(
        approved["status"]["conditions"][0]["type"], "Approved",
        "{approved}"
    );
    assert_eq!(approved["status"]["conditions"][0]["reason"], "KubectlApprove");
    assert_eq!(condition(&k.ok("node-2", &["get", "csr"])), "Approved");
    k.ok(
        "node-2",
        &[
            "patch",
            "csr",
            "jane",
            "--subresource=status",
            "--type=merge",
            "-p",
            &format!(r#"{{"status":{{"certificate":"{certificate}"}}}}"#),
        ],
    );
    let table = k.ok("node-3", &["get", "csr"]);
    assert_eq!(condition(&table), "Approved,Issued");
    assert_eq!(row(&table, "jane")[3..5], [ADMIN, "24h"], "{table}");
    // Who asked is recorded by the server, whatever the request claimed.
    let spec = &approved["spec"];
    assert_eq!(spec["username"], ADMIN);
    assert!(
        spec["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters")),
        "{spec}"
    );
    // An update of the request itself changes its metadata, never its spec.
    k.ok(
        "node-1",
        &[
            "patch",
            "csr",
            "jane",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"team":"a"}},"spec":{"signerName":"example.com/other","expirationSeconds":60}}"#,
        ],
    );
    let patched = k.json("node-3", &["get", "csr", "jane"]);
    assert_eq!(patched["metadata"]["labels"]["team"], "a", "{patched}");
    assert_eq!(patched["spec"], approved["spec"], "{patched}");
}

/// A PEM certificate signing request for `name` and a certificate for it, base64 as a
/// CertificateSigningRequest holds them.
fn signed_request(name: &str) -> (String, String) {
    use base64::Engine;
    let b64 = |pem: String| base64::engine::general_purpose::STANDARD.encode(pem);
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
    let request = params.serialize_request(&key).unwrap().pem().unwrap();
    let certificate = params.self_signed(&key).unwrap().pem();
    (b64(request), b64(certificate))
}

/// The `autoscaling.alpha.kubernetes.io/...` annotation of a v1 HorizontalPodAutoscaler,
/// decoded.
fn hpa_annotation(hpa: &Value, name: &str) -> Value {
    let text = hpa["metadata"]["annotations"][format!("autoscaling.alpha.kubernetes.io/{name}")]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} annotation in {hpa}"));
    serde_json::from_str(text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horizontal_pod_autoscalers_are_one_object_in_autoscaling_v1_and_v2() {
    let k = Kube::start().await;
    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let v2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

    // Discovery serves both versions and prefers v2, as kube-apiserver does.
    let group: Value = serde_json::from_str(&k.ok("node-1", &["get", "--raw", "/apis/autoscaling"])).unwrap();
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
    let resources: Value =
        serde_json::from_str(&k.ok("node-2", &["get", "--raw", "/apis/autoscaling/v1"])).unwrap();
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]
    );

    // kubectl autoscale, and kube's columns.
    k.ok(
        "node-1",
        &["create", "deployment", "web", "--image=nginx", "--replicas=2"],
    );
    k.ok(
        "node-2",
        &[
            "autoscale",
            "deployment",
            "web",
            "--min=2",
            "--max=5",
            "--cpu-percent=70",
        ],
    );
    let table = k.ok("node-3", &["get", "hpa"]);
    assert_eq!(
        header(&table),
        "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE"
    );
    let web = row(&table, "web");
    assert_eq!(web[1], "Deployment/web", "{table}");
    assert!(table.contains("/70%"), "{table}");
    assert_eq!(web[web.len() - 4..web.len() - 1], ["2", "5", "0"], "{table}");
    let v1_table = k.ok("node-1", &["get", "horizontalpodautoscalers.v1.autoscaling"]);
    assert!(
        v1_table.contains("/70%") && v1_table.contains("Deployment/web"),
        "{v1_table}"
    );

    // The same object through both versions.
    let (code, through_v1) = k.send(reqwest::Method::GET, 0, &format!("{v1}/web"), None).await;
    assert_eq!(code, 200, "{through_v1}");
    assert_eq!(through_v1["apiVersion"], "autoscaling/v1");
    assert_eq!(
        through_v1["spec"]["targetCPUUtilizationPercentage"], 70,
        "{through_v1}"
    );
    assert_eq!(through_v1["spec"]["minReplicas"], 2);
    assert!(through_v1["spec"].get("metrics").is_none(), "{through_v1}");
    let (_, through_v2) = k.send(reqwest::Method::GET, 1, &format!("{v2}/web"), None).await;
    assert_eq!(through_v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        through_v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}])
    );
    assert_eq!(
        through_v1["metadata"]["resourceVersion"],
        through_v2["metadata"]["resourceVersion"]
    );
    let proto = k
        .http
        .get(k.url(2, &format!("{v1}/web")))
        .header("Accept", "application/vnd.kubernetes.protobuf")
        .send()
        .await
        .unwrap();
    assert_eq!(
        proto.headers()["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    let bytes = proto.bytes().await.unwrap();
    assert!(bytes.windows(14).any(|w| w == b"autoscaling/v1"), "{bytes:?}");

    // Both OpenAPI documents describe v1.
    let v3 = k.text(&k.url(0, "/openapi/v3/apis/autoscaling/v1")).await;
    assert!(
        v3.contains("\"io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler\""),
        "{v3}"
    );
    let v2_doc = k.text(&k.url(1, "/openapi/v2")).await;
    assert!(v2_doc.contains("\"io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerList\""));
    assert!(
        v2_doc.contains("/apis/autoscaling/v1/namespaces/{namespace}/horizontalpodautoscalers/{name}/status")
    );

    // Written through v1 (v1's defaults), read through v2.
    let api = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "api"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}});
    let (code, created) = k.send(reqwest::Method::POST, 2, v1, Some(&api)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "autoscaling/v1");
    assert_eq!(created["spec"]["minReplicas"], 1, "{created}");
    assert!(created["spec"].get("metrics").is_none(), "{created}");
    let (_, api2) = k.send(reqwest::Method::GET, 0, &format!("{v2}/api"), None).await;
    assert_eq!(
        api2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 50,
        "{api2}"
    );
    assert_eq!(api2["spec"]["minReplicas"], 1);
    assert!(api2["spec"].get("targetCPUUtilizationPercentage").is_none());

    // Written through v2 with what v1 has no field for: kept in kube's annotations, and a
    // write of the v1 object back loses none of it.
    let queue = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "queue"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "queue"},
            "minReplicas": 1, "maxReplicas": 10,
            "metrics": [
                {"type": "Pods", "pods": {"metric": {"name": "jobs_per_second"}, "target": {"type": "AverageValue", "averageValue": "20"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120, "selectPolicy": "Min",
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}}});
    let (code, body) = k.send(reqwest::Method::POST, 1, v2, Some(&queue)).await;
    assert_eq!(code, 201, "{body}");
    let (_, mut queue1) = k
        .send(reqwest::Method::GET, 2, &format!("{v1}/queue"), None)
        .await;
    assert_eq!(queue1["spec"]["targetCPUUtilizationPercentage"], 60, "{queue1}");
    assert_eq!(
        hpa_annotation(&queue1, "metrics"),
        json!([{"type": "Pods", "pods": {"metricName": "jobs_per_second", "targetAverageValue": "20"}}])
    );
    assert_eq!(
        hpa_annotation(&queue1, "behavior")["ScaleDown"]["StabilizationWindowSeconds"],
        120,
        "{queue1}"
    );
    queue1["spec"]["maxReplicas"] = json!(12);
    let (code, body) = k
        .send(reqwest::Method::PUT, 0, &format!("{v1}/queue"), Some(&queue1))
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["apiVersion"], "autoscaling/v1");
    let (_, queue2) = k
        .send(reqwest::Method::GET, 1, &format!("{v2}/queue"), None)
        .await;
    assert_eq!(queue2["spec"]["maxReplicas"], 12);
    assert_eq!(
        queue2["spec"]["metrics"][0], queue["spec"]["metrics"][0],
        "{queue2}"
    );
    assert_eq!(
        queue2["spec"]["metrics"][1], queue["spec"]["metrics"][1],
        "{queue2}"
    );
    assert_eq!(
        queue2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 120,
        "{queue2}"
    );
    assert!(queue2["metadata"].get("annotations").is_none(), "{queue2}");

    // A list through v1 converts its items; a watch through v1 converts each event.
    let (_, list) = k.send(reqwest::Method::GET, 2, v1, None).await;
    assert_eq!(list["apiVersion"], "autoscaling/v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 3, "{list}");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["spec"]["targetCPUUtilizationPercentage"].is_number()),
        "{list}"
    );
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    k.ok(
        "node-1",
        &[
            "patch",
            "hpa",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"maxReplicas":7}}"#,
        ],
    );
    let watch = k
        .text(&k.url(
            0,
            &format!("{v1}?watch=true&resourceVersion={rv}&timeoutSeconds=2"),
        ))
        .await;
    let events: Vec<Value> = watch.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 1, "{watch}");
    assert_eq!(events[0]["type"], "MODIFIED");
    let object = &events[0]["object"];
    assert_eq!(object["apiVersion"], "autoscaling/v1", "{watch}");
    assert_eq!(object["spec"]["maxReplicas"], 7);
    assert_eq!(object["spec"]["targetCPUUtilizationPercentage"], 70, "{watch}");

    // Server-side apply through v1: the manager's fields are recorded in v1.
    let applied = "apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata: {name: api}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
  maxReplicas: 6
  targetCPUUtilizationPercentage: 40
";
    k.ok(
        "node-2",
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=ops",
            "-f",
            &k.manifest("hpa.yaml", applied),
        ],
    );
    let (_, api2) = k.send(reqwest::Method::GET, 0, &format!("{v2}/api"), None).await;
    assert_eq!(api2["spec"]["maxReplicas"], 6);
    assert_eq!(
        api2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 40,
        "{api2}"
    );
    let ops = api2["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["manager"] == "ops")
        .unwrap_or_else(|| panic!("no ops manager in {api2}"));
    assert_eq!(ops["apiVersion"], "autoscaling/v1");
    assert_eq!(ops["operation"], "Apply");
    assert!(
        ops["fieldsV1"]["f:spec"]
            .get("f:targetCPUUtilizationPercentage")
            .is_some(),
        "{ops}"
    );
}

/// What the backend behind a proxy was asked: method, path, query, the headers a proxy sets,
/// and the body.
async fn echo(request: axum::extract::Request) -> axum::Json<Value> {
    let (parts, body) = request.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    axum::Json(json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query().unwrap_or(""),
        "host": header("host"),
        "forwardedUri": header("x-forwarded-uri"),
        "forwardedFor": header("x-forwarded-for"),
        "authorization": header("authorization"),
        "body": String::from_utf8_lossy(&body),
    }))
}

/// A backend answering a redirect to a path of its own, with a CORS header.
async fn redirect() -> Response {
    Response::builder()
        .status(302)
        .header("location", "/echo/after?from=redirect")
        .header("access-control-allow-origin", "*")
        .body(axum::body::Body::empty())
        .unwrap()
}

/// A backend's HTML page, with links to its own paths, a relative one and another host's.
async fn page() -> Response {
    Response::builder()
        .header("content-type", "text/html; charset=utf-8")
        .body(axum::body::Body::from(
            r#"<html><head><script src="/app.js"></script></head><body><a href="/echo/next">next</a> <a href="rel">rel</a> <a href="http://example.com/x">away</a><p>/echo/text</p></body></html>"#,
        ))
        .unwrap()
}

/// An address of this host other than loopback (the proxies refuse loopback addresses, as
/// kube's do): the one its route to the outside leaves from.
fn host_ip() -> String {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket.connect("198.51.100.1:9").expect("a route off this host");
    let ip = socket.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "{ip}");
    ip.to_string()
}

/// `pods/NAME/proxy`, `services/NAME/proxy` and `nodes/NAME/proxy` pass any request on through
/// every replica, as kube-apiserver's proxies do: `kubectl get --raw` and `create --raw` reach
/// the pod at its IP (the port named, or its first container port), a Service's endpoint that
/// is its pod (a port number turned into the port's name), a node's kubelet (with the replicas'
/// kubelet client certificate) or another port of the node; the path after `proxy` and the
/// query go along, the caller's credentials do not; a redirect and an HTML page's links come
/// back rewritten to go through the proxy; and kube's errors for an address it will not proxy to, a Service with no
/// such port or no endpoints, and a backend that is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_reach_pods_services_and_nodes() {
    let k = Kube::start().await;
    let ip = host_ip();
    let app = || {
        Router::new()
            .route("/", any(|| async { "root" }))
            .route("/echo/{*rest}", any(echo))
            .route("/redirect", any(redirect))
            .route("/page", any(page))
    };
    let (port, _backend) = spawn_server(app(), None, "0.0.0.0");
    let ns = "/api/v1/namespaces/default";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": port}]}]}});
    k.ok(
        "node-1",
        &["create", "-f", &k.manifest("web.json", &pod.to_string())],
    );
    let status = json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}});
    k.ok(
        "node-2",
        &[
            "patch",
            "pod",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
    );

    // A pod, through every replica, at its first container port or the one named.
    for (i, context) in ["node-1", "node-2", "node-3"].iter().enumerate() {
        let path = format!("{ns}/pods/web/proxy/echo/a/b?x={i}&y=two");
        let got: Value = serde_json::from_str(&k.ok(context, &["get", "--raw", &path])).unwrap();
        assert_eq!(
            (&got["method"], &got["path"], &got["query"]),
            // kubectl adds its `--request-timeout`; the whole query goes along.
            (
                &json!("GET"),
                &json!("/echo/a/b"),
                &json!(format!("timeout=20s&x={i}&y=two"))
            ),
            "{got}"
        );
        assert_eq!(got["forwardedUri"], format!("{ns}/pods/web/proxy/echo/a/b"));
        assert_eq!(got["host"], k.url(i, "").split("://").nth(1).unwrap());
        assert_eq!(got["forwardedFor"], "127.0.0.1");
        assert_eq!(got["authorization"], "");
    }
    for name in [format!("web:{port}"), format!("http:web:{port}")] {
        assert_eq!(
            k.ok("node-3", &["get", "--raw", &format!("{ns}/pods/{name}/proxy/")]),
            "root"
        );
    }
    let body = k.manifest("body.json", r#"{"hello": "proxy"}"#);
    let posted: Value = serde_json::from_str(&k.ok(
        "node-2",
        &[
            "create",
            "--raw",
            &format!("{ns}/pods/web/proxy/echo/posted"),
            "-f",
            &body,
        ],
    ))
    .unwrap();
    assert_eq!(
        (&posted["method"], &posted["body"]),
        (&json!("POST"), &json!(r#"{"hello": "proxy"}"#))
    );

    // Redirects: the subresource itself gets its trailing slash; a backend's redirect to a
    // path of its own goes through the proxy, without the backend's CORS header.
    let plain = k
        .cluster
        .http_builder_as(ADMIN, &["system:masters"])
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = plain
        .get(k.url(0, &format!("{ns}/pods/web/proxy?q=1")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 301);
    assert_eq!(
        r.headers()["location"],
        format!("{ns}/pods/web/proxy/?q=1").as_str()
    );
    let r = plain
        .get(k.url(1, &format!("{ns}/pods/web/proxy/redirect")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 302);
    assert_eq!(
        r.headers()["location"],
        format!("{ns}/pods/web/proxy/echo/after?from=redirect").as_str()
    );
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // An OPTIONS request is passed on as any other.
    let r = plain
        .request(
            reqwest::Method::OPTIONS,
            k.url(2, &format!("{ns}/pods/web/proxy/echo/opt")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let got: Value = r.json().await.unwrap();
    assert_eq!(
        (&got["method"], &got["path"]),
        (&json!("OPTIONS"), &json!("/echo/opt"))
    );
    // An HTML page's links to the backend's own paths go through the proxy as well.
    let html = k.ok("node-3", &["get", "--raw", &format!("{ns}/pods/web/proxy/page")]);
    let p = format!("{ns}/pods/web/proxy");
    assert_eq!(
        html,
        format!(
            r#"<html><head><script src="{p}/app.js"></script></head><body><a href="{p}/echo/next">next</a> <a href="rel">rel</a> <a href="http://example.com/x">away</a><p>/echo/text</p></body></html>"#
        )
    );

    // A Service: by port name, or by number turned into the name; only to endpoints that are
    // their pods.
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": port}]}});
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": ip, "targetRef": {"kind": "Pod", "namespace": "default", "name": "web"}}],
                     "ports": [{"name": "http", "port": port}]}]});
    let lonely = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lonely"},
        "spec": {"ports": [{"port": 80}]}});
    let impostor = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "lonely"},
        "subsets": [{"addresses": [{"ip": "10.1.2.3", "targetRef": {"kind": "Pod", "namespace": "default", "name": "web"}}],
                     "ports": [{"port": port}]}]});
    for (file, object) in [
        ("svc.json", &service),
        ("ep.json", &endpoints),
        ("lonely.json", &lonely),
    ] {
        k.ok(
            "node-1",
            &["create", "-f", &k.manifest(file, &object.to_string())],
        );
    }
    for name in ["web:http", "web:80", "http:web:http"] {
        let got: Value = serde_json::from_str(&k.ok(
            "node-3",
            &["get", "--raw", &format!("{ns}/services/{name}/proxy/echo/svc")],
        ))
        .unwrap();
        assert_eq!(got["path"], "/echo/svc", "{name}: {got}");
    }
    k.refused(
        "node-2",
        &["get", "--raw", &format!("{ns}/services/web:81/proxy/")],
        r#"Error from server (ServiceUnavailable): no service port 81 found for service "web""#,
    );
    k.refused(
        "node-2",
        &["get", "--raw", &format!("{ns}/services/lonely/proxy/")],
        r#"Error from server (NotFound): endpoints "lonely" not found"#,
    );
    k.ok(
        "node-1",
        &[
            "create",
            "-f",
            &k.manifest("impostor.json", &impostor.to_string()),
        ],
    );
    k.refused(
        "node-3",
        &["get", "--raw", &format!("{ns}/services/lonely:80/proxy/")],
        r#"Error from server (ServiceUnavailable): no endpoints available for service "lonely:80""#,
    );

    // A node: its kubelet (HTTPS, only for the replicas' kubelet client certificate), or
    // another of its ports.
    let (_, certs, key) = test_server_cert("kubelet-ca", &[&ip]);
    let ca = std::fs::read_to_string(k.cluster.pki.ca_cert()).unwrap();
    let (kubelet_port, _kubelet) = spawn_server(
        app(),
        Some(mutual_tls(&ca, certs, key, &[b"http/1.1"])),
        "0.0.0.0",
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-7"}});
    k.ok(
        "node-1",
        &["create", "-f", &k.manifest("node.json", &node.to_string())],
    );
    let node_status = json!({"status": {"addresses": [{"type": "InternalIP", "address": ip}],
                                        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}}}});
    k.ok(
        "node-2",
        &[
            "patch",
            "node",
            "worker-7",
            "--subresource=status",
            "--type=merge",
            "-p",
            &node_status.to_string(),
        ],
    );
    for name in [
        "worker-7".to_string(),
        format!("worker-7:{kubelet_port}"),
        format!("worker-7:{port}"),
    ] {
        let got: Value = serde_json::from_str(&k.ok(
            "node-3",
            &[
                "get",
                "--raw",
                &format!("/api/v1/nodes/{name}/proxy/echo/metrics"),
            ],
        ))
        .unwrap();
        assert_eq!(got["path"], "/echo/metrics", "{name}: {got}");
        assert_eq!(
            got["forwardedUri"],
            format!("/api/v1/nodes/{name}/proxy/echo/metrics")
        );
    }

    // What kube will not proxy to, and a backend that is down.
    let loopback = json!({"status": {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}});
    k.ok("node-1", &["run", "local", "--image=nginx", "--port=80"]);
    k.ok(
        "node-1",
        &[
            "patch",
            "pod",
            "local",
            "--subresource=status",
            "--type=merge",
            "-p",
            &loopback.to_string(),
        ],
    );
    k.refused(
        "node-2",
        &["get", "--raw", &format!("{ns}/pods/local/proxy/")],
        "Error from server (BadRequest): address not allowed",
    );
    k.refused(
        "node-2",
        &["get", "--raw", &format!("{ns}/pods/ftp:web:21/proxy/")],
        r#"Error from server (BadRequest): invalid pod request "ftp:web:21""#,
    );
    k.refused(
        "node-3",
        &["get", "--raw", &format!("{ns}/pods/nope/proxy/")],
        r#"Error from server (NotFound): pods "nope" not found"#,
    );
    let closed = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    k.refused(
        "node-1",
        &["get", "--raw", &format!("{ns}/pods/web:{closed_port}/proxy/")],
        &format!(
            "Error from server (ServiceUnavailable): error trying to reach service: \
             dial tcp {ip}:{closed_port}: connect: connection refused"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_resized_in_place_through_their_subresource() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "rz"]);
    k.wait_namespace_populated("rz").await;
    let limits = "apiVersion: v1\nkind: LimitRange\nmetadata: {name: cap, namespace: rz}\n\
                  spec:\n  limits:\n  - type: Container\n    max: {cpu: \"1\"}\n";
    k.ok("node-1", &["create", "-f", &k.manifest("cap.yaml", limits)]);
    let pod = r#"apiVersion: v1
kind: Pod
metadata: {name: app, namespace: rz}
spec:
  containers:
  - name: c
    image: nginx
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 200m, memory: 128Mi}
"#;
    k.ok("node-2", &["create", "-f", &k.manifest("app.yaml", pod)]);
    let resize = |context: &str, patch: &str| {
        k.kubectl(
            context,
            &[
                "patch",
                "pod",
                "app",
                "-n",
                "rz",
                "--subresource=resize",
                "-p",
                patch,
            ],
        )
    };

    // The containers' cpu and memory change in place: the pod moves to its next generation, and
    // the change is the resizing manager's, recorded for the subresource.
    let (ok, out, err) = resize(
        "node-3",
        r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m","memory":"256Mi"}}}]}}"#,
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/app patched");
    let resized = k.json(
        "node-1",
        &["get", "pod", "app", "-n", "rz", "--show-managed-fields"],
    );
    assert_eq!(
        resized["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "150m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "256Mi"}})
    );
    assert_eq!(resized["metadata"]["generation"], 2);
    assert_eq!(resized["status"]["qosClass"], "Burstable");
    let entries = resized["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["manager"] == "kubectl-patch" && e["subresource"] == "resize"),
        "{entries:?}"
    );
    // The subresource reads as the pod.
    let (ok, raw, err) = k.kubectl(
        "node-2",
        &["get", "--raw", "/api/v1/namespaces/rz/pods/app/resize"],
    );
    assert!(ok, "{err}");
    let read: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        (&read["kind"], &read["metadata"]["generation"]),
        (&json!("Pod"), &json!(2))
    );

    // Anything but resources written through it is left as it was: nothing to store.
    let (ok, out, err) = resize(
        "node-2",
        r#"{"metadata":{"labels":{"x":"y"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#,
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/app patched (no change)");
    let same = k.json("node-3", &["get", "pod", "app", "-n", "rz"]);
    assert_eq!(same["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(
        same["metadata"]["resourceVersion"],
        resized["metadata"]["resourceVersion"]
    );

    // A plain update may not resize; what a resize may not do is refused as kube refuses it.
    k.refused(
        "node-1",
        &[
            "patch",
            "pod",
            "app",
            "-n",
            "rz",
            "-p",
            r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"120m"}}}]}}"#,
        ],
        "pod updates may not change fields other than",
    );
    let refusals = [
        (
            r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"ephemeral-storage":"1Gi"}}}]}}"#,
            "The Pod \"app\" is invalid: spec: Forbidden: only cpu and memory resources are mutable",
        ),
        (
            r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":null}}}]}}"#,
            "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed",
        ),
        (
            r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"256Mi"}}}]}}"#,
            "spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing",
        ),
        (
            r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"400m"}}}]}}"#,
            "spec.containers[0].resources.requests: Invalid value: \"400m\": must be less than or equal to cpu limit of 300m",
        ),
        (
            r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"2"}}}]}}"#,
            "pods \"app\" is forbidden: maximum cpu usage per Container is 1, but limit is 2",
        ),
        (
            r#"{"spec":{"containers":[{"name":"c","resizePolicy":[{"resourceName":"gpu","restartPolicy":"NotRequired"}]}]}}"#,
            "spec.containers[0].resizePolicy: Unsupported value: \"gpu\": supported values: \"cpu\", \"memory\"",
        ),
    ];
    for (i, (patch, message)) in refusals.iter().enumerate() {
        let (ok, _, err) = resize(["node-1", "node-2", "node-3"][i % 3], patch);
        assert!(!ok && err.contains(message), "{patch}: {err}");
    }
    let after = k.json("node-2", &["get", "pod", "app", "-n", "rz"]);
    assert_eq!(
        after["metadata"]["resourceVersion"],
        resized["metadata"]["resourceVersion"]
    );
}
