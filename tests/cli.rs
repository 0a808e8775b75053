//! The `kuberaft` command line as a user runs it: `cluster up`, `endpoint status`, `serve`
//! with bad configs and bad data dirs.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const T: Duration = Duration::from_secs(30);

fn run(args: &[&str]) -> (bool, String, String) {
    outcome(Command::new(kuberaft_bin()).args(args))
}

/// Runs `cmd` to completion: whether it succeeded, its stdout and its stderr.
fn outcome(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().expect("run the command");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `serve` with a config that must be refused; returns stderr.
fn serve_fails(config: &std::path::Path) -> String {
    let mut child = Command::new(kuberaft_bin())
        .args(["serve", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + T;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "serve should have failed");
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return err;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running with a bad config");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Bases of two blocks of six consecutive ports, for the API and the peer ports of `cluster up`
/// (three nodes, and three more for a fourth node or a second cluster), each port free when
/// chosen and never handed out before by this process. The blocks lie below the kernel's
/// ephemeral range (32768 and up), so no outgoing connection of another test can be holding one.
fn ports() -> (u16, u16) {
    const BLOCK: u16 = 6;
    static NEXT: std::sync::Mutex<u16> = std::sync::Mutex::new(0);
    let mut next = NEXT.lock().unwrap_or_else(|p| p.into_inner());
    if *next == 0 {
        // Spread by pid so that concurrent runs start apart.
        *next = 20000 + (std::process::id() % 2000) as u16 * BLOCK;
    }
    let mut block = || loop {
        if *next + BLOCK > 32700 {
            *next = 20000;
        }
        let base = *next;
        *next += BLOCK;
        if (base..base + BLOCK).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    };
    (block(), block())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_up_then_endpoint_status_shows_every_member_and_one_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (api, peer) = ports();
    let mut up = Command::new(kuberaft_bin())
        .args(["cluster", "up", "--nodes", "3", "--dir"])
        .arg(dir.path())
        .args(["--api-port", &api.to_string(), "--peer-port", &peer.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // `cluster up` prints its summary once every node is ready.
    let mut stdout = std::io::BufReader::new(up.stdout.take().unwrap());
    let mut banner = String::new();
    loop {
        use std::io::BufRead;
        let mut line = String::new();
        if stdout.read_line(&mut line).unwrap() == 0 {
            panic!("cluster up exited early: {banner}");
        }
        banner.push_str(&line);
        if line.contains("Ctrl-C") {
            break;
        }
    }
    assert!(banner.contains("is up with 3 node(s)"), "{banner}");
    assert!(
        banner.contains(&format!("export KUBECONFIG={}", kubeconfig.display())),
        "{banner}"
    );
    // Everything the user needs is readable only by them.
    {
        use std::os::unix::fs::PermissionsExt;
        for f in [
            "kubeconfig",
            "pki/ca.key",
            "pki/service-account.key",
            "pki/users/kuberaft-admin.key",
            "pki/replicas/node-2/peer.key",
        ] {
            let mode = std::fs::metadata(dir.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{f} is readable by others: {mode:o}");
        }
    }
    // HTTPS only, the serving certificate issued by the cluster CA; the public paths answer
    // without credentials, the rest only to the admin's certificate.
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("pki/ca.crt")).unwrap()).unwrap();
    let anonymous = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca.clone())
        .build()
        .unwrap();
    let admin_pem = [
        std::fs::read(dir.path().join("pki/users/kuberaft-admin.crt")).unwrap(),
        std::fs::read(dir.path().join("pki/users/kuberaft-admin.key")).unwrap(),
    ]
    .concat();
    let admin = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .identity(reqwest::Identity::from_pem(&admin_pem).unwrap())
        .build()
        .unwrap();
    assert!(
        reqwest::get(format!("http://127.0.0.1:{api}/readyz"))
            .await
            .is_err()
            || reqwest::get(format!("http://127.0.0.1:{api}/readyz"))
                .await
                .unwrap()
                .status()
                != 200,
        "plain HTTP must not be served"
    );
    let denied = anonymous
        .get(format!("https://127.0.0.1:{api}/api/v1/namespaces"))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    for i in 1..=3 {
        let http = anonymous
            .get(format!("https://127.0.0.1:{}/readyz", api + i - 1))
            .send()
            .await
            .unwrap();
        let status = http.status();
        let why = http.text().await.unwrap_or_default();
        assert_eq!(status, 200, "node-{i} not ready after `cluster up`: {why}");
    }
    // Prometheus metrics with the Raft and storage series operators graph.
    let metrics = admin
        .get(format!("https://127.0.0.1:{api}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "kuberaft_raft_term",
        "kuberaft_raft_is_leader",
        "kuberaft_raft_leader_changes_total",
        "kuberaft_raft_commit_index",
        "kuberaft_raft_applied_index",
        "kuberaft_store_revision",
        "kuberaft_store_compacted_revision",
        "kuberaft_store_db_size_bytes",
        "kuberaft_storage_fsync_duration_seconds_bucket",
    ] {
        assert!(
            metrics.contains(series),
            "{series} missing from /metrics:\n{metrics}"
        );
    }
    let live = anonymous
        .get(format!("https://127.0.0.1:{api}/livez"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    let (ok, out, err) = run(&[
        "endpoint",
        "status",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(rows.iter().filter(|r| r["role"] == "leader").count(), 1, "{out}");
    assert_eq!(
        rows.iter().filter(|r| r["role"] == "follower").count(),
        2,
        "{out}"
    );
    let ids: Vec<u64> = rows.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, vec![1, 2, 3]);
    // Each member reports the certificates it serves with: the CA (10 years), its serving and
    // peer certificates (1 year), none due for renewal.
    for r in &rows {
        let certs: Vec<(&str, i64)> = r["certificates"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|c| (c["name"].as_str().unwrap(), c["daysLeft"].as_i64().unwrap()))
            .collect();
        let names: Vec<&str> = certs.iter().map(|c| c.0).collect();
        assert_eq!(names, ["ca", "api", "peer"], "{r}");
        assert!(certs[0].1 > 3600, "{r}");
        assert!(
            (360..=366).contains(&certs[1].1) && (360..=366).contains(&certs[2].1),
            "{r}"
        );
    }
    // The table form has a header and one row per member, with the earliest expiry.
    let (ok, table, warnings) = run(&["endpoint", "status", "--kubeconfig", kubeconfig.to_str().unwrap()]);
    assert!(ok);
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.lines().next().unwrap().ends_with("CERTIFICATES EXPIRE"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 4, "{table}");
    assert!(
        table
            .lines()
            .skip(1)
            .all(|l| l.contains(" in 36") && !l.contains("RENEW")),
        "{table}"
    );
    assert!(!warnings.contains("warning:"), "{warnings}");
    // kubectl reads the kubeconfig (its kuberaft extensions included).
    let contexts = Command::new("kubectl")
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "config",
            "get-contexts",
            "-o",
            "name",
        ])
        .output()
        .expect("kubectl is installed");
    assert!(
        contexts.status.success(),
        "{}",
        String::from_utf8_lossy(&contexts.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&contexts.stdout).trim(),
        "node-1\nnode-2\nnode-3"
    );
    // Ctrl-C / SIGTERM stops every node cleanly.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(up.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = up.wait().unwrap();
    assert!(status.success());
    for i in 1..=3 {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", api + i - 1)).is_err(),
            "node-{i} still listening after cluster up stopped"
        );
    }
    // A second `cluster up` on the same dir restarts the same cluster with its data.
    let configs_before = std::fs::read_to_string(dir.path().join("node-1.yaml")).unwrap();
    let again = UpCluster::start(dir.path(), api, peer);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("node-1.yaml")).unwrap(),
        configs_before
    );
    assert!(again.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_status_reports_a_down_member_as_unreachable() {
    let mut c = Cluster::start(Options::default());
    let leader = c.wait_leader(T).await;
    let down = c.follower_of(leader);
    c.kill(down);
    // The admin's kubeconfig gives `endpoint status` its client certificate for the peer port.
    let kubeconfig = c.dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        support::kube::kubeconfig_text(&c, ADMIN, &["system:masters"]),
    )
    .unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let endpoints = c
        .replicas
        .iter()
        .map(|r| r.peer_addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let (ok, out, err) = run(&[
        "endpoint",
        "status",
        "--kubeconfig",
        kubeconfig,
        "--endpoints",
        &endpoints,
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    let row = rows
        .iter()
        .find(|r| r["id"] == c.replicas[down].id)
        .expect("row of the down member");
    assert!(row["error"].as_str().unwrap().contains("unreachable"), "{row}");
    assert_eq!(rows.iter().filter(|r| r["role"] == "leader").count(), 1);
    // Asking only one live member still lists every member, the down one included.
    let (ok, out, _) = run(&[
        "endpoint",
        "status",
        "--kubeconfig",
        kubeconfig,
        "--endpoints",
        &c.replicas[leader].peer_addr,
        "-o",
        "json",
    ]);
    assert!(ok);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3, "{out}");
}

#[test]
fn serve_refuses_bad_configs_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let members = vec![
        (
            1,
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        ),
        (
            2,
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        ),
    ];
    let pki = make_pki(&dir.path().join("pki"), 2);
    let good = config_yaml(1, &dir.path().join("d1"), &members, &Options::default(), &pki);
    let cases = [
        (
            good.replace("dataDir", "dataDirectory"),
            "unknown field `dataDirectory`",
        ),
        (
            good.replace("id: 2\n", "id: 1\n"),
            "two members have the same id 1",
        ),
        (
            good.replacen("id: 1\n", "id: 7\n", 1),
            "id 7 is not one of the members",
        ),
        (
            good.replace("clusterName: test-cluster", "clusterName: \"\""),
            "clusterName must not be empty",
        ),
        (
            good.replace("snapshotLogs: 20000", "snapshotLogs: lots"),
            "snapshotLogs",
        ),
        (
            good.replace(
                "serviceClusterIPRange: 10.96.0.0/12",
                "serviceClusterIPRange: 10.0.0.0/8",
            ),
            "serviceClusterIPRange \"10.0.0.0/8\" is too large; for 32-bit addresses, the mask must be >= 12",
        ),
        (
            good.replace(
                "serviceNodePortRange: 30000-32767",
                "serviceNodePortRange: 32767-30000",
            ),
            "serviceNodePortRange \"32767-30000\" is not a port range such as 30000-32767",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad-{i}.yaml"));
        std::fs::write(&p, text).unwrap();
        let err = serve_fails(&p);
        assert!(err.contains(expected), "case {i}: expected {expected:?} in {err}");
        assert!(
            err.contains(&p.display().to_string()),
            "case {i}: names the file: {err}"
        );
    }
    // An admission configuration that does not parse stops it too, naming that file.
    let admission = dir.path().join("admission.yaml");
    std::fs::write(
        &admission,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults: {enforce: strictest}\n",
    )
    .unwrap();
    let p = dir.path().join("bad-admission.yaml");
    std::fs::write(
        &p,
        format!("{good}admissionConfigFile: {}\n", admission.display()),
    )
    .unwrap();
    let err = serve_fails(&p);
    assert!(
        err.contains(&format!(
            "{}: defaults.enforce: Invalid value: \"strictest\": must be one of privileged, baseline, restricted",
            admission.display()
        )),
        "{err}"
    );
    assert!(
        !dir.path().join("d1").exists(),
        "no data dir was created for a bad config"
    );
}

#[test]
fn serve_refuses_a_data_dir_that_is_corrupt_or_belongs_to_another_node() {
    let dir = tempfile::tempdir().unwrap();
    let members = vec![(
        1,
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    )];
    let data = dir.path().join("data");
    // Not a database: refuse instead of initialising over it.
    std::fs::create_dir_all(data.join("db")).unwrap();
    std::fs::write(data.join("db/precious.txt"), "keep me").unwrap();
    let cfg = dir.path().join("n1.yaml");
    let pki = make_pki(&dir.path().join("pki"), 2);
    std::fs::write(&cfg, config_yaml(1, &data, &members, &Options::default(), &pki)).unwrap();
    let err = serve_fails(&cfg);
    assert!(err.contains("no kuberaft database"), "{err}");
    assert_eq!(
        std::fs::read_to_string(data.join("db/precious.txt")).unwrap(),
        "keep me"
    );

    // A real data dir of node 1 ...
    std::fs::remove_dir_all(&data).unwrap();
    let mut c = Cluster::start(Options {
        nodes: 1,
        ..Options::default()
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(c.wait_leader(T));
    c.stop(0);
    let node_data = c.dir.path().join("node-1");
    // ... opened as node 2 of the same cluster is refused.
    let members2 = vec![(
        2,
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    )];
    let cfg2 = dir.path().join("n2.yaml");
    std::fs::write(
        &cfg2,
        config_yaml(2, &node_data, &members2, &Options::default(), &pki),
    )
    .unwrap();
    let err = serve_fails(&cfg2);
    assert!(err.contains("belongs to node 1"), "{err}");
    // A damaged database is refused, not reinitialised.
    std::fs::write(node_data.join("db/CURRENT"), "MANIFEST-999999\n").unwrap();
    let err = serve_fails(&c.replicas[0].config);
    assert!(err.contains("cannot open the database"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_of_another_cluster_is_refused_and_exits() {
    let mut c = Cluster::start(Options::default());
    c.wait_leader(T).await;
    // A fresh replica of cluster "intruder" that lists the real replicas as its peers.
    let dir = tempfile::tempdir().unwrap();
    let mut members: Vec<(u64, String, String)> = c
        .replicas
        .iter()
        .take(2)
        .map(|r| (r.id, r.peer_addr.clone(), r.api_addr.clone()))
        .collect();
    members.push((
        9,
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    ));
    let cfg = dir.path().join("intruder.yaml");
    let opts = Options {
        cluster_name: "intruder".into(),
        ..Options::default()
    };
    // Certificates of the same CA (an operator's mix-up, not an attacker: another CA's are
    // refused at the handshake, see tests/security.rs).
    c.pki
        .ensure_replica("node-9", &["127.0.0.1".into()], false)
        .unwrap();
    let text = config_yaml(9, &dir.path().join("data"), &members, &opts, &c.pki);
    std::fs::write(&cfg, text).unwrap();
    let err = serve_fails(&cfg);
    assert!(err.contains("another cluster"), "{err}");
    // The real cluster is unharmed.
    let leader = c.wait_leader(T).await;
    let mut kv = c.kv(leader).await;
    put(&mut kv, "/still/fine", b"1").await.unwrap();
    assert!(c.log(0).contains("another cluster") || c.log(1).contains("another cluster"));
}

/// A `cluster up` in the background, stopped (SIGTERM) when dropped.
struct UpCluster {
    child: std::process::Child,
    /// Its stdout, kept open: `cluster up` must be able to print while it stops the nodes.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
    kubeconfig: std::path::PathBuf,
}

impl UpCluster {
    /// Runs `cluster up` in `dir` and waits for its banner.
    fn start(dir: &std::path::Path, api: u16, peer: u16) -> UpCluster {
        use std::io::BufRead;
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(kuberaft_bin())
            .args(["cluster", "up", "--nodes", "3", "--dir"])
            .arg(dir)
            .args(["--api-port", &api.to_string(), "--peer-port", &peer.to_string()])
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("Ctrl-C") {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                let _ = child.wait();
                let err = std::fs::read_to_string(stderr.path()).unwrap_or_default();
                panic!("cluster up exited early (api {api}, peer {peer}):\n{err}");
            }
        }
        UpCluster {
            child,
            _stdout: out,
            kubeconfig: dir.join("kubeconfig"),
        }
    }

    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        outcome(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(args),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(ok, "kubectl {args:?}: {err}");
        out
    }
}

impl UpCluster {
    /// Stops every node as Ctrl-C would; returns how `cluster up` exited.
    fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        self.child.wait().unwrap()
    }
}

impl Drop for UpCluster {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restores_as_a_new_cluster_whose_clients_relist() {
    let dir = tempfile::tempdir().unwrap();
    let (old_dir, new_dir) = (dir.path().join("old"), dir.path().join("new"));
    let (api, peer) = ports();
    let old = UpCluster::start(&old_dir, api, peer);
    let kubeconfig = old.kubeconfig.to_str().unwrap().to_string();
    old.ok(&["create", "namespace", "shop"]);
    old.ok(&["-n", "shop", "create", "configmap", "app", "--from-literal=a=1"]);
    old.ok(&[
        "-n",
        "shop",
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=pw=s3cret",
    ]);
    let seen_rv: i64 = old
        .ok(&[
            "-n",
            "shop",
            "get",
            "configmap",
            "app",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .parse()
        .unwrap();

    // Online, from the replicas the kubeconfig names, as the admin over mutual TLS.
    let file = dir.path().join("backup.snap");
    let (ok, out, err) = run(&[
        "snapshot",
        "save",
        file.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("Snapshot saved at {}: revision ", file.display())),
        "{out}"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the backup is readable by others: {mode:o}");
    }
    assert!(!dir.path().join("backup.snap.part").exists());
    old.ok(&["-n", "shop", "create", "configmap", "after-the-backup"]);
    let old_name = std::fs::read_to_string(old_dir.join("node-1.yaml")).unwrap();
    let old_name = old_name
        .lines()
        .find_map(|l| l.strip_prefix("clusterName: "))
        .unwrap()
        .to_string();

    let (ok, out, err) = run(&["snapshot", "status", file.to_str().unwrap(), "-o", "json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["clusterName"], old_name.as_str(), "{status}");
    assert_eq!(status["formatVersion"], 1, "{status}");
    let revision = status["revision"].as_i64().unwrap();
    assert!(revision >= seen_rv, "{status}");
    assert!(status["keys"].as_u64().unwrap() > 10, "{status}");
    assert_eq!(
        status["sizeBytes"].as_u64().unwrap(),
        std::fs::metadata(&file).unwrap().len()
    );
    assert_eq!(status["sha256"].as_str().unwrap().len(), 64, "{status}");

    // A damaged file is refused by status and restore, and restore writes nothing.
    let bytes = std::fs::read(&file).unwrap();
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    for (what, bad) in [
        ("truncated", bytes[..bytes.len() - 100].to_vec()),
        ("flipped", flipped),
    ] {
        let path = dir.path().join(format!("{what}.snap"));
        std::fs::write(&path, bad).unwrap();
        let (ok, _, err) = run(&["snapshot", "status", path.to_str().unwrap()]);
        assert!(!ok && err.contains("is not a usable backup"), "{what}: {err}");
        let target = dir.path().join(format!("{what}-cluster"));
        let (ok, _, err) = run(&[
            "snapshot",
            "restore",
            path.to_str().unwrap(),
            "--dir",
            target.to_str().unwrap(),
        ]);
        assert!(!ok && err.contains("is not a usable backup"), "{what}: {err}");
        assert!(
            !target.exists(),
            "{what}: a refused restore left {}",
            target.display()
        );
    }

    // The Secret is sealed with the old cluster's key: a new cluster without it is refused
    // before anything is written...
    let restore = |extra: &[&str]| {
        let mut args = vec![
            "snapshot",
            "restore",
            file.to_str().unwrap(),
            "--dir",
            new_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let (new_api, new_peer) = (api + 3, peer + 3);
    let ports = [
        "--api-port".to_string(),
        new_api.to_string(),
        "--peer-port".to_string(),
        new_peer.to_string(),
    ];
    let ports: Vec<&str> = ports.iter().map(String::as_str).collect();
    let (ok, _, err) = restore(&ports);
    assert!(
        !ok && err.contains("/registry/core/secrets/shop/db") && err.contains("cannot be opened"),
        "{err}"
    );
    assert!(!new_dir.exists());
    // ...and with the old PKI copied over, it is restored.
    std::fs::create_dir_all(&new_dir).unwrap();
    let copied = Command::new("cp")
        .arg("-a")
        .arg(old_dir.join("pki"))
        .arg(new_dir.join("pki"))
        .status()
        .unwrap();
    assert!(copied.success());
    let (ok, out, err) = restore(&ports);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("at revision {}", revision + 1_000_000_000)),
        "{out}"
    );
    let (ok, _, err) = restore(&ports);
    assert!(!ok && err.contains("already holds a cluster"), "{err}");
    assert!(old.stop().success());

    // Node 2 of the new cluster also backs itself up on a schedule, keeping the newest two.
    let node2 = new_dir.join("node-2.yaml");
    let config = std::fs::read_to_string(&node2).unwrap();
    std::fs::write(
        &node2,
        format!("{config}backup:\n  intervalSeconds: 1\n  keep: 2\n  dir: backups\n"),
    )
    .unwrap();
    let new = UpCluster::start(&new_dir, new_api, new_peer);
    let new_name = std::fs::read_to_string(new_dir.join("node-1.yaml")).unwrap();
    assert!(!new_name.contains(&old_name), "a restore makes a new cluster");
    assert_eq!(
        new.ok(&[
            "-n",
            "shop",
            "get",
            "configmap",
            "app",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "1"
    );
    assert_eq!(
        new.ok(&["-n", "shop", "get", "secret", "db", "-o", "jsonpath={.data.pw}"]),
        "czNjcmV0"
    );
    let (ok, _, err) = new.kubectl(&["-n", "shop", "get", "configmap", "after-the-backup"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
    let created: i64 = new
        .ok(&[
            "-n",
            "shop",
            "create",
            "configmap",
            "new",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .parse()
        .unwrap();
    assert!(created > revision + 1_000_000_000, "{created}");
    // An informer resuming with a resourceVersion of the old cluster is told to re-list.
    let http = admin_http(&new_dir.join("pki"));
    let watch = http
        .get(format!(
            "https://127.0.0.1:{}/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion={seen_rv}",
            new_api + 1
        ))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap();
    let first_event = watch.text().await.unwrap_or_default();
    let event: serde_json::Value = serde_json::from_str(first_event.lines().next().unwrap_or("")).unwrap();
    assert_eq!(event["type"], "ERROR", "{first_event}");
    assert_eq!(event["object"]["code"], 410, "{first_event}");
    assert_eq!(event["object"]["reason"], "Expired", "{first_event}");
    let backups = || {
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(new_dir.join("backups"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    };
    let first = eventually(T, || async {
        let files = backups();
        if files.len() == 2 {
            Ok(files)
        } else {
            Err(format!("backups so far: {files:?}"))
        }
    })
    .await;
    // Later backups replace the oldest: never more than two.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let files = backups();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        !files.contains(&first[0]),
        "the oldest was not removed: {first:?} then {files:?}"
    );
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(name.contains("-node2-") && name.ends_with(".snap"), "{name}");
    }
    let (ok, out, err) = run(&["snapshot", "status", files[1].to_str().unwrap(), "-o", "json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(status["revision"].as_i64().unwrap() >= created, "{status}");
    assert_eq!(status["nodeId"], 2, "{status}");
    assert!(new.stop().success());
}

/// An HTTPS client that trusts the CA of the PKI in `pki` and speaks as its admin.
fn admin_http(pki: &std::path::Path) -> reqwest::Client {
    let pem = |f: &str| std::fs::read(pki.join(f)).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pem("ca.crt")).unwrap())
        .identity(
            reqwest::Identity::from_pem(
                &[pem("users/kuberaft-admin.crt"), pem("users/kuberaft-admin.key")].concat(),
            )
            .unwrap(),
        )
        .build()
        .unwrap()
}

/// The member that leads, as `member list` shows it.
fn leader_of(kubeconfig: &std::path::Path) -> Option<u64> {
    members(kubeconfig)
        .into_iter()
        .find(|m| m.1 == "leader")
        .map(|m| m.0)
}

/// Sends `signal` (`-KILL`, `-TERM`) to the `cluster up` replica `id` of the cluster in `dir`.
fn signal_node(dir: &std::path::Path, id: u64, signal: &str) {
    let config = dir.join(format!("node-{id}.yaml"));
    let sent = Command::new("pkill")
        .args([signal, "-f", config.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(sent.success(), "no replica {id} to signal in {}", dir.display());
}

/// A process that is killed when the test ends, also when it fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `kuberaft member ...` run against the cluster of `kubeconfig`: success, stdout, stderr.
fn member(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["member"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--kubeconfig", kubeconfig.to_str().unwrap()]);
    run(&all)
}

/// The member list as JSON: `(id, role, lag)` per member.
fn members(kubeconfig: &std::path::Path) -> Vec<(u64, String, Option<u64>)> {
    let (ok, out, err) = member(kubeconfig, &["list", "-o", "json"]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    rows.iter()
        .map(|r| {
            (
                r["id"].as_u64().unwrap(),
                r["role"].as_str().unwrap().to_string(),
                r["lag"].as_u64(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_added_promoted_and_removed_while_the_cluster_serves() {
    use kuberaft::config::{MemberConfig, ServeConfig};
    let dir = tempfile::tempdir().unwrap();
    let (api, peer) = ports();
    let cluster = UpCluster::start(dir.path(), api, peer);
    let kubeconfig = cluster.kubeconfig.clone();
    cluster.ok(&["create", "namespace", "shop"]);
    for i in 0..20 {
        cluster.ok(&["-n", "shop", "create", "configmap", &format!("c{i}")]);
    }
    let roles: Vec<String> = members(&kubeconfig).into_iter().map(|m| m.1).collect();
    assert_eq!(roles.iter().filter(|r| *r == "leader").count(), 1, "{roles:?}");
    assert_eq!(roles.len(), 3, "{roles:?}");

    // A learner the leader has never heard from is not promoted.
    let (ok, _, err) = member(
        &kubeconfig,
        &[
            "add",
            "--id",
            "5",
            "--peer-addr",
            "127.0.0.1:1",
            "--api-addr",
            "127.0.0.1:2",
        ],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = member(&kubeconfig, &["promote", "5"]);
    assert!(!ok && err.contains("node 5 has not caught up"), "{err}");
    let (ok, _, err) = member(&kubeconfig, &["remove", "5"]);
    assert!(ok, "{err}");
    let (ok, _, err) = member(&kubeconfig, &["promote", "9"]);
    assert!(!ok && err.contains("node 9 is not a member"), "{err}");

    // A fourth replica, made as on a new host: its certificates, a config that names only
    // itself, an empty data dir, and --join through any replica.
    let (ok, _, err) = run(&[
        "certs",
        "replica",
        "--dir",
        dir.path().join("pki").to_str().unwrap(),
        "--name",
        "node-4",
        "--host",
        "127.0.0.1",
    ]);
    assert!(ok, "{err}");
    let mut config = ServeConfig::load(&dir.path().join("node-3.yaml")).unwrap();
    let (api4, peer4) = (api + 3, peer + 3);
    config.id = 4;
    config.data_dir = dir.path().join("node-4");
    config.members = vec![MemberConfig {
        id: 4,
        peer_addr: format!("127.0.0.1:{peer4}"),
        api_addr: format!("127.0.0.1:{api4}"),
    }];
    let security = config.security.as_mut().unwrap();
    for path in [
        &mut security.serving_certificate,
        &mut security.serving_key,
        &mut security.peer_certificate,
        &mut security.peer_key,
    ] {
        *path = std::path::PathBuf::from(path.to_str().unwrap().replace("node-3", "node-4"));
    }
    let config_path = dir.path().join("node-4.yaml");
    std::fs::write(&config_path, config.to_yaml().unwrap()).unwrap();
    let log = std::fs::File::create(dir.path().join("node-4.log")).unwrap();
    let _node4 = KillOnDrop(
        Command::new(kuberaft_bin())
            .args(["serve", "--config", config_path.to_str().unwrap(), "--join"])
            .arg(format!("https://127.0.0.1:{}", peer + 1))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let log4 = dir.path().join("node-4.log");
    eventually(T, || async {
        let list = members(&kubeconfig);
        match list.iter().find(|m| m.0 == 4) {
            Some((_, role, Some(0))) if role == "learner" => Ok(()),
            other => Err(format!(
                "node 4: {other:?} in {list:?}; its log:\n{}",
                std::fs::read_to_string(&log4).unwrap_or_default()
            )),
        }
    })
    .await;
    // The learner serves reads (and forwards writes) like any replica.
    let on4 = |args: &[&str]| {
        let mut all = vec!["--server".to_string(), format!("https://127.0.0.1:{api4}")];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        cluster.kubectl(&all)
    };
    let (ok, listed, err) = on4(&["-n", "shop", "get", "configmaps", "-o", "name"]);
    assert!(ok, "{err}");
    assert_eq!(
        listed.lines().filter(|l| l.starts_with("configmap/c")).count(),
        20,
        "{listed}"
    );
    let (ok, _, err) = on4(&["-n", "shop", "create", "configmap", "from-the-learner"]);
    assert!(ok, "{err}");
    // The `default/kubernetes` endpoints follow the members: the learner serves the API too.
    let endpoint_ports = || {
        let (ok, out, err) = on4(&["get", "endpoints", "kubernetes", "-o", "json"]);
        assert!(ok, "{err}");
        let endpoints: serde_json::Value = serde_json::from_str(&out).unwrap();
        let mut ports: Vec<u64> = endpoints["subsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ports"][0]["port"].as_u64().unwrap())
            .collect();
        ports.sort_unstable();
        ports
    };
    let all_four: Vec<u64> = (0..4).map(|i| u64::from(api) + i).collect();
    eventually(T, || async {
        let ports = endpoint_ports();
        (ports == all_four).then_some(()).ok_or(format!("{ports:?}"))
    })
    .await;
    let (ok, status, err) = run(&[
        "endpoint",
        "status",
        "-o",
        "json",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&status).unwrap();
    assert!(
        rows.iter()
            .any(|r| r["id"] == 4 && r["role"] == "learner" && r["lag"].is_u64()),
        "{status}"
    );

    let (ok, _, err) = member(&kubeconfig, &["promote", "4"]);
    assert!(ok, "{err}");
    assert!(
        members(&kubeconfig).contains(&(4, "voter".into(), Some(0)))
            || members(&kubeconfig).iter().any(|m| m.0 == 4 && m.1 == "leader"),
        "{:?}",
        members(&kubeconfig)
    );

    // Removing a voter: it stops serving and says why, also when restarted on its old data.
    let (ok, _, err) = member(&kubeconfig, &["remove", "1"]);
    assert!(ok, "{err}");
    let node1_log = dir.path().join("node-1.log");
    eventually(T, || async {
        let log = std::fs::read_to_string(&node1_log).unwrap_or_default();
        if log.contains("node 1 was removed from the cluster") {
            Ok(())
        } else {
            Err("node 1 still runs".to_string())
        }
    })
    .await;
    eventually(T, || async {
        let ports = endpoint_ports();
        (ports == all_four[1..]).then_some(()).ok_or(format!("{ports:?}"))
    })
    .await;
    let (ok, _, err) = run(&[
        "serve",
        "--config",
        dir.path().join("node-1.yaml").to_str().unwrap(),
    ]);
    assert!(
        !ok && err.contains("node 1 was removed from the cluster"),
        "{err}"
    );

    // With a follower down, removing the other one would leave it and node 4: no quorum.
    // Removing the one that is down works. (A follower: a request forwarded to a leader that
    // was just killed fails until the others notice, which is not what this checks.)
    let (down, up) = if leader_of(&kubeconfig) == Some(2) {
        (3u64, 2u64)
    } else {
        (2, 3)
    };
    signal_node(dir.path(), down, "-KILL");
    let via4 = [
        "--endpoints".to_string(),
        format!("127.0.0.1:{peer4}"),
        "--kubeconfig".to_string(),
        kubeconfig.to_str().unwrap().to_string(),
    ];
    let via4: Vec<&str> = via4.iter().map(String::as_str).collect();
    let admin_via_node4 = |args: &[&str]| run(&[args, &via4[..]].concat());
    let (ok, _, err) = admin_via_node4(&["member", "remove", &up.to_string()]);
    assert!(
        !ok && err.contains(&format!("removing node {up} would lose quorum")),
        "{err}"
    );
    let (ok, _, err) = admin_via_node4(&["member", "remove", &down.to_string()]);
    assert!(ok, "{err}");
    let (ok, _, err) = on4(&["-n", "shop", "create", "configmap", "after-the-removals"]);
    assert!(ok, "{err}");
    let (ok, out, err) = admin_via_node4(&["member", "list", "-o", "json"]);
    assert!(ok, "{err}");
    let ids: Vec<u64> = serde_json::from_str::<Vec<serde_json::Value>>(&out)
        .unwrap()
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [up, 4], "{out}");
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_moves_on_request_and_on_a_graceful_stop_without_failed_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (api, peer) = ports();
    let cluster = UpCluster::start(dir.path(), api, peer);
    let kubeconfig = cluster.kubeconfig.clone();
    let leader = || leader_of(&kubeconfig);
    let first = leader().expect("a leader");
    let to = if first == 1 { 2 } else { 1 };
    let (ok, out, err) = run(&[
        "move-leader",
        "--to",
        &to.to_string(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("leadership moved from node {first} to node {to} in ")),
        "{out}"
    );
    assert_eq!(leader(), Some(to));
    let (ok, _, err) = run(&[
        "move-leader",
        "--to",
        &to.to_string(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains(&format!("node {to} already leads")), "{err}");

    // Writes through another replica go on while the leader stops gracefully: it hands
    // leadership over first, and no write fails.
    let writer_node = to % 3 + 1;
    let http = admin_http(&dir.path().join("pki"));
    let url = format!(
        "https://127.0.0.1:{}/api/v1/namespaces/default/configmaps",
        api + writer_node as u16 - 1
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                i += 1;
                let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("w{i}")}});
                match http.post(&url).json(&body).send().await {
                    Ok(r) if r.status() == 201 => ok += 1,
                    Ok(r) => failed.push(format!("{}: {}", r.status(), r.text().await.unwrap_or_default())),
                    Err(e) => failed.push(e.to_string()),
                }
            }
            (ok, failed)
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal_node(dir.path(), to, "-TERM");
    let node_log = dir.path().join(format!("node-{to}.log"));
    eventually(T, || async {
        let log = std::fs::read_to_string(&node_log).unwrap_or_default();
        if log.contains("handed leadership over before stopping") {
            Ok(())
        } else {
            Err(format!("node {to} has not handed over"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (written, failed) = writer.await.unwrap();
    assert!(failed.is_empty(), "{} writes failed: {failed:?}", failed.len());
    assert!(written > 5, "{written}");
    let others = format!(
        "127.0.0.1:{},127.0.0.1:{}",
        peer + (to % 3) as u16,
        peer + ((to + 1) % 3) as u16
    );
    let (ok, out, err) = run(&[
        "member",
        "list",
        "-o",
        "json",
        "--endpoints",
        &others,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let new_leader = rows.iter().find(|r| r["role"] == "leader").expect(&out);
    assert_ne!(new_leader["id"], to, "{out}");
    drop(cluster);
}

/// Three (and then four) "hosts": network namespaces on a bridge, each with its own address,
/// torn down when dropped. `None` where the machine does not allow it (not root, no `ip`).
struct Hosts {
    bridge: String,
    namespaces: Vec<String>,
    subnet: String,
    processes: Vec<std::process::Child>,
}

impl Hosts {
    fn ip(args: &[&str]) -> Result<(), String> {
        let out = Command::new("ip")
            .args(args)
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn create(count: usize) -> Result<Hosts, String> {
        let tag = std::process::id() % 10_000;
        let mut hosts = Hosts {
            bridge: format!("krbr{tag}"),
            namespaces: Vec::new(),
            subnet: format!("10.213.{}", 20 + std::process::id() % 200),
            processes: Vec::new(),
        };
        let bridge = hosts.bridge.clone();
        Hosts::ip(&["link", "add", &bridge, "type", "bridge"])?;
        Hosts::ip(&["addr", "add", &format!("{}.254/24", hosts.subnet), "dev", &bridge])?;
        Hosts::ip(&["link", "set", &bridge, "up"])?;
        for i in 1..=count {
            let ns = format!("kr{tag}-{i}");
            Hosts::ip(&["netns", "add", &ns])?;
            hosts.namespaces.push(ns.clone());
            let (outside, inside) = (format!("krv{tag}h{i}"), format!("krv{tag}n{i}"));
            Hosts::ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside])?;
            Hosts::ip(&["link", "set", &outside, "master", &bridge])?;
            Hosts::ip(&["link", "set", &outside, "up"])?;
            Hosts::ip(&["link", "set", &inside, "netns", &ns])?;
            let addr = format!("{}/24", hosts.addr(i));
            Hosts::ip(&["-n", &ns, "addr", "add", &addr, "dev", &inside])?;
            Hosts::ip(&["-n", &ns, "link", "set", &inside, "up"])?;
            Hosts::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// Host `i`'s address (1-based).
    fn addr(&self, i: usize) -> String {
        format!("{}.{i}", self.subnet)
    }

    /// Runs `kuberaft serve` with `args` on host `i`, its stderr in `log`.
    fn serve(&mut self, i: usize, args: &[&str], log: &std::path::Path) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.namespaces[i - 1]])
            .arg(kuberaft_bin())
            .arg("serve")
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        self.processes.push(child);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for p in &mut self.processes {
            let _ = p.kill();
            let _ = p.wait();
        }
        for ns in &self.namespaces {
            let _ = Hosts::ip(&["netns", "del", ns]);
        }
        let _ = Hosts::ip(&["link", "del", &self.bridge]);
    }
}

/// The README's multi-host walk-through on network namespaces: `kuberaft certs` for three
/// hosts by address, the shipped `deploy/` configs with the hosts' addresses, kubectl through
/// the kubeconfig `certs kubeconfig` writes, then a fourth replica joining as a learner and
/// promoted, and a backup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_on_network_namespaces_serve_join_and_back_up() {
    let mut hosts = match Hosts::create(4) {
        Ok(h) => h,
        Err(why) => {
            eprintln!(
                "skipping the network-namespace test: this machine cannot create network namespaces ({why})"
            );
            return;
        }
    };
    let addrs: Vec<String> = (0..=4).map(|i| hosts.addr(i)).collect();
    let addr = |i: usize| addrs[i].clone();
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let pki_s = pki.to_str().unwrap();
    let kuberaft = |args: &[&str]| {
        let (ok, out, err) = run(args);
        assert!(ok, "kuberaft {args:?}: {err}");
        out
    };
    kuberaft(&["certs", "ca", "--dir", pki_s]);
    for i in 1..=4 {
        kuberaft(&[
            "certs",
            "replica",
            "--dir",
            pki_s,
            "--name",
            &format!("node-{i}"),
            "--host",
            &addr(i),
        ]);
    }
    kuberaft(&[
        "certs",
        "client",
        "--dir",
        pki_s,
        "--user",
        "ops-admin",
        "--group",
        "system:masters",
    ]);
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let servers: Vec<String> = (1..=3).map(|i| format!("https://{}:6443", addr(i))).collect();
    let mut args = vec![
        "certs",
        "kubeconfig",
        "--dir",
        pki_s,
        "--user",
        "ops-admin",
        "--out",
    ];
    args.push(kubeconfig.to_str().unwrap());
    for s in &servers {
        args.extend(["--server", s.as_str()]);
    }
    kuberaft(&args);
    // The shipped configs, with this machine's addresses, directories and audit log.
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    std::fs::copy(
        deploy.join("audit-policy.yaml"),
        dir.path().join("audit-policy.yaml"),
    )
    .unwrap();
    let config_of = |i: usize, template: usize| {
        let text = std::fs::read_to_string(deploy.join(format!("node-{template}.yaml"))).unwrap();
        let mut text = text
            .replace(
                "/var/lib/kuberaft",
                dir.path().join(format!("data-{i}")).to_str().unwrap(),
            )
            .replace(
                "/var/log/kuberaft",
                dir.path().join(format!("log-{i}")).to_str().unwrap(),
            );
        for h in 1..=4 {
            text = text.replace(&format!("10.0.0.{h}:"), &format!("{}:", addr(h)));
        }
        text
    };
    for i in 1..=3 {
        std::fs::write(dir.path().join(format!("node-{i}.yaml")), config_of(i, i)).unwrap();
    }
    for i in 1..=3 {
        let config = dir.path().join(format!("node-{i}.yaml"));
        hosts.serve(
            i,
            &["--config", config.to_str().unwrap()],
            &dir.path().join(format!("node-{i}.log")),
        );
    }
    let kubectl = |args: &[&str]| {
        outcome(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(args),
        )
    };
    eventually(T, || async {
        match kubectl(&["get", "namespace", "kube-system"]) {
            (true, _, _) => Ok(()),
            (false, _, err) => Err(err),
        }
    })
    .await;
    let (ok, _, err) = kubectl(&["create", "namespace", "shop"]);
    assert!(ok, "{err}");
    let (ok, _, err) = kubectl(&["-n", "shop", "create", "configmap", "app", "--from-literal=a=1"]);
    assert!(ok, "{err}");
    let endpoints = (1..=3)
        .map(|i| format!("{}:7443", addr(i)))
        .collect::<Vec<_>>()
        .join(",");
    let admin = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--endpoints",
            &endpoints,
        ]);
        run(&all)
    };
    let (ok, out, err) = admin(&["endpoint", "status", "-o", "json"]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(rows.iter().filter(|r| r["role"] == "leader").count(), 1, "{out}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["apiAddr"], format!("{}:6443", addr(i + 1)), "{out}");
    }

    // A fourth host joins as a learner, catches up and is promoted.
    let config4 = dir.path().join("node-4.yaml");
    std::fs::write(&config4, config_of(4, 4)).unwrap();
    let seed = format!("https://{}:7443", addr(2));
    hosts.serve(
        4,
        &["--config", config4.to_str().unwrap(), "--join", &seed],
        &dir.path().join("node-4.log"),
    );
    eventually(T, || async {
        let (ok, out, err) = admin(&["member", "list", "-o", "json"]);
        let rows: Vec<serde_json::Value> = serde_json::from_str(&out).map_err(|_| err.clone())?;
        let learner = rows.iter().find(|r| r["id"] == 4);
        match learner {
            Some(r) if ok && r["role"] == "learner" && r["lag"] == 0 => Ok(()),
            other => Err(format!("{other:?}: {out} {err}")),
        }
    })
    .await;
    let (ok, _, err) = admin(&["member", "promote", "4"]);
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(&[
        "--server",
        &format!("https://{}:6443", addr(4)),
        "-n",
        "shop",
        "get",
        "configmap",
        "app",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert!(ok && out == "1", "{out} {err}");

    // A backup from the hosts, verified.
    let backup = dir.path().join("backup.snap");
    let (ok, _, err) = admin(&["snapshot", "save", backup.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, out, err) = run(&["snapshot", "status", backup.to_str().unwrap(), "-o", "json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["clusterName"], "kuberaft-prod", "{out}");
}
