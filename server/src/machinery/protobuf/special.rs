//! Hand-written codecs for the types whose JSON form is not their protobuf field structure:
//! times, durations, int-or-string, quantities, raw JSON payloads, the apiextensions
//! schema unions and discovery's `Verbs`. Chosen by protobuf message name.

use serde_json::Value;

use super::transcode::{decode_message, encode_nested, integer, shape, utf8, MAX_DEPTH};
use super::wire::{ProtoError, Reader, Reason, Result, Write, LEN, VARINT};
use crate::machinery::duration;
use crate::machinery::timestamp;

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";
const APIEXTENSIONS: [&str; 2] = [
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.",
];

/// A type with its own JSON form.
enum Special {
    /// `metav1.Time`: RFC 3339, second precision; the zero time is an empty message.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with six fractional digits.
    MicroTime,
    /// `metav1.Duration`: a Go duration string over int64 nanoseconds.
    Duration,
    /// `intstr.IntOrString`: a JSON number or string.
    IntOrString,
    /// `resource.Quantity`: its canonical string.
    Quantity,
    /// `runtime.RawExtension`: embedded JSON, or an embedded protobuf object.
    RawExtension,
    /// `metav1.FieldsV1` and apiextensions `JSON`: embedded JSON.
    RawJson,
    /// `JSONSchemaPropsOrArray` of an apiextensions package (the package prefix).
    SchemaOrArray(&'static str),
    /// `JSONSchemaPropsOrBool`.
    SchemaOrBool(&'static str),
    /// `JSONSchemaPropsOrStringArray`.
    SchemaOrStringArray(&'static str),
    /// `metav1.Verbs`: a plain JSON list of strings.
    Verbs,
}

fn special(name: &str) -> Option<Special> {
    if let Some(local) = name.strip_prefix(META) {
        return match local {
            "Time" => Some(Special::Time),
            "MicroTime" => Some(Special::MicroTime),
            "Duration" => Some(Special::Duration),
            "FieldsV1" => Some(Special::RawJson),
            "Verbs" => Some(Special::Verbs),
            _ => None,
        };
    }
    match name {
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => return Some(Special::IntOrString),
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => return Some(Special::Quantity),
        "k8s.io.apimachinery.pkg.runtime.RawExtension" => return Some(Special::RawExtension),
        _ => {}
    }
    for pkg in APIEXTENSIONS {
        if let Some(local) = name.strip_prefix(pkg) {
            return match local {
                "JSON" => Some(Special::RawJson),
                "JSONSchemaPropsOrArray" => Some(Special::SchemaOrArray(pkg)),
                "JSONSchemaPropsOrBool" => Some(Special::SchemaOrBool(pkg)),
                "JSONSchemaPropsOrStringArray" => Some(Special::SchemaOrStringArray(pkg)),
                _ => None,
            };
        }
    }
    None
}

/// Extra nesting levels an object embedded in a `RawExtension` counts for: decoding one takes
/// about four times the stack of a plain message level.
const EMBEDDED_OBJECT_COST: usize = 3;

fn schema_name(pkg: &str) -> String {
    format!("{pkg}JSONSchemaProps")
}

fn invalid(msg: impl ToString) -> ProtoError {
    Reason::Invalid(msg.to_string()).into()
}

/// One field of a special message, read without the type facts.
enum Raw<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// Reads every field of a small message; fixed-size fields do not occur in these types.
fn fields(bytes: &[u8]) -> Result<Vec<(u32, Raw<'_>)>> {
    let mut out = Vec::new();
    let mut r = Reader::new(bytes);
    while let Some((tag, wire)) = r.key()? {
        match wire {
            VARINT => out.push((tag, Raw::Varint(r.varint()?))),
            LEN => out.push((tag, Raw::Bytes(r.bytes()?))),
            other => r.skip(other)?,
        }
    }
    Ok(out)
}

fn wrong_wire(tag: u32) -> ProtoError {
    invalid(format!("field {tag} has the wrong wire type"))
}

fn varint_of(raw: &Raw<'_>, tag: u32) -> Result<u64> {
    match raw {
        Raw::Varint(v) => Ok(*v),
        Raw::Bytes(_) => Err(wrong_wire(tag)),
    }
}

fn bytes_of<'a>(raw: &Raw<'a>, tag: u32) -> Result<&'a [u8]> {
    match raw {
        Raw::Bytes(b) => Ok(b),
        Raw::Varint(_) => Err(wrong_wire(tag)),
    }
}

/// Nesting depth of a JSON value (a scalar is 1).
fn json_depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        _ => 1,
    }
}

