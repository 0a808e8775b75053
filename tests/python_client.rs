//! The official Kubernetes Python client (`pip install kubernetes`) against a real
//! three-replica cluster with security on, as its users run it: `tests/python/client_e2e.py`
//! loads the cluster's kubeconfig (client certificates, the CA verified) and goes through CRUD,
//! every patch type, server-side apply, `watch.Watch().stream` from a resourceVersion, an
//! informer's list-then-watch, `utils.create_from_yaml` and the dynamic client, asserting what
//! kube-apiserver answers. It runs once under each client version of `tests/python/clients`
//! (a pinned 36.x and the latest), each in its own virtualenv that `./dev.sh test` makes; a
//! missing virtualenv fails the test rather than skipping it.

mod support;

use support::kube::Kube;
use support::python::{client_versions, python_for, run_script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_sees_what_kube_apiserver_answers() {
    let versions = client_versions();
    assert!(versions.len() >= 2, "a pinned 36.x and the latest: {versions:?}");
    let pythons: Vec<std::path::PathBuf> = versions.iter().map(|v| python_for(v)).collect();
    let k = Kube::start().await;
    let mut failed = Vec::new();
    for (version, python) in versions.iter().zip(&pythons) {
        let prefix = format!("py{}", version.replace('.', "-"));
        let (ok, output) = run_script(&k, python, "client_e2e.py", &prefix).await;
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
