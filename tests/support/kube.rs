//! A three-replica cluster with a kubeconfig (one context per replica, `node-1`..`node-3`) for
//! driving the real `kubectl` and plain HTTP against it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::{eventually, Cluster, Options};

const T: Duration = Duration::from_secs(30);

/// A running cluster plus what a client needs to reach each replica.
pub struct Kube {
    pub cluster: Cluster,
    pub kubeconfig: PathBuf,
    /// kubectl's discovery cache, private to this cluster: ports are reused between test
    /// clusters, and a shared cache would serve one cluster's discovery to the next.
    pub cache_dir: PathBuf,
    pub http: reqwest::Client,
}

impl Kube {
    /// Starts the cluster and waits until the leader has created the system namespaces.
    pub async fn start() -> Kube {
        Kube::start_with(Options::default()).await
    }

    /// Like [`Kube::start`] with non-default replica options.
    pub async fn start_with(options: Options) -> Kube {
        let mut cluster = Cluster::start(options);
        cluster.wait_leader(T).await;
        let kubeconfig = cluster.dir.path().join("kubeconfig");
        let cache_dir = cluster.dir.path().join("kube-cache");
        let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
        for r in &cluster.replicas {
            text.push_str(&format!(
                "- name: node-{}\n  cluster:\n    server: http://{}\n",
                r.id, r.api_addr
            ));
        }
        text.push_str("contexts:\n");
        for r in &cluster.replicas {
            text.push_str(&format!(
                "- name: node-{0}\n  context: {{cluster: node-{0}, user: u}}\n",
                r.id
            ));
        }
        text.push_str("current-context: node-1\nusers:\n- name: u\n  user: {}\n");
        std::fs::write(&kubeconfig, text).unwrap();
        let k = Kube {
            cluster,
            kubeconfig,
            cache_dir,
            http: reqwest::Client::new(),
        };
        eventually(T, || async {
            let (ok, out, err) = k.kubectl("node-1", &["get", "ns", "default", "-o", "name"]);
            if ok {
                Ok(out)
            } else {
                Err(err)
            }
        })
        .await;
        k
    }

    /// Runs kubectl against one replica's context: (succeeded, stdout, stderr).
    pub fn kubectl(&self, context: &str, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .args(["--context", context, "--request-timeout", "20s"])
            .args(args)
            .output()
            .expect("kubectl is installed");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl, asserts it succeeded and returns its stdout.
    pub fn ok(&self, context: &str, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(context, args);
        assert!(ok, "kubectl {args:?} failed: {err}");
        out
    }

    /// Runs kubectl with `-o json` and parses the output.
    pub fn json(&self, context: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(context, &all)).expect("kubectl -o json prints JSON")
    }

    /// Writes `text` to a file in the cluster's directory and returns its path.
    pub fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.cluster.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// The URL of `path` on replica `node` (0-based).
    pub fn url(&self, node: usize, path: &str) -> String {
        format!("http://{}{path}", self.cluster.replicas[node].api_addr)
    }

    /// GETs `url` and returns the body as text (panics on a transport error).
    pub async fn text(&self, url: &str) -> String {
        self.http.get(url).send().await.unwrap().text().await.unwrap()
    }

    /// Sends a JSON request to replica `node`: (status code, JSON body or null).
    pub async fn send(
        &self,
        method: reqwest::Method,
        node: usize,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, self.url(node, path));
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.unwrap();
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or(Value::Null))
    }
}
