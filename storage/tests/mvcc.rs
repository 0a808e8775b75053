//! Behaviour of the MVCC state machine: revisions, compares, history reads, compaction,
//! snapshots and the change history.

use std::sync::Arc;

use kuberaft_proto::{
    compare, op, Compare, DeleteOp, DeletePrefixOp, MergeOp, Op, PutOp, RangeRequest, TxnRequest,
};
use kuberaft_storage::{Db, Identity, Merger, Mergers, Mvcc, StorageError};

fn open(dir: &std::path::Path) -> Mvcc {
    let db = Db::open(
        dir,
        &Identity {
            cluster_name: "t".into(),
            node_id: 1,
        },
    )
    .unwrap();
    Mvcc::new(db)
}

fn put(key: &str, value: &str) -> Op {
    Op {
        op: Some(op::Op::Put(PutOp {
            key: key.into(),
            value: value.into(),
        })),
    }
}

fn del(key: &str) -> Op {
    Op {
        op: Some(op::Op::Delete(DeleteOp { key: key.into() })),
    }
}

fn txn(m: &Mvcc, compares: Vec<Compare>, success: Vec<Op>, failure: Vec<Op>) -> kuberaft_proto::TxnResponse {
    let mut b = m.begin().unwrap();
    let r = b
        .txn(&TxnRequest {
            compares,
            success,
            failure,
        })
        .unwrap();
    b.set_raft_meta(b"applied", None);
    b.commit().unwrap();
    r
}

fn get(m: &Mvcc, key: &str, rev: i64) -> Result<Option<(String, i64, i64, i64)>, StorageError> {
    let r = m.range(&RangeRequest {
        key: key.into(),
        revision: rev,
        ..Default::default()
    })?;
    Ok(r.kvs.first().map(|kv| {
        (
            String::from_utf8(kv.value.clone()).unwrap(),
            kv.create_revision,
            kv.mod_revision,
            kv.version,
        )
    }))
}

fn list(m: &Mvcc, prefix: &str, rev: i64, limit: i64, after: &str) -> (Vec<String>, bool, i64) {
    let r = m
        .range(&RangeRequest {
            key: prefix.into(),
            prefix: true,
            revision: rev,
            limit,
            start_after: after.into(),
            ..Default::default()
        })
        .unwrap();
    (
        r.kvs
            .iter()
            .map(|kv| String::from_utf8(kv.key.clone()).unwrap())
            .collect(),
        r.more,
        r.count,
    )
}

#[test]
fn each_mutating_txn_adds_exactly_one_revision() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path());
    assert_eq!(
        txn(&m, vec![], vec![put("/a", "1"), put("/b", "1")], vec![]).revision,
        1
    );
    assert_eq!(txn(&m, vec![], vec![put("/a", "2")], vec![]).revision, 2);
    // Deleting an absent key changes nothing and keeps the revision.
    assert_eq!(txn(&m, vec![], vec![del("/zzz")], vec![]).revision, 2);
    assert_eq!(get(&m, "/a", 0).unwrap(), Some(("2".into(), 1, 2, 2)));
    assert_eq!(get(&m, "/b", 0).unwrap(), Some(("1".into(), 1, 1, 1)));
    assert_eq!(m.revisions().unwrap(), (2, 0));
}

#[test]
fn compares_choose_the_branch_and_report_current_state() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path());
    let absent = |k: &str| Compare {
        key: k.into(),
        target: Some(compare::Target::Exists(false)),
    };
    let r = txn(&m, vec![absent("/k")], vec![put("/k", "v1")], vec![]);
    assert!(r.succeeded);
    let r = txn(&m, vec![absent("/k")], vec![put("/k", "v2")], vec![]);
    assert!(!r.succeeded);
    assert_eq!(r.compared.len(), 1);
    assert_eq!(r.compared[0].mod_revision, 1);
    assert_eq!(r.revision, 1);
    let at = |rev| Compare {
        key: "/k".into(),
        target: Some(compare::Target::ModRevision(rev)),
    };
    assert!(!txn(&m, vec![at(7)], vec![put("/k", "x")], vec![put("/other", "y")]).succeeded);
    assert_eq!(get(&m, "/other", 0).unwrap().unwrap().0, "y");
    assert!(txn(&m, vec![at(1)], vec![put("/k", "v3")], vec![]).succeeded);
    let ver = Compare {
        key: "/k".into(),
        target: Some(compare::Target::Version(2)),
    };
    assert!(txn(&m, vec![ver], vec![del("/k")], vec![]).succeeded);
    assert_eq!(get(&m, "/k", 0).unwrap(), None);
}

