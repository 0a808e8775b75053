//! Reads the prost-generated messages of `k8s-pb` with `syn`.
//!
//! k8s-pb has one `mod.rs` per Go package; each `#[derive(::prost::Message)]` struct is one
//! protobuf message. Its `#[prost(...)]` attributes carry the wire facts (tag, scalar kind,
//! repetition, map value kind) and its doc comments keep the Go markers (`+listType=map`, ...).
//! Nothing else about a message is trusted: the Go type name is recovered later (prost
//! re-cases acronyms), and JSON names come from k8s-openapi.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use syn::{Attribute, Expr, Fields, GenericArgument, Item, Lit, Meta, PathArguments, Type};

/// The Go constants `+default=ref(...)` markers name, with their values. k8s-pb keeps the
/// markers but not the constants; a reference missing here fails the generation.
const DEFAULT_REFS: &[(&str, &str)] = &[
    ("AzureDataDiskCachingReadWrite", "ReadWrite"),
    ("AzureSharedBlobDisk", "Shared"),
];

/// The module paths (below k8s-pb's `src/`) that are not Kubernetes 1.35 API server types:
/// the metrics APIs are served by metrics-server, and `testapigroup` is a fixture.
const EXCLUDED_MODULES: [&[&str]; 2] = [&["metrics"], &["apimachinery", "pkg", "apis", "testapigroup"]];

/// A Rust module of k8s-pb, e.g. `["api", "core", "v1"]`; one Go package.
pub type ModulePath = Vec<String>;

/// Identifies a message: its module and its prost (re-cased) struct name.
pub type MessageId = (ModulePath, String);

/// The protobuf wire kind of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// UTF-8 string.
    String,
    /// Varint int32.
    Int32,
    /// Varint int64.
    Int64,
    /// Varint bool.
    Bool,
    /// Fixed64 double.
    Double,
    /// Length-delimited bytes.
    Bytes,
    /// Embedded message.
    Message,
    /// `map<string, V>`.
    Map,
}

impl Kind {
    /// The name used in the facts table.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Int32 => "int32",
            Kind::Int64 => "int64",
            Kind::Bool => "bool",
            Kind::Double => "double",
            Kind::Bytes => "bytes",
            Kind::Message => "message",
            Kind::Map => "map",
        }
    }
}

/// The Go markers found in a doc comment, in order of appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Markers {
    /// `+listType=`.
    pub list_type: Option<String>,
    /// Every `+listMapKey=`, in order.
    pub list_map_keys: Vec<String>,
    /// `+patchStrategy=`.
    pub patch_strategy: Option<String>,
    /// `+patchMergeKey=`.
    pub patch_merge_key: Option<String>,
    /// `+mapType=`.
    pub map_type: Option<String>,
    /// `+structType=` (only meaningful on a message).
    pub struct_type: Option<String>,
    /// `+default=`: the value the field defaults to (published as the schema's `default`).
    pub default: Option<Value>,
}

impl Markers {
    /// Reads markers from doc lines. Only lines whose text starts with `+` count, so examples
    /// quoted inside descriptions (`//   // +listType=map`) are ignored.
    fn from_doc(lines: &[String]) -> Result<Markers> {
        let mut m = Markers::default();
        for line in lines {
            let Some(marker) = line.trim().strip_prefix('+') else {
                continue;
            };
            let Some((key, value)) = marker.split_once('=') else {
                continue;
            };
            let value = value.trim().to_string();
            if key.trim() == "default" {
                if m.default.replace(default_value(&value)?).is_some() {
                    bail!("marker +default repeated in one doc comment");
                }
                continue;
            }
            let slot = match key.trim() {
                "listType" => &mut m.list_type,
                "patchStrategy" => &mut m.patch_strategy,
                "patchMergeKey" => &mut m.patch_merge_key,
                "mapType" => &mut m.map_type,
                "structType" => &mut m.struct_type,
                "listMapKey" => {
                    m.list_map_keys.push(value);
                    continue;
                }
                _ => continue,
            };
            if slot.replace(value).is_some() {
                bail!("marker +{key} repeated in one doc comment");
            }
        }
        Ok(m)
    }

