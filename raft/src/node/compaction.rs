//! The compaction schedule. History is kept for at least the configured retention window;
//! the leader proposes compaction to the newest revision outside it. Compaction is a log
//! command, so every replica compacts identically and at the same point of the log.

use std::collections::VecDeque;
use std::sync::Weak;
use std::time::Instant;

use kuberaft_proto as pb;

use super::RaftNode;

/// Every replica samples `(time, revision)`; the leader proposes compaction to the newest
/// revision that is older than the retention window. A replica that just became leader only
/// knows the samples since it started, so it compacts later rather than too early. The loop
/// ends once the node is dropped.
pub(super) async fn compaction_loop(node: Weak<RaftNode>) {
    let mut samples: VecDeque<(Instant, i64)> = VecDeque::new();
    loop {
        let Some(n) = node.upgrade() else { return };
        let interval = n.config.compaction_interval;
        let retention = n.config.compaction_retention;
        let p = *n.progress.borrow();
        let now = Instant::now();
        samples.push_back((now, p.revision));
        let mut target = None;
        while let Some(&(t, rev)) = samples.front() {
            if now.duration_since(t) >= retention {
                target = Some((t, rev));
                samples.pop_front();
            } else {
                break;
            }
        }
        if let Some((t, rev)) = target {
            // Keep the sample: it is still the newest revision outside the window.
            samples.push_front((t, rev));
            if n.is_leader() && rev > p.compacted {
                let cmd = pb::Command {
                    command: Some(pb::command::Command::Compact(pb::CompactRequest {
                        revision: rev,
                    })),
                };
                match n.propose_local(cmd).await {
                    Ok(_) => tracing::info!(revision = rev, "compacted history"),
                    Err(e) => tracing::warn!(error = %e, "compaction proposal failed"),
                }
            }
        }
        drop(n);
        tokio::time::sleep(interval).await;
    }
}
