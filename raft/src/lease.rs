//! The leader's lease: linearizable reads without a heartbeat round while a quorum has recently
//! acknowledged this leader.
//!
//! openraft 0.9 confirms leadership for every read-index round by sending heartbeats to a
//! quorum and waiting for the answers. But a follower that accepted an AppendEntries of this
//! leader refuses every vote, and does not campaign itself, for `electionTimeoutMax` after it
//! handled it (openraft's follower lease). So when the AppendEntries that a quorum accepted was
//! sent at `t`, no other leader can be elected before `t + electionTimeoutMax`; until then this
//! leader's commit index is a valid read index without asking anyone. This module keeps the
//! send time of the last accepted AppendEntries per follower ([`Lease::acknowledged`], fed by
//! the network) and answers whether a quorum of every voter set acknowledged this leader's
//! vote within the lease ([`Lease::held_since`]).
//!
//! The follower lease is kept in memory, so the rules that make it hold across a restart are
//! here too: a replica that restarts on existing data neither votes nor campaigns until a
//! whole lease has passed since it started ([`Lease::refuses_votes`]); a replica it
//! acknowledged before it stopped may still count on it. The leader itself counts in its
//! quorum only while its saved vote is still the one it leads with (a vote it granted to a
//! candidate is saved before the candidate learns of it). The lease is not used while
//! membership changes (the voter sets in openraft's metrics may lag the log) or while the
//! leader hands leadership over.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use openraft::Vote;

/// The share of the followers' lease (`electionTimeoutMax`) a leader relies on; the rest is
/// margin for the time between a follower handling an AppendEntries and the leader using it,
/// and for clocks of different hosts running at slightly different rates.
const LEASE_SHARE: (u32, u32) = (3, 4);

/// When each follower last accepted an AppendEntries, and under which leader vote.
#[derive(Debug, Default)]
struct Acks {
    by_follower: HashMap<u64, (Vote<u64>, Instant)>,
    /// While membership changes are in flight, no lease (counted by [`Suspension`]); after
    /// the last one ends, none until this instant.
    resume_at: Option<Instant>,
}

/// A replica's lease bookkeeping (shared by the network, which records acknowledgements, and
/// the node, which reads under the lease and refuses early votes).
#[derive(Debug)]
pub struct Lease {
    acks: Mutex<Acks>,
    /// How long after an acknowledged send this leader may rely on it.
    duration: Duration,
    /// The followers' lease (`electionTimeoutMax`).
    followers: Duration,
    /// Until when this replica refuses votes and does not campaign (restarted on old data).
    quiet_until: Option<Instant>,
    /// Membership changes in flight.
    suspended: AtomicUsize,
}

impl Lease {
    /// The lease of a replica whose followers keep their lease for `election_timeout_max`;
    /// `restarted` says whether it starts on data of an earlier run (then it stays out of
    /// elections for one lease).
    pub fn new(election_timeout_max: Duration, restarted: bool) -> Self {
        let (num, den) = LEASE_SHARE;
        Lease {
            acks: Mutex::default(),
            duration: election_timeout_max * num / den,
            followers: election_timeout_max,
            quiet_until: restarted.then(|| Instant::now() + election_timeout_max),
            suspended: AtomicUsize::new(0),
        }
    }

    /// How long a replica that restarted stays out of elections.
    pub fn quiet_period(&self) -> Duration {
        self.followers
    }

    /// Records that follower `id` accepted an AppendEntries that carried `vote` and was sent
    /// at `sent`.
    pub fn acknowledged(&self, id: u64, vote: Vote<u64>, sent: Instant) {
        let mut acks = self.acks.lock().unwrap_or_else(|p| p.into_inner());
        let entry = acks.by_follower.entry(id).or_insert((vote, sent));
        if entry.0 != vote {
            *entry = (vote, sent);
        } else if entry.1 < sent {
            entry.1 = sent;
        }
    }

    /// Whether this replica must refuse a vote request now: it restarted on old data less
    /// than one follower lease ago, so it may have acknowledged a leader that still counts on
    /// it.
    pub fn refuses_votes(&self) -> bool {
        self.quiet_until.is_some_and(|until| Instant::now() < until)
    }

    /// Stops the lease until the returned guard is dropped, and for one lease after.
    pub fn suspend(&self) -> Suspension<'_> {
        self.suspended.fetch_add(1, Ordering::SeqCst);
        Suspension { lease: self }
    }

    /// The instant from which leader `me`, leading with `vote`, holds the lease over the voter
    /// sets `configs` (all of them, as during a joint membership change), if it holds now:
    /// in each set, a majority (this leader counting as acknowledging now) accepted an
    /// AppendEntries of `vote` sent within the lease.
    pub fn held_since(&self, me: u64, vote: &Vote<u64>, configs: &[BTreeSet<u64>]) -> Option<Instant> {
        if self.suspended.load(Ordering::SeqCst) > 0 || configs.is_empty() {
            return None;
        }
        let acks = self.acks.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if acks.resume_at.is_some_and(|at| now < at) {
            return None;
        }
        let mut since = now;
        for voters in configs {
            let mut times: Vec<Instant> = voters
                .iter()
                .filter_map(|v| match acks.by_follower.get(v) {
                    _ if *v == me => Some(now),
                    Some((acked, at)) if acked == vote => Some(*at),
                    _ => None,
                })
                .collect();
            let quorum = voters.len() / 2 + 1;
            if times.len() < quorum {
                return None;
            }
            times.sort_unstable_by(|a, b| b.cmp(a));
            since = since.min(times[quorum - 1]);
        }
        (now < since + self.duration).then_some(since)
    }
}

