//! What `kubectl` shows for the built-in types on a real three-replica cluster: defaults in
//! `-o yaml`, table columns (also `-o wide`), `jsonpath`, `-o name`, `describe`, `-A`, `scale`
//! through the scale subresource, `replace` and generations, and Service cluster IPs and node
//! ports that stay unique whichever replica allocates them.

mod support;

use std::collections::HashSet;

use serde_json::{json, Value};
use support::kube::Kube;
use support::*;

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
    let deploys = k.ok("node-2", &["-n", "shop", "get", "deploy"]);
    assert_eq!(row(&deploys, "web")[..4], ["web", "3/4", "4", "3"]);
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
    assert_eq!(listed, ips);

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
