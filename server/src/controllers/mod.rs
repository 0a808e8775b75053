//! Controllers: leader-only reconcilers over the generic store, the part of
//! kube-controller-manager that an API server needs to behave like a cluster — namespace
//! deletion, garbage collection of dependents, removal of a deleted definition's objects,
//! ClusterRole aggregation, and the `default` ServiceAccount and `kube-root-ca.crt` ConfigMap
//! of every namespace (one mechanism for both: `per_namespace`).
//!
//! Each runs through [`run_while_leader`], written once: its work starts when this replica
//! becomes the leader (told by the Raft node's leader changes, not by polling) and is dropped
//! the moment it stops leading. The controllers keep no state of their own, so a new leader
//! continues where the old one stopped.

pub mod clusterrole_aggregation;
pub mod crd_finalizer;
pub mod garbage_collector;
pub mod namespace;
pub mod per_namespace;
pub mod root_ca_publisher;
pub mod service_account;

use std::future::Future;

use tokio::sync::watch;

use crate::store::Store;

/// Runs `work` while this replica leads, for as long as the node lives: started when it
/// becomes the leader (at once if it is), cancelled when it stops leading, started afresh when
/// it leads again. `work` is a controller's loop and is not expected to return; if it does,
/// it is started again only at the next term this replica leads.
pub fn run_while_leader<F, Fut>(store: Store, controller: &'static str, mut work: F)
where
    F: FnMut(Store) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let me = store.replica_id();
        let mut leader = store.leader_changes();
        loop {
            if !wait_until(&mut leader, |l| l == Some(me)).await {
                return;
            }
            tracing::debug!(controller, "this replica leads: controller started");
            let mut lost = leader.clone();
            let node_alive = tokio::select! {
                () = work(store.clone()) => wait_until(&mut lost, |l| l != Some(me)).await,
                alive = wait_until(&mut lost, |l| l != Some(me)) => alive,
            };
            if !node_alive {
                return;
            }
            tracing::debug!(controller, "this replica no longer leads: controller stopped");
        }
    });
}

/// Waits until the leader id satisfies `cond`; `false` when the node has stopped.
async fn wait_until(leader: &mut watch::Receiver<Option<u64>>, cond: impl Fn(Option<u64>) -> bool) -> bool {
    leader.wait_for(|l| cond(*l)).await.is_ok()
}