    /// Whether any field-level marker is present.
    pub fn has_field_markers(&self) -> bool {
        self.list_type.is_some()
            || !self.list_map_keys.is_empty()
            || self.patch_strategy.is_some()
            || self.patch_merge_key.is_some()
            || self.map_type.is_some()
            || self.default.is_some()
    }
}

/// The value of a `+default=` marker: JSON, or `ref(GoConstant)` for a known constant.
fn default_value(marker: &str) -> Result<Value> {
    if let Some(name) = marker.strip_prefix("ref(").and_then(|r| r.strip_suffix(')')) {
        return DEFAULT_REFS
            .iter()
            .find(|(constant, _)| *constant == name)
            .map(|(_, value)| Value::from(*value))
            .ok_or_else(|| anyhow!("+default={marker}: unknown constant (add it to DEFAULT_REFS)"));
    }
    serde_json::from_str(marker).with_context(|| format!("+default={marker} is not JSON"))
}

/// One field of a message.
#[derive(Debug, Clone)]
pub struct Field {
    /// The Rust field name without `r#` (the proto name in snake case).
    pub rust_name: String,
    /// The protobuf field number.
    pub tag: u32,
    /// The wire kind.
    pub kind: Kind,
    /// Whether the field is `repeated`.
    pub repeated: bool,
    /// For `map` fields, the value kind (`string`, `bytes` or `message`).
    pub map_value: Option<Kind>,
    /// For message-valued fields and maps, the referenced message.
    pub message: Option<MessageId>,
    /// Markers from the field's doc comment.
    pub markers: Markers,
    /// The field's doc comment as upstream OpenAPI describes the property.
    pub description: String,
}

/// One message.
#[derive(Debug, Clone)]
pub struct Message {
    /// The first word of the message's doc comment (Go convention: the type name).
    pub doc_first_word: Option<String>,
    /// Markers from the message's doc comment (`+structType`).
    pub markers: Markers,
    /// The message's doc comment as upstream OpenAPI describes the definition.
    pub description: String,
    /// Fields in declaration order.
    pub fields: Vec<Field>,
}

fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A doc comment as Kubernetes' OpenAPI generator turns the Go comment into a description:
/// generator markers (`+optional`) and `TODO` lines dropped, the lines of a paragraph joined
/// by spaces, paragraphs by a blank line, nothing after `---`. prost's rendering of the
/// comment is undone first: it wraps bare URLs in `<...>` and escapes brackets.
pub fn description(lines: &[String]) -> String {
    let mut paragraphs: Vec<Vec<String>> = vec![Vec::new()];
    for line in lines {
        if line.trim() == "---" {
            break;
        }
        let text = line.trim();
        if text.is_empty() {
            paragraphs.push(Vec::new());
        } else if !text.starts_with('+') && !text.starts_with("TODO") {
            let text = unwrap_urls(&text.replace("\\[", "[").replace("\\]", "]"));
            if let Some(last) = paragraphs.last_mut() {
                last.push(text);
            }
        }
    }
    paragraphs
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| p.join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `More info: <https://...>` → `More info: https://...`.
fn unwrap_urls(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<http") {
        let Some(len) = rest[start..].find('>') else { break };
        out.push_str(&rest[..start]);
        out.push_str(&rest[start + 1..start + len]);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

fn derives_prost(attrs: &[Attribute], what: &str) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("derive")).any(|a| {
        let mut found = false;
        // A derive list that does not parse as paths is not prost output; treat it as absent.
        let _ = a.parse_nested_meta(|m| {
            let segs: Vec<String> = m.path.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() == 2 && segs[0] == "prost" && segs[1] == what {
                found = true;
            }
            Ok(())
        });
        found
    })
}

fn scalar_kind(name: &str) -> Option<Kind> {
    Some(match name {
        "string" => Kind::String,
        "int32" => Kind::Int32,
        "int64" => Kind::Int64,
        "bool" => Kind::Bool,
        "double" => Kind::Double,
        "bytes" => Kind::Bytes,
        "message" => Kind::Message,
        _ => return None,
    })
}

struct ProstAttr {
    kind: Kind,
    map_value: Option<Kind>,
    repeated: bool,
    tag: u32,
}

