//! A three-replica cluster with a kubeconfig (one context per replica, `node-1`..`node-3`) for
//! driving the real `kubectl` and plain HTTP against it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::{eventually, Cluster, Options, ADMIN};

/// A kubeconfig for `cluster` with one context per replica (`node-1`..), speaking as `user`
/// in `groups` (a client certificate made on first use), the CA verified.
pub fn kubeconfig_text(cluster: &Cluster, user: &str, groups: &[&str]) -> String {
    let (cert, key) = cluster.user_pem(user, groups);
    let (cert_file, key_file) = cluster.pki.user(user);
    let _ = (cert, key);
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (i, r) in cluster.replicas.iter().enumerate() {
        text.push_str(&format!(
            "- name: node-{}\n  cluster:\n    server: {}\n",
            r.id,
            cluster.base_url(i)
        ));
        if !cluster.options.insecure {
            text.push_str(&format!(
                "    certificate-authority: {}\n",
                cluster.pki.ca_cert().display()
            ));
        }
    }
    text.push_str("contexts:\n");
    for r in &cluster.replicas {
        text.push_str(&format!(
            "- name: node-{0}\n  context: {{cluster: node-{0}, user: u}}\n",
            r.id
        ));
    }
    text.push_str("current-context: node-1\nusers:\n- name: u\n  user:\n");
    text.push_str(&format!(
        "    client-certificate: {}\n    client-key: {}\n",
        cert_file.display(),
        key_file.display()
    ));
    text
}

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
    /// Starts the cluster and waits until the leader has created the system namespaces and
    /// what every namespace holds.
    pub async fn start() -> Kube {
        Kube::start_with(Options::default()).await
    }

    /// Like [`Kube::start`] with non-default replica options.
    pub async fn start_with(options: Options) -> Kube {
        let mut cluster = Cluster::start(options);
        cluster.wait_leader(T).await;
        Kube::attach(cluster).await
    }

    /// Like [`Kube::start`] for a cluster started already (with a leader).
    pub async fn attach(cluster: Cluster) -> Kube {
        let kubeconfig = cluster.dir.path().join("kubeconfig");
        let cache_dir = cluster.dir.path().join("kube-cache");
        std::fs::write(&kubeconfig, kubeconfig_text(&cluster, ADMIN, &["system:masters"])).unwrap();
        let http = cluster.http();
        let k = Kube {
            cluster,
            kubeconfig,
            cache_dir,
            http,
        };
        // Every replica answers anonymous health checks once it has the default RBAC policy.
        let anonymous = k.cluster.http_builder().build().unwrap();
        for i in 0..k.cluster.replicas.len() {
            let url = k.url(i, "/readyz");
            eventually(T, || async {
                match anonymous.get(&url).send().await {
                    Ok(r) if r.status() == 200 => Ok(()),
                    Ok(r) => Err(format!("{url}: {}", r.status())),
                    Err(e) => Err(format!("{url}: {e}")),
                }
            })
            .await;
        }
        eventually(T, || async {
            let (ok, out, err) = k.kubectl("node-1", &["get", "ns", "default", "-o", "name"]);
            if ok {
                Ok(out)
            } else {
                Err(err)
            }
        })
        .await;
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            k.wait_namespace_populated(ns).await;
        }
        k
    }

    /// Waits until namespace `ns` holds what the leader's controllers give every namespace:
    /// the `default` ServiceAccount and, on a cluster with a CA (not `--insecure`), the
    /// `kube-root-ca.crt` ConfigMap — so that a test sees them from the start, not appearing
    /// in the middle of what it checks.
    pub async fn wait_namespace_populated(&self, ns: &str) {
        let mut paths = vec![format!("/api/v1/namespaces/{ns}/serviceaccounts/default")];
        if !self.cluster.options.insecure {
            paths.push(format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"));
        }
        for path in paths {
            let url = self.url(0, &path);
            eventually(T, || async {
                match self.http.get(&url).send().await {
                    Ok(r) if r.status() == 200 => Ok(()),
                    Ok(r) => Err(format!("{url}: {}", r.status())),
                    Err(e) => Err(format!("{url}: {e}")),
                }
            })
            .await;
        }
    }

    /// Runs kubectl against one replica's context: (succeeded, stdout, stderr).
    pub fn kubectl(&self, context: &str, args: &[&str]) -> (bool, String, String) {
        self.kubectl_in(&self.kubeconfig, context, args)
    }

    /// Runs kubectl with `kubeconfig` and `context`: (succeeded, stdout, stderr).
    fn kubectl_in(
        &self,
        kubeconfig: &std::path::Path,
        context: &str,
        args: &[&str],
    ) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
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

    /// Runs kubectl, asserts it failed with `message` in its stderr, and returns the stderr.
    pub fn refused(&self, context: &str, args: &[&str], message: &str) -> String {
        let (ok, _, err) = self.kubectl(context, args);
        assert!(!ok, "kubectl {args:?} succeeded");
        assert!(err.contains(message), "kubectl {args:?}: {err}");
        err
    }

    /// Binds `user` to `cluster-admin` (as `<user>-admin`) and returns a way to make HTTP/1.1
    /// clients authenticated as them by a client certificate.
    pub fn cluster_admin(&self, user: &str) -> impl Fn() -> reqwest::Client + '_ {
        let binding = format!("{user}-admin");
        let subject = format!("--user={user}");
        self.ok(
            "node-1",
            &[
                "create",
                "clusterrolebinding",
                &binding,
                "--clusterrole=cluster-admin",
                &subject,
            ],
        );
        let user = user.to_string();
        move || {
            self.cluster
                .http_builder_as(&user, &[])
                .http1_only()
                .build()
                .unwrap()
        }
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
        format!("{}{path}", self.cluster.base_url(node))
    }

    /// GETs `url` and returns the body as text (panics on a transport error).
    pub async fn text(&self, url: &str) -> String {
        self.http.get(url).send().await.unwrap().text().await.unwrap()
    }

    /// GETs `path` from replica `node` accepting `accept`, and returns the JSON body.
    pub async fn json_as(&self, node: usize, path: &str, accept: &str) -> Result<Value, String> {
        let r = self
            .http
            .get(self.url(node, path))
            .header("accept", accept)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        r.json().await.map_err(|e| e.to_string())
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

impl Kube {
    /// A kube-rs config for `url` (a replica, or a proxy in front of one) as the admin, TLS
    /// verified against the cluster CA.
    pub fn kube_config_at(&self, url: &str) -> kube::Config {
        use base64::Engine;
        use rustls_pki_types::pem::PemObject;
        let mut config = kube::Config::new(url.parse().expect("a URL"));
        if !self.cluster.options.insecure {
            let ca = rustls_pki_types::CertificateDer::from_pem_slice(self.cluster.ca_pem().as_bytes())
                .expect("the CA certificate");
            config.root_cert = Some(vec![ca.to_vec()]);
            let (cert, key) = self.cluster.user_pem(ADMIN, &["system:masters"]);
            let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
            config.auth_info.client_certificate_data = Some(b64(&cert));
            config.auth_info.client_key_data = Some(b64(&key).into());
        }
        config
    }

    /// A kube-rs client for replica `node` (0-based) as the admin.
    pub fn kube_client(&self, node: usize) -> kube::Client {
        kube::Client::try_from(self.kube_config_at(&self.url(node, ""))).expect("a kube-rs client")
    }
}

impl Kube {
    /// A kubeconfig file for `user` in `groups` (a client certificate of the cluster CA), one
    /// context per replica as the admin's.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> PathBuf {
        let path = self.cluster.dir.path().join(format!("kubeconfig-{user}"));
        std::fs::write(&path, kubeconfig_text(&self.cluster, user, groups)).unwrap();
        path
    }

    /// Runs kubectl with another kubeconfig against replica `node` (0-based): (succeeded,
    /// stdout, stderr).
    pub fn kubectl_with(
        &self,
        kubeconfig: &std::path::Path,
        node: usize,
        args: &[&str],
    ) -> (bool, String, String) {
        let context = format!("node-{}", self.cluster.replicas[node].id);
        self.kubectl_in(kubeconfig, &context, args)
    }
}
