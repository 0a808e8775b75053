//! The table-driven walk: any Kubernetes message between its protobuf bytes and its JSON value,
//! guided by the field tags and kinds in the type facts. Types whose JSON form is not their
//! field structure (times, quantities, raw JSON, …) are delegated to [`super::special`].
//!
//! Empty versus absent: protobuf cannot tell them apart, and the facts do not say which Go
//! fields are pointers. Encoding therefore writes every field the JSON object holds (non-null),
//! which is what Go writes for the same object decoded from that JSON: pointer fields when set,
//! plain fields always (an absent plain field decodes to the same zero value). Decoding keeps
//! every number and boolean the wire carries (an explicit `replicas: 0` or
//! `automountServiceAccountToken: false` must survive; for plain Go fields a zero is equivalent
//! to absence under Kubernetes' defaulting and validation) and drops empty strings and bytes —
//! Go's generated marshallers write every plain string, even empty, and `omitempty` hides them
//! in JSON — except for the few pointer strings whose empty value means something
//! ([`KEEP_EMPTY`]).

use base64::Engine;
use prost::encoding::WireType;
use serde_json::{Map, Number, Value};

use super::special;
use super::wire::{ProtoError, Reader, Reason, Result, Write, FIXED64, LEN, VARINT};
use crate::machinery::type_facts::{facts, FieldFacts, FieldKind, MapValueKind, MessageFacts};

/// Deepest JSON nesting a decoded object may reach. It stays below serde_json's parse limit
/// (128) so every stored object parses again, and bounds the stack the recursive walk uses
/// (each level is a handful of small frames; see the recursion split in [`decode_field`]).
pub const MAX_DEPTH: usize = 100;

/// Deepest JSON nesting an encoded value may have: that of any parsed JSON (serde_json's
/// limit). Deeper values fail to encode and the caller answers JSON instead.
const MAX_ENCODE_DEPTH: usize = 128;

/// Pointer string fields where `""` differs from unset: `storageClassName: ""` asks for no
/// storage class rather than the default one, and likewise for volume attributes classes.
const KEEP_EMPTY: &[(&str, &str)] = &[
    ("k8s.io.api.core.v1.PersistentVolumeClaimSpec", "storageClassName"),
    (
        "k8s.io.api.core.v1.PersistentVolumeClaimSpec",
        "volumeAttributesClassName",
    ),
];

/// The facts of a message, or an error naming it.
pub fn message(name: &str) -> Result<&'static MessageFacts> {
    facts()
        .message(name)
        .ok_or_else(|| Reason::UnknownMessage(name.to_string()).into())
}

fn target(field: &FieldFacts) -> Result<&str> {
    field
        .message
        .as_deref()
        .ok_or_else(|| Reason::Invalid(format!("field {} names no message", field.name)).into())
}

fn too_deep() -> ProtoError {
    Reason::TooDeep(MAX_DEPTH).into()
}

/// The JSON type of a value, for error messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A shape error: `expected` where `found` is.
pub fn shape(expected: &'static str, found: &Value) -> ProtoError {
    Reason::Shape {
        expected,
        found: json_type(found),
    }
    .into()
}

fn mismatch(found: WireType, expected: &'static str) -> ProtoError {
    Reason::Mismatch {
        found: found as u8,
        expected,
    }
    .into()
}

/// A UTF-8 string from a length-delimited payload.
pub fn utf8(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| Reason::Invalid("string is not valid UTF-8".into()).into())
}

/// Decodes one message at JSON nesting level `depth` (the message's object is at `depth`).
/// Special types may decode to `null`, meaning "absent".
pub fn decode_message(name: &str, bytes: &[u8], depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    if let Some(v) = special::decode(name, bytes, depth)? {
        return Ok(v);
    }
    let msg = message(name)?;
    let mut obj = Map::new();
    decode_fields(name, msg, bytes, depth, &mut obj)?;
    Ok(Value::Object(obj))
}

/// Decodes the fields of `msg` into `obj` (shared by inline fields, whose contents are
/// flattened into their parent's object).
fn decode_fields(
    name: &str,
    msg: &MessageFacts,
    bytes: &[u8],
    depth: usize,
    obj: &mut Map<String, Value>,
) -> Result<()> {
    let mut r = Reader::new(bytes);
    while let Some((tag, wire)) = r.key()? {
        let Some(field) = msg.field_by_tag(tag) else {
            r.skip(wire)?;
            continue;
        };
        let decoded = decode_field(name, field, wire, &mut r, depth, obj);
        if field.inline {
            decoded?;
        } else {
            decoded.map_err(|e| e.within(field.name.clone()))?;
        }
    }
    Ok(())
}

