//! A body that tells an observer what passes through it and when it is dropped: how the
//! filters see a body without buffering it — the audit filter copies a request body as the
//! endpoint reads it and notes the end of a watch stream, the metrics filter counts a
//! response's bytes and records the request once it is written.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use hyper::body::{Frame, SizeHint};

/// What a filter does with the body it observes.
pub trait Observer: Send + Unpin + 'static {
    /// A piece of the body passed.
    fn data(&mut self, _data: &Bytes) {}
    /// The body is dropped; `ended` when all of it passed (the client took it all).
    fn dropped(&mut self, ended: bool);
}

/// `inner`, observed by `observer`.
pub struct Observed<O: Observer> {
    inner: Body,
    ended: bool,
    observer: O,
}

impl<O: Observer> Observed<O> {
    /// `inner` as a body that `observer` observes.
    pub fn body(inner: Body, observer: O) -> Body {
        Body::new(Observed {
            inner,
            ended: false,
            observer,
        })
    }
}

impl<O: Observer> HttpBody for Observed<O> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.observer.data(data);
                }
            }
            Poll::Ready(None) => this.ended = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<O: Observer> Drop for Observed<O> {
    fn drop(&mut self) {
        // A body of known length is not polled past its last byte.
        let ended = self.ended || self.inner.is_end_stream();
        self.observer.dropped(ended);
    }
}
