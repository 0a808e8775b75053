//! The seats of the limited priority levels and their fair queues. A level always has its
//! nominal seats; the part of them it may lend (`lendablePercent`) goes to a pool the other
//! levels borrow from, up to their borrowing limits, while the lender does not use it. A
//! request takes a seat at once when one is free and nobody of its level waits; otherwise it
//! joins the shortest of the queues its flow is dealt (shuffle sharding), or is refused when
//! that queue is full, the level does not queue, or it waited past its time. A freed seat goes
//! to the head of the queue that has received the least service so far (fair queuing by
//! virtual time, every request counted as one unit of work), first within its own level and
//! then in the levels that may borrow it, so a flow that floods its queues cannot starve the
//! others and an idle level's seats do not sit unused.
//!
//! All levels share one lock: a seat freed in one level may go to a request of another.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

/// How a limited level answers a request it cannot seat at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overflow {
    /// Refuse it.
    Reject,
    /// Queue it.
    Queue {
        /// Number of queues.
        queues: usize,
        /// Queues dealt to each flow.
        hand_size: usize,
        /// Requests a queue holds at most.
        queue_length_limit: usize,
    },
}

/// A level's seats: its nominal ones, how many of them it lends, how many it may borrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Seats the level always has.
    pub nominal: usize,
    /// Of them, the seats others may borrow while the level does not use them.
    pub lendable: usize,
    /// Seats the level may borrow beyond its own.
    pub borrowing: usize,
}

/// Why a request got no seat (kube's `reason` label of
/// `apiserver_flowcontrol_rejected_requests_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The level does not queue and every seat is taken.
    ConcurrencyLimit,
    /// The queue the request was dealt is full.
    QueueFull,
    /// The request waited in its queue as long as it may.
    TimeOut,
}

impl Refusal {
    /// The metric label.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::ConcurrencyLimit => "concurrency-limit",
            Refusal::QueueFull => "queue-full",
            Refusal::TimeOut => "time-out",
        }
    }
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    seat: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<Waiter>,
    /// Service received: one unit per request dispatched from this queue, caught up with the
    /// level's virtual clock whenever the queue turns non-empty.
    virtual_start: u64,
}

#[derive(Debug)]
struct Level {
    limits: Limits,
    overflow: Overflow,
    executing: usize,
    queues: Vec<Queue>,
    /// The virtual clock: the service of the queue dispatched from last.
    clock: u64,
    counts: Counts,
}

/// What a level did with its requests since it was configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Given a seat.
    pub dispatched: u64,
    /// Refused at once (queue full, or a level that does not queue).
    pub rejected: u64,
    /// Refused after waiting as long as they may.
    pub timed_out: u64,
    /// Gone while they waited (their client went away).
    pub cancelled: u64,
}

/// A level's state, as kube's `dump_priority_levels` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// Queues holding a request.
    pub active_queues: usize,
    /// Requests waiting.
    pub waiting: usize,
    /// Requests executing.
    pub executing: usize,
    /// What it did so far.
    pub counts: Counts,
}

impl Level {
    fn waiting(&self) -> bool {
        self.queues.iter().any(|q| !q.waiting.is_empty())
    }

    /// Seats in use beyond what the level never lends.
    fn beyond_guarantee(&self) -> usize {
        self.executing
            .saturating_sub(self.limits.nominal - self.limits.lendable.min(self.limits.nominal))
    }
}

#[derive(Debug, Default)]
struct State {
    levels: Vec<Level>,
    next_id: u64,
}

impl State {
    /// Whether level `i` may start one more request: within its nominal seats always; beyond
    /// them while it may still borrow and the lent seats in use (its own lent part included)
    /// are fewer than all levels lend.
    fn may_start(&self, i: usize) -> bool {
        let l = &self.levels[i];
        if l.executing < l.limits.nominal {
            return true;
        }
        if l.executing >= l.limits.nominal + l.limits.borrowing {
            return false;
        }
        let lent: usize = self.levels.iter().map(|l| l.limits.lendable).sum();
        let in_use: usize = self.levels.iter().map(Level::beyond_guarantee).sum();
        in_use < lent
    }