/// Embedded JSON placed at nesting level `depth`; `null` when empty.
#[inline(never)]
fn raw_json(raw: &[u8], depth: usize) -> Result<Value> {
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    let v: Value = serde_json::from_slice(raw).map_err(|e| invalid(format!("embedded JSON: {e}")))?;
    if depth + json_depth(&v) - 1 > MAX_DEPTH {
        return Err(Reason::TooDeep(MAX_DEPTH).into());
    }
    Ok(v)
}

fn last<'f, 'a>(fields: &'f [(u32, Raw<'a>)], tag: u32) -> Option<&'f Raw<'a>> {
    // For singular fields the last occurrence wins, as in Go.
    fields.iter().rev().find(|(t, _)| *t == tag).map(|(_, r)| r)
}

fn last_varint(fields: &[(u32, Raw<'_>)], tag: u32) -> Result<u64> {
    last(fields, tag).map_or(Ok(0), |r| varint_of(r, tag))
}

fn last_bytes<'a>(fields: &[(u32, Raw<'a>)], tag: u32) -> Result<&'a [u8]> {
    last(fields, tag).map_or(Ok(&[][..]), |r| bytes_of(r, tag))
}

/// Decodes a special message; `None` when `name` is not special. Each type has its own small
/// function so that the recursive ones cost little stack per nesting level.
pub fn decode(name: &str, bytes: &[u8], depth: usize) -> Result<Option<Value>> {
    let Some(kind) = special(name) else {
        return Ok(None);
    };
    let fields = fields(bytes)?;
    let v = match kind {
        // Go writes the zero time as an empty message; its JSON is null.
        Special::Time | Special::MicroTime if bytes.is_empty() => Value::Null,
        Special::Time => time(&fields, false)?,
        Special::MicroTime => time(&fields, true)?,
        Special::Duration => duration(&fields)?,
        Special::IntOrString => int_or_string(&fields)?,
        Special::Quantity => quantity(&fields)?,
        Special::RawExtension => {
            let raw = last_bytes(&fields, 1)?;
            if raw.starts_with(&super::MAGIC) {
                // An embedded object costs more stack per level than a plain message.
                super::decode_envelope(raw, depth + EMBEDDED_OBJECT_COST)?
            } else {
                raw_json(raw, depth)?
            }
        }
        Special::RawJson => raw_json(last_bytes(&fields, 1)?, depth)?,
        Special::SchemaOrArray(pkg) => schema_or_array(pkg, &fields, depth)?,
        Special::SchemaOrBool(pkg) => match last(&fields, 2) {
            Some(raw) => decode_message(&schema_name(pkg), bytes_of(raw, 2)?, depth)?,
            None => Value::Bool(last_varint(&fields, 1)? != 0),
        },
        Special::SchemaOrStringArray(pkg) => schema_or_string_array(pkg, &fields, depth)?,
        Special::Verbs => Value::Array(strings_of(&fields, 1)?),
    };
    Ok(Some(v))
}

