//! The dependency rules of `src/lib.rs`, checked on the source: which top-level module may name
//! which, that the modules import each other in no cycle, and that only the storage facade (and
//! process assembly) talks to Raft. A rule broken by a new import fails here with the file that
//! broke it. No exception is allowed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Modules that must never be named by the module on the left.
#[rustfmt::skip]
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("scheme", &["admission", "apiextensions", "audit", "authentication", "authorization", "cli", "config", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "machinery", "pki", "proxy", "registry", "server", "store", "webhook"]),
    ("machinery", &["admission", "apiextensions", "audit", "authentication", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "pki", "proxy", "registry", "server", "store", "webhook"]),
    ("pki", &["admission", "apiextensions", "audit", "authentication", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "proxy", "registry", "server", "store", "webhook"]),
    ("store", &["admission", "apiextensions", "audit", "authentication", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "pki", "proxy", "registry", "server", "webhook"]),
    ("audit", &["admission", "apiextensions", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "pki", "proxy", "registry", "server", "store", "webhook"]),
    ("authentication", &["admission", "apiextensions", "audit", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "proxy", "registry", "server", "webhook"]),
    ("authorization", &["admission", "apiextensions", "audit", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "pki", "proxy", "registry", "server", "webhook"]),
    ("cel", &["admission", "apiextensions", "audit", "authentication", "authorization", "cli", "config", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "pki", "proxy", "registry", "server", "store", "webhook"]),
    ("admission", &["apiextensions", "audit", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "proxy", "registry", "server"]),
    ("kinds", &["audit", "cli", "controllers", "endpoints", "filters", "server"]),
    ("registry", &["apiextensions", "audit", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "proxy", "server"]),
    ("apiextensions", &["admission", "audit", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "proxy", "server"]),
    ("controllers", &["audit", "cli", "endpoints", "filters", "server"]),
    ("endpoints", &["audit", "cli", "controllers", "filters", "flowcontrol", "server"]),
    ("filters", &["cli", "controllers", "server"]),
    ("webhook", &["admission", "aggregator", "apiextensions", "audit", "authentication", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "proxy", "registry", "server"]),
    ("aggregator", &["admission", "apiextensions", "audit", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "registry", "server"]),
    ("proxy", &["admission", "aggregator", "apiextensions", "audit", "authentication", "authorization", "cel", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "pki", "registry", "server", "store", "webhook"]),
    ("flowcontrol", &["admission", "aggregator", "apiextensions", "audit", "authentication", "authorization", "cel", "cli", "config", "controllers", "endpoints", "filters", "kinds", "pki", "proxy", "registry", "server", "webhook"]),
    ("config", &["admission", "aggregator", "apiextensions", "audit", "authentication", "authorization", "cli", "controllers", "endpoints", "filters", "flowcontrol", "kinds", "machinery", "pki", "proxy", "registry", "scheme", "server", "store", "webhook"]),
];

/// The only modules that may name the Raft or protobuf crates.
const RAFT_ALLOWED: &[&str] = &["store", "server", "config", "cli"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source dir") {
        let path = entry.expect("a dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`store` for `src/store/cacher.rs`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// Every source file with its top-level module and its code (comment lines left out).
fn modules() -> Vec<(PathBuf, String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 50, "found only {} files", files.len());
    files
        .into_iter()
        .map(|file| {
            let module = module_of(&src, &file);
            let text = std::fs::read_to_string(&file).expect("readable source");
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            (file, module, code)
        })
        .collect()
}

/// Whether `code` names the top-level module `to`.
fn names(code: &str, to: &str) -> bool {
    code.contains(&format!("crate::{to}::")) || code.contains(&format!("crate::{to};"))
}

#[test]
fn modules_import_each_other_in_no_cycle() {
    let all = modules();
    let tops: BTreeSet<String> = all.iter().map(|(_, m, _)| m.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, from, code) in &all {
        for to in tops
            .iter()
            .filter(|t| *t != from && !["lib", "main"].contains(&t.as_str()))
        {
            if names(code, to) {
                edges.entry(from.clone()).or_default().insert(to.clone());
            }
        }
    }
    // Depth-first search; a module met again while on the path closes a cycle.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in &tops {
        let cycle = visit(m, &edges, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "an import cycle: {}",
            cycle.unwrap_or_default().join(" → ")
        );
    }
}

#[test]
fn modules_import_only_downward() {
    let mut broken = Vec::new();
    let mut raft = Vec::new();
    for (file, module, code) in modules() {
        for (from, forbidden) in FORBIDDEN {
            if *from != module {
                continue;
            }
            for to in *forbidden {
                if names(&code, to) {
                    broken.push(format!("{} ({from}) imports {to}", file.display()));
                }
            }
        }
        if !RAFT_ALLOWED.contains(&module.as_str())
            && (code.contains("kuberaft_raft")
                || code.contains("kuberaft_proto")
                || code.contains("kuberaft_storage"))
        {
            raft.push(file.display().to_string());
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the layer rules:\n{}",
        broken.join("\n")
    );
    assert!(
        raft.is_empty(),
        "only the storage facade may name Raft or its protocol:\n{}",
        raft.join("\n")
    );
}
