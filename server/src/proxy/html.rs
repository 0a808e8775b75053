//! The links of an HTML page that comes back through a proxy, rewritten to go through the
//! proxy too, as kube's proxy transport rewrites them: a browser that opens a pod's or a
//! Service's page through `.../proxy/` then follows its links, loads its scripts and posts
//! its forms there as well. The page streams through as it comes (kube reads it whole first);
//! a gzip or deflate page is decoded, rewritten and encoded again; one in another encoding
//! passes as it is.
//!
//! *Invariant:* knows HTTP and HTML only; which URL a link becomes is the caller's.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use flate2::write::{DeflateDecoder, DeflateEncoder, GzDecoder, GzEncoder};
use flate2::Compression;
use futures::StreamExt;
use lol_html::{element, send, MemorySettings};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// The attributes that hold a URL, per element (kube's `atomsToAttrs`, from the HTML 4 and 5
/// attribute indexes).
const URL_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("a", &["href"]),
    ("applet", &["codebase"]),
    ("area", &["href"]),
    ("audio", &["src"]),
    ("base", &["href"]),
    ("blockquote", &["cite"]),
    ("body", &["background"]),
    ("button", &["formaction"]),
    ("command", &["icon"]),
    ("del", &["cite"]),
    ("embed", &["src"]),
    ("form", &["action"]),
    ("frame", &["longdesc", "src"]),
    ("head", &["profile"]),
    ("html", &["manifest"]),
    ("iframe", &["longdesc", "src"]),
    ("img", &["longdesc", "src", "usemap"]),
    ("input", &["src", "usemap", "formaction"]),
    ("ins", &["cite"]),
    ("link", &["href"]),
    ("object", &["classid", "codebase", "data", "usemap"]),
    ("q", &["cite"]),
    ("script", &["src"]),
    ("source", &["src"]),
    ("video", &["poster", "src"]),
];

/// The most memory the rewriter may hold for one page (a start tag split over many chunks is
/// buffered whole): a page that needs more ends there.
const MAX_REWRITER_MEMORY: usize = 16 << 20;

/// What a link becomes.
pub type Rewrite = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// `response` with the links of its body rewritten by `rewrite` when it is an HTML page
/// (`Content-Type: text/html`) in an encoding this server reads (none, gzip or deflate); its
/// length is then unknown until it ends. Anything else comes back as it is.
pub fn rewrite_links(response: Response, rewrite: Rewrite) -> Response {
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.split(';').next().unwrap_or_default().trim() == "text/html");
    if !html {
        return response;
    }
    let coding = match response
        .headers()
        .get(header::CONTENT_ENCODING)
        .map(|v| v.as_bytes())
    {
        None | Some(b"") => Coding::Identity,
        Some(b"gzip") => Coding::Gzip,
        Some(b"deflate") => Coding::Deflate,
        Some(_) => return response,
    };
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(pump(body, Page::new(coding, rewrite), tx));
    Response::from_parts(parts, Body::from_stream(ReceiverStream::new(rx)))
}

/// How the page's bytes are encoded.
#[derive(Debug, Clone, Copy)]
enum Coding {
    Identity,
    Gzip,
    Deflate,
}

/// Feeds `body` through `page` and what comes out to `tx`, until the body or the client ends;
/// a body that fails or a page that cannot be rewritten ends the answer with an error.
async fn pump(body: Body, mut page: Page, tx: mpsc::Sender<io::Result<Bytes>>) {
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let fed = chunk.map_err(io::Error::other).and_then(|c| page.write(&c));
        let out = page.take();
        if !out.is_empty() && tx.send(Ok(out)).await.is_err() {
            return;
        }
        if let Err(e) = fed {
            tracing::info!(error = %e, "a proxied HTML page could not be rewritten");
            let _ = tx.send(Err(e)).await;
            return;
        }
    }
    let last = page.finish();
    if let Err(e) = &last {
        tracing::info!(error = %e, "a proxied HTML page could not be rewritten");
    }
    let _ = tx.send(last).await;
}