    /// Gives free seats to queued requests: in level `first`, then in every other level that
    /// may now borrow one, each to the head of its non-empty queue with the least service.
    fn dispatch(&mut self, first: usize) {
        let order = std::iter::once(first).chain((0..self.levels.len()).filter(|i| *i != first));
        for i in order.collect::<Vec<_>>() {
            while self.levels[i].waiting() && self.may_start(i) {
                let l = &mut self.levels[i];
                let Some(q) = l
                    .queues
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| !q.waiting.is_empty())
                    .min_by_key(|(i, q)| (q.virtual_start, *i))
                    .map(|(i, _)| i)
                else {
                    break;
                };
                let clock = l.clock;
                let queue = &mut l.queues[q];
                let Some(waiter) = queue.waiting.pop_front() else {
                    break;
                };
                let start = queue.virtual_start.max(clock);
                queue.virtual_start = start + 1;
                l.clock = start;
                // A waiter that already left (timed out, or its client went away) takes no seat.
                if waiter.seat.send(()).is_ok() {
                    l.executing += 1;
                    l.counts.dispatched += 1;
                }
            }
        }
    }
}

/// The seats and queues of every limited level of a replica.
#[derive(Debug, Default)]
pub struct Seats {
    state: Mutex<State>,
}

/// One limited level's handle on the shared seats.
#[derive(Debug, Clone)]
pub struct QueueSet {
    seats: Arc<Seats>,
    index: usize,
}

/// A seat, given back when dropped.
#[derive(Debug)]
pub struct Seat {
    set: QueueSet,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut s = self.set.seats.lock();
        let index = self.set.index;
        if let Some(l) = s.levels.get_mut(index) {
            l.executing = l.executing.saturating_sub(1);
        }
        s.dispatch(index);
    }
}

/// A request waiting in a queue. If it leaves before it is seated (it timed out, or its client
/// went away), it is taken out of its queue; a seat given to it in the meantime is given back.
struct Pending<'a> {
    set: &'a QueueSet,
    id: u64,
    seated: oneshot::Receiver<()>,
    settled: bool,
}

impl Pending<'_> {
    /// Leaves the queue; returns whether a seat was given first (it is then the caller's).
    fn leave(&mut self) -> bool {
        self.settled = true;
        let mut s = self.set.seats.lock();
        if let Some(l) = s.levels.get_mut(self.set.index) {
            for q in &mut l.queues {
                q.waiting.retain(|w| w.id != self.id);
            }
        }
        // The dispatcher sends under the same lock, so a seat given is here now.
        self.seated.try_recv().is_ok()
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        if self.leave() {
            drop(Seat {
                set: self.set.clone(),
            });
        }
        self.set.count(|c| c.cancelled += 1);
    }
}

/// What a request did to get its seat (or why it did not).
#[derive(Debug)]
pub struct Admission {
    /// The seat, or why there is none.
    pub outcome: Result<Seat, Refusal>,
    /// Whether it waited in a queue.
    pub queued: bool,
}

impl Seats {
    /// No levels yet.
    pub fn new() -> Arc<Seats> {
        Arc::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new level.
    pub fn level(self: &Arc<Self>, limits: Limits, overflow: Overflow) -> QueueSet {
        let mut s = self.lock();
        let queues = queue_count(&overflow);
        s.levels.push(Level {
            limits,
            overflow,
            executing: 0,
            queues: (0..queues).map(|_| Queue::default()).collect(),
            clock: 0,
            counts: Counts::default(),
        });
        QueueSet {
            seats: self.clone(),
            index: s.levels.len() - 1,
        }
    }
}

impl QueueSet {
    /// Applies a changed configuration: requests already queued keep their order, dealt anew
    /// over the new number of queues when it changed. A level no longer configured is given
    /// no seats: what it runs finishes, what it queues times out.
    pub fn reconfigure(&self, limits: Limits, overflow: Overflow) {
        let mut s = self.seats.lock();
        let Some(l) = s.levels.get_mut(self.index) else {
            return;
        };
        l.limits = limits;
        let count = queue_count(&overflow);
        if count != l.queues.len() {
            let waiting: Vec<Waiter> = l.queues.drain(..).flat_map(|q| q.waiting).collect();
            l.queues = (0..count).map(|_| Queue::default()).collect();
            let clock = l.clock;
            for (i, w) in waiting.into_iter().enumerate() {
                if let Some(q) = l.queues.get_mut(i % count.max(1)) {
                    q.virtual_start = clock;
                    q.waiting.push_back(w);
                }
            }
        }
        l.overflow = overflow;
        s.dispatch(self.index);
    }

    /// The level's nominal seats.
    pub fn limit(&self) -> usize {
        self.seats
            .lock()
            .levels
            .get(self.index)
            .map_or(0, |l| l.limits.nominal)
    }

    fn count(&self, update: impl FnOnce(&mut Counts)) {
        if let Some(l) = self.seats.lock().levels.get_mut(self.index) {
            update(&mut l.counts);
        }
    }