#[inline(never)]
fn time(fields: &[(u32, Raw<'_>)], micro: bool) -> Result<Value> {
    let seconds = last_varint(fields, 1)? as i64;
    let nanos = last_varint(fields, 2)? as i64 as i32;
    Ok(Value::String(
        timestamp::format_rfc3339(seconds, nanos, micro).map_err(invalid)?,
    ))
}

#[inline(never)]
fn duration(fields: &[(u32, Raw<'_>)]) -> Result<Value> {
    Ok(Value::String(duration::format_duration(
        last_varint(fields, 1)? as i64
    )))
}

#[inline(never)]
fn int_or_string(fields: &[(u32, Raw<'_>)]) -> Result<Value> {
    match last_varint(fields, 1)? as i64 {
        0 => Ok(Value::from(last_varint(fields, 2)? as i64 as i32)),
        1 => Ok(Value::String(utf8(last_bytes(fields, 3)?)?)),
        other => Err(invalid(format!(
            "IntOrString has type {other}; only 0 and 1 exist"
        ))),
    }
}

#[inline(never)]
fn quantity(fields: &[(u32, Raw<'_>)]) -> Result<Value> {
    let s = utf8(last_bytes(fields, 1)?)?;
    // Go's zero Quantity prints as "0".
    Ok(Value::String(if s.is_empty() { "0".into() } else { s }))
}

fn strings_of(fields: &[(u32, Raw<'_>)], tag: u32) -> Result<Vec<Value>> {
    fields
        .iter()
        .filter(|(t, _)| *t == tag)
        .map(|(_, raw)| Ok(Value::String(utf8(bytes_of(raw, tag)?)?)))
        .collect()
}

fn schema_or_array(pkg: &str, fields: &[(u32, Raw<'_>)], depth: usize) -> Result<Value> {
    let schema = schema_name(pkg);
    let mut list = Vec::new();
    let mut single = Value::Null;
    for (tag, raw) in fields {
        match tag {
            1 => single = decode_message(&schema, bytes_of(raw, 1)?, depth)?,
            2 => list.push(decode_message(&schema, bytes_of(raw, 2)?, depth + 1)?),
            _ => {}
        }
    }
    Ok(if list.is_empty() {
        single
    } else {
        Value::Array(list)
    })
}

fn schema_or_string_array(pkg: &str, fields: &[(u32, Raw<'_>)], depth: usize) -> Result<Value> {
    let list = strings_of(fields, 2)?;
    if !list.is_empty() {
        return Ok(Value::Array(list));
    }
    match last(fields, 1) {
        Some(raw) => decode_message(&schema_name(pkg), bytes_of(raw, 1)?, depth),
        None => Ok(Value::Null),
    }
}

/// Encodes a special message; `false` when `name` is not special.
pub fn encode(name: &str, v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<bool> {
    let Some(kind) = special(name) else {
        return Ok(false);
    };
    if v.is_null() {
        // Absent: the empty message (the zero time, nil raw bytes, …).
        return Ok(true);
    }
    match kind {
        Special::Time | Special::MicroTime => encode_time(v, out)?,
        Special::Duration => {
            let text = v.as_str().ok_or_else(|| shape("a duration string", v))?;
            out.varint_field(1, duration::parse_duration(text).map_err(invalid)?);
        }
        Special::IntOrString => encode_int_or_string(v, out)?,
        Special::Quantity => encode_quantity(v, out)?,
        Special::RawExtension | Special::RawJson => {
            let raw = serde_json::to_vec(v).map_err(invalid)?;
            out.len_field(1, &raw);
        }
        Special::SchemaOrArray(pkg) => match v {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    encode_nested(2, &schema_name(pkg), item, depth + 1, out)
                        .map_err(|e| e.within(format!("[{i}]")))?;
                }
            }
            Value::Object(_) => encode_nested(1, &schema_name(pkg), v, depth, out)?,
            other => return Err(shape("a schema or an array of schemas", other)),
        },
        Special::SchemaOrBool(pkg) => match v {
            Value::Bool(b) => out.varint_field(1, i64::from(*b)),
            Value::Object(_) => {
                out.varint_field(1, 1);
                encode_nested(2, &schema_name(pkg), v, depth, out)?;
            }
            other => return Err(shape("a schema or a boolean", other)),
        },
        Special::SchemaOrStringArray(pkg) => match v {
            Value::Array(items) => strings(2, items, out)?,
            Value::Object(_) => encode_nested(1, &schema_name(pkg), v, depth, out)?,
            other => return Err(shape("a schema or an array of strings", other)),
        },
        Special::Verbs => strings(
            1,
            v.as_array().ok_or_else(|| shape("an array of strings", v))?,
            out,
        )?,
    }
    Ok(true)
}

#[inline(never)]
fn encode_time(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    let text = v.as_str().ok_or_else(|| shape("an RFC 3339 string", v))?;
    let (seconds, nanos) = timestamp::parse_rfc3339(text).map_err(invalid)?;
    // Go's Timestamp has plain fields: both are always written.
    out.varint_field(1, seconds);
    out.varint_field(2, i64::from(nanos));
    Ok(())
}

#[inline(never)]
fn encode_int_or_string(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    let (ty, int, text) = match v {
        Value::String(s) => (1, 0, s.as_str()),
        Value::Number(_) => {
            let n = integer(v)?;
            let n = i32::try_from(n).map_err(|_| invalid(format!("{n} does not fit in int32")))?;
            (0, n, "")
        }
        other => return Err(shape("a number or a string", other)),
    };
    // All three are plain fields in Go: always written.
    out.varint_field(1, ty);
    out.varint_field(2, i64::from(int));
    out.len_field(3, text.as_bytes());
    Ok(())
}

#[inline(never)]
fn encode_quantity(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(shape("a quantity string", other)),
    };
    out.len_field(1, text.as_bytes());
    Ok(())
}

fn strings(tag: u32, items: &[Value], out: &mut Vec<u8>) -> Result<()> {
    for (i, item) in items.iter().enumerate() {
        let s = item
            .as_str()
            .ok_or_else(|| shape("a string", item).within(format!("[{i}]")))?;
        out.len_field(tag, s.as_bytes());
    }
    Ok(())
}
