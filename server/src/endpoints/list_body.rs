//! Streamed list bodies: a LIST answered in compact JSON, CBOR or protobuf is written in chunks
//! of about [`CHUNK_BYTES`], each made when the connection asks for the next one, by copying the
//! next items' encodings that the watch cache already keeps. A list of many large objects read
//! by many clients at once then costs each of them a chunk, not a copy of the whole list (issue
//! 19, "Overload"). The bytes are exactly those of the whole list's encoding, whose length is
//! known up front, so the response keeps its `Content-Length` and gzip applies as before.
//!
//! YAML, `pretty`, Table and PartialObjectMetadataList responses are built whole elsewhere.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, BytesMut};
use hyper::body::{Frame, SizeHint};
use serde_json::{json, Value};

use crate::machinery::cbor;
use crate::machinery::go_json;
use crate::machinery::protobuf;
use crate::store::cacher::CachedObject;

/// About how many bytes each chunk of a list body holds (one item larger than this is a chunk
/// of its own size).
pub const CHUNK_BYTES: usize = 64 * 1024;

/// How each item of a list is written between the list's head and tail.
#[derive(Debug, Clone, Copy)]
enum Items {
    /// JSON, comma-separated; `typed`: the whole object (custom resources keep `kind` and
    /// `apiVersion` in lists), else the list item's encoding.
    Json { typed: bool },
    /// CBOR, one after the other; `typed` as for JSON.
    Cbor { typed: bool },
    /// Protobuf: each object's message as a length-delimited `items` field (`tag`).
    Protobuf { tag: u32 },
}

impl Items {
    /// The bytes `object` takes in the list, separator included.
    fn len(self, object: &CachedObject, first: bool) -> usize {
        match self {
            Items::Json { typed } => {
                let sep = usize::from(!first);
                sep + if typed {
                    object.json_len()
                } else {
                    object.item_json().len()
                }
            }
            Items::Cbor { typed } => cbor_of(object, typed).len(),
            Items::Protobuf { tag } => {
                let n = protobuf_of(object).map_or(0, <[u8]>::len);
                protobuf::field_prefix_len(tag, n) + n
            }
        }
    }

    /// Writes `object` as an item of the list.
    fn write(self, object: &CachedObject, first: bool, out: &mut BytesMut) {
        match self {
            Items::Json { typed } => {
                if !first {
                    out.put_u8(b',');
                }
                if typed {
                    object.write_json(out);
                } else {
                    out.put_slice(object.item_json());
                }
            }
            Items::Cbor { typed } => out.put_slice(cbor_of(object, typed)),
            Items::Protobuf { tag } => {
                let message = protobuf_of(object).unwrap_or_default();
                protobuf::put_field_prefix(tag, message.len(), out);
                out.put_slice(message);
            }
        }
    }
}

/// An object's CBOR as a list item: the whole object without the self-described tag of a
/// top-level one (`typed`), else its list-item encoding.
fn cbor_of(object: &CachedObject, typed: bool) -> &[u8] {
    if typed {
        object
            .cbor()
            .get(cbor::SELF_DESCRIBED.len()..)
            .unwrap_or_default()
    } else {
        object.cbor_item()
    }
}

/// An object's protobuf message, without the envelope (`None`: its type has no protobuf form).
fn protobuf_of(object: &CachedObject) -> Option<&[u8]> {
    object.protobuf().and_then(|b| protobuf::object_message(b))
}

/// A list's body, produced a chunk at a time from a snapshot of its objects.
pub struct ListBody {
    head: Option<Bytes>,
    items: std::vec::IntoIter<Arc<CachedObject>>,
    encoding: Items,
    first: bool,
    tail: Option<Bytes>,
    /// Bytes not yet produced.
    remaining: u64,
    chunk_bytes: usize,
}

impl ListBody {
    /// `items` between `head` and `tail`.
    fn new(head: Vec<u8>, tail: Vec<u8>, items: Vec<Arc<CachedObject>>, encoding: Items) -> ListBody {
        let items_len: usize = items
            .iter()
            .enumerate()
            .map(|(i, o)| encoding.len(o, i == 0))
            .sum();
        ListBody {
            remaining: (head.len() + items_len + tail.len()) as u64,
            head: Some(head.into()),
            items: items.into_iter(),
            encoding,
            first: true,
            tail: Some(tail.into()),
            chunk_bytes: CHUNK_BYTES,
        }
    }

    /// The list as compact JSON: its own fields from `body` in kube's order (`kind`,
    /// `apiVersion`, `metadata`), as its streaming list encoder writes them, then `items`, and
    /// the newline Go's encoder ends with.
    pub fn json(body: &Value, items: Vec<Arc<CachedObject>>, typed: bool) -> serde_json::Result<ListBody> {
        let own =
            json!({"kind": body["kind"], "apiVersion": body["apiVersion"], "metadata": body["metadata"]});
        let mut head = go_json::encode(&go_json::Ordered(&own, &go_json::LIST_HEAD), false)?;
        // `{...,"metadata":{...}}` → `{...,"metadata":{...},"items":[` … `]}`
        head.pop();
        head.extend_from_slice(b",\"items\":[");
        Ok(ListBody::new(
            head,
            b"]}\n".to_vec(),
            items,
            Items::Json { typed },
        ))
    }