    /// The level's queues, requests and counts now.
    pub fn dump(&self) -> Dump {
        let s = self.seats.lock();
        s.levels.get(self.index).map_or(
            Dump {
                active_queues: 0,
                waiting: 0,
                executing: 0,
                counts: Counts::default(),
            },
            |l| Dump {
                active_queues: l.queues.iter().filter(|q| !q.waiting.is_empty()).count(),
                waiting: l.queues.iter().map(|q| q.waiting.len()).sum(),
                executing: l.executing,
                counts: l.counts,
            },
        )
    }

    /// Requests executing and waiting now.
    pub fn load(&self) -> (usize, usize) {
        let s = self.seats.lock();
        s.levels.get(self.index).map_or((0, 0), |l| {
            (l.executing, l.queues.iter().map(|q| q.waiting.len()).sum())
        })
    }

    /// A seat for a request of `flow`, waiting at most `wait` in a queue. `on_queue` is called
    /// when the request joins a queue; what it returns is dropped when the request leaves it.
    pub async fn admit<G>(&self, flow: u64, wait: Duration, on_queue: impl FnOnce() -> G) -> Admission {
        let refused = |refusal| Admission {
            outcome: Err(refusal),
            queued: false,
        };
        let rejected = |s: &mut State, refusal| {
            s.levels[self.index].counts.rejected += 1;
            refused(refusal)
        };
        let (id, seated) = {
            let mut s = self.seats.lock();
            let Some(level) = s.levels.get(self.index) else {
                return refused(Refusal::ConcurrencyLimit);
            };
            if !level.waiting() && s.may_start(self.index) {
                let l = &mut s.levels[self.index];
                l.executing += 1;
                l.counts.dispatched += 1;
                // Immediate service counts as service: the flow's queue moves ahead in
                // virtual time like any other's.
                if let Some(q) = pick_queue(l, flow) {
                    let clock = l.clock;
                    let queue = &mut l.queues[q];
                    queue.virtual_start = queue.virtual_start.max(clock) + 1;
                }
                return Admission {
                    outcome: Ok(self.seat()),
                    queued: false,
                };
            }
            let Overflow::Queue {
                queue_length_limit, ..
            } = level.overflow
            else {
                return rejected(&mut s, Refusal::ConcurrencyLimit);
            };
            let Some(q) = pick_queue(level, flow) else {
                return rejected(&mut s, Refusal::ConcurrencyLimit);
            };
            if level.queues[q].waiting.len() >= queue_length_limit {
                return rejected(&mut s, Refusal::QueueFull);
            }
            let id = s.next_id;
            s.next_id += 1;
            let (tx, rx) = oneshot::channel();
            let l = &mut s.levels[self.index];
            let clock = l.clock;
            let queue = &mut l.queues[q];
            if queue.waiting.is_empty() {
                queue.virtual_start = queue.virtual_start.max(clock);
            }
            queue.waiting.push_back(Waiter { id, seat: tx });
            (id, rx)
        };
        let in_queue = on_queue();
        let mut pending = Pending {
            set: self,
            id,
            seated,
            settled: false,
        };
        let outcome = match tokio::time::timeout(wait, &mut pending.seated).await {
            Ok(Ok(())) => {
                pending.settled = true;
                Ok(self.seat())
            }
            // Waited too long, unless a seat came in the meantime.
            Ok(Err(_)) | Err(_) => match pending.leave() {
                true => Ok(self.seat()),
                false => {
                    self.count(|c| c.timed_out += 1);
                    Err(Refusal::TimeOut)
                }
            },
        };
        drop(in_queue);
        Admission {
            outcome,
            queued: true,
        }
    }

