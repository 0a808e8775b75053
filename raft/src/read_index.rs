//! Read-index batching on the leader. Every linearizable read needs the leader to confirm its
//! leadership (a heartbeat round to a quorum) after the read arrived, and then its commit index
//! is the read index. Concurrent reads can share one confirmation, as long as it started after
//! each of them arrived: callers that arrive while a round is in flight wait for the next one,
//! which starts when the current one ends and answers everyone who queued before it.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::NodeError;

/// What one round answers: the read index (`None` when this replica is not the leader), or why
/// leadership could not be confirmed.
pub type RoundResult = Result<Option<u64>, RoundError>;

/// Why a round failed, in a form every caller of the round can be given a copy of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoundError {
    /// No quorum answered (the read can be retried).
    Unavailable(String),
    /// Raft stopped.
    ShuttingDown,
    /// Raft failed otherwise.
    Raft(String),
}

impl From<RoundError> for NodeError {
    fn from(e: RoundError) -> NodeError {
        match e {
            RoundError::Unavailable(why) => NodeError::Unavailable(why),
            RoundError::ShuttingDown => NodeError::ShuttingDown,
            RoundError::Raft(why) => NodeError::Raft(why),
        }
    }
}

/// Callers waiting for the next round, and whether a round is running.
#[derive(Default)]
struct Queue {
    running: bool,
    waiting: Vec<oneshot::Sender<RoundResult>>,
}

/// Shares leadership confirmations among concurrent reads (cheap to clone).
#[derive(Clone, Default)]
pub struct ReadIndexBatcher {
    queue: Arc<Mutex<Queue>>,
}

impl ReadIndexBatcher {
    /// The read index from a round of `confirm` that started after this call. `confirm` runs
    /// the round; the first caller to find no round running starts a driver that keeps running
    /// rounds until nobody is waiting.
    pub async fn read_index<F, Fut>(&self, confirm: F) -> RoundResult
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = RoundResult> + Send,
    {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.waiting.push(tx);
            !std::mem::replace(&mut q.running, true)
        };
        if start {
            let queue = self.queue.clone();
            tokio::spawn(async move {
                loop {
                    let batch = {
                        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                        if q.waiting.is_empty() {
                            q.running = false;
                            return;
                        }
                        std::mem::take(&mut q.waiting)
                    };
                    let result = confirm().await;
                    for waiter in batch {
                        let _ = waiter.send(result.clone());
                    }
                }
            });
        }
        rx.await.unwrap_or(Err(RoundError::ShuttingDown))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;

    /// Concurrent callers share rounds, and every caller's answer comes from a round that
    /// started after it arrived.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_share_rounds_that_started_after_they_arrived() {
        let batcher = ReadIndexBatcher::default();
        let rounds_started = Arc::new(AtomicU64::new(0));
        let mut callers = Vec::new();
        for i in 0..200u64 {
            let (batcher, started) = (batcher.clone(), rounds_started.clone());
            callers.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_micros(i * 50)).await;
                // Rounds are numbered as they start; a round's answer is its number.
                let arrived_after = started.load(Ordering::SeqCst);
                let counter = started.clone();
                let answer = batcher
                    .read_index(move || {
                        let counter = counter.clone();
                        async move {
                            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            Ok(Some(n))
                        }
                    })
                    .await;
                (arrived_after, answer)
            }));
        }
        for caller in callers {
            let (arrived_after, answer) = caller.await.expect("caller");
            let round = answer.expect("a round").expect("an index");
            assert!(
                round > arrived_after,
                "round {round} started before the caller arrived (after {arrived_after})"
            );
        }
        let rounds = rounds_started.load(Ordering::SeqCst);
        assert!(
            (1..100).contains(&rounds),
            "200 callers over ~10 ms should share rounds: {rounds}"
        );
    }

    #[tokio::test]
    async fn a_failed_round_fails_its_callers_and_the_next_round_runs() {
        let batcher = ReadIndexBatcher::default();
        let failed = batcher
            .read_index(|| async { Err(RoundError::Unavailable("no quorum".into())) })
            .await;
        assert_eq!(failed, Err(RoundError::Unavailable("no quorum".into())));
        let ok = batcher.read_index(|| async { Ok(Some(7)) }).await;
        assert_eq!(ok, Ok(Some(7)));
    }
}
