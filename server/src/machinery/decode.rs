//! Decoding a request body (JSON, YAML, Kubernetes protobuf or CBOR) into a JSON value, noting
//! duplicate fields for field validation.

use crate::machinery::cbor;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::{decode_tracking_duplicates, Decoded};

/// Decodes a JSON, YAML, Kubernetes protobuf or CBOR body into a JSON value, noting duplicate
/// fields for field validation (YAML through yaml_serde, whose alias expansion and nesting are
/// bounded; JSON nesting is bounded by serde_json; CBOR refuses duplicate keys outright, as
/// kube-apiserver's CBOR decoder does).
pub fn decode_body(content_type: &str, body: &[u8]) -> ApiResult<Decoded> {
    match content_type {
        "" | "application/json" => {
            let mut de = serde_json::Deserializer::from_slice(body);
            decode_tracking_duplicates(&mut de)
                .and_then(|decoded| de.end().map(|()| decoded))
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "the body of the request could not be decoded as JSON: {e}"
                    ))
                })
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            decode_tracking_duplicates(yaml_serde::Deserializer::from_slice(body)).map_err(|e| {
                ApiError::bad_request(format!(
                    "the body of the request could not be decoded as YAML: {e}"
                ))
            })
        }
        crate::machinery::protobuf::MEDIA_TYPE => Ok(Decoded {
            value: crate::machinery::protobuf::decode_request(body)?,
            duplicates: Vec::new(),
        }),
        cbor::MEDIA_TYPE => Ok(Decoded {
            value: cbor::decode(body).map_err(|e| ApiError::bad_request(e.to_string()))?,
            duplicates: Vec::new(),
        }),
        _ => Err(ApiError::unsupported_media_type()),
    }
}

/// Decodes the body of a create or update of a `kind` (JSON, YAML, protobuf or CBOR). A JSON
/// body that is not JSON is refused as kube-apiserver's decoder refuses it: it could not read
/// the body's `apiVersion` and `kind` (`SimpleMetaFactory.Interpret`, Go's `encoding/json`
/// error), and says what it expected and how the body began (`transformDecodeError`). CBOR is
/// refused the same way when it is not well-formed or breaks the decoder's limits (found before
/// the type is read); a well-formed body with a duplicate key, invalid UTF-8 or NaN further in
/// is refused naming the kind and version it declared.
pub fn decode_object(kind: &str, content_type: &str, body: &[u8]) -> ApiResult<Decoded> {
    if content_type == cbor::MEDIA_TYPE {
        return match cbor::decode(body) {
            Ok(value) => Ok(Decoded {
                value,
                duplicates: Vec::new(),
            }),
            Err(e) => Err(ApiError::bad_request(cbor_refusal(kind, body, &e))),
        };
    }
    if matches!(content_type, "" | "application/json") {
        if let Some(why) = go_interpret_error(body) {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {why} ({})",
                summarize(body, 30)
            )));
        }
    }
    decode_body(content_type, body)
}

/// kube-apiserver's words for a CBOR body of a `kind` its decoder refused: before the type was
/// read (well-formedness, limits, a duplicate top-level key), or while decoding the rest.
fn cbor_refusal(kind: &str, body: &[u8], e: &cbor::CborError) -> String {
    let interpreted = if e.is_structural() {
        Err(e.clone())
    } else {
        cbor::type_meta(body)
    };
    match interpreted {
        Err(e) => format!(
            "the object provided is unrecognized (must be of type {kind}): unable to determine group/version/kind: {e} ({})",
            summarize(body, 30)
        ),
        Ok((api_version, declared)) => {
            let version = api_version.rsplit('/').next().unwrap_or_default();
            let declared = if declared.is_empty() { kind } else { &declared };
            format!("{declared} in version \"{version}\" cannot be handled as a {kind}: {e}")
        }
    }
}

/// Why Go's `json.Unmarshal` of `body` into the `apiVersion`/`kind` probe struct fails, in
/// its words; `None` when it succeeds.
fn go_interpret_error(body: &[u8]) -> Option<String> {
    if let Some(syntax) = go_syntax_error(body) {
        return Some(syntax);
    }
    let first = body.iter().find(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))?;
    let found = match first {
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        b'-' | b'0'..=b'9' => "number",
        _ => return None,
    };
    Some(format!(
        "json: cannot unmarshal {found} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
    ))
}

