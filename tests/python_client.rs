//! The official Kubernetes Python client (`pip install kubernetes`) against a real
//! three-replica cluster with security on, as its users run it: `tests/python/client_e2e.py`
//! loads the cluster's kubeconfig (client certificates, the CA verified) and goes through CRUD,
//! every patch type, server-side apply, `watch.Watch().stream` from a resourceVersion, an
//! informer's list-then-watch, `utils.create_from_yaml` and the dynamic client, asserting what
//! kube-apiserver answers. It runs once under each client version of `tests/python/clients`
//! (a pinned 36.x and the latest), each in its own virtualenv that `./dev.sh test` makes; a
//! missing virtualenv fails the test rather than skipping it.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use support::kube::Kube;

/// The client versions, one `kubernetes==VERSION` a line; dev.sh reads the same file.
const CLIENTS: &str = include_str!("python/clients");

/// How long one run of the script may take (it takes about half a minute).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

/// The versions listed in [`CLIENTS`].
fn client_versions() -> Vec<&'static str> {
    CLIENTS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.strip_prefix("kubernetes==")
                .unwrap_or_else(|| panic!("tests/python/clients: {l:?} is not kubernetes==VERSION"))
        })
        .collect()
}

/// Where dev.sh makes the virtualenvs: `KUBERAFT_PYTHON_CLIENTS` (dev.sh sets it), else
/// `python-clients/` in the cargo target dir this test was built in.
fn virtualenvs() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUBERAFT_PYTHON_CLIENTS") {
        return PathBuf::from(dir);
    }
    let bin = support::kuberaft_bin();
    bin.parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} has no target dir", bin.display()))
        .join("python-clients")
}

/// The Python interpreter of the virtualenv that holds client `version`.
fn python_for(version: &str) -> PathBuf {
    let python = virtualenvs()
        .join(format!("kubernetes-{version}"))
        .join("bin")
        .join("python");
    assert!(
        python.exists(),
        "the Python client kubernetes=={version} is not installed ({} is missing): run ./dev.sh test, \
         which makes one virtualenv per version of tests/python/clients",
        python.display()
    );
    python
}

/// Runs the script under `python` against the cluster: (succeeded, everything it printed).
async fn run_script(k: &Kube, python: &Path, prefix: &str) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/client_e2e.py");
    let log = k.cluster.dir.path().join(format!("{prefix}.log"));
    let out = std::fs::File::create(&log).expect("the script's log");
    let mut child = tokio::process::Command::new(python)
        .arg(&script)
        .arg(&k.kubeconfig)
        .arg(prefix)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("the script's log"))
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", python.display()));
    let ok = match tokio::time::timeout(SCRIPT_TIMEOUT, child.wait()).await {
        Ok(status) => status.expect("wait for the script").success(),
        Err(_) => {
            let _ = child.kill().await;
            false
        }
    };
    (ok, std::fs::read_to_string(&log).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_sees_what_kube_apiserver_answers() {
    let versions = client_versions();
    assert!(versions.len() >= 2, "a pinned 36.x and the latest: {versions:?}");
    let pythons: Vec<PathBuf> = versions.iter().map(|v| python_for(v)).collect();
    let k = Kube::start().await;
    let mut failed = Vec::new();
    for (version, python) in versions.iter().zip(&pythons) {
        let prefix = format!("py{}", version.replace('.', "-"));
        let (ok, output) = run_script(&k, python, &prefix).await;
        assert!(
            output.starts_with(&format!("kubernetes client {version},")),
            "the virtualenv of {version} runs another client:\n{output}"
        );
        if !ok {
            failed.push(format!("=== kubernetes=={version} ===\n{output}"));
        }
    }
    assert!(
        failed.is_empty(),
        "the Python client saw differences from kube-apiserver:\n{}{}",
        failed.join("\n"),
        k.cluster.log_tails(20)
    );
}
