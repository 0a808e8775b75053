//! The Swagger 2.0 document in the protobuf encoding kubectl downloads for client-side schema
//! validation: gnostic's `openapi.v2.Document`, served as
//! `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`.
//!
//! Only the parts of the message set kuberaft's document uses are written; anything else in the
//! input is an error, so a new keyword cannot silently vanish from the protobuf form. Vendor
//! extensions, defaults and enum values travel as YAML text (`Any.yaml`); JSON is valid YAML.

use prost::encoding;
use serde_json::{Map, Value};

use crate::machinery::protobuf::wire::Write;

/// The JSON document holds something the encoder does not know how to write.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// A key that has no field here.
    #[error("openapi v2 protobuf: unsupported key {key:?} in {context}")]
    Unsupported {
        /// The JSON key.
        key: String,
        /// Where it was found.
        context: &'static str,
    },
    /// A value of the wrong JSON type.
    #[error("openapi v2 protobuf: {key:?} in {context} has the wrong type")]
    WrongType {
        /// The JSON key.
        key: String,
        /// Where it was found.
        context: &'static str,
    },
}

type Result<T = ()> = std::result::Result<T, EncodeError>;

/// A protobuf message being written.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.buf.len_field(field, s.as_bytes());
        }
    }

    fn boolean(&mut self, field: u32, b: bool) {
        if b {
            encoding::bool::encode(field, &b, &mut self.buf);
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            encoding::int64::encode(field, &v, &mut self.buf);
        }
    }

    fn double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            encoding::double::encode(field, &v, &mut self.buf);
        }
    }

    fn message(&mut self, field: u32, f: impl FnOnce(&mut Writer) -> Result) -> Result {
        let mut inner = Writer::default();
        f(&mut inner)?;
        self.buf.len_field(field, &inner.buf);
        Ok(())
    }

    /// `Any { yaml = 2 }` holding `v` as text.
    fn any(&mut self, field: u32, v: &Value) -> Result {
        self.message(field, |m| {
            m.string(2, &v.to_string());
            Ok(())
        })
    }

    /// `NamedAny { name = 1, value = 2 }`: one vendor extension.
    fn extension(&mut self, field: u32, name: &str, v: &Value) -> Result {
        self.message(field, |m| {
            m.string(1, name);
            m.any(2, v)
        })
    }
}

fn wrong(key: &str, context: &'static str) -> EncodeError {
    EncodeError::WrongType {
        key: key.to_string(),
        context,
    }
}

fn unsupported(key: &str, context: &'static str) -> EncodeError {
    EncodeError::Unsupported {
        key: key.to_string(),
        context,
    }
}

fn text<'a>(v: &'a Value, key: &str, context: &'static str) -> Result<&'a str> {
    v.as_str().ok_or_else(|| wrong(key, context))
}

fn object<'a>(v: &'a Value, key: &str, context: &'static str) -> Result<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| wrong(key, context))
}

fn array<'a>(v: &'a Value, key: &str, context: &'static str) -> Result<&'a Vec<Value>> {
    v.as_array().ok_or_else(|| wrong(key, context))
}

fn strings(w: &mut Writer, field: u32, v: &Value, key: &str, context: &'static str) -> Result {
    for s in array(v, key, context)? {
        w.buf.len_field(field, text(s, key, context)?.as_bytes());
    }
    Ok(())
}

fn flag(v: &Value, key: &str, context: &'static str) -> Result<bool> {
    v.as_bool().ok_or_else(|| wrong(key, context))
}

fn integer(v: &Value, key: &str, context: &'static str) -> Result<i64> {
    v.as_i64().ok_or_else(|| wrong(key, context))
}

fn number(v: &Value, key: &str, context: &'static str) -> Result<f64> {
    v.as_f64().ok_or_else(|| wrong(key, context))
}