/// How kube-apiserver shows the start of a body it could not decode (`summarizeData`): an
/// object's first `max` bytes as text, anything else's in hex, `...` when cut.
fn summarize(body: &[u8], max: usize) -> String {
    let head = &body[..body.len().min(max)];
    let more = if body.len() > max { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!(
            "{}{more}",
            head.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    }
}

/// The syntax error Go's `encoding/json` scanner reports for `body` (the first one, in its
/// words: `unexpected end of JSON input`, `invalid character 'x' looking for beginning of
/// value`, ...), or `None` for valid JSON. Iterative, so nesting costs heap, not stack.
pub fn go_syntax_error(body: &[u8]) -> Option<String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Container {
        Object,
        Array,
    }
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        BeginValue,
        BeginValueOrEmpty,
        BeginStringOrEmpty,
        BeginKey,
        EndValue,
        EndTop,
        InString { key: bool },
        Escape { key: bool },
        Unicode { key: bool, left: u8 },
        Neg,
        Zero,
        Digits,
        Dot,
        Fraction,
        Exponent,
        ExponentSign,
        ExponentDigits,
        Literal { word: &'static [u8], at: usize },
    }
    let invalid = |c: u8, context: &str| Some(format!("invalid character {} {context}", quote_char(c)));
    let is_space = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut stack: Vec<Container> = Vec::new();
    // Whether the value that just ended was an object key (it is followed by `:`).
    let mut after_key = false;
    let mut state = State::BeginValue;
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        i += 1;
        state = match state {
            State::BeginValue | State::BeginValueOrEmpty => {
                if is_space(c) {
                    continue;
                }
                if c == b']' && state == State::BeginValueOrEmpty {
                    stack.pop();
                    State::EndValue
                } else {
                    match c {
                        b'{' => {
                            stack.push(Container::Object);
                            State::BeginStringOrEmpty
                        }
                        b'[' => {
                            stack.push(Container::Array);
                            State::BeginValueOrEmpty
                        }
                        b'"' => State::InString { key: false },
                        b'-' => State::Neg,
                        b'0' => State::Zero,
                        b'1'..=b'9' => State::Digits,
                        b't' => State::Literal { word: b"true", at: 1 },
                        b'f' => State::Literal {
                            word: b"false",
                            at: 1,
                        },
                        b'n' => State::Literal { word: b"null", at: 1 },
                        _ => return invalid(c, "looking for beginning of value"),
                    }
                }
            }
            State::BeginStringOrEmpty | State::BeginKey => {
                if is_space(c) {
                    continue;
                }
                match c {
                    b'}' if state == State::BeginStringOrEmpty => {
                        stack.pop();
                        State::EndValue
                    }
                    b'"' => State::InString { key: true },
                    _ => return invalid(c, "looking for beginning of object key string"),
                }
            }
            State::InString { key } => match c {
                b'"' => {
                    after_key = key;
                    State::EndValue
                }
                b'\\' => State::Escape { key },
                0..=0x1f => return invalid(c, "in string literal"),
                _ => State::InString { key },
            },
            State::Escape { key } => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => State::InString { key },
                b'u' => State::Unicode { key, left: 4 },
                _ => return invalid(c, "in string escape code"),
            },
            State::Unicode { key, left } => {
                if !c.is_ascii_hexdigit() {
                    return invalid(c, "in \\u hexadecimal character escape");
                }
                if left == 1 {
                    State::InString { key }
                } else {
                    State::Unicode { key, left: left - 1 }
                }
            }
            State::Neg => match c {
                b'0' => State::Zero,
                b'1'..=b'9' => State::Digits,
                _ => return invalid(c, "in numeric literal"),
            },
            State::Digits if c.is_ascii_digit() => State::Digits,
            State::Zero | State::Digits => match c {
                b'.' => State::Dot,
                b'e' | b'E' => State::Exponent,
                _ => {
                    i -= 1;
                    State::EndValue
                }
            },
            State::Dot => match c {
                b'0'..=b'9' => State::Fraction,
                _ => return invalid(c, "after decimal point in numeric literal"),
            },
            State::Fraction => match c {
                b'0'..=b'9' => State::Fraction,
                b'e' | b'E' => State::Exponent,
                _ => {
                    i -= 1;
                    State::EndValue
                }
            },
            State::Exponent | State::ExponentSign => match c {
                b'+' | b'-' if state == State::Exponent => State::ExponentSign,
                b'0'..=b'9' => State::ExponentDigits,
                _ => return invalid(c, "in exponent of numeric literal"),
            },
            State::ExponentDigits => match c {
                b'0'..=b'9' => State::ExponentDigits,
                _ => {
                    i -= 1;
                    State::EndValue
                }
            },
            State::Literal { word, at } => {
                if c != word[at] {
                    let name = String::from_utf8_lossy(word);
                    return invalid(
                        c,
                        &format!("in literal {name} (expecting {})", quote_char(word[at])),
                    );
                }
                if at + 1 == word.len() {
                    State::EndValue
                } else {
                    State::Literal { word, at: at + 1 }
                }
            }
            State::EndValue => {
                let Some(top) = stack.last() else {
                    i -= 1;
                    state = State::EndTop;
                    continue;
                };
                if is_space(c) {
                    continue;
                }
                match (top, after_key) {
                    (Container::Object, true) => {
                        if c != b':' {
                            return invalid(c, "after object key");
                        }
                        after_key = false;
                        State::BeginValue
                    }
                    (Container::Object, false) => match c {
                        b',' => State::BeginKey,
                        b'}' => {
                            stack.pop();
                            State::EndValue
                        }
                        _ => return invalid(c, "after object key:value pair"),
                    },
                    (Container::Array, _) => match c {
                        b',' => State::BeginValue,
                        b']' => {
                            stack.pop();
                            State::EndValue
                        }
                        _ => return invalid(c, "after array element"),
                    },
                }
            }
            State::EndTop => {
                if !is_space(c) {
                    return invalid(c, "after top-level value");
                }
                State::EndTop
            }
        };
    }
    let complete = stack.is_empty()
        && matches!(
            state,
            State::EndValue
                | State::EndTop
                | State::Zero
                | State::Digits
                | State::Fraction
                | State::ExponentDigits
        );
    (!complete).then(|| "unexpected end of JSON input".to_string())
}

