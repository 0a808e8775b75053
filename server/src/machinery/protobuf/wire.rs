//! The protobuf wire format at the byte level: a bounds-checked reader over untrusted input and
//! a writer, plus the error every layer of the transcoder reports. Varints, keys and wire types
//! are prost's; this module adds the checks and the errors the transcoder reports.
//!
//! The reader never allocates: length prefixes are checked against the bytes actually present
//! and yield sub-slices of the input, so a hostile length cannot reserve memory.

use std::fmt;

use prost::encoding::{decode_varint, encode_key, encode_varint, WireType, MAX_TAG};

/// Why a protobuf body or object could not be transcoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Reason {
    /// The input ends inside a key, varint, fixed-size value or length-delimited field.
    #[error("unexpected end of input (truncated {0})")]
    Truncated(&'static str),
    /// A varint runs past ten bytes, or its tenth byte carries bits beyond the 64th.
    #[error("varint longer than 64 bits")]
    VarintTooLong,
    /// Field number 0 or above 2^29-1.
    #[error("invalid field number {0}")]
    FieldNumber(u64),
    /// Wire types 3 and 4 (groups), 6 and 7 do not occur in Kubernetes messages.
    #[error("unsupported wire type {0}")]
    WireType(u8),
    /// A known field arrived with a wire type that does not fit its kind.
    #[error("wire type {found} does not fit a {expected} field")]
    Mismatch {
        /// The wire type on the wire.
        found: u8,
        /// The field kind from the type facts.
        expected: &'static str,
    },
    /// Objects nest deeper than the transcoder allows.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// A value that decodes but is not valid for its type (bad UTF-8, time out of range, …).
    #[error("{0}")]
    Invalid(String),
    /// A JSON value of the wrong shape for the message it is encoded into.
    #[error("expected {expected}, found {found}")]
    Shape {
        /// What the message needs.
        expected: &'static str,
        /// What the JSON value is.
        found: &'static str,
    },
    /// The type facts have no message by this name.
    #[error("no protobuf message {0}")]
    UnknownMessage(String),
}

/// A transcoding failure and where in the object it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoError {
    /// JSON path of the failing value, outermost first (empty at the top level).
    pub path: Vec<String>,
    /// What went wrong.
    pub reason: Reason,
}

impl ProtoError {
    /// Records that the error happened inside `segment` (a field name or `[index]`).
    pub fn within(mut self, segment: impl Into<String>) -> Self {
        self.path.push(segment.into());
        self
    }
}

impl From<Reason> for ProtoError {
    fn from(reason: Reason) -> Self {
        ProtoError {
            path: Vec::new(),
            reason,
        }
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            return write!(f, "{}", self.reason);
        }
        let mut path = String::new();
        for seg in self.path.iter().rev() {
            if !seg.starts_with('[') && !path.is_empty() {
                path.push('.');
            }
            path.push_str(seg);
        }
        write!(f, "{path}: {}", self.reason)
    }
}

impl std::error::Error for ProtoError {}

/// Result of a transcoding step.
pub type Result<T> = std::result::Result<T, ProtoError>;

/// Varint (wire type 0).
pub const VARINT: WireType = WireType::Varint;
/// Little-endian 64-bit value (wire type 1).
pub const FIXED64: WireType = WireType::SixtyFourBit;
/// Length-delimited bytes (wire type 2).
pub const LEN: WireType = WireType::LengthDelimited;
/// Little-endian 32-bit value (wire type 5).
pub const FIXED32: WireType = WireType::ThirtyTwoBit;