fn push(obj: &mut Map<String, Value>, name: &str, v: Value) {
    if let Value::Array(items) = obj
        .entry(name.to_string())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        items.push(v);
    }
}

/// Decodes one occurrence of a field into `obj`. The recursive paths (messages, maps) live in
/// their own small functions so the stack each nesting level costs stays small.
fn decode_field(
    msg_name: &str,
    field: &FieldFacts,
    wire: WireType,
    r: &mut Reader<'_>,
    depth: usize,
    obj: &mut Map<String, Value>,
) -> Result<()> {
    match field.kind {
        FieldKind::Map if wire == LEN => decode_map_field(field, r.bytes()?, depth, obj),
        FieldKind::Message if wire == LEN => decode_message_field(field, r.bytes()?, depth, obj),
        FieldKind::Map => Err(mismatch(wire, "map")),
        FieldKind::Message => Err(mismatch(wire, "message")),
        _ => decode_scalar_field(msg_name, field, wire, r, obj),
    }
}

fn decode_map_field(
    field: &FieldFacts,
    payload: &[u8],
    depth: usize,
    obj: &mut Map<String, Value>,
) -> Result<()> {
    if depth + 2 > MAX_DEPTH {
        return Err(too_deep());
    }
    let (k, v) = decode_entry(field, payload, depth + 2)?;
    if let Value::Object(m) = obj
        .entry(field.name.clone())
        .or_insert_with(|| Value::Object(Map::new()))
    {
        m.insert(k, v);
    }
    Ok(())
}

fn decode_message_field(
    field: &FieldFacts,
    payload: &[u8],
    depth: usize,
    obj: &mut Map<String, Value>,
) -> Result<()> {
    let target = target(field)?;
    if field.inline {
        // No JSON level of its own, but the recursion still counts.
        if depth + 1 > MAX_DEPTH {
            return Err(too_deep());
        }
        return decode_fields(target, message(target)?, payload, depth + 1, obj);
    }
    let name = field.name.as_str();
    if field.repeated {
        let v = decode_message(target, payload, depth + 2)?;
        push(obj, name, v);
        return Ok(());
    }
    match decode_message(target, payload, depth + 1)? {
        Value::Null => {
            obj.remove(name);
        }
        // A repeated occurrence of a singular message merges into the first.
        Value::Object(more) => match obj.get_mut(name) {
            Some(Value::Object(existing)) => existing.extend(more),
            _ => {
                obj.insert(name.to_string(), Value::Object(more));
            }
        },
        v => {
            obj.insert(name.to_string(), v);
        }
    }
    Ok(())
}

#[inline(never)]
fn decode_scalar_field(
    msg_name: &str,
    field: &FieldFacts,
    wire: WireType,
    r: &mut Reader<'_>,
    obj: &mut Map<String, Value>,
) -> Result<()> {
    let name = field.name.as_str();
    let kind = field.kind;
    if field.repeated && wire == LEN && kind != FieldKind::String && kind != FieldKind::Bytes {
        // Packed repeated scalars: Kubernetes writes them unpacked, but both are valid.
        let mut packed = Reader::new(r.bytes()?);
        let inner = if kind == FieldKind::Double {
            FIXED64
        } else {
            VARINT
        };
        while !packed.is_empty() {
            let v = scalar(kind, inner, &mut packed)?;
            push(obj, name, v);
        }
        return Ok(());
    }
    let v = scalar(kind, wire, r)?;
    if field.repeated {
        push(obj, name, v);
    } else if v.as_str() == Some("") && !KEEP_EMPTY.contains(&(msg_name, name)) {
        obj.remove(name);
    } else {
        obj.insert(name.to_string(), v);
    }
    Ok(())
}

