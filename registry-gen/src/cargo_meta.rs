//! Finds the pinned input crates on disk through `cargo metadata`.
//!
//! The generator reads the source of `k8s-pb` and `k8s-openapi` as data, so it needs the exact
//! directories cargo unpacked for the versions this crate depends on, plus the workspace root to
//! know where the committed table lives.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// One input crate as resolved for `registry-gen`.
#[derive(Debug, Clone)]
pub struct InputCrate {
    /// The resolved version, recorded in the table's `source` block.
    pub version: String,
    /// The directory holding the crate's `Cargo.toml` and `src/`.
    pub root: PathBuf,
}

/// Where the generator's inputs and output live.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The repository root, the parent of `registry-gen/` (the committed table is under
    /// `server/src/machinery/`).
    pub workspace_root: PathBuf,
    /// The `k8s-pb` crate (prost-generated messages with Go markers in doc comments).
    pub k8s_pb: InputCrate,
    /// The `k8s-openapi` crate (its source is scanned to check the schemars roots are complete).
    pub k8s_openapi: InputCrate,
}

/// The host triple, so `cargo metadata` only needs the packages a build on this machine fetched.
fn host_triple() -> Result<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let out = Command::new(&rustc)
        .arg("-vV")
        .output()
        .with_context(|| format!("running `{rustc} -vV`"))?;
    if !out.status.success() {
        bail!("`{rustc} -vV` failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_string())
        .ok_or_else(|| anyhow!("`{rustc} -vV` printed no host line"))
}

/// Runs `cargo metadata` for this crate's manifest and picks out the two input crates.
pub fn locate() -> Result<Inputs> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            &host_triple()?,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .with_context(|| format!("running `{cargo} metadata`"))?;
    if !out.status.success() {
        bail!(
            "`cargo metadata` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("parsing `cargo metadata` output")?;
    let workspace_root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| anyhow!("registry-gen has no parent directory"))?;
    let packages = meta["packages"]
        .as_array()
        .ok_or_else(|| anyhow!("`cargo metadata` has no packages"))?;
    let by_id = |id: &str| packages.iter().find(|p| p["id"].as_str() == Some(id));
    let me = packages
        .iter()
        .find(|p| p["name"] == "registry-gen")
        .and_then(|p| p["id"].as_str())
        .ok_or_else(|| anyhow!("`cargo metadata` does not list registry-gen"))?;
    let node = meta["resolve"]["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["id"].as_str() == Some(me)))
        .ok_or_else(|| anyhow!("`cargo metadata` has no resolve node for registry-gen"))?;
    let deps: Vec<&Value> = node["deps"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|d| d["pkg"].as_str().and_then(by_id))
                .collect()
        })
        .unwrap_or_default();
    let find = |name: &str| -> Result<InputCrate> {
        let pkg = deps
            .iter()
            .find(|p| p["name"] == name)
            .ok_or_else(|| anyhow!("registry-gen does not depend on {name}"))?;
        let manifest = pkg["manifest_path"]
            .as_str()
            .ok_or_else(|| anyhow!("{name} has no manifest_path"))?;
        let root = Path::new(manifest)
            .parent()
            .ok_or_else(|| anyhow!("{name} manifest path {manifest} has no parent"))?
            .to_path_buf();
        let version = pkg["version"]
            .as_str()
            .ok_or_else(|| anyhow!("{name} has no version"))?;
        Ok(InputCrate {
            version: version.to_string(),
            root,
        })
    };
    Ok(Inputs {
        workspace_root,
        k8s_pb: find("k8s-pb")?,
        k8s_openapi: find("k8s-openapi")?,
    })
}
