//! The seats of one limited priority level and its fair queues: a request takes a seat at once
//! when one is free and nobody waits; otherwise it joins the shortest of the queues its flow is
//! dealt (shuffle sharding), or is refused when that queue is full, the level does not queue,
//! or it waited past its time. A freed seat goes to the head of the queue that has received
//! the least service so far (fair queuing by virtual time, every request counted as one unit
//! of work), so a flow that floods its queues cannot starve the others.

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
struct State {
    limit: usize,
    overflow: Overflow,
    executing: usize,
    queues: Vec<Queue>,
    /// The virtual clock: the service of the queue dispatched from last.
    clock: u64,
    next_id: u64,
}

/// The seats and queues of one limited priority level.
#[derive(Debug)]
pub struct QueueSet {
    state: Mutex<State>,
}

/// A seat, given back when dropped.
#[derive(Debug)]
pub struct Seat {
    set: Arc<QueueSet>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut s = self.set.lock();
        s.executing = s.executing.saturating_sub(1);
        dispatch(&mut s);
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
        let mut s = self.set.lock();
        for q in &mut s.queues {
            q.waiting.retain(|w| w.id != self.id);
        }
        // The dispatcher sends under the same lock, so a seat given is here now.
        self.seated.try_recv().is_ok()
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.settled && self.leave() {
            let mut s = self.set.lock();
            s.executing = s.executing.saturating_sub(1);
            dispatch(&mut s);
        }
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

impl QueueSet {
    /// A level of `limit` seats.
    pub fn new(limit: usize, overflow: Overflow) -> Arc<QueueSet> {
        let queues = queue_count(&overflow);
        Arc::new(QueueSet {
            state: Mutex::new(State {
                limit,
                overflow,
                executing: 0,
                queues: (0..queues).map(|_| Queue::default()).collect(),
                clock: 0,
                next_id: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies a changed configuration: requests already queued keep their order, dealt anew
    /// over the new number of queues when it changed.
    pub fn reconfigure(&self, limit: usize, overflow: Overflow) {
        let mut s = self.lock();
        s.limit = limit;
        let count = queue_count(&overflow);
        if count != s.queues.len() {
            let waiting: Vec<Waiter> = s.queues.drain(..).flat_map(|q| q.waiting).collect();
            s.queues = (0..count).map(|_| Queue::default()).collect();
            let clock = s.clock;
            for (i, w) in waiting.into_iter().enumerate() {
                if let Some(q) = s.queues.get_mut(i % count.max(1)) {
                    q.virtual_start = clock;
                    q.waiting.push_back(w);
                }
            }
        }
        s.overflow = overflow;
        dispatch(&mut s);
    }

    /// The seats the level has.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Requests executing and waiting now.
    pub fn load(&self) -> (usize, usize) {
        let s = self.lock();
        (s.executing, s.queues.iter().map(|q| q.waiting.len()).sum())
    }

    /// A seat for a request of `flow`, waiting at most `wait` in a queue. `on_queue` is called
    /// when the request joins a queue; what it returns is dropped when the request leaves it.
    pub async fn admit<G>(
        self: &Arc<Self>,
        flow: u64,
        wait: Duration,
        on_queue: impl FnOnce() -> G,
    ) -> Admission {
        let (id, seated) = {
            let mut s = self.lock();
            let nobody_waits = s.queues.iter().all(|q| q.waiting.is_empty());
            if s.executing < s.limit && nobody_waits {
                s.executing += 1;
                // Immediate service counts as service: the flow's queue moves ahead in
                // virtual time like any other's.
                if let Some(q) = pick_queue(&s, flow) {
                    let clock = s.clock;
                    let queue = &mut s.queues[q];
                    queue.virtual_start = queue.virtual_start.max(clock) + 1;
                }
                return Admission {
                    outcome: Ok(self.seat()),
                    queued: false,
                };
            }
            let Overflow::Queue {
                queue_length_limit, ..
            } = s.overflow
            else {
                return Admission {
                    outcome: Err(Refusal::ConcurrencyLimit),
                    queued: false,
                };
            };
            let Some(q) = pick_queue(&s, flow) else {
                return Admission {
                    outcome: Err(Refusal::ConcurrencyLimit),
                    queued: false,
                };
            };
            if s.queues[q].waiting.len() >= queue_length_limit {
                return Admission {
                    outcome: Err(Refusal::QueueFull),
                    queued: false,
                };
            }
            let id = s.next_id;
            s.next_id += 1;
            let (tx, rx) = oneshot::channel();
            let clock = s.clock;
            let queue = &mut s.queues[q];
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
                false => Err(Refusal::TimeOut),
            },
        };
        drop(in_queue);
        Admission {
            outcome,
            queued: true,
        }
    }

    fn seat(self: &Arc<Self>) -> Seat {
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
fn pick_queue(s: &State, flow: u64) -> Option<usize> {
    let deck = s.queues.len();
    if deck == 0 {
        return None;
    }
    let hand_size = match s.overflow {
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
        if best.is_none_or(|b| s.queues[card].waiting.len() < s.queues[b].waiting.len()) {
            best = Some(card);
        }
    }
    best
}

/// Gives free seats to queued requests: each to the head of the non-empty queue with the
/// least service so far.
fn dispatch(s: &mut State) {
    while s.executing < s.limit {
        let Some(q) = s
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.waiting.is_empty())
            .min_by_key(|(i, q)| (q.virtual_start, *i))
            .map(|(i, _)| i)
        else {
            return;
        };
        let clock = s.clock;
        let queue = &mut s.queues[q];
        let Some(waiter) = queue.waiting.pop_front() else {
            return;
        };
        let start = queue.virtual_start.max(clock);
        queue.virtual_start = start + 1;
        s.clock = start;
        // A waiter that already left (timed out, or its client went away) takes no seat.
        if waiter.seat.send(()).is_ok() {
            s.executing += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    fn queued(queues: usize, hand_size: usize, queue_length_limit: usize) -> Overflow {
        Overflow::Queue {
            queues,
            hand_size,
            queue_length_limit,
        }
    }

    #[tokio::test]
    async fn a_rejecting_level_refuses_beyond_its_seats() {
        let set = QueueSet::new(2, Overflow::Reject);
        let a = set.admit(1, WAIT, || ()).await.outcome.expect("a seat");
        let _b = set.admit(1, WAIT, || ()).await.outcome.expect("a seat");
        let refused = set.admit(2, WAIT, || ()).await;
        assert_eq!(refused.outcome.err(), Some(Refusal::ConcurrencyLimit));
        drop(a);
        assert!(set.admit(2, WAIT, || ()).await.outcome.is_ok());
    }

    #[tokio::test]
    async fn a_full_queue_refuses_and_a_long_wait_times_out() {
        let set = QueueSet::new(1, queued(1, 1, 1));
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
    }

    #[tokio::test]
    async fn a_freed_seat_goes_to_the_flow_served_least() {
        // Two flows, each on a queue of its own (one queue dealt per flow out of many).
        let set = QueueSet::new(1, queued(64, 1, 50));
        let (a, b) = (7u64, 8u64);
        {
            let s = set.lock();
            assert_ne!(pick_queue(&s, a), pick_queue(&s, b));
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
}
