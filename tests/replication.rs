//! The replicated store, end to end: real `kuberaft serve` processes, real kills.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kuberaft_proto::kv_client::KvClient;
use kuberaft_proto::RangeRequest;
use support::*;
use tokio::sync::Mutex;
use tonic::transport::Channel;

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_writes_are_forwarded_and_every_replica_has_the_same_revisions() {
    let mut c = Cluster::start(Options::default());
    c.wait_bootstrapped(T).await;
    let leader = c.wait_leader(T).await;
    let follower = c.follower_of(leader);
    let mut kv = c.kv(follower).await;
    let mut revs = Vec::new();
    for i in 0..20 {
        revs.push(
            put(&mut kv, &format!("/fwd/{i}"), b"v")
                .await
                .expect("put via follower"),
        );
    }
    // One revision per write, strictly increasing by one.
    assert!(revs.windows(2).all(|w| w[1] == w[0] + 1), "{revs:?}");
    // Read-your-writes on the replica that answered, without a read index.
    assert_eq!(
        get(&mut kv, "/fwd/19", 0, true).await.unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let (rev, _) = c.wait_converged(T).await;
    assert_eq!(rev, *revs.last().unwrap());
    // Every replica answers a read at an old revision identically.
    for i in 0..3 {
        let mut kv = c.kv(i).await;
        let old = get(&mut kv, "/fwd/5", revs[5], true).await.unwrap();
        assert_eq!(old.as_deref(), Some(&b"v"[..]), "replica {i}");
        assert_eq!(
            get(&mut kv, "/fwd/6", revs[5], true).await.unwrap(),
            None,
            "replica {i}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linearizable_read_on_a_follower_sees_the_latest_committed_write() {
    let mut c = Cluster::start(Options::default());
    let leader = c.wait_leader(T).await;
    let follower = c.follower_of(leader);
    let mut writer = c.kv(leader).await;
    let mut reader = c.kv(follower).await;
    for i in 0..50 {
        let value = format!("{i}");
        put(&mut writer, "/ri/key", value.as_bytes()).await.unwrap();
        let seen = get(&mut reader, "/ri/key", 0, false).await.unwrap();
        assert_eq!(
            seen.as_deref(),
            Some(value.as_bytes()),
            "read {i} on the follower was stale"
        );
    }
}

/// How many linearizable reads replica `i` has answered under its leader's lease, from its
/// `/metrics`.
async fn lease_reads(c: &Cluster, i: usize) -> u64 {
    let text = c
        .http()
        .get(format!("{}/metrics", c.base_url(i)))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix("kuberaft_raft_lease_reads_total "))
        .map_or(0, |v| v.trim().parse().expect("a counter value"))
}

/// A linearizable read with a client-side deadline of `within`.
async fn get_within(
    kv: &mut KvClient<Channel>,
    key: &str,
    within: Duration,
) -> Result<Option<Vec<u8>>, tonic::Status> {
    let mut req = tonic::Request::new(RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    });
    req.set_timeout(within);
    let r = kv.range(req).await?.into_inner();
    Ok(r.kvs.into_iter().next().map(|kv| kv.value))
}

/// The leader answers linearizable reads under its lease while its followers keep
/// acknowledging it, without a confirmation round per read; once they stop answering (both
/// paused, as a partition would cut them off), the lease runs out within one election timeout
/// and the leader answers no linearizable read at all (it might no longer lead) until they are
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_reads_under_its_lease_only_while_a_quorum_acknowledges_it() {
    let mut c = Cluster::start(Options::default());
    let leader = c.wait_leader(T).await;
    let mut kv = c.kv(leader).await;
    put(&mut kv, "/lease/key", b"1").await.unwrap();
    let before = lease_reads(&c, leader).await;
    for _ in 0..20 {
        let seen = get(&mut kv, "/lease/key", 0, false).await.unwrap();
        assert_eq!(seen.as_deref(), Some(&b"1"[..]));
    }
    let during = lease_reads(&c, leader).await;
    assert!(
        during >= before + 20,
        "20 reads on the leader, {} of them under its lease",
        during - before
    );

    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    for &f in &followers {
        c.pause(f);
    }
    // Past the lease (3/4 of the 600 ms election timeout) since the last acknowledgement.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let expired = lease_reads(&c, leader).await;
    let cut_off = get_within(&mut kv, "/lease/key", Duration::from_secs(2)).await;
    assert!(
        cut_off.is_err(),
        "a leader cut off from its followers answered a linearizable read: {cut_off:?}"
    );
    assert_eq!(
        lease_reads(&c, leader).await,
        expired,
        "no read is answered under an expired lease"
    );

    for &f in &followers {
        c.resume(f);
    }
    let leader = c.wait_leader(T).await;
    let mut kv = c.kv(leader).await;
    let seen = eventually(T, || {
        let mut kv = kv.clone();
        async move {
            get(&mut kv, "/lease/key", 0, false)
                .await
                .map_err(|e| e.to_string())
        }
    })
    .await;
    assert_eq!(seen.as_deref(), Some(&b"1"[..]));
    let again = lease_reads(&c, leader).await;
    for _ in 0..5 {
        get(&mut kv, "/lease/key", 0, false).await.unwrap();
    }
    assert!(
        lease_reads(&c, leader).await >= again + 5,
        "the lease holds again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_elects_a_new_one_and_writes_continue() {
    let mut c = Cluster::start(Options::default());
    let old = c.wait_leader(T).await;
    let mut kv = c.kv(old).await;
    put(&mut kv, "/lk/before", b"1").await.unwrap();
    c.kill(old);
    let new = c.wait_leader(T).await;
    assert_ne!(new, old);
    let survivor = c.follower_of(new);
    for target in [new, survivor] {
        let mut kv = c.kv(target).await;
        eventually(T, || {
            let mut kv = kv.clone();
            async move { put(&mut kv, "/lk/after", b"2").await.map_err(|e| e.to_string()) }
        })
        .await;
        assert_eq!(
            get(&mut kv, "/lk/before", 0, false).await.unwrap().as_deref(),
            Some(&b"1"[..])
        );
    }
    c.restart(old);
    c.wait_leader(T).await;
    c.wait_converged(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_follower_catches_up_from_the_log() {
    let mut c = Cluster::start(Options::default());
    let leader = c.wait_leader(T).await;
    let follower = c.follower_of(leader);
    assert!(c.stop(follower).success(), "clean shutdown: {}", c.log(follower));
    let mut kv = c.kv(leader).await;
    for i in 0..100 {
        put(&mut kv, &format!("/cu/{i}"), b"x").await.unwrap();
    }
    c.restart(follower);
    let (rev, _) = c.wait_converged(T).await;
    assert!(rev >= 100);
    let s = c.status(follower, false).await.unwrap();
    assert_eq!(s.snapshot_index, 0, "caught up from the log, not a snapshot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_purge_point_catches_up_by_snapshot() {
    let mut c = Cluster::start(Options {
        snapshot_logs: 50,
        logs_kept_after_snapshot: 5,
        ..Options::default()
    });
    let leader = c.wait_leader(T).await;
    let follower = c.follower_of(leader);
    c.kill(follower);
    let mut kv = c.kv(leader).await;
    for i in 0..300 {
        put(
            &mut kv,
            &format!("/snap/{:03}", i % 40),
            format!("{i}").as_bytes(),
        )
        .await
        .unwrap();
    }
    // The leader has purged the log the follower would need.
    let ls = c.status(leader, false).await.unwrap();
    assert!(ls.snapshot_index > 0, "leader took a snapshot: {ls:?}");
    assert!(ls.log_entries < 300, "leader purged its log: {ls:?}");
    c.restart(follower);
    let (rev, hash) = c.wait_converged(T).await;
    let fs = c.status(follower, true).await.unwrap();
    assert!(fs.snapshot_index > 0, "follower installed a snapshot: {fs:?}");
    assert_eq!((fs.hash_revision, fs.state_hash), (rev, hash));
    // History travelled with the snapshot: an older revision reads the same on the follower.
    let mut fkv = c.kv(follower).await;
    let mut lkv = c.kv(leader).await;
    let at = rev - 30;
    assert_eq!(
        get(&mut fkv, "/snap/005", at, true).await.unwrap(),
        get(&mut lkv, "/snap/005", at, true).await.unwrap()
    );
    // And the follower keeps following.
    put(&mut fkv, "/snap/after", b"1").await.unwrap();
    c.wait_converged(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_makes_old_revisions_fail_on_every_replica() {
    let mut c = Cluster::start(Options::default());
    let leader = c.wait_leader(T).await;
    let mut kv = c.kv(leader).await;
    let mut revs = Vec::new();
    for i in 0..10 {
        revs.push(put(&mut kv, "/cmp/k", format!("{i}").as_bytes()).await.unwrap());
    }
    let follower = c.follower_of(leader);
    let mut fkv = c.kv(follower).await;
    let resp = fkv
        .compact(kuberaft_proto::CompactRequest { revision: revs[5] })
        .await
        .expect("compact via a follower")
        .into_inner();
    assert_eq!(resp.compacted_revision, revs[5]);
    c.wait_converged(T).await;
    for i in 0..3 {
        let mut kv = c.kv(i).await;
        let err = get(&mut kv, "/cmp/k", revs[4], true)
            .await
            .expect_err("compacted read");
        assert_eq!(err.code(), tonic::Code::OutOfRange, "replica {i}: {err:?}");
        assert!(
            err.message().contains("compacted"),
            "replica {i}: {}",
            err.message()
        );
        let at = get(&mut kv, "/cmp/k", revs[5], true).await.unwrap();
        assert_eq!(at.as_deref(), Some(&b"5"[..]), "replica {i}");
        let s = c.status(i, false).await.unwrap();
        assert_eq!(s.compacted_revision, revs[5]);
    }
    // Compacting past the current revision is refused.
    let err = fkv
        .compact(kuberaft_proto::CompactRequest {
            revision: revs[9] + 100,
        })
        .await
        .expect_err("future compaction");
    assert_eq!(err.code(), tonic::Code::OutOfRange);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_compacts_on_schedule_after_the_retention_window() {
    let mut c = Cluster::start(Options {
        retention_seconds: 2,
        ..Options::default()
    });
    let leader = c.wait_leader(T).await;
    let mut kv = c.kv(leader).await;
    let first = put(&mut kv, "/sched/k", b"1").await.unwrap();
    put(&mut kv, "/sched/k", b"2").await.unwrap();
    // Wait for the compaction on the replica read below: a serializable read answers from
    // local state, and another replica may apply the compaction before this one does.
    eventually(T, || {
        let c = &c;
        async move {
            let s = c.status(leader, false).await.ok_or("no status")?;
            if s.compacted_revision > first {
                Ok(())
            } else {
                Err(format!("compacted revision still {}", s.compacted_revision))
            }
        }
    })
    .await;
    let err = get(&mut kv, "/sched/k", first, true)
        .await
        .expect_err("compacted");
    assert_eq!(err.code(), tonic::Code::OutOfRange);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_write_load_loses_no_acknowledged_write() {
    let mut c = Cluster::start(Options::default());
    c.wait_leader(T).await;
    let acked: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..6 {
        let mut kv = c.kv(w % 3).await;
        let acked = acked.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut seq = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = format!("/load/{w}/{seq}");
                let value = format!("{w}-{seq}").into_bytes();
                let mut req = tonic::Request::new(put_txn(&key, &value));
                req.set_timeout(Duration::from_secs(3));
                if kv.txn(req).await.is_ok() {
                    acked.lock().await.insert(key, value);
                }
                seq += 1;
            }
        }));
    }
    // Kill the leader and a follower in turn while the load runs, restarting each.
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let victim = if round % 2 == 0 {
            c.wait_leader(T).await
        } else {
            let l = c.wait_leader(T).await;
            c.follower_of(l)
        };
        c.kill(victim);
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.restart(victim);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    c.wait_leader(T).await;
    c.wait_converged(T).await;
    let acked = acked.lock().await.clone();
    assert!(acked.len() > 50, "the load made progress: {} writes", acked.len());
    for i in 0..3 {
        let mut kv = c.kv(i).await;
        let all = kv
            .range(kuberaft_proto::RangeRequest {
                key: b"/load/".to_vec(),
                prefix: true,
                serializable: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let stored: BTreeMap<String, Vec<u8>> = all
            .kvs
            .into_iter()
            .map(|kv| (String::from_utf8(kv.key).unwrap(), kv.value))
            .collect();
        for (k, v) in &acked {
            assert_eq!(stored.get(k), Some(v), "replica {i} lost acknowledged write {k}");
        }
        // Nothing appears that was never written.
        for (k, v) in &stored {
            let (w, seq) = k["/load/".len()..].split_once('/').unwrap();
            assert_eq!(
                v,
                &format!("{w}-{seq}").into_bytes(),
                "replica {i} has a value nobody wrote at {k}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_values_and_bad_keys_are_rejected_before_the_log() {
    let mut c = Cluster::start(Options::default());
    c.wait_bootstrapped(T).await;
    let leader = c.wait_leader(T).await;
    let follower = c.follower_of(leader);
    let before = c.status(leader, false).await.unwrap().last_log_index;
    for i in [leader, follower] {
        let mut kv = c.kv(i).await;
        let err = put(&mut kv, "/big", &vec![7u8; 1_600_000])
            .await
            .expect_err("too large");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("exceeds the limit"), "{}", err.message());
        let err = put(&mut kv, "", b"x").await.expect_err("empty key");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
    }
    let after = c.status(leader, false).await.unwrap().last_log_index;
    assert_eq!(before, after, "rejected requests never reached the log");
    // A value just under the limit is fine.
    let mut kv = c.kv(follower).await;
    put(&mut kv, "/almost", &vec![1u8; 1_500_000]).await.unwrap();
    assert_eq!(
        get(&mut kv, "/almost", 0, false).await.unwrap().map(|v| v.len()),
        Some(1_500_000)
    );
}