/// A membership change in flight: the lease is not used until it is dropped, and for one
/// follower lease after (by then openraft's metrics show the new voter sets).
pub struct Suspension<'a> {
    lease: &'a Lease,
}

impl Drop for Suspension<'_> {
    fn drop(&mut self) {
        let mut acks = self.lease.acks.lock().unwrap_or_else(|p| p.into_inner());
        acks.resume_at = Some(Instant::now() + self.lease.followers);
        self.lease.suspended.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(term: u64, leader: u64) -> Vote<u64> {
        Vote::new_committed(term, leader)
    }

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_quorum_of_recent_acknowledgements_of_this_vote_holds_the_lease() {
        let lease = Lease::new(Duration::from_millis(600), false);
        let v = vote(3, 1);
        let voters = [set(&[1, 2, 3])];
        assert_eq!(
            lease.held_since(1, &v, &voters),
            None,
            "no follower acknowledged yet"
        );
        let sent = Instant::now();
        lease.acknowledged(2, v, sent);
        assert_eq!(
            lease.held_since(1, &v, &voters),
            Some(sent),
            "the leader and node 2 are a quorum"
        );
        assert_eq!(
            lease.held_since(1, &vote(4, 1), &voters),
            None,
            "acknowledgements of another vote do not count"
        );
        lease.acknowledged(2, vote(2, 3), Instant::now());
        assert_eq!(
            lease.held_since(1, &v, &voters),
            None,
            "node 2 now follows another vote"
        );
    }

    #[test]
    fn the_lease_ends_a_share_of_the_follower_lease_after_the_quorum_send() {
        let lease = Lease::new(Duration::from_millis(600), false);
        let v = vote(3, 1);
        let voters = [set(&[1, 2, 3, 4, 5])];
        let now = Instant::now();
        lease.acknowledged(2, v, now - Duration::from_millis(500));
        lease.acknowledged(3, v, now - Duration::from_millis(100));
        lease.acknowledged(4, v, now - Duration::from_millis(50));
        // The quorum of three is the leader, node 4 and node 3: held since node 3's send.
        assert_eq!(
            lease.held_since(1, &v, &voters),
            Some(now - Duration::from_millis(100))
        );
        // Without node 4 and 3, node 2's send is 500 ms old: past 3/4 of 600 ms.
        let old = Lease::new(Duration::from_millis(600), false);
        old.acknowledged(2, v, now - Duration::from_millis(500));
        old.acknowledged(3, v, now - Duration::from_millis(460));
        assert_eq!(old.held_since(1, &v, &voters), None);
        // An older acknowledgement arriving late does not move the time back.
        lease.acknowledged(3, v, now - Duration::from_millis(300));
        assert_eq!(
            lease.held_since(1, &v, &voters),
            Some(now - Duration::from_millis(100))
        );
    }

    #[test]
    fn every_voter_set_of_a_joint_membership_needs_its_own_quorum() {
        let lease = Lease::new(Duration::from_millis(600), false);
        let v = vote(3, 1);
        let joint = [set(&[1, 2, 3]), set(&[1, 4, 5])];
        lease.acknowledged(2, v, Instant::now());
        assert_eq!(lease.held_since(1, &v, &joint), None, "the new set has no quorum");
        lease.acknowledged(5, v, Instant::now());
        assert!(lease.held_since(1, &v, &joint).is_some());
        assert_eq!(lease.held_since(1, &v, &[]), None);
    }

    #[test]
    fn a_membership_change_suspends_the_lease_until_one_lease_after_it() {
        let lease = Lease::new(Duration::from_millis(600), false);
        let v = vote(3, 1);
        let voters = [set(&[1, 2, 3])];
        lease.acknowledged(2, v, Instant::now());
        let change = lease.suspend();
        assert_eq!(lease.held_since(1, &v, &voters), None);
        drop(change);
        lease.acknowledged(2, v, Instant::now());
        assert_eq!(
            lease.held_since(1, &v, &voters),
            None,
            "not within a lease of the change"
        );
    }

    #[test]
    fn a_replica_restarted_on_old_data_refuses_votes_for_one_follower_lease() {
        assert!(Lease::new(Duration::from_millis(600), true).refuses_votes());
        assert!(!Lease::new(Duration::from_millis(600), false).refuses_votes());
        let short = Lease::new(Duration::from_millis(1), true);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!short.refuses_votes());
    }
}