/// Encodes a Swagger 2.0 document.
pub fn encode(doc: &Value) -> Result<Vec<u8>> {
    const CX: &str = "document";
    let mut w = Writer::default();
    let doc = object(doc, "", CX)?;
    // Written in field order, as gnostic does, so the document starts with `swagger`.
    for key in doc.keys() {
        if !matches!(key.as_str(), "swagger" | "info" | "paths" | "definitions") && !key.starts_with("x-") {
            return Err(unsupported(key, CX));
        }
    }
    if let Some(v) = doc.get("swagger") {
        w.string(1, text(v, "swagger", CX)?);
    }
    if let Some(v) = doc.get("info") {
        w.message(2, |m| info(m, v))?;
    }
    if let Some(v) = doc.get("paths") {
        w.message(8, |m| {
            for (path, item) in object(v, "paths", CX)? {
                m.message(2, |named| {
                    named.string(1, path);
                    named.message(2, |pi| path_item(pi, item))
                })?;
            }
            Ok(())
        })?;
    }
    if let Some(v) = doc.get("definitions") {
        w.message(9, |m| named_schemas(m, v, "definitions", CX))?;
    }
    for (key, v) in doc.iter().filter(|(k, _)| k.starts_with("x-")) {
        w.extension(16, key, v)?;
    }
    Ok(w.buf)
}

fn info(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "info";
    for (key, v) in object(v, "info", CX)? {
        match key.as_str() {
            "title" => w.string(1, text(v, key, CX)?),
            "version" => w.string(2, text(v, key, CX)?),
            "description" => w.string(3, text(v, key, CX)?),
            k if k.starts_with("x-") => w.extension(7, k, v)?,
            other => return Err(unsupported(other, CX)),
        }
    }
    Ok(())
}

/// `repeated NamedSchema additional_properties = 1` (Definitions and Properties).
fn named_schemas(w: &mut Writer, v: &Value, key: &str, context: &'static str) -> Result {
    for (name, s) in object(v, key, context)? {
        w.message(1, |named| {
            named.string(1, name);
            named.message(2, |m| schema(m, s))
        })?;
    }
    Ok(())
}

fn path_item(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "path item";
    for (key, v) in object(v, "path", CX)? {
        let field = match key.as_str() {
            "get" => 2,
            "put" => 3,
            "post" => 4,
            "delete" => 5,
            "options" => 6,
            "head" => 7,
            "patch" => 8,
            "parameters" => {
                for p in array(v, key, CX)? {
                    w.message(9, |m| parameter(m, p))?;
                }
                continue;
            }
            k if k.starts_with("x-") => {
                w.extension(10, k, v)?;
                continue;
            }
            other => return Err(unsupported(other, CX)),
        };
        w.message(field, |m| operation(m, v))?;
    }
    Ok(())
}

fn operation(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "operation";
    for (key, v) in object(v, "operation", CX)? {
        match key.as_str() {
            "tags" => strings(w, 1, v, key, CX)?,
            "summary" => w.string(2, text(v, key, CX)?),
            "description" => w.string(3, text(v, key, CX)?),
            "operationId" => w.string(5, text(v, key, CX)?),
            "produces" => strings(w, 6, v, key, CX)?,
            "consumes" => strings(w, 7, v, key, CX)?,
            "parameters" => {
                for p in array(v, key, CX)? {
                    w.message(8, |m| parameter(m, p))?;
                }
            }
            "responses" => w.message(9, |m| responses(m, v))?,
            "schemes" => strings(w, 10, v, key, CX)?,
            "deprecated" => w.boolean(11, flag(v, key, CX)?),
            k if k.starts_with("x-") => w.extension(13, k, v)?,
            other => return Err(unsupported(other, CX)),
        }
    }
    Ok(())
}

/// `ParametersItem { parameter = 1 }` → `Parameter { body_parameter = 1 | non_body_parameter = 2 }`.
fn parameter(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "parameter";
    let location = v.get("in").and_then(Value::as_str).unwrap_or("");
    w.message(1, |p| {
        if location == "body" {
            return p.message(1, |b| body_parameter(b, v));
        }
        // NonBodyParameter: header = 1, formData = 2, query = 3, path = 4.
        let (field, layout) = match location {
            "header" => (1, SubSchema::PATH_LIKE),
            "formData" => (2, SubSchema::QUERY_LIKE),
            "query" => (3, SubSchema::QUERY_LIKE),
            "path" => (4, SubSchema::PATH_LIKE),
            _ => return Err(wrong("in", CX)),
        };
        p.message(2, |nb| nb.message(field, |s| sub_schema(s, v, &layout)))
    })
}

fn body_parameter(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "body parameter";
    for (key, v) in object(v, "parameter", CX)? {
        match key.as_str() {
            "description" => w.string(1, text(v, key, CX)?),
            "name" => w.string(2, text(v, key, CX)?),
            "in" => w.string(3, text(v, key, CX)?),
            "required" => w.boolean(4, flag(v, key, CX)?),
            "schema" => w.message(5, |m| schema(m, v))?,
            k if k.starts_with("x-") => w.extension(6, k, v)?,
            other => return Err(unsupported(other, CX)),
        }
    }
    Ok(())
}