/// One scalar value (strings, bytes, numbers, booleans).
#[inline(never)]
fn scalar(kind: FieldKind, wire: WireType, r: &mut Reader<'_>) -> Result<Value> {
    let expect = |want: WireType, what: &'static str| {
        if wire == want {
            Ok(())
        } else {
            Err(mismatch(wire, what))
        }
    };
    Ok(match kind {
        FieldKind::String => {
            expect(LEN, "string")?;
            Value::String(utf8(r.bytes()?)?)
        }
        FieldKind::Bytes => {
            expect(LEN, "bytes")?;
            Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?))
        }
        FieldKind::Int32 => {
            expect(VARINT, "int32")?;
            // Go truncates a varint to the low 32 bits for int32.
            Value::from(r.varint()? as i64 as i32)
        }
        FieldKind::Int64 => {
            expect(VARINT, "int64")?;
            Value::from(r.varint()? as i64)
        }
        FieldKind::Bool => {
            expect(VARINT, "bool")?;
            Value::Bool(r.varint()? != 0)
        }
        FieldKind::Double => {
            expect(FIXED64, "double")?;
            let f = f64::from_bits(r.fixed64()?);
            if f.fract() == 0.0 && f.abs() < 9.0e18 {
                // Go prints integral floats without a fraction (`10`, not `10.0`).
                Value::from(f as i64)
            } else {
                Value::Number(
                    Number::from_f64(f)
                        .ok_or_else(|| Reason::Invalid(format!("{f} is not a JSON number")))?,
                )
            }
        }
        FieldKind::Message | FieldKind::Map => return Err(mismatch(wire, "scalar")),
    })
}

/// One `map<string, V>` entry message: key = 1, value = 2.
fn decode_entry(field: &FieldFacts, bytes: &[u8], depth: usize) -> Result<(String, Value)> {
    let mut key = String::new();
    let mut value = None;
    let mut r = Reader::new(bytes);
    while let Some((tag, wire)) = r.key()? {
        match (tag, field.value) {
            (1, _) => {
                if wire != LEN {
                    return Err(mismatch(wire, "map key"));
                }
                key = utf8(r.bytes()?)?;
            }
            (2, Some(MapValueKind::String)) => value = Some(scalar(FieldKind::String, wire, &mut r)?),
            (2, Some(MapValueKind::Bytes)) => value = Some(scalar(FieldKind::Bytes, wire, &mut r)?),
            (2, Some(MapValueKind::Message)) => {
                if wire != LEN {
                    return Err(mismatch(wire, "map value"));
                }
                let payload = r.bytes()?;
                value =
                    Some(decode_message(target(field)?, payload, depth).map_err(|e| e.within(key.clone()))?);
            }
            _ => r.skip(wire)?,
        }
    }
    let value = match (value, field.value) {
        (Some(v), _) => v,
        (None, Some(MapValueKind::Message)) => decode_message(target(field)?, &[], depth)?,
        (None, _) => Value::String(String::new()),
    };
    Ok((key, value))
}

/// Encodes a JSON value as message `name` at JSON nesting level `depth`.
pub fn encode_message(name: &str, value: &Value, depth: usize, out: &mut Vec<u8>) -> Result<()> {
    if depth > MAX_ENCODE_DEPTH {
        return Err(Reason::TooDeep(MAX_ENCODE_DEPTH).into());
    }
    if special::encode(name, value, depth, out)? {
        return Ok(());
    }
    let msg = message(name)?;
    match value {
        Value::Object(obj) => encode_fields(msg, obj, depth, out),
        Value::Null => Ok(()),
        other => Err(shape("an object", other)),
    }
}

/// Encodes a message as a length-delimited field.
pub fn encode_nested(tag: u32, name: &str, value: &Value, depth: usize, out: &mut Vec<u8>) -> Result<()> {
    let mut sub = Vec::new();
    encode_message(name, value, depth, &mut sub)?;
    out.len_field(tag, &sub);
    Ok(())
}

fn encode_fields(
    msg: &MessageFacts,
    obj: &Map<String, Value>,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    for field in &msg.fields {
        if field.inline {
            encode_inline(field, obj, depth, out)?;
            continue;
        }
        let Some(v) = obj.get(&field.name).filter(|v| !v.is_null()) else {
            continue;
        };
        encode_field(field, v, depth, out).map_err(|e| e.within(field.name.clone()))?;
    }
    Ok(())
}