    fn seat(&self) -> Seat {
        Seat { set: self.clone() }
    }
}

fn queue_count(overflow: &Overflow) -> usize {
    match overflow {
        Overflow::Reject => 0,
        Overflow::Queue { queues, .. } => (*queues).max(1),
    }
}

/// Shuffle sharding: the flow's hand of distinct queues, dealt with the flow's hash as the
/// source of randomness, and of them the one with the fewest requests waiting (the first such
/// in the hand).
fn pick_queue(l: &Level, flow: u64) -> Option<usize> {
    let deck = l.queues.len();
    if deck == 0 {
        return None;
    }
    let hand_size = match l.overflow {
        Overflow::Queue { hand_size, .. } => hand_size.clamp(1, deck),
        Overflow::Reject => 1,
    };
    let mut seed = flow;
    let mut cards: Vec<usize> = (0..deck).collect();
    let mut best: Option<usize> = None;
    for dealt in 0..hand_size {
        let remaining = (deck - dealt) as u64;
        let pick = dealt + (seed % remaining) as usize;
        seed /= remaining;
        cards.swap(dealt, pick);
        let card = cards[dealt];
        if best.is_none_or(|b| l.queues[card].waiting.len() < l.queues[b].waiting.len()) {
            best = Some(card);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    fn own(nominal: usize) -> Limits {
        Limits {
            nominal,
            lendable: 0,
            borrowing: 0,
        }
    }

    fn queued(queues: usize, hand_size: usize, queue_length_limit: usize) -> Overflow {
        Overflow::Queue {
            queues,
            hand_size,
            queue_length_limit,
        }
    }

    #[tokio::test]
    async fn a_rejecting_level_refuses_beyond_its_seats() {
        let set = Seats::new().level(own(2), Overflow::Reject);
        let a = set.admit(1, WAIT, || ()).await.outcome.expect("a seat");
        let _b = set.admit(1, WAIT, || ()).await.outcome.expect("a seat");
        let refused = set.admit(2, WAIT, || ()).await;
        assert_eq!(refused.outcome.err(), Some(Refusal::ConcurrencyLimit));
        drop(a);
        assert!(set.admit(2, WAIT, || ()).await.outcome.is_ok());
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_a_long_wait_times_out() {
        let set = Seats::new().level(own(1), queued(1, 1, 1));
        let _held = set.admit(1, WAIT, || ()).await.outcome.expect("a seat");
        let waiting = {
            let set = set.clone();
            tokio::spawn(async move { set.admit(1, Duration::from_millis(200), || ()).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(set.load(), (1, 1));
        let full = set.admit(2, WAIT, || ()).await;
        assert_eq!(full.outcome.err(), Some(Refusal::QueueFull));
        let timed_out = waiting.await.expect("joined");
        assert!(timed_out.queued);
        assert_eq!(timed_out.outcome.err(), Some(Refusal::TimeOut));
        assert_eq!(set.load(), (1, 0), "the timed-out request left its queue");
        assert_eq!(
            set.dump().counts,
            Counts {
                dispatched: 1,
                rejected: 1,
                timed_out: 1,
                cancelled: 0
            }
        );
    }

    #[tokio::test]
    async fn a_freed_seat_goes_to_the_flow_served_least() {
        // Two flows, each on a queue of its own (one queue dealt per flow out of many).
        let set = Seats::new().level(own(1), queued(64, 1, 50));
        let (a, b) = (7u64, 8u64);
        {
            let s = set.seats.lock();
            assert_ne!(pick_queue(&s.levels[0], a), pick_queue(&s.levels[0], b));
        }
        let held = set.admit(a, WAIT, || ()).await.outcome.expect("a seat");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (flow, n) in [(&a, 3), (&b, 1)] {
            for _ in 0..n {
                let (set, order, flow) = (set.clone(), order.clone(), *flow);
                tasks.push(tokio::spawn(async move {
                    let seat = set.admit(flow, WAIT, || ()).await.outcome.expect("seated");
                    order.lock().expect("order").push(flow);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    drop(seat);
                }));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        assert_eq!(set.load(), (1, 4));
        drop(held);
        for t in tasks {
            t.await.expect("joined");
        }
        let order = order.lock().expect("order").clone();
        assert_eq!(order, vec![b, a, a, a]);
    }

    #[tokio::test]
    async fn idle_lendable_seats_are_borrowed_and_the_lender_keeps_its_own() {
        let seats = Seats::new();
        // The lender lends both its seats; the borrower has one and may borrow without limit.
        let lender = seats.level(
            Limits {
                nominal: 2,
                lendable: 2,
                borrowing: 0,
            },
            Overflow::Reject,
        );
        let borrower = seats.level(
            Limits {
                nominal: 1,
                lendable: 0,
                borrowing: 10,
            },
            queued(1, 1, 10),
        );
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(
                borrower
                    .admit(1, WAIT, || ())
                    .await
                    .outcome
                    .expect("own, then borrowed"),
            );
        }
        assert_eq!(borrower.load(), (3, 0));
        // Nothing left to borrow: the next one waits.
        let waiting = {
            let borrower = borrower.clone();
            tokio::spawn(async move { borrower.admit(1, WAIT, || ()).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(borrower.load(), (3, 1));
        // The lender's own seats are its own even while lent out.
        let mine = lender
            .admit(9, WAIT, || ())
            .await
            .outcome
            .expect("the lender's own seat");
        assert_eq!(lender.load(), (1, 0));
        // A borrowed seat given back is not lent again while the lender uses its share...
        held.pop();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(borrower.load(), (2, 1));
        // ...and once the lender is done, it is.
        drop(mine);
        let seated = waiting.await.expect("joined");
        assert!(seated.queued && seated.outcome.is_ok());
    }
}