/// Field numbers of the non-body parameter messages, which differ only in whether they have
/// `allow_empty_value` (query and formData do, shifting every later field by one).
struct SubSchema {
    allow_empty_value: Option<u32>,
    type_: u32,
    format: u32,
    unique_items: u32,
    vendor_extension: u32,
}

impl SubSchema {
    const QUERY_LIKE: SubSchema = SubSchema {
        allow_empty_value: Some(5),
        type_: 6,
        format: 7,
        unique_items: 20,
        vendor_extension: 23,
    };
    const PATH_LIKE: SubSchema = SubSchema {
        allow_empty_value: None,
        type_: 5,
        format: 6,
        unique_items: 19,
        vendor_extension: 22,
    };
}

fn sub_schema(w: &mut Writer, v: &Value, layout: &SubSchema) -> Result {
    const CX: &str = "non-body parameter";
    for (key, v) in object(v, "parameter", CX)? {
        match key.as_str() {
            "required" => w.boolean(1, flag(v, key, CX)?),
            "in" => w.string(2, text(v, key, CX)?),
            "description" => w.string(3, text(v, key, CX)?),
            "name" => w.string(4, text(v, key, CX)?),
            "allowEmptyValue" => match layout.allow_empty_value {
                Some(field) => w.boolean(field, flag(v, key, CX)?),
                None => return Err(unsupported(key, CX)),
            },
            "type" => w.string(layout.type_, text(v, key, CX)?),
            "format" => w.string(layout.format, text(v, key, CX)?),
            "uniqueItems" => w.boolean(layout.unique_items, flag(v, key, CX)?),
            k if k.starts_with("x-") => w.extension(layout.vendor_extension, k, v)?,
            other => return Err(unsupported(other, CX)),
        }
    }
    Ok(())
}

/// `Responses { response_code = 1 (NamedResponseValue), vendor_extension = 2 }`.
fn responses(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "responses";
    for (code, r) in object(v, "responses", CX)? {
        if code.starts_with("x-") {
            w.extension(2, code, r)?;
            continue;
        }
        w.message(1, |named| {
            named.string(1, code);
            // ResponseValue { response = 1 }
            named.message(2, |rv| rv.message(1, |m| response(m, r)))
        })?;
    }
    Ok(())
}

fn response(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "response";
    for (key, v) in object(v, "response", CX)? {
        match key.as_str() {
            "description" => w.string(1, text(v, key, CX)?),
            // SchemaItem { schema = 1 }
            "schema" => w.message(2, |si| si.message(1, |m| schema(m, v)))?,
            k if k.starts_with("x-") => w.extension(5, k, v)?,
            other => return Err(unsupported(other, CX)),
        }
    }
    Ok(())
}

