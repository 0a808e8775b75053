//! The CI chaos run: a short seeded `kuberaft-chaos run` with kills, a pause, a partition, a
//! leadership transfer and the replacement of a wiped member against a real three-replica
//! cluster. It must find no violation, and the run must really
//! have injected those faults and acknowledged writes throughout.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn seeded_short_run_has_no_violations() {
    let chaos = PathBuf::from(env!("CARGO_BIN_EXE_kuberaft-chaos"));
    let kuberaft = chaos.with_file_name("kuberaft");
    assert!(
        kuberaft.is_file(),
        "{} is missing: run `cargo test --workspace` so the server binary is built",
        kuberaft.display()
    );
    let out = tempfile::tempdir().expect("temporary directory");
    let status = Command::new(&chaos)
        .args([
            "run",
            "--seed",
            "42",
            "--duration",
            "100s",
            "--faults",
            "kill,pause,partition,transfer,replace",
        ])
        .args(["--base-port", "24600", "--out"])
        .arg(out.path())
        .status()
        .expect("kuberaft-chaos runs");
    let summary = std::fs::read_to_string(out.path().join("summary.md")).unwrap_or_default();
    assert!(status.success(), "kuberaft-chaos failed ({status}):\n{summary}");

    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("result.json")).expect("result.json"))
            .expect("JSON");
    assert_eq!(result["passed"], true);
    assert_eq!(result["violations"].as_array().map(Vec::len), Some(0));
    assert_eq!(result["inconclusive_registers"], 0, "{summary}");
    let faults = result["faults"].as_array().expect("faults");
    let count = |kind: &str| faults.iter().filter(|f| f["kind"] == kind).count();
    assert!(count("kill") >= 2, "at least two kills: {summary}");
    for kind in ["pause", "partition", "transfer", "replace"] {
        assert!(count(kind) >= 1, "no {kind} fault: {summary}");
    }
    assert!(
        faults
            .iter()
            .any(|f| f["kind"] == "kill" && f["hit_leader"] == true),
        "a leader kill: {summary}"
    );
    // Every fault was followed by a successful write.
    let recovery = result["availability"]["recovery_s"].as_array().expect("recovery");
    assert!(recovery.iter().all(|r| r.is_number()), "{summary}");
    let counts = &result["counts"];
    for field in [
        "register_writes_ok",
        "churn_ops",
        "lease_writes",
        "watch_events",
        "initial_watches",
        "lists",
    ] {
        assert!(counts[field].as_u64().unwrap_or(0) > 0, "no {field}: {summary}");
    }
    assert!(
        result["availability"]["ok_writes"].as_u64().unwrap_or(0) > 200,
        "{summary}"
    );
    assert!(result["converged"].is_array(), "replicas converged: {summary}");
    assert!(out.path().join("chart.svg").is_file());
}