    /// The list as CBOR (a definite-length `items` array).
    pub fn cbor(body: &Value, items: Vec<Arc<CachedObject>>, typed: bool) -> ListBody {
        let (head, tail) = cbor::list_frame(body, items.len());
        ListBody::new(head, tail, items, Items::Cbor { typed })
    }

    /// The list as protobuf, or `None` when it has no protobuf form (its kind or one of its
    /// objects has none).
    pub fn protobuf(body: &Value, items: Vec<Arc<CachedObject>>) -> Option<ListBody> {
        let lens: Option<Vec<usize>> = items.iter().map(|o| protobuf_of(o).map(<[u8]>::len)).collect();
        match protobuf::ListFrame::new(body, lens?.into_iter()) {
            Ok(frame) => Some(ListBody::new(
                frame.head,
                frame.tail,
                items,
                Items::Protobuf { tag: frame.items_tag },
            )),
            Err(e) => {
                tracing::debug!(error = %e, "answering JSON: no protobuf form");
                None
            }
        }
    }

    /// The body as a response with status `code` and `content_type`.
    pub fn response(self, code: u16, content_type: &'static str) -> Response {
        let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
        (code, [(header::CONTENT_TYPE, content_type)], Body::new(self)).into_response()
    }

    /// The next chunk: the head, then items until the chunk holds [`CHUNK_BYTES`] or more,
    /// then the tail; `None` when all is produced.
    fn next_chunk(&mut self) -> Option<Bytes> {
        let mut out = BytesMut::with_capacity(self.chunk_bytes);
        if let Some(head) = self.head.take() {
            out.put_slice(&head);
        }
        while out.len() < self.chunk_bytes {
            match self.items.next() {
                Some(object) => {
                    self.encoding.write(&object, self.first, &mut out);
                    self.first = false;
                }
                None => {
                    if let Some(tail) = self.tail.take() {
                        out.put_slice(&tail);
                    }
                    break;
                }
            }
        }
        if out.is_empty() {
            return None;
        }
        self.remaining = self.remaining.saturating_sub(out.len() as u64);
        Some(out.freeze())
    }
}