/// Where the rewriter's output goes: plain, or into an encoder of the page's encoding.
enum Output {
    Identity(Vec<u8>),
    Gzip(GzEncoder<Vec<u8>>),
    Deflate(DeflateEncoder<Vec<u8>>),
}

impl Output {
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Output::Identity(out) => out.write_all(data),
            Output::Gzip(e) => e.write_all(data),
            Output::Deflate(e) => e.write_all(data),
        }
    }

    /// What is ready to send.
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(match self {
            Output::Identity(out) => out,
            Output::Gzip(e) => e.get_mut(),
            Output::Deflate(e) => e.get_mut(),
        })
    }

    /// The rest, once the page has ended.
    fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Output::Identity(out) => Ok(out),
            Output::Gzip(e) => e.finish(),
            Output::Deflate(e) => e.finish(),
        }
    }
}

/// The rewriter's output, shared between its sink and whoever sends it on.
type Shared = Arc<Mutex<(Output, io::Result<()>)>>;

/// Where the rewriter writes: into the shared output.
type Sink = Box<dyn FnMut(&[u8]) + Send>;

/// The rewriter, whose sink writes into the shared output.
type Rewriter = send::HtmlRewriter<'static, Sink>;

/// The rewriter as a writer of the decoded page.
struct Html(Rewriter);

impl Write for Html {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0.write(data).map_err(io::Error::other)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The page's bytes as they come: decoded, rewritten, encoded again.
enum Input {
    Identity(Html),
    Gzip(GzDecoder<Html>),
    Deflate(DeflateDecoder<Html>),
}

/// One page being rewritten.
struct Page {
    input: Input,
    output: Shared,
}

impl Page {
    fn new(coding: Coding, rewrite: Rewrite) -> Self {
        let output = match coding {
            Coding::Identity => Output::Identity(Vec::new()),
            Coding::Gzip => Output::Gzip(GzEncoder::new(Vec::new(), Compression::default())),
            Coding::Deflate => Output::Deflate(DeflateEncoder::new(Vec::new(), Compression::best())),
        };
        let output: Shared = Arc::new(Mutex::new((output, Ok(()))));
        let into = output.clone();
        let sink: Sink = Box::new(move |data: &[u8]| {
            if let Ok(mut shared) = into.lock() {
                let (out, status) = &mut *shared;
                if status.is_ok() {
                    *status = out.write(data);
                }
            }
        });
        let settings = send::Settings::new_send()
            .append_element_content_handler(element!("*", move |el| {
                let tag = el.tag_name();
                let Some((_, names)) = URL_ATTRIBUTES.iter().find(|(t, _)| *t == tag) else {
                    return Ok(());
                };
                for name in *names {
                    if let Some(link) = el.get_attribute(name) {
                        let rewritten = rewrite(&link);
                        if rewritten != link {
                            el.set_attribute(name, &rewritten)?;
                        }
                    }
                }
                Ok(())
            }))
            .with_memory_settings(MemorySettings::new().with_max_allowed_memory_usage(MAX_REWRITER_MEMORY))
            .with_strict(false);
        let html = Html(send::HtmlRewriter::new(settings, sink));
        let input = match coding {
            Coding::Identity => Input::Identity(html),
            Coding::Gzip => Input::Gzip(GzDecoder::new(html)),
            Coding::Deflate => Input::Deflate(DeflateDecoder::new(html)),
        };
        Page { input, output }
    }

    /// Feeds the next bytes of the page.
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match &mut self.input {
            Input::Identity(html) => html.write_all(data),
            Input::Gzip(d) => d.write_all(data),
            Input::Deflate(d) => d.write_all(data),
        }?;
        status(&self.output)
    }

    /// What the page has produced so far.
    fn take(&mut self) -> Bytes {
        self.output
            .lock()
            .map(|mut shared| Bytes::from(shared.0.take()))
            .unwrap_or_default()
    }