/// A cursor over one message's bytes.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads the message in `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.buf.len() {
            return Err(Reason::Truncated(what).into());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// One varint.
    pub fn varint(&mut self) -> Result<u64> {
        let start = self.buf;
        decode_varint(&mut self.buf).map_err(|_| {
            // prost does not say why: the input ended inside the varint, or it is too long.
            let truncated = start.len() < 10 && start.iter().all(|b| b & 0x80 != 0);
            let reason = if truncated {
                Reason::Truncated("varint")
            } else {
                Reason::VarintTooLong
            };
            reason.into()
        })
    }

    /// The next field key (number, wire type), or `None` at the end of the message.
    pub fn key(&mut self) -> Result<Option<(u32, WireType)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > u64::from(MAX_TAG) {
            return Err(Reason::FieldNumber(field).into());
        }
        let wire = match WireType::try_from(key & 7) {
            Ok(wire @ (VARINT | FIXED64 | LEN | FIXED32)) => wire,
            // Groups (3 and 4), 6 and 7; `key & 7` fits in a byte.
            _ => return Err(Reason::WireType((key & 7) as u8).into()),
        };
        // Checked above: at most 2^29-1.
        Ok(Some((field as u32, wire)))
    }

    /// A length-delimited payload.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.varint()?;
        let n =
            usize::try_from(n).map_err(|_| ProtoError::from(Reason::Truncated("length-delimited field")))?;
        self.take(n, "length-delimited field")
    }

    /// A fixed 64-bit value.
    pub fn fixed64(&mut self) -> Result<u64> {
        let b = self.take(8, "fixed64")?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Skips a value of an unknown field.
    pub fn skip(&mut self, wire: WireType) -> Result<()> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8, "fixed64").map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => self.take(4, "fixed32").map(drop),
            other => Err(Reason::WireType(other as u8).into()),
        }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Appends protobuf fields to a buffer.
pub trait Write {
    /// A length-delimited field.
    fn len_field(&mut self, field: u32, payload: &[u8]);
    /// The key and length of a length-delimited field whose `len` bytes follow.
    fn len_prefix(&mut self, field: u32, len: usize);
    /// A varint field (negative `int32`/`int64` are sign-extended to ten bytes, as Go does).
    fn varint_field(&mut self, field: u32, v: i64);
}

impl Write for Vec<u8> {
    fn len_field(&mut self, field: u32, payload: &[u8]) {
        self.len_prefix(field, payload.len());
        self.extend_from_slice(payload);
    }

    fn len_prefix(&mut self, field: u32, len: usize) {
        encode_key(field, LEN, self);
        encode_varint(len as u64, self);
    }

    fn varint_field(&mut self, field: u32, v: i64) {
        encode_key(field, VARINT, self);
        encode_varint(v as u64, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_negative_numbers_take_ten_bytes() {
        for v in [
            0i64,
            1,
            127,
            128,
            300,
            i64::from(i32::MAX),
            -1,
            i64::MIN,
            i64::MAX,
        ] {
            let mut b = Vec::new();
            b.varint_field(1, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.key().unwrap(), Some((1, VARINT)));
            assert_eq!(r.varint().unwrap() as i64, v);
            assert!(r.is_empty());
        }
        let mut b = Vec::new();
        encode_varint(-1i64 as u64, &mut b);
        assert_eq!(b.len(), 10);
        let mut b = Vec::new();
        encode_varint(300, &mut b);
        assert_eq!(b, [0xac, 0x02]);
    }

    #[test]
    fn hostile_input_is_an_error() {
        assert_eq!(
            Reader::new(&[0x80]).varint().unwrap_err().reason,
            Reason::Truncated("varint")
        );
        assert_eq!(
            Reader::new(&[0xff; 11]).varint().unwrap_err().reason,
            Reason::VarintTooLong
        );
        // Field number 0.
        assert!(matches!(
            Reader::new(&[0x02]).key().unwrap_err().reason,
            Reason::FieldNumber(0)
        ));
        // Group wire type.
        assert!(matches!(
            Reader::new(&[0x0b]).key().unwrap_err().reason,
            Reason::WireType(3)
        ));
        // A length far past the input.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]);
        assert!(matches!(r.bytes().unwrap_err().reason, Reason::Truncated(_)));
        let mut r = Reader::new(&[1, 2, 3]);
        assert!(matches!(
            r.fixed64().unwrap_err().reason,
            Reason::Truncated("fixed64")
        ));
    }

    #[test]
    fn a_varint_past_64_bits_is_too_long() {
        let mut b = [0xff; 10];
        b[9] = 0x01;
        assert_eq!(Reader::new(&b).varint().unwrap(), u64::MAX);
        b[9] = 0x02;
        assert_eq!(
            Reader::new(&b).varint().unwrap_err().reason,
            Reason::VarintTooLong
        );
    }

    #[test]
    fn error_paths_read_outermost_first() {
        let e = ProtoError::from(Reason::TooDeep(3))
            .within("[2]")
            .within("items")
            .within("spec");
        assert_eq!(e.to_string(), "spec.items[2]: nesting deeper than 3 levels");
    }
}