/// A byte as Go's JSON scanner quotes it in an error (`quoteChar`): `'x'`, `'\''`, `'"'`,
/// `'\n'`, `'\x00'`; bytes above ASCII are the code points of the same value.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        0x07 => "'\\a'".to_string(),
        0x08 => "'\\b'".to_string(),
        0x0c => "'\\f'".to_string(),
        b'\n' => "'\\n'".to_string(),
        b'\r' => "'\\r'".to_string(),
        b'\t' => "'\\t'".to_string(),
        0x0b => "'\\v'".to_string(),
        b'\\' => "'\\\\'".to_string(),
        0..=0x1f | 0x7f => format!("'\\x{c:02x}'"),
        0x80..=0xa0 | 0xad => format!("'\\u{c:04x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_are_worded_as_gos_encoding_json() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (b"{\"a\": [1, 2.5e-3, true, null, \"x\\u00e9\"]}", None),
            (b" 12 ", None),
            (b"", Some("unexpected end of JSON input")),
            (b"{", Some("unexpected end of JSON input")),
            (b"{\"a\":1", Some("unexpected end of JSON input")),
            (
                b"xx",
                Some("invalid character 'x' looking for beginning of value"),
            ),
            (b"{\"a\" 1}", Some("invalid character '1' after object key")),
            (
                b"{\"a\":1 \"b\":2}",
                Some("invalid character '\"' after object key:value pair"),
            ),
            (b"[1 2]", Some("invalid character '2' after array element")),
            (
                b"{a:1}",
                Some("invalid character 'a' looking for beginning of object key string"),
            ),
            (b"{}}", Some("invalid character '}' after top-level value")),
            (b"tru", Some("unexpected end of JSON input")),
            (
                b"trux",
                Some("invalid character 'x' in literal true (expecting 'e')"),
            ),
            (b"01", Some("invalid character '1' after top-level value")),
            (
                b"1.x",
                Some("invalid character 'x' after decimal point in numeric literal"),
            ),
            (b"\"a\nb\"", Some("invalid character '\\n' in string literal")),
            (b"\"\\q\"", Some("invalid character 'q' in string escape code")),
            (
                b"{'a':1}",
                Some("invalid character '\\'' looking for beginning of object key string"),
            ),
        ];
        for (body, want) in cases {
            assert_eq!(
                go_syntax_error(body).as_deref(),
                *want,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn an_undecodable_object_is_refused_as_kube_apiserver_refuses_it() {
        let e = decode_object("Namespace", "application/json", b"{\"kind\":\"Namespace\",").unwrap_err();
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert_eq!(
            e.message,
            "the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: unexpected end of JSON input ({\"kind\":\"Namespace\",)"
        );
        let e = decode_object(
            "ConfigMap",
            "application/json",
            b"not json at all, and longer than thirty bytes",
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u') (6e6f74206a736f6e20617420616c6c2c20616e64206c6f6e676572207468 ...)"
        );
        let e = decode_object("ConfigMap", "application/json", b"[]").unwrap_err();
        assert!(e.message.contains("json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" } (5b5d)"), "{}", e.message);
    }

    #[test]
    fn bodies_decode_or_fail_with_the_right_status() {
        assert_eq!(decode_body("application/yaml", b"a: 1").unwrap().value["a"], 1);
        assert_eq!(decode_body("application/json", b"{").unwrap_err().code, 400);
        assert_eq!(decode_body("application/json", b"{} {}").unwrap_err().code, 400);
        assert_eq!(decode_body("text/plain", b"x").unwrap_err().code, 415);
        let deep = "[".repeat(10_000);
        assert_eq!(
            decode_body("application/json", deep.as_bytes()).unwrap_err().code,
            400
        );
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
        assert_eq!(
            decode_body("application/yaml", bomb.as_bytes()).unwrap_err().code,
            400
        );
    }
}