    /// Ends the page: the rest of its output.
    fn finish(self) -> io::Result<Bytes> {
        let Page { input, output } = self;
        let Html(rewriter) = match input {
            Input::Identity(html) => html,
            Input::Gzip(d) => d.finish()?,
            Input::Deflate(d) => d.finish()?,
        };
        rewriter.end().map_err(io::Error::other)?;
        status(&output)?;
        let shared = Arc::try_unwrap(output)
            .map_err(|_| io::Error::other("the rewritten page's output is still shared"))?
            .into_inner()
            .map_err(|_| io::Error::other("the rewritten page's output was lost"))?;
        shared.0.finish().map(Bytes::from)
    }
}

/// A failed write into the output, if any.
fn status(output: &Shared) -> io::Result<()> {
    match output.lock() {
        Ok(shared) => match &shared.1 {
            Ok(()) => Ok(()),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        },
        Err(_) => Err(io::Error::other("the rewritten page's output was lost")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use flate2::read::GzDecoder as GzReader;
    use std::io::Read;

    fn through_proxy() -> Rewrite {
        Arc::new(|link: &str| {
            if link.starts_with('/') {
                format!("/proxy{link}")
            } else {
                link.to_string()
            }
        })
    }

    async fn rewritten(body: Vec<u8>, content_type: &str, encoding: Option<&str>) -> (Response, Vec<u8>) {
        let mut builder = Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, content_type)
            .header(header::CONTENT_LENGTH, body.len());
        if let Some(e) = encoding {
            builder = builder.header(header::CONTENT_ENCODING, e);
        }
        // The page arrives in small pieces, tags split across them.
        let pieces: Vec<io::Result<Bytes>> = body.chunks(7).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let response = builder
            .body(Body::from_stream(futures::stream::iter(pieces)))
            .unwrap();
        let (parts, body) = rewrite_links(response, through_proxy()).into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (Response::from_parts(parts, Body::empty()), bytes.to_vec())
    }

    const PAGE: &str = r#"<!DOCTYPE html><html><head><link rel="stylesheet" href="/static/app.css"></head>
<body><a href="/metrics?x=1">metrics</a> <a href="relative/page">rel</a> <a href="http://elsewhere/x">out</a>
<IMG SRC="/logo.png" alt="/not-a-link"><form action="/submit" method="post"></form><p title="/x">/text</p></body></html>"#;

    const EXPECTED: &str = r#"<!DOCTYPE html><html><head><link rel="stylesheet" href="/proxy/static/app.css"></head>
<body><a href="/proxy/metrics?x=1">metrics</a> <a href="relative/page">rel</a> <a href="http://elsewhere/x">out</a>
<IMG SRC="/proxy/logo.png" alt="/not-a-link"><form action="/proxy/submit" method="post"></form><p title="/x">/text</p></body></html>"#;

    #[tokio::test]
    async fn the_links_of_a_page_are_rewritten_and_nothing_else_is() {
        let (response, body) = rewritten(PAGE.as_bytes().to_vec(), "text/html; charset=utf-8", None).await;
        assert_eq!(String::from_utf8(body).unwrap(), EXPECTED);
        assert!(response.headers().get(header::CONTENT_LENGTH).is_none());
    }

    #[tokio::test]
    async fn a_gzip_page_is_rewritten_and_encoded_again() {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(PAGE.as_bytes()).unwrap();
        let (_, body) = rewritten(encoder.finish().unwrap(), "text/html", Some("gzip")).await;
        let mut text = String::new();
        GzReader::new(body.as_slice()).read_to_string(&mut text).unwrap();
        assert_eq!(text, EXPECTED);
    }

    #[tokio::test]
    async fn other_content_and_unknown_encodings_pass_as_they_are() {
        let (response, body) = rewritten(PAGE.as_bytes().to_vec(), "text/plain", None).await;
        assert_eq!(body, PAGE.as_bytes());
        assert_eq!(response.headers()[header::CONTENT_LENGTH], PAGE.len().to_string());
        let (_, body) = rewritten(PAGE.as_bytes().to_vec(), "text/html", Some("br")).await;
        assert_eq!(body, PAGE.as_bytes());
    }
}
