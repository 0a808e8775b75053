//! `registry-gen`: regenerates `server/src/machinery/type_facts.json`, the project's table of
//! built-in Kubernetes type facts (protobuf tags and kinds, Go-embedded fields, and the
//! list/map/struct/patch markers used by strategic merge patch and server-side apply).
//!
//! Inputs are the pinned crates `k8s-pb` (prost messages of Kubernetes 1.35 with the Go
//! markers kept in doc comments) and `k8s-openapi` (JSON property names through schemars).
//! See `/work/shared/TYPE-REGISTRY.md` for why these sources.
//!
//! Usage: `registry-gen` writes the table; `registry-gen --check` fails if the committed table
//! differs from a fresh regeneration. It is a workspace of its own (its `syn` features would
//! otherwise change the main build's): `cargo run --manifest-path registry-gen/Cargo.toml`.

mod cargo_meta;
mod facts;
mod openapi;
mod proto;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

/// Where the table lives, relative to the workspace root.
const OUTPUT: &str = "server/src/machinery/type_facts.json";

/// A regenerated table and where it belongs.
struct Generated {
    path: PathBuf,
    text: String,
    stats: facts::Stats,
}

/// Regenerates the table in memory from the pinned crates.
fn generate() -> Result<Generated> {
    let inputs = cargo_meta::locate()?;
    let msgs = proto::parse_crate(&inputs.k8s_pb.root)?;
    let defs = openapi::definitions()?;
    openapi::check_complete(&inputs.k8s_openapi.root, &defs)?;
    let source = facts::Source {
        k8s_openapi: inputs.k8s_openapi.version.clone(),
        feature: openapi::FEATURE.to_string(),
        k8s_pb: inputs.k8s_pb.version.clone(),
    };
    let (table, stats) = facts::build(&msgs, &defs, &source)?;
    if !stats.unmatched_fields.is_empty() || !stats.uncovered_properties.is_empty() {
        bail!(
            "incomplete join: proto fields without a JSON property {:?}, properties without a proto field {:?}",
            stats.unmatched_fields,
            stats.uncovered_properties
        );
    }
    Ok(Generated {
        path: inputs.workspace_root.join(OUTPUT),
        text: facts::render(&table),
        stats,
    })
}

/// Describes the first line where `committed` and `fresh` differ, or `None` if equal.
fn first_difference(committed: &str, fresh: &str) -> Option<String> {
    if committed == fresh {
        return None;
    }
    let mut a = committed.lines();
    let mut b = fresh.lines();
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (x, y) => {
                return Some(format!(
                    "line {line}: committed {:?}, regenerated {:?}",
                    x.unwrap_or("<end of file>"),
                    y.unwrap_or("<end of file>")
                ))
            }
        }
    }
}

/// Fails with the first difference if the committed table is not what the inputs produce.
fn check(generated: &Generated) -> Result<()> {
    let committed = std::fs::read_to_string(&generated.path)
        .with_context(|| format!("reading {}", generated.path.display()))?;
    if let Some(diff) = first_difference(&committed, &generated.text) {
        bail!(
            "{} is stale ({diff}); run `cargo run --manifest-path registry-gen/Cargo.toml`",
            generated.path.display()
        );
    }
    Ok(())
}

fn print_stats(s: &facts::Stats) {
    eprintln!(
        "messages: {} ({} with an OpenAPI definition)",
        s.messages, s.with_definition
    );
    eprintln!("fields joined to JSON properties: {}", s.joined_fields);
    eprintln!(
        "inline (Go-embedded) fields: {} {:?}",
        s.inline_fields.len(),
        s.inline_fields
    );
    eprintln!(
        "unmatched fields: {} {:?}",
        s.unmatched_fields.len(),
        s.unmatched_fields
    );
    eprintln!(
        "uncovered properties: {} {:?}",
        s.uncovered_properties.len(),
        s.uncovered_properties
    );
    eprintln!(
        "definitions without a message: {} {:?}",
        s.definitions_without_message.len(),
        s.definitions_without_message
    );
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check_only = match args.as_slice() {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => bail!("usage: registry-gen [--check]"),
    };
    let generated = generate()?;
    print_stats(&generated.stats);
    if check_only {
        check(&generated)?;
        eprintln!("{} is up to date", generated.path.display());
    } else {
        std::fs::write(&generated.path, &generated.text)
            .with_context(|| format!("writing {}", generated.path.display()))?;
        eprintln!(
            "wrote {} ({} bytes)",
            generated.path.display(),
            generated.text.len()
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("registry-gen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed table is exactly what the pinned crates regenerate.
    #[test]
    fn committed_table_regenerates() {
        let generated = generate().expect("generation succeeds");
        if let Err(e) = check(&generated) {
            panic!("{e:#}");
        }
    }

    #[test]
    fn first_difference_names_the_line() {
        assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
        let d = first_difference("a\nb\nc\n", "a\nx\nc\n").expect("differs");
        assert!(d.starts_with("line 2:"), "{d}");
        let d = first_difference("a\n", "a\nb\n").expect("differs");
        assert!(d.contains("<end of file>"), "{d}");
    }
}