#[test]
fn bad_requests_are_rejected_without_effect() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path());
    let mut b = m.begin().unwrap();
    let big = Op {
        op: Some(op::Op::Put(PutOp {
            key: "/big".into(),
            value: vec![0; 1_600_000],
        })),
    };
    assert!(matches!(
        b.txn(&TxnRequest {
            success: vec![big],
            ..Default::default()
        }),
        Err(StorageError::TooLarge { what: "value", .. })
    ));
    assert!(matches!(
        b.txn(&TxnRequest {
            success: vec![put("", "x")],
            ..Default::default()
        }),
        Err(StorageError::InvalidKey(_))
    ));
    assert!(matches!(
        b.txn(&TxnRequest {
            success: vec![put("/d", "1"), del("/d")],
            ..Default::default()
        }),
        Err(StorageError::InvalidRequest(_))
    ));
    b.commit().unwrap();
    assert_eq!(m.revisions().unwrap(), (0, 0));
}

/// A counter up to a limit: the operand is what to add, the limit is 3.
struct UpToThree;

impl Merger for UpToThree {
    fn merge(&self, current: Option<&[u8]>, operand: &[u8]) -> Result<Vec<u8>, String> {
        let number = |b: &[u8]| -> Result<u64, String> {
            std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| "not a number".to_string())
        };
        let total = current.map_or(Ok(0), number)? + number(operand)?;
        if total > 3 {
            return Err(format!("{total} is over 3"));
        }
        Ok(total.to_string().into_bytes())
    }
}

fn add(key: &str, merger: &str, n: &str) -> Op {
    Op {
        op: Some(op::Op::Merge(MergeOp {
            key: key.into(),
            merger: merger.into(),
            operand: n.into(),
        })),
    }
}

#[test]
fn merges_compute_from_the_current_value_and_a_refusal_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path()).with_mergers(Mergers::default().with("count", Arc::new(UpToThree)));
    // Each merge stores what the function makes of the value as the log left it, with the
    // object it accompanies, as one revision.
    let r = txn(
        &m,
        vec![],
        vec![put("/obj/a", "a"), add("/n", "count", "2")],
        vec![],
    );
    assert!(r.succeeded);
    assert_eq!(r.revision, 1);
    assert!(
        txn(
            &m,
            vec![],
            vec![put("/obj/b", "b"), add("/n", "count", "1")],
            vec![]
        )
        .succeeded
    );
    assert_eq!(get(&m, "/n", 0).unwrap(), Some(("3".into(), 1, 2, 2)));
    // A refusal fails the transaction as a failed compare would: its puts are not stored,
    // the failure branch runs, and the merged key's state is reported with the reason.
    let r = txn(
        &m,
        vec![],
        vec![put("/obj/c", "c"), add("/n", "count", "1")],
        vec![put("/refusals", "1")],
    );
    assert!(!r.succeeded);
    assert_eq!(r.refused, "4 is over 3");
    assert_eq!(r.compared.len(), 1);
    assert_eq!(r.compared[0].mod_revision, 2);
    assert_eq!(get(&m, "/obj/c", 0).unwrap(), None);
    assert_eq!(get(&m, "/refusals", 0).unwrap().unwrap().0, "1");
    assert_eq!(get(&m, "/n", 0).unwrap().unwrap().0, "3");
    // A failed compare runs no merge; an unknown function refuses.
    let absent = Compare {
        key: "/obj/a".into(),
        target: Some(compare::Target::Exists(false)),
    };
    let r = txn(&m, vec![absent], vec![add("/n", "count", "9")], vec![]);
    assert!(!r.succeeded);
    assert!(r.refused.is_empty());
    let r = txn(&m, vec![], vec![add("/n", "nothing", "1")], vec![]);
    assert_eq!(r.refused, "no merge function named \"nothing\"");
    // Merges belong to the success branch, once per key.
    let mut b = m.begin().unwrap();
    for bad in [
        TxnRequest {
            failure: vec![add("/n", "count", "1")],
            ..Default::default()
        },
        TxnRequest {
            success: vec![put("/n", "0"), add("/n", "count", "1")],
            ..Default::default()
        },
    ] {
        assert!(matches!(b.txn(&bad), Err(StorageError::InvalidRequest(_))));
    }
    b.commit().unwrap();
    assert_eq!(get(&m, "/n", 0).unwrap().unwrap().0, "3");
}