fn parse_prost_attr(attr: &Attribute) -> Result<ProstAttr> {
    let mut kind = None;
    let mut map_value = None;
    let mut repeated = false;
    let mut tag = None;
    attr.parse_nested_meta(|m| {
        let name = m.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
        match name.as_str() {
            "optional" | "boxed" => {}
            "repeated" => repeated = true,
            "packed" => {
                m.value()?.parse::<syn::LitStr>()?;
            }
            "tag" => {
                tag = Some(
                    m.value()?
                        .parse::<syn::LitStr>()?
                        .value()
                        .parse::<u32>()
                        .map_err(|e| m.error(e))?,
                );
            }
            "btree_map" => {
                let spec = m.value()?.parse::<syn::LitStr>()?.value();
                let value = match spec.split(',').map(str::trim).collect::<Vec<_>>().as_slice() {
                    ["string", v] => scalar_kind(v),
                    _ => None,
                };
                map_value = Some(value.ok_or_else(|| m.error(format!("unsupported map {spec:?}")))?);
                kind = Some(Kind::Map);
            }
            other => {
                let k =
                    scalar_kind(other).ok_or_else(|| m.error(format!("unknown prost attribute {other}")))?;
                if other == "bytes" {
                    m.value()?.parse::<syn::LitStr>()?;
                }
                kind = Some(k);
            }
        }
        Ok(())
    })?;
    Ok(ProstAttr {
        kind: kind.ok_or_else(|| anyhow!("prost attribute without a kind"))?,
        map_value,
        repeated,
        tag: tag.ok_or_else(|| anyhow!("prost attribute without a tag"))?,
    })
}

/// Finds the message a field type names, looking through Option/Vec/Box and a map's value.
fn referenced_type(ty: &Type, module: &[String]) -> Result<Option<MessageId>> {
    let Type::Path(tp) = ty else {
        bail!("unexpected field type shape")
    };
    let last = tp
        .path
        .segments
        .last()
        .ok_or_else(|| anyhow!("empty type path"))?;
    let name = last.ident.to_string();
    let args: Vec<&Type> = match &last.arguments {
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    match (name.as_str(), args.as_slice()) {
        ("Option" | "Vec" | "Box", [inner]) => referenced_type(inner, module),
        ("BTreeMap", [_, value]) => referenced_type(value, module),
        ("String" | "i32" | "i64" | "u8" | "bool" | "f64", []) => Ok(None),
        (_, []) => {
            let mut path: Vec<String> = module.to_vec();
            let segs: Vec<String> = tp.path.segments.iter().map(|s| s.ident.to_string()).collect();
            let (struct_name, dirs) = segs.split_last().ok_or_else(|| anyhow!("empty type path"))?;
            for d in dirs {
                if d == "super" {
                    path.pop()
                        .ok_or_else(|| anyhow!("`super` above the crate root"))?;
                } else {
                    path.push(d.clone());
                }
            }
            Ok(Some((path, struct_name.clone())))
        }
        _ => bail!("unexpected generic type {name}"),
    }
}

fn parse_module(file: &syn::File, module: &[String], out: &mut BTreeMap<MessageId, Message>) -> Result<()> {
    for item in &file.items {
        match item {
            Item::Struct(s) if derives_prost(&s.attrs, "Message") => {
                let doc = doc_lines(&s.attrs);
                let doc_first_word = doc
                    .first()
                    .and_then(|l| l.split_whitespace().next())
                    .map(|w| w.trim_end_matches(|c: char| !c.is_alphanumeric()).to_string());
                let mut fields = Vec::new();
                if let Fields::Named(named) = &s.fields {
                    for f in &named.named {
                        let ident = f
                            .ident
                            .as_ref()
                            .ok_or_else(|| anyhow!("unnamed field"))?
                            .to_string();
                        let rust_name = ident.trim_start_matches("r#").to_string();
                        let attr = f
                            .attrs
                            .iter()
                            .find(|a| a.path().is_ident("prost"))
                            .ok_or_else(|| anyhow!("{}.{rust_name} has no #[prost]", s.ident))?;
                        let p = parse_prost_attr(attr).with_context(|| format!("{}.{rust_name}", s.ident))?;
                        let target = referenced_type(&f.ty, module)?;
                        let wants_target = p.kind == Kind::Message || p.map_value == Some(Kind::Message);
                        if wants_target != target.is_some() {
                            bail!(
                                "{}.{rust_name}: field type does not match its prost kind",
                                s.ident
                            );
                        }
                        let field_doc = doc_lines(&f.attrs);
                        let mut markers = Markers::from_doc(&field_doc)?;
                        // On a field, `+structType` is published like `+mapType`
                        // (`x-kubernetes-map-type` on the property).
                        if let Some(st) = markers.struct_type.take() {
                            if markers.map_type.replace(st).is_some() {
                                bail!("{}.{rust_name} has both +structType and +mapType", s.ident);
                            }
                        }
                        fields.push(Field {
                            rust_name,
                            tag: p.tag,
                            kind: p.kind,
                            repeated: p.repeated,
                            map_value: p.map_value,
                            message: target,
                            markers,
                            description: description(&field_doc),
                        });
                    }
                }
                let markers = Markers::from_doc(&doc).with_context(|| s.ident.to_string())?;
                let id = (module.to_vec(), s.ident.to_string());
                out.insert(
                    id,
                    Message {
                        doc_first_word,
                        markers,
                        description: description(&doc),
                        fields,
                    },
                );
            }
            Item::Struct(s) if derives_prost(&s.attrs, "Oneof") => bail!("unsupported oneof {}", s.ident),
            Item::Enum(e) if derives_prost(&e.attrs, "Enumeration") || derives_prost(&e.attrs, "Oneof") => {
                bail!("unsupported prost enum {}", e.ident)
            }
            Item::Mod(m) if m.content.is_some() => bail!("unexpected inline module {}", m.ident),
            _ => {}
        }
    }
    Ok(())
}

fn walk(dir: &Path, module: &mut ModulePath, out: &mut BTreeMap<MessageId, Message>) -> Result<()> {
    if EXCLUDED_MODULES
        .iter()
        .any(|ex| ex.iter().copied().eq(module.iter().map(String::as_str)))
    {
        return Ok(());
    }
    let mod_rs = dir.join("mod.rs");
    if mod_rs.is_file() && !module.is_empty() {
        let text =
            std::fs::read_to_string(&mod_rs).with_context(|| format!("reading {}", mod_rs.display()))?;
        let file = syn::parse_file(&text).with_context(|| format!("parsing {}", mod_rs.display()))?;
        parse_module(&file, module, out).with_context(|| format!("in {}", mod_rs.display()))?;
    }
    let mut subdirs: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        module.push(sub.clone());
        walk(&dir.join(&sub), module, out)?;
        module.pop();
    }
    Ok(())
}

