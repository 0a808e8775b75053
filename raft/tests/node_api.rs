//! The narrow `RaftNode` API the server uses instead of reaching into openraft and the MVCC
//! store: leadership (`is_leader`, `leader_changes`) and the async store reads (`range`,
//! `changes`, `revisions`), on a one-replica cluster (it elects itself; no network is used).

use std::collections::BTreeMap;
use std::time::Duration;

use kuberaft_proto as pb;
use kuberaft_raft::{Member, NodeConfig, NodeError, RaftNode};
use kuberaft_storage::StorageError;

const WAIT: Duration = Duration::from_secs(10);

fn config(dir: &std::path::Path) -> NodeConfig {
    let me = Member {
        peer_addr: "127.0.0.1:1".into(),
        api_addr: "127.0.0.1:2".into(),
    };
    NodeConfig {
        id: 1,
        cluster_name: "node-api".into(),
        data_dir: dir.to_path_buf(),
        members: BTreeMap::from([(1, me)]),
        heartbeat: Duration::from_millis(50),
        election_timeout: (Duration::from_millis(150), Duration::from_millis(300)),
        snapshot_logs: 10_000,
        logs_kept_after_snapshot: 1_000,
        // The test compacts explicitly; the schedule stays out of the way.
        compaction_retention: Duration::from_secs(3_600),
        compaction_interval: Duration::from_secs(3_600),
        request_timeout: Duration::from_secs(5),
        peer_tls: None,
        certificates: Vec::new(),
        join: None,
        quota_bytes: 0,
        mergers: Default::default(),
    }
}

fn put(key: &str, value: &str) -> pb::Command {
    pb::Command {
        command: Some(pb::command::Command::Txn(pb::TxnRequest {
            success: vec![pb::Op {
                op: Some(pb::op::Op::Put(pb::PutOp {
                    key: key.into(),
                    value: value.into(),
                })),
            }],
            ..Default::default()
        })),
    }
}

fn get(key: &str, revision: i64) -> pb::RangeRequest {
    pb::RangeRequest {
        key: key.into(),
        revision,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_and_store_reads_through_the_node() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (node, _fatal) = RaftNode::start(config(dir.path())).await.expect("start");

    let mut leader = node.leader_changes();
    tokio::time::timeout(WAIT, leader.wait_for(|l| *l == Some(1)))
        .await
        .expect("a leader within the wait")
        .expect("leader watch open");
    // openraft reports the leader id and the leader role in the same metrics update.
    assert!(node.is_leader());

    node.write(put("a", "1")).await.expect("write 1");
    node.write(put("a", "2")).await.expect("write 2");
    let (current, compacted) = node.revisions().await.expect("revisions");
    assert_eq!((current, compacted), (2, 0));

    let now = node.range(get("a", 0)).await.expect("range now");
    assert_eq!(now.kvs.len(), 1);
    assert_eq!(now.kvs[0].value, b"2");
    let then = node.range(get("a", 1)).await.expect("range at 1");
    assert_eq!(then.kvs[0].value, b"1");
    assert!(matches!(
        node.range(get("a", 3)).await,
        Err(NodeError::Storage(StorageError::FutureRevision {
            requested: 3,
            current: 2
        }))
    ));

    let changes = node.changes(0, 2).await.expect("changes");
    assert_eq!(
        changes.iter().map(|(rev, _)| *rev).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        changes[1].1[0].prev.as_ref().map(|p| p.value.clone()),
        Some(b"1".to_vec())
    );

    let compact = pb::Command {
        command: Some(pb::command::Command::Compact(pb::CompactRequest { revision: 2 })),
    };
    node.write(compact).await.expect("compact");
    assert_eq!(node.revisions().await.expect("revisions").1, 2);
    assert!(matches!(
        node.range(get("a", 1)).await,
        Err(NodeError::Storage(StorageError::Compacted { requested: 1, .. }))
    ));
    assert!(matches!(
        node.changes(0, 2).await,
        Err(NodeError::Storage(StorageError::Compacted { requested: 0, .. }))
    ));

    // The watch's feeder ends with Raft: the channel closes after the shutdown.
    node.shutdown().await;
    let closed = tokio::time::timeout(WAIT, async { while leader.changed().await.is_ok() {} }).await;
    assert!(closed.is_ok(), "the leader watch stayed open after shutdown");
}

/// A create-if-absent of `key`: puts `value` only if the key does not exist.
fn create(key: &str, value: &str) -> pb::Command {
    let Some(pb::command::Command::Txn(mut txn)) = put(key, value).command else {
        unreachable!("put builds a transaction")
    };
    txn.compares = vec![pb::Compare {
        key: key.into(),
        target: Some(pb::compare::Target::Exists(false)),
    }];
    pb::Command {
        command: Some(pb::command::Command::Txn(txn)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transactions_share_log_entries_but_keep_their_own_revision_and_result() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (node, _fatal) = RaftNode::start(config(dir.path())).await.expect("start");
    tokio::time::timeout(WAIT, node.leader_changes().wait_for(|l| *l == Some(1)))
        .await
        .expect("a leader within the wait")
        .expect("leader watch open");
    let first_index = node.status(false).await.expect("status").last_log_index;

    // 300 puts of distinct keys and 30 racing creates of one key, all at once.
    let mut tasks = Vec::new();
    for i in 0..300 {
        let n = node.clone();
        tasks.push(tokio::spawn(
            async move { n.write(put(&format!("k{i}"), "v")).await },
        ));
    }
    for i in 0..30 {
        let n = node.clone();
        tasks.push(tokio::spawn(async move {
            n.write(create("once", &format!("{i}"))).await
        }));
    }
    let mut revisions = Vec::new();
    let mut created = 0;
    for (i, task) in tasks.into_iter().enumerate() {
        let result = task.await.expect("task").expect("write");
        let Some(pb::command_result::Result::Txn(t)) = result.result else {
            panic!("write {i} got {result:?}");
        };
        if i < 300 {
            assert!(t.succeeded, "put {i} did not succeed");
            revisions.push(t.revision);
        } else if t.succeeded {
            created += 1;
            revisions.push(t.revision);
        } else {
            // A losing create sees the winner's value, committed before it in the log.
            assert_eq!(t.compared.len(), 1, "create {i}: {t:?}");
        }
    }
    assert_eq!(created, 1, "exactly one of the racing creates wins");
    // One revision per successful transaction: 301 distinct, consecutive revisions.
    revisions.sort_unstable();
    assert_eq!(revisions, (1..=301).collect::<Vec<i64>>());
    assert_eq!(node.revisions().await.expect("revisions").0, 301);
    // ...in far fewer log entries than transactions.
    let entries = node.status(false).await.expect("status").last_log_index - first_index;
    assert!(
        entries < 150,
        "330 concurrent transactions took {entries} log entries"
    );
    node.shutdown().await;
}