#[test]
fn history_reads_see_each_revision_and_paging_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path());
    for i in 0..5 {
        txn(
            &m,
            vec![],
            vec![put(&format!("/p/{i}"), &format!("v{i}"))],
            vec![],
        );
    }
    txn(&m, vec![], vec![put("/p/0", "changed")], vec![]); // rev 6
    txn(&m, vec![], vec![del("/p/1")], vec![]); // rev 7
    txn(&m, vec![], vec![put("/q", "outside")], vec![]); // rev 8
    assert_eq!(get(&m, "/p/0", 5).unwrap().unwrap().0, "v0");
    assert_eq!(get(&m, "/p/0", 6).unwrap().unwrap().0, "changed");
    assert_eq!(get(&m, "/p/1", 6).unwrap().unwrap().0, "v1");
    assert_eq!(get(&m, "/p/1", 7).unwrap(), None);
    assert_eq!(
        list(&m, "/p/", 3, 0, ""),
        (vec!["/p/0".into(), "/p/1".into(), "/p/2".into()], false, 3)
    );
    assert_eq!(
        list(&m, "/p/", 0, 2, ""),
        (vec!["/p/0".into(), "/p/2".into()], true, 4)
    );
    assert_eq!(
        list(&m, "/p/", 6, 2, "/p/1"),
        (vec!["/p/2".into(), "/p/3".into()], true, 3)
    );
    assert!(matches!(
        get(&m, "/p/0", 9),
        Err(StorageError::FutureRevision {
            requested: 9,
            current: 8
        })
    ));
}

#[test]
fn compaction_keeps_reads_at_and_above_and_refuses_below() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path());
    txn(&m, vec![], vec![put("/a", "1")], vec![]); // 1
    txn(&m, vec![], vec![put("/a", "2")], vec![]); // 2
    txn(&m, vec![], vec![put("/b", "1")], vec![]); // 3
    txn(&m, vec![], vec![del("/b")], vec![]); // 4
    txn(&m, vec![], vec![put("/a", "3")], vec![]); // 5
    let mut b = m.begin().unwrap();
    assert_eq!(b.compact(4).unwrap(), 4);
    assert!(matches!(b.compact(99), Err(StorageError::FutureRevision { .. })));
    b.set_raft_meta(b"applied", None);
    b.commit().unwrap();
    assert_eq!(m.revisions().unwrap(), (5, 4));
    assert!(matches!(
        get(&m, "/a", 3),
        Err(StorageError::Compacted {
            requested: 3,
            compacted: 4
        })
    ));
    assert_eq!(get(&m, "/a", 4).unwrap().unwrap().0, "2");
    assert_eq!(get(&m, "/b", 4).unwrap(), None);
    assert_eq!(get(&m, "/a", 5).unwrap().unwrap().0, "3");
    assert!(m.changes(3, 5).is_err());
    let changes = m.changes(4, 5).unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].1[0].prev.as_ref().unwrap().value, b"2");
}

#[test]
fn changes_replay_every_revision_in_order_with_previous_values() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(dir.path());
    let mut b = m.begin().unwrap();
    b.txn(&TxnRequest {
        success: vec![put("/x/1", "a"), put("/x/2", "b")],
        ..Default::default()
    })
    .unwrap();
    b.txn(&TxnRequest {
        success: vec![put("/x/1", "c")],
        ..Default::default()
    })
    .unwrap();
    b.txn(&TxnRequest {
        success: vec![Op {
            op: Some(op::Op::DeletePrefix(DeletePrefixOp { prefix: "/x/".into() })),
        }],
        ..Default::default()
    })
    .unwrap();
    b.set_raft_meta(b"applied", None);
    let applied = b.commit().unwrap();
    assert_eq!(applied.revision, 3);
    let replay = m.changes(0, 3).unwrap();
    assert_eq!(applied.revisions, replay);
    assert_eq!(replay[1].1[0].prev.as_ref().unwrap().value, b"a");
    assert!(replay[2].1.iter().all(|c| c.is_delete()));
    assert_eq!(replay[2].1.len(), 2);
    assert_eq!(list(&m, "/x/", 0, 0, "").2, 0);
}

#[test]
fn snapshot_round_trip_reproduces_state_hash_and_history() {
    let src = tempfile::tempdir().unwrap();
    let dst = tempfile::tempdir().unwrap();
    let a = open(src.path());
    for i in 0..50 {
        txn(
            &a,
            vec![],
            vec![put(&format!("/s/{}", i % 7), &format!("{i}"))],
            vec![],
        );
    }
    let file = src.path().join("snap.bin");
    let info = a.write_snapshot(&file).unwrap();
    assert_eq!(info.applied.as_deref(), Some(&b"applied"[..]));
    let b = open(dst.path());
    txn(&b, vec![], vec![put("/junk", "x")], vec![]);
    b.install_snapshot(std::fs::File::open(&file).unwrap()).unwrap();
    assert_eq!(a.state_hash().unwrap(), b.state_hash().unwrap());
    assert_eq!(get(&b, "/junk", 0).unwrap(), None);
    assert_eq!(get(&b, "/s/3", 10).unwrap(), get(&a, "/s/3", 10).unwrap());
    // A corrupted snapshot is refused and leaves the target untouched.
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    let before = b.state_hash().unwrap();
    assert!(b.install_snapshot(&bytes[..]).is_err());
    assert_eq!(b.state_hash().unwrap(), before);
}
