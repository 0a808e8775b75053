//! Where a request's audit events go: the bounded buffer between the requests and the audit
//! log, with the thread that writes it, and the webhook backend's queue (`audit::webhook`).
//!
//! A request never writes to the disk: it hands its event's line to a channel, and one writer
//! thread appends the lines to the log, flushing whenever the channel runs empty (so the file
//! is current within moments, and a burst is written in one go). The buffer is bounded by the
//! bytes waiting, [`BUFFER_BYTES`]: kube-apiserver's `blocking` mode with a buffer in front of
//! the disk. When it is full — the disk is slower than the events come — a request waits
//! (asynchronously, holding no thread) until the writer has made room; no event is dropped.
//! An event that is too large for the whole buffer waits for the whole buffer.
//!
//! `apiserver_audit_event_total` counts the events handed over, `apiserver_audit_error_total`
//! (`plugin="log"`) the ones that could not be written.
//!
//! The webhook backend never makes a request wait: its queue drops what does not fit.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::audit::log::Log;
use crate::audit::webhook::Webhook;

/// How many bytes of events may wait for the writer before requests wait for it.
pub const BUFFER_BYTES: usize = 32 << 20;

/// One line for the log, holding its share of the buffer until it is written.
struct Line {
    bytes: Vec<u8>,
    _room: OwnedSemaphorePermit,
}

/// Where events are sent: the log, the webhook, or both (cheap to clone).
#[derive(Clone, Debug)]
pub struct Sink {
    log: Option<LogWriter>,
    webhook: Option<Webhook>,
}

impl Sink {
    /// Sends to the log of `log` (if any) and to `webhook` (if any).
    pub fn new(log: Option<LogWriter>, webhook: Option<Webhook>) -> Sink {
        Sink { log, webhook }
    }

    /// Sends to the log only, through the writer thread `start` makes for it.
    pub fn start(log: Log) -> std::io::Result<Sink> {
        Ok(Sink::new(Some(LogWriter::start(log)?), None))
    }

    /// Sends a line, waiting while the log's buffer is full.
    pub async fn send(&self, line: Vec<u8>) {
        metrics::counter!("apiserver_audit_event_total").increment(1);
        if let Some(webhook) = &self.webhook {
            webhook.send(&line);
        }
        if let Some(log) = &self.log {
            log.send(line).await;
        }
    }

    /// Sends a line from code that cannot wait (a response body being dropped): at once when
    /// the log's buffer has room, else from a task that waits for room.
    pub fn send_now(&self, line: Vec<u8>) {
        metrics::counter!("apiserver_audit_event_total").increment(1);
        if let Some(webhook) = &self.webhook {
            webhook.send(&line);
        }
        if let Some(log) = &self.log {
            log.send_now(line);
        }
    }
}

/// The log's buffer and writer thread (cheap to clone).
#[derive(Clone)]
pub struct LogWriter {
    lines: mpsc::UnboundedSender<Line>,
    room: Arc<Semaphore>,
    capacity: usize,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("capacity", &self.capacity)
            .field("room", &self.room.available_permits())
            .finish()
    }
}

fn error_total() {
    metrics::counter!("apiserver_audit_error_total", "plugin" => "log").increment(1);
}

impl LogWriter {
    /// Starts the writer thread for `log` with a buffer of [`BUFFER_BYTES`].
    pub fn start(log: Log) -> std::io::Result<LogWriter> {
        LogWriter::with_capacity(log, BUFFER_BYTES)
    }

    /// Starts the writer thread for `log` with a buffer of `capacity` bytes. The thread ends
    /// once every clone of the writer is dropped and the last line is written.
    pub fn with_capacity(log: Log, capacity: usize) -> std::io::Result<LogWriter> {
        let (lines, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_lines(log, rx))?;
        let capacity = capacity.clamp(1, Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        Ok(LogWriter {
            lines,
            room: Arc::new(Semaphore::new(capacity)),
            capacity,
        })
    }

    /// The buffer share of a line.
    fn share(&self, line: &[u8]) -> u32 {
        // `capacity` fits in a u32 (see `with_capacity`).
        line.len().clamp(1, self.capacity) as u32
    }

    fn hand_over(&self, bytes: Vec<u8>, room: OwnedSemaphorePermit) {
        if self.lines.send(Line { bytes, _room: room }).is_err() {
            tracing::error!("the audit log writer has stopped; audit event dropped");
            error_total();
        }
    }

    /// Sends a line, waiting while the buffer is full.
    async fn send(&self, line: Vec<u8>) {
        match self.room.clone().acquire_many_owned(self.share(&line)).await {
            Ok(room) => self.hand_over(line, room),
            Err(_) => error_total(),
        }
    }

    /// Sends a line from code that cannot wait: at once when there is room, else from a task
    /// that waits for room.
    fn send_now(&self, line: Vec<u8>) {
        match self.room.clone().try_acquire_many_owned(self.share(&line)) {
            Ok(room) => self.hand_over(line, room),
            Err(_) => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    let writer = self.clone();
                    runtime.spawn(async move { writer.send(line).await });
                }
                Err(_) => {
                    tracing::error!("audit buffer full outside the runtime; audit event dropped");
                    error_total();
                }
            },
        }
    }
}

/// The writer thread: appends every line, flushing when no more are waiting.
fn write_lines(mut log: Log, mut rx: mpsc::UnboundedReceiver<Line>) {
    while let Some(line) = rx.blocking_recv() {
        write_line(&mut log, line);
        while let Ok(line) = rx.try_recv() {
            write_line(&mut log, line);
        }
        if let Err(e) = log.flush() {
            tracing::error!(error = %e, "audit log not flushed");
            error_total();
        }
    }
}

/// Appends one line; its share of the buffer is freed when it is dropped here.
fn write_line(log: &mut Log, line: Line) {
    if let Err(e) = log.write_line(&line.bytes) {
        tracing::error!(error = %e, "audit event not written");
        error_total();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::log::{Limits, RotatingFile};
    use std::time::{Duration, Instant};

    async fn wait_for(path: &std::path::Path, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text == want {
                return;
            }
            assert!(Instant::now() < deadline, "log is {text:?}, want {want:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn lines_reach_the_file_in_order_and_a_full_buffer_waits_for_room() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let limits = Limits::from_config(1, 0, 0);
        let log = Log::File(RotatingFile::open(&path, limits).unwrap());
        // Room for one line of 6 bytes at a time.
        let sink = Sink::new(Some(LogWriter::with_capacity(log, 6).unwrap()), None);
        for i in 0..50 {
            sink.send(format!("line{i:01}\n").into_bytes()).await;
        }
        sink.send_now(b"last\n".to_vec());
        let want: String = (0..50).map(|i| format!("line{i:01}\n")).collect::<String>() + "last\n";
        wait_for(&path, &want).await;
    }
}