/// gnostic's `Schema` message.
fn schema(w: &mut Writer, v: &Value) -> Result {
    const CX: &str = "schema";
    for (key, v) in object(v, "schema", CX)? {
        match key.as_str() {
            "$ref" => w.string(1, text(v, key, CX)?),
            "format" => w.string(2, text(v, key, CX)?),
            "title" => w.string(3, text(v, key, CX)?),
            "description" => w.string(4, text(v, key, CX)?),
            "default" => w.any(5, v)?,
            "multipleOf" => w.double(6, number(v, key, CX)?),
            "maximum" => w.double(7, number(v, key, CX)?),
            "exclusiveMaximum" => w.boolean(8, flag(v, key, CX)?),
            "minimum" => w.double(9, number(v, key, CX)?),
            "exclusiveMinimum" => w.boolean(10, flag(v, key, CX)?),
            "maxLength" => w.int64(11, integer(v, key, CX)?),
            "minLength" => w.int64(12, integer(v, key, CX)?),
            "pattern" => w.string(13, text(v, key, CX)?),
            "maxItems" => w.int64(14, integer(v, key, CX)?),
            "minItems" => w.int64(15, integer(v, key, CX)?),
            "uniqueItems" => w.boolean(16, flag(v, key, CX)?),
            "maxProperties" => w.int64(17, integer(v, key, CX)?),
            "minProperties" => w.int64(18, integer(v, key, CX)?),
            "required" => strings(w, 19, v, key, CX)?,
            "enum" => {
                for e in array(v, key, CX)? {
                    w.any(20, e)?;
                }
            }
            // AdditionalPropertiesItem { schema = 1 | boolean = 2 }
            "additionalProperties" => w.message(21, |m| match v {
                Value::Bool(b) => {
                    // A oneof member: written even when false.
                    encoding::bool::encode(2, b, &mut m.buf);
                    Ok(())
                }
                _ => m.message(1, |s| schema(s, v)),
            })?,
            // TypeItem { repeated string value = 1 }
            "type" => w.message(22, |m| match v {
                Value::String(t) => {
                    m.string(1, t);
                    Ok(())
                }
                _ => strings(m, 1, v, key, CX),
            })?,
            // ItemsItem { repeated Schema schema = 1 }
            "items" => w.message(23, |m| match v {
                Value::Array(list) => list.iter().try_for_each(|s| m.message(1, |x| schema(x, s))),
                _ => m.message(1, |x| schema(x, v)),
            })?,
            "allOf" => {
                for s in array(v, key, CX)? {
                    w.message(24, |m| schema(m, s))?;
                }
            }
            "properties" => w.message(25, |m| named_schemas(m, v, key, CX))?,
            "discriminator" => w.string(26, text(v, key, CX)?),
            "readOnly" => w.boolean(27, flag(v, key, CX)?),
            "example" => w.any(30, v)?,
            k if k.starts_with("x-") => w.extension(31, k, v)?,
            other => return Err(unsupported(other, CX)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use prost::encoding::WireType;
    use serde_json::json;

    use super::*;

    /// Reads one level of protobuf fields: (field number, wire type, payload or varint).
    fn fields(mut b: &[u8]) -> Vec<(u32, u8, Vec<u8>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let (field, wire) = encoding::decode_key(&mut b).unwrap();
            let payload = match wire {
                WireType::Varint => encoding::decode_varint(&mut b).unwrap().to_le_bytes().to_vec(),
                WireType::LengthDelimited => {
                    let len = encoding::decode_varint(&mut b).unwrap() as usize;
                    let (payload, rest) = b.split_at(len);
                    b = rest;
                    payload.to_vec()
                }
                WireType::SixtyFourBit => {
                    let (payload, rest) = b.split_at(8);
                    b = rest;
                    payload.to_vec()
                }
                other => panic!("unexpected wire type {other:?}"),
            };
            out.push((field, wire as u8, payload));
        }
        out
    }

    #[test]
    fn a_definition_is_written_with_gnostic_field_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "definitions": {
                "a.B": {
                    "type": "object",
                    "required": ["x"],
                    "properties": {"x": {"$ref": "#/definitions/a.C", "description": "d"}},
                    "x-kubernetes-group-version-kind": [{"group": "", "kind": "B", "version": "v1"}],
                }
            }
        });
        let bytes = encode(&doc).unwrap();
        let top = fields(&bytes);
        assert_eq!(top[0], (1, 2, b"2.0".to_vec()));
        let defs = &top.iter().find(|f| f.0 == 9).unwrap().2;
        let named = &fields(defs)[0].2;
        let named = fields(named);
        assert_eq!(named[0].2, b"a.B".to_vec());
        let schema = fields(&named[1].2);
        let by_field = |n: u32| schema.iter().filter(move |f| f.0 == n).collect::<Vec<_>>();
        assert_eq!(by_field(19)[0].2, b"x".to_vec());
        assert_eq!(fields(&by_field(22)[0].2)[0].2, b"object".to_vec());
        let ext = fields(&by_field(31)[0].2);
        assert_eq!(ext[0].2, b"x-kubernetes-group-version-kind".to_vec());
        let yaml = String::from_utf8(fields(&ext[1].2)[0].2.clone()).unwrap();
        let parsed: Value = yaml_serde::from_str(&yaml).unwrap();
        assert_eq!(parsed[0]["kind"], "B");
        let prop = fields(&fields(&by_field(25)[0].2)[0].2);
        let prop_schema = fields(&prop[1].2);
        assert_eq!(prop_schema[0], (1, 2, b"#/definitions/a.C".to_vec()));
    }

    #[test]
    fn unknown_keywords_are_errors() {
        let doc = json!({"definitions": {"a": {"oneOf": []}}});
        assert!(matches!(encode(&doc), Err(EncodeError::Unsupported { .. })));
    }
}