/// Parses every message of k8s-pb (under `src/`, minus [`EXCLUDED_MODULES`]).
pub fn parse_crate(root: &Path) -> Result<BTreeMap<MessageId, Message>> {
    let mut out = BTreeMap::new();
    walk(&root.join("src"), &mut Vec::new(), &mut out)?;
    if out.is_empty() {
        bail!("no prost messages found under {}", root.display());
    }
    for (id, msg) in &out {
        for f in &msg.fields {
            if let Some(target) = &f.message {
                if !out.contains_key(target) {
                    bail!("{}.{} references unknown message {target:?}", id.1, f.rust_name);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn doc_comments_become_upstream_descriptions() {
        assert_eq!(
            description(&doc(&[
                " Standard list metadata.",
                " More info: <https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds>",
                " +optional",
            ])),
            "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
        );
        assert_eq!(description(&doc(&[" One.", "", " Two \\[x\\].", " ---", " hidden"])), "One.\n\nTwo [x].");
    }

    #[test]
    fn default_markers_are_json_or_known_constants() {
        let m = Markers::from_doc(&doc(&[" Protocol for port.", " +optional", " +default=\"TCP\""]))
            .expect("parses");
        assert_eq!(m.default, Some(Value::from("TCP")));
        assert!(m.has_field_markers());
        let m = Markers::from_doc(&doc(&[" +default=0"])).expect("parses");
        assert_eq!(m.default, Some(Value::from(0)));
        let m = Markers::from_doc(&doc(&[" +default=ref(AzureSharedBlobDisk)"])).expect("parses");
        assert_eq!(m.default, Some(Value::from("Shared")));
        assert!(Markers::from_doc(&doc(&[" +default=ref(NoSuchConstant)"])).is_err());
        assert!(Markers::from_doc(&doc(&[" +default=TCP"])).is_err());
        assert!(Markers::from_doc(&doc(&[" +default=1", " +default=2"])).is_err());
    }
}
