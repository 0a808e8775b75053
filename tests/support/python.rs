//! Running the Python end-to-end scripts of `tests/python/` against a cluster, under the
//! virtualenvs `./dev.sh test` makes: one per official client version of
//! `tests/python/clients`, each also holding the packages of `tests/python/requirements`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::kube::Kube;

/// The client versions, one `kubernetes==VERSION` a line; dev.sh reads the same file.
const CLIENTS: &str = include_str!("../python/clients");

/// How long one run of a script may take.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

/// The versions listed in [`CLIENTS`].
pub fn client_versions() -> Vec<&'static str> {
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
    let bin = super::kuberaft_bin();
    bin.parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} has no target dir", bin.display()))
        .join("python-clients")
}

/// The Python interpreter of the virtualenv that holds client `version` (a missing one fails
/// the test rather than skipping it).
pub fn python_for(version: &str) -> PathBuf {
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

/// Runs `tests/python/<script>` under `python` against the cluster with its kubeconfig and
/// `prefix` as arguments: (succeeded, everything it printed).
pub async fn run_script(k: &Kube, python: &Path, script: &str, prefix: &str) -> (bool, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/python")
        .join(script);
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
