//! Watchers: each keeps one logical watch of the chaos namespace's ConfigMaps alive for the
//! whole run, resuming from the last resourceVersion it saw (events and bookmarks) after every
//! disconnect, and moving to the next replica on each reconnect (streams also end on their own
//! after a few seconds, so watchers keep moving even without faults).

use serde_json::Value;

use crate::api;
use crate::history::{WatchEvent, WatchRecord, WatchSegment};
use crate::workloads::Ctx;

/// The content the checkers compare: a register's value or a churn object's id.
pub fn content(obj: &Value) -> String {
    let data = &obj["data"];
    data["value"]
        .as_str()
        .or_else(|| data["id"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// An event line as a [`WatchEvent`], or the error text of an `ERROR` event.
pub fn parse_event(line: &Value) -> Result<WatchEvent, String> {
    let kind = line["type"].as_str().unwrap_or_default().to_string();
    let obj = &line["object"];
    if kind == "ERROR" {
        return Err(format!(
            "ERROR event: {} {}",
            obj["code"].as_i64().unwrap_or(0),
            obj["message"].as_str().unwrap_or_default()
        ));
    }
    Ok(WatchEvent {
        name: if kind == "BOOKMARK" {
            String::new()
        } else {
            api::name(obj)
        },
        rv: api::resource_version(obj),
        content: if kind == "BOOKMARK" {
            String::new()
        } else {
            content(obj)
        },
        kind,
    })
}

/// One watcher starting at `from_rv` on replica `first` until the phase ends; its record is
/// appended to the history when it stops.
pub async fn run(mut ctx: Ctx, name: String, first: usize, from_rv: u64) {
    let n = ctx.clients.len();
    let mut record = WatchRecord {
        watcher: name,
        segments: Vec::new(),
    };
    let mut last_rv = from_rv;
    let mut replica = first;
    let mut fatal = false;
    while !ctx.stopped() && !fatal {
        let client = ctx.clients[replica % n].clone();
        let timeout = 2 + ctx.rng.below(6);
        let mut segment = WatchSegment {
            replica: client.replica,
            from_rv: last_rv,
            start: ctx.clock.now(),
            events: Vec::new(),
            end_error: None,
        };
        match client.watch_configmaps(Some(&last_rv.to_string()), timeout).await {
            Err(e) => segment.end_error = Some(e.to_string()),
            Ok(mut stream) => loop {
                let next = tokio::select! {
                    e = stream.next_event() => e,
                    _ = ctx.stop.wait_for(|s| *s) => break,
                };
                match next {
                    Ok(None) => break,
                    Err(e) => {
                        segment.end_error = Some(e.to_string());
                        break;
                    }
                    Ok(Some(line)) => match parse_event(&line) {
                        Ok(event) => {
                            last_rv = last_rv.max(event.rv);
                            segment.events.push(event);
                        }
                        Err(e) => {
                            // An ERROR event (e.g. 410 Gone) ends the stream; resuming
                            // cannot recover it within the history window, so it is recorded
                            // for the checker and this watcher stops.
                            segment.end_error = Some(e);
                            fatal = true;
                            break;
                        }
                    },
                }
            },
        }
        let failed = segment.end_error.is_some();
        record.segments.push(segment);
        replica = (replica + 1) % n;
        if failed && ctx.pause(100, 300).await {
            break;
        }
    }
    ctx.recorder.lock().watches.push(record);
}

/// Watches started without a resourceVersion, every few seconds on a random replica, each
/// read for two seconds: their synthetic ADDED events must be the state at some revision and
/// the events after them the history from there (checked by `checkers::watch::check_initial`).
pub async fn run_initial(mut ctx: Ctx) {
    while !ctx.pause(3000, 6000).await {
        let client = ctx.any_client();
        let mut segment = WatchSegment {
            replica: client.replica,
            from_rv: 0,
            start: ctx.clock.now(),
            events: Vec::new(),
            end_error: None,
        };
        match client.watch_configmaps(None, 2).await {
            Err(e) => segment.end_error = Some(e.to_string()),
            Ok(mut stream) => loop {
                match stream.next_event().await {
                    Ok(None) => break,
                    Err(e) => {
                        segment.end_error = Some(e.to_string());
                        break;
                    }
                    Ok(Some(line)) => match parse_event(&line) {
                        Ok(event) => segment.events.push(event),
                        Err(e) => {
                            segment.end_error = Some(e);
                            break;
                        }
                    },
                }
            },
        }
        // A stream cut by a fault says nothing about initial events; an ERROR event does.
        if segment
            .end_error
            .as_deref()
            .is_none_or(|e| e.starts_with("ERROR event"))
        {
            ctx.recorder.lock().initial_watches.push(segment);
        }
    }
}
