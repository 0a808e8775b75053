//! Proposal batching: the transactions written while a replica's earlier proposal is in
//! flight are gathered into one log entry ([`pb::TxnBatch`]).
//!
//! Every log entry costs the same fixed work whatever it holds — a turn of openraft's core, an
//! encoding, a log record and its fsync, its place in an AppendEntries message, an apply call,
//! and from a follower one forwarding call — so under load that work is shared by every
//! transaction of a batch instead of paid by each. Batching happens twice: a follower gathers
//! its clients' transactions into one forwarding call, and the leader gathers those calls and
//! its own clients' transactions into one entry. A replica keeps at most [`MAX_IN_FLIGHT`]
//! batches in flight; what arrives meanwhile waits for the next one, so a lone client never
//! waits for a batch to fill (there is no timer) and a busy cluster writes fewer, larger
//! entries.
//!
//! The invariants do not move: each transaction of a batch is applied as its own revision, in
//! the batch's order, with its own result (a rejected one rejects only itself), and its caller
//! is answered only once the entry is committed and applied here, as for a single write.

use std::sync::{Arc, Weak};

use kuberaft_proto as pb;
use prost::Message;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::space::adds_data;
use super::RaftNode;
use crate::NodeError;

/// Batches of one replica in flight at once (being forwarded, replicated or applied).
const MAX_IN_FLIGHT: usize = 2;

/// Most transactions in one batch.
const MAX_TXNS: usize = 4096;

/// A batch takes no more groups once its encoded size reaches this; a group is never split,
/// and a forwarded one is itself a batch, so an entry stays under twice this plus one
/// transaction (`MAX_REQUEST_BYTES`, 2 MiB).
const MAX_BYTES: usize = 1024 * 1024;

/// The results of a group of transactions and the log index of the entry they were applied
/// in.
type GroupResult = Result<(Vec<pb::CommandResult>, u64), NodeError>;

/// Transactions proposed together and answered together: one client's transaction, or a batch
/// a follower forwarded.
struct Group {
    txns: Vec<pb::TxnRequest>,
    adds_data: bool,
    bytes: usize,
    reply: oneshot::Sender<GroupResult>,
}

/// The queue of transactions waiting to be proposed.
pub(super) struct Proposals {
    queue: mpsc::UnboundedSender<Group>,
}

impl Proposals {
    /// Starts the batching task of `node`; it ends when the node is dropped.
    pub(super) fn start(node: Weak<RaftNode>) -> (Proposals, impl std::future::Future<Output = ()>) {
        let (queue, rx) = mpsc::unbounded_channel();
        (Proposals { queue }, batch_loop(node, rx))
    }

    /// Queues `txn` (already validated) and waits for its result.
    pub(super) async fn submit(&self, txn: pb::TxnRequest) -> Result<pb::CommandResult, NodeError> {
        let (mut results, _) = self.submit_group(vec![txn]).await?;
        results
            .pop()
            .ok_or_else(|| NodeError::Raft("a transaction got no result".into()))
    }

    /// Queues `txns` (already validated, all adding data or none: a follower's batch) to be
    /// proposed next to each other, and waits for their results and the index of their entry.
    pub(super) async fn submit_group(&self, txns: Vec<pb::TxnRequest>) -> GroupResult {
        let (reply, result) = oneshot::channel();
        let group = Group {
            adds_data: txns.iter().any(adds_data),
            bytes: txns.iter().map(Message::encoded_len).sum(),
            txns,
            reply,
        };
        self.queue.send(group).map_err(|_| NodeError::ShuttingDown)?;
        result.await.map_err(|_| NodeError::ShuttingDown)?
    }
}

/// Takes groups off the queue as batches and proposes each batch once one of the
/// [`MAX_IN_FLIGHT`] slots is free.
async fn batch_loop(node: Weak<RaftNode>, mut queue: mpsc::UnboundedReceiver<Group>) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut next = None;
    loop {
        let first = match next.take() {
            Some(g) => g,
            None => match queue.recv().await {
                Some(g) => g,
                None => return,
            },
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut txns = first.txns.len();
        let mut bytes = first.bytes;
        let mut batch = vec![first];
        // Under the space alarm the leader refuses whatever adds data, so a batch holds either
        // only such transactions or none: deletes are never refused with them.
        while txns < MAX_TXNS && bytes < MAX_BYTES {
            let Ok(g) = queue.try_recv() else {
                break;
            };
            if g.adds_data != batch[0].adds_data {
                next = Some(g);
                break;
            }
            txns += g.txns.len();
            bytes += g.bytes;
            batch.push(g);
        }
        let Some(n) = node.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            n.propose_batch(batch).await;
            drop(slot);
        });
    }
}

impl RaftNode {
    /// Proposes the groups of `batch` as one entry (a lone transaction as itself) and answers
    /// each group.
    async fn propose_batch(&self, batch: Vec<Group>) {
        let mut sizes = Vec::with_capacity(batch.len());
        let mut replies = Vec::with_capacity(batch.len());
        let mut txns = Vec::new();
        for group in batch {
            sizes.push(group.txns.len());
            replies.push(group.reply);
            txns.extend(group.txns);
        }
        metrics::histogram!("kuberaft_raft_proposal_batch_size").record(txns.len() as f64);
        let count = txns.len();
        let command = if count == 1 {
            txns.pop().map(pb::command::Command::Txn)
        } else {
            Some(pb::command::Command::Batch(pb::TxnBatch { txns }))
        };
        let outcome = self.write_command(pb::Command { command }).await;
        let results = match outcome {
            Ok((result, index)) if count == 1 => Ok((vec![result], index)),
            Ok((
                pb::CommandResult {
                    result: Some(pb::command_result::Result::Batch(b)),
                },
                index,
            )) if b.results.len() == count => Ok((b.results, index)),
            Ok((other, _)) => Err(NodeError::Raft(format!(
                "a batch of {count} transactions got the result {other:?}"
            ))),
            Err(e) => Err(e),
        };
        let mut results = results.map(|(r, index)| (r.into_iter(), index));
        for (reply, size) in replies.into_iter().zip(sizes) {
            let answer = match &mut results {
                Ok((r, index)) => Ok((r.by_ref().take(size).collect(), *index)),
                Err(e) => Err(e.duplicate()),
            };
            // A caller that went away no longer needs its result.
            let _ = reply.send(answer);
        }
    }
}