/// A Go-embedded struct is a plain field: always written, from the parent's keys.
fn encode_inline(
    field: &FieldFacts,
    obj: &Map<String, Value>,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut sub = Vec::new();
    encode_fields(message(target(field)?)?, obj, depth + 1, &mut sub)?;
    out.len_field(field.tag, &sub);
    Ok(())
}

/// Encodes one present field. As in decoding, the recursive paths are small functions of
/// their own so each nesting level costs little stack.
fn encode_field(field: &FieldFacts, v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<()> {
    match (field.kind, field.repeated) {
        (FieldKind::Map, _) => encode_map(field, v, depth, out),
        (FieldKind::Message, false) => encode_nested(field.tag, target(field)?, v, depth + 1, out),
        (FieldKind::Message, true) => {
            let items = v.as_array().ok_or_else(|| shape("an array", v))?;
            let target = target(field)?;
            for (i, item) in items.iter().enumerate() {
                encode_nested(field.tag, target, item, depth + 2, out)
                    .map_err(|e| e.within(format!("[{i}]")))?;
            }
            Ok(())
        }
        (_, true) => {
            let items = v.as_array().ok_or_else(|| shape("an array", v))?;
            for (i, item) in items.iter().enumerate() {
                encode_scalar(field, item, out).map_err(|e| e.within(format!("[{i}]")))?;
            }
            Ok(())
        }
        (_, false) => encode_scalar(field, v, out),
    }
}

fn encode_map(field: &FieldFacts, v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<()> {
    let map = v.as_object().ok_or_else(|| shape("an object", v))?;
    // serde_json's map is sorted, as Go's generated marshallers sort map keys.
    for (k, val) in map {
        let mut entry = Vec::new();
        entry.len_field(1, k.as_bytes());
        encode_map_value(field, val, depth, &mut entry).map_err(|e| e.within(k.clone()))?;
        out.len_field(field.tag, &entry);
    }
    Ok(())
}

fn encode_map_value(field: &FieldFacts, val: &Value, depth: usize, entry: &mut Vec<u8>) -> Result<()> {
    match field.value {
        Some(MapValueKind::String) => {
            entry.len_field(2, val.as_str().ok_or_else(|| shape("a string", val))?.as_bytes());
            Ok(())
        }
        Some(MapValueKind::Bytes) => {
            entry.len_field(2, &base64_bytes(val)?);
            Ok(())
        }
        Some(MapValueKind::Message) => encode_nested(2, target(field)?, val, depth + 2, entry),
        None => Err(Reason::Invalid(format!("map field {} has no value kind", field.name)).into()),
    }
}

#[inline(never)]
fn encode_scalar(field: &FieldFacts, v: &Value, out: &mut Vec<u8>) -> Result<()> {
    let tag = field.tag;
    match field.kind {
        FieldKind::String => out.len_field(tag, v.as_str().ok_or_else(|| shape("a string", v))?.as_bytes()),
        FieldKind::Bytes => out.len_field(tag, &base64_bytes(v)?),
        FieldKind::Int32 => {
            let n = integer(v)?;
            let n = i32::try_from(n).map_err(|_| Reason::Invalid(format!("{n} does not fit in int32")))?;
            out.varint_field(tag, i64::from(n));
        }
        FieldKind::Int64 => out.varint_field(tag, integer(v)?),
        FieldKind::Bool => {
            out.varint_field(tag, i64::from(v.as_bool().ok_or_else(|| shape("a boolean", v))?))
        }
        FieldKind::Double => {
            let f = v.as_f64().ok_or_else(|| shape("a number", v))?;
            prost::encoding::double::encode(tag, &f, out);
        }
        FieldKind::Message | FieldKind::Map => {
            return Err(Reason::Invalid(format!("field {} is not a scalar", field.name)).into())
        }
    }
    Ok(())
}

/// An integer JSON value (an integral float such as `3.0` is accepted).
pub fn integer(v: &Value) -> Result<i64> {
    if let Some(n) = v.as_i64() {
        return Ok(n);
    }
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => Ok(f as i64),
        Some(f) => Err(Reason::Invalid(format!("{f} is not an integer")).into()),
        None => Err(shape("an integer", v)),
    }
}

/// The bytes of a base64 JSON string.
pub fn base64_bytes(v: &Value) -> Result<Vec<u8>> {
    let s = v.as_str().ok_or_else(|| shape("a base64 string", v))?;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| Reason::Invalid(format!("invalid base64: {e}")).into())
}