impl HttpBody for ListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.next_chunk().map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::cacher::CachedObject;

    /// A ConfigMap of about `size` bytes of data.
    fn config_map(i: usize, size: usize) -> Arc<CachedObject> {
        let obj = json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": format!("cm-{i}"), "namespace": "default", "resourceVersion": (i + 2).to_string(),
                "uid": format!("u-{i}"), "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "x"}},
            "data": {"payload": "é\"<&".repeat(size / 5 + i % 7)},
            "binaryData": {"b": "aGk="},
        });
        CachedObject::new(
            &format!("/registry/configmaps/default/cm-{i}"),
            obj,
            (i + 2) as i64,
        )
    }

    /// A custom resource (listed with its type fields).
    fn widget(i: usize) -> Arc<CachedObject> {
        let obj = json!({
            "kind": "Widget", "apiVersion": "example.com/v1",
            "metadata": {"name": format!("w-{i}"), "resourceVersion": "7"},
            "spec": {"size": i, "text": "x".repeat(i * 37 % 500)},
        });
        CachedObject::new(&format!("/registry/example.com/widgets/w-{i}"), obj, 7)
    }

    /// A list's own fields, with paging metadata when `paged`.
    fn list_body(kind: &str, api_version: &str, paged: bool) -> Value {
        let mut metadata = json!({"resourceVersion": "1234"});
        if paged {
            metadata["continue"] = json!("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNCwic3RhcnQiOiJ4In0");
            metadata["remainingItemCount"] = json!(17);
        }
        json!({"kind": kind, "apiVersion": api_version, "metadata": metadata})
    }

    /// The whole list as a value, its items as the list holds them.
    fn whole(body: &Value, items: &[Arc<CachedObject>], typed: bool) -> Value {
        let mut whole = body.clone();
        whole["items"] = items
            .iter()
            .map(|o| {
                let mut v = o.value();
                if !typed {
                    let m = v.as_object_mut().expect("an object");
                    m.remove("kind");
                    m.remove("apiVersion");
                }
                v
            })
            .collect();
        whole
    }

    /// All of a body, chunk by chunk, checking the size it announced and each chunk's size.
    fn drain(mut body: ListBody, chunk_bytes: usize, largest_item: usize) -> Vec<u8> {
        body.chunk_bytes = chunk_bytes;
        let announced = body.size_hint().exact().expect("an exact size");
        let mut out = Vec::new();
        while let Some(chunk) = body.next_chunk() {
            assert!(
                chunk.len() < chunk_bytes + largest_item + 4096,
                "a chunk of {}",
                chunk.len()
            );
            out.extend_from_slice(&chunk);
            assert_eq!(body.size_hint().exact(), Some(announced - out.len() as u64));
        }
        assert!(body.is_end_stream());
        assert_eq!(out.len() as u64, announced);
        out
    }

    /// The whole list's JSON as kuberaft wrote it before lists were streamed: the list's own
    /// fields in kube's order, then `items`, each the object's shared encoding.
    fn expected_json(body: &Value, items: &[Arc<CachedObject>], typed: bool) -> Vec<u8> {
        let own =
            json!({"kind": body["kind"], "apiVersion": body["apiVersion"], "metadata": body["metadata"]});
        let own = go_json::encode(&go_json::Ordered(&own, &go_json::LIST_HEAD), false).unwrap();
        let encoded: Vec<Bytes> = items
            .iter()
            .map(|o| if typed { o.json() } else { o.item_json().clone() })
            .collect();
        let mut out = own[..own.len() - 1].to_vec();
        out.extend_from_slice(b",\"items\":[");
        out.extend_from_slice(&encoded.join(&b","[..]));
        out.extend_from_slice(b"]}\n");
        // The same list as the values say.
        let decoded: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(decoded, whole(body, items, typed));
        out
    }

    const CASES: [usize; 4] = [0, 1, 2, 60];
    const CHUNKS: [usize; 3] = [1, 300, 8192];

    #[test]
    fn streamed_json_is_the_whole_list() {
        for paged in [false, true] {
            for n in CASES {
                let items: Vec<_> = (0..n).map(|i| config_map(i, 900)).collect();
                let body = list_body("ConfigMapList", "v1", paged);
                let expected = expected_json(&body, &items, false);
                for chunk in CHUNKS {
                    let streamed = ListBody::json(&body, items.clone(), false).unwrap();
                    assert_eq!(
                        drain(streamed, chunk, 2048),
                        expected,
                        "{n} items, chunks of {chunk}"
                    );
                }
            }
            let widgets: Vec<_> = (0..25).map(widget).collect();
            let body = list_body("WidgetList", "example.com/v1", paged);
            let expected = expected_json(&body, &widgets, true);
            assert!(expected
                .starts_with(b"{\"kind\":\"WidgetList\",\"apiVersion\":\"example.com/v1\",\"metadata\":{"));
            for chunk in CHUNKS {
                let streamed = ListBody::json(&body, widgets.clone(), true).unwrap();
                assert_eq!(drain(streamed, chunk, 2048), expected);
            }
        }
    }

    #[test]
    fn streamed_cbor_is_the_whole_list() {
        for paged in [false, true] {
            for n in CASES {
                let items: Vec<_> = (0..n).map(|i| config_map(i, 900)).collect();
                let body = list_body("ConfigMapList", "v1", paged);
                let expected = cbor::encode(&whole(&body, &items, false));
                for chunk in CHUNKS {
                    let streamed = ListBody::cbor(&body, items.clone(), false);
                    assert_eq!(
                        drain(streamed, chunk, 2048),
                        expected,
                        "{n} items, chunks of {chunk}"
                    );
                }
            }
            // More than 23 items: the array's length takes a byte of its own.
            let widgets: Vec<_> = (0..300).map(widget).collect();
            let body = list_body("WidgetList", "example.com/v1", paged);
            let expected = cbor::encode(&whole(&body, &widgets, true));
            for chunk in CHUNKS {
                let streamed = ListBody::cbor(&body, widgets.clone(), true);
                assert_eq!(drain(streamed, chunk, 2048), expected);
            }
        }
    }

    #[test]
    fn streamed_protobuf_is_the_whole_list() {
        for paged in [false, true] {
            for n in CASES {
                let items: Vec<_> = (0..n).map(|i| config_map(i, 900)).collect();
                let body = list_body("ConfigMapList", "v1", paged);
                let expected = protobuf::encode_object(&whole(&body, &items, false)).unwrap();
                for chunk in CHUNKS {
                    let streamed = ListBody::protobuf(&body, items.clone()).expect("a protobuf form");
                    assert_eq!(
                        drain(streamed, chunk, 2048),
                        expected,
                        "{n} items, chunks of {chunk}"
                    );
                }
            }
            // A list whose length prefix takes three bytes or more.
            let items: Vec<_> = (0..200).map(|i| config_map(i, 3000)).collect();
            let body = list_body("ConfigMapList", "v1", paged);
            let expected = protobuf::encode_object(&whole(&body, &items, false)).unwrap();
            let streamed = ListBody::protobuf(&body, items).expect("a protobuf form");
            assert_eq!(drain(streamed, CHUNK_BYTES, 4096), expected);
        }
        // Custom resources have no protobuf form: the caller answers JSON.
        let widgets: Vec<_> = (0..3).map(widget).collect();
        assert!(ListBody::protobuf(&list_body("WidgetList", "example.com/v1", false), widgets).is_none());
    }
}
