//! How the watch cache's batches reach watchers: watchers whose field selector pins their
//! type's indexed field are found by that field's value, as kube-apiserver's cacher finds them
//! with its indexed trigger, instead of every watcher waking for every batch to test its
//! selectors.
//!
//! The indexed field is data in the type table (`scheme::watch_index`; pods: `spec.nodeName`).
//! A watcher of `spec.nodeName=node-7` is registered under `node-7` with a queue of its own,
//! and a batch's events are queued only for the watchers registered under the value their
//! object has and the value it had before the change: a pod moving off a node still reaches
//! the old node's watcher, whose selector turns it into a DELETED event, as it always did.
//! Watchers registered under one value share one copy of the batch. Every other watcher (and
//! every other reader of the cache) takes every batch from the cache's broadcast, as before.
//!
//! Each queue holds as many batches as the broadcast: a watcher that falls further behind is
//! dropped from the index and told it lagged, and closes exactly as a broadcast watcher that
//! falls behind does. A reset (the state reloaded) reaches every indexed watcher, and the
//! index is emptied. A watcher that is sent only its own events learns how far the cache has
//! gone (for its bookmarks) from the cache's revision, read before it empties its queue. A
//! watcher's registration ends with its subscription, and an empty value or type leaves the
//! index with it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::mpsc::error::{TryRecvError as QueueEmpty, TrySendError};
use tokio::sync::{broadcast, mpsc, watch};

use crate::machinery::selector::{FieldSelector, Selectable};
use crate::scheme::watch_index;
use crate::store::cacher::{CacheEvent, Change, Published, SharedEncodings};
use crate::store::keys::type_of_key;

/// The batches one watcher takes.
pub enum Live {
    /// Every batch the cache publishes.
    All(broadcast::Receiver<Arc<Published>>),
    /// Only the events of its indexed value, queued for it alone.
    Indexed(Indexed),
}

impl Live {
    /// The next batch; `Lagged` once the watcher fell further behind than its buffer, `Closed`
    /// when no batch will come any more.
    pub async fn recv(&mut self) -> Result<Arc<Published>, RecvError> {
        match self {
            Live::All(rx) => rx.recv().await,
            Live::Indexed(q) => q.recv().await,
        }
    }

    /// The next batch if one is waiting.
    pub fn try_recv(&mut self) -> Result<Arc<Published>, TryRecvError> {
        match self {
            Live::All(rx) => rx.try_recv(),
            Live::Indexed(q) => q.try_recv(),
        }
    }

    /// For a watcher sent only its own events: the cache's revision now. Once it has taken
    /// every batch waiting for it after reading this, it has seen every event up to it.
    /// `None` for a watcher taking every batch (each batch says how far the cache reached).
    pub fn progress(&self) -> Option<i64> {
        match self {
            Live::All(_) => None,
            Live::Indexed(q) => Some(q.revision.borrow().unwrap_or(0)),
        }
    }
}

/// A watcher's own queue of batches, registered in the index for as long as it lives.
pub struct Indexed {
    rx: mpsc::Receiver<Arc<Published>>,
    lagged: Arc<AtomicBool>,
    revision: watch::Receiver<Option<i64>>,
    _registration: Registration,
}

impl Indexed {
    /// How many batches are lost, once the queue overflowed (the queued ones are dropped too,
    /// as a broadcast receiver that lags skips its buffer).
    fn missed(&self) -> Option<u64> {
        self.lagged
            .load(Ordering::Acquire)
            .then(|| self.rx.len() as u64 + 1)
    }

    async fn recv(&mut self) -> Result<Arc<Published>, RecvError> {
        if let Some(n) = self.missed() {
            return Err(RecvError::Lagged(n));
        }
        match self.rx.recv().await {
            Some(batch) => Ok(batch),
            None => Err(self.missed().map_or(RecvError::Closed, RecvError::Lagged)),
        }
    }

    fn try_recv(&mut self) -> Result<Arc<Published>, TryRecvError> {
        if let Some(n) = self.missed() {
            return Err(TryRecvError::Lagged(n));
        }
        match self.rx.try_recv() {
            Ok(batch) => Ok(batch),
            Err(QueueEmpty::Empty) => Err(TryRecvError::Empty),
            Err(QueueEmpty::Disconnected) => {
                Err(self.missed().map_or(TryRecvError::Closed, TryRecvError::Lagged))
            }
        }
    }
}

/// Removes its watcher from the index when the watcher ends.
struct Registration {
    index: WatcherIndex,
    group: String,
    plural: String,
    value: String,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.index
            .lock()
            .remove(&self.group, &self.plural, &self.value, self.id);
    }
}

/// One registered watcher, as the dispatcher reaches it.
struct Slot {
    id: u64,
    tx: mpsc::Sender<Arc<Published>>,
    lagged: Arc<AtomicBool>,
}

impl Slot {
    /// Queues `batch`; false when the watcher is gone or just fell behind (it is then told so).
    fn offer(&self, batch: &Arc<Published>) -> bool {
        match self.tx.try_send(batch.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.lagged.store(true, Ordering::Release);
                false
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

/// The indexed watchers of one type.
struct TypeWatchers {
    group: String,
    plural: String,
    /// The JSON path they are indexed by.
    path: &'static str,
    by_value: HashMap<String, Vec<Slot>>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    /// One entry per type that has indexed watchers (a handful at most: a linear search).
    types: Vec<TypeWatchers>,
}

impl Registry {
    /// Where the watchers of a type are.
    fn position(&self, group: &str, plural: &str) -> Option<usize> {
        self.types
            .iter()
            .position(|t| t.group == group && t.plural == plural)
    }

    fn remove(&mut self, group: &str, plural: &str, value: &str, id: u64) {
        let Some(t) = self.position(group, plural) else {
            return;
        };
        let watchers = &mut self.types[t].by_value;
        if let Some(slots) = watchers.get_mut(value) {
            slots.retain(|s| s.id != id);
            if slots.is_empty() {
                watchers.remove(value);
            }
        }
        if watchers.is_empty() {
            self.types.swap_remove(t);
        }
    }

    /// How many watchers are registered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.types
            .iter()
            .flat_map(|t| t.by_value.values())
            .map(Vec::len)
            .sum()
    }
}

/// The values under which watchers of `t` may care about `e`: its object's and its previous
/// object's (each once); every registered value for a change nobody can read.
fn values_of(e: &CacheEvent, t: &TypeWatchers) -> Vec<String> {
    let obj = match &e.change {
        Change::Put(obj) | Change::Deleted(obj) => obj,
        Change::Corrupt(_) => return t.by_value.keys().cloned().collect(),
    };
    let now = obj.field(t.path);
    let before = e.prev.as_ref().map(|p| p.field(t.path)).filter(|b| *b != now);
    [Some(now), before]
        .into_iter()
        .flatten()
        .filter(|v| t.by_value.contains_key(v))
        .collect()
}

/// The cache's index of watchers by the value of their type's indexed field (cheap to clone;
/// clones share it).
#[derive(Clone, Default)]
pub struct WatcherIndex(Arc<Mutex<Registry>>);

impl WatcherIndex {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a watcher of the key `prefix` whose field selector is `fields`, with a queue
    /// of `capacity` batches, when the selector pins the type's indexed field; `None` when it
    /// does not (the watcher takes every batch). `revision` is the cache's. The caller holds
    /// the cache's state, so the watcher is sent exactly the batches after the state it read.
    pub fn register(
        &self,
        prefix: &str,
        fields: &FieldSelector,
        capacity: usize,
        revision: &watch::Receiver<Option<i64>>,
    ) -> Option<Indexed> {
        let (group, plural) = type_of_key(prefix);
        let path = watch_index(group, plural)?;
        let value = fields.pinned(path)?.to_string();
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let lagged = Arc::new(AtomicBool::new(false));
        let mut reg = self.lock();
        let id = reg.next_id;
        reg.next_id += 1;
        let t = match reg.position(group, plural) {
            Some(t) => t,
            None => {
                reg.types.push(TypeWatchers {
                    group: group.to_string(),
                    plural: plural.to_string(),
                    path,
                    by_value: HashMap::new(),
                });
                reg.types.len() - 1
            }
        };
        reg.types[t]
            .by_value
            .entry(value.clone())
            .or_default()
            .push(Slot {
                id,
                tx,
                lagged: lagged.clone(),
            });
        drop(reg);
        Some(Indexed {
            rx,
            lagged,
            revision: revision.clone(),
            _registration: Registration {
                index: self.clone(),
                group: group.to_string(),
                plural: plural.to_string(),
                value,
                id,
            },
        })
    }

    /// Queues each event of an applied batch (the cache revision after it: `revision`) for the
    /// watchers registered under its values, one batch per value holding its events in order.
    pub fn dispatch(&self, events: &[Arc<CacheEvent>], revision: i64) {
        let mut reg = self.lock();
        if reg.types.is_empty() {
            return;
        }
        let mut queued: BTreeMap<(usize, String), Vec<Arc<CacheEvent>>> = BTreeMap::new();
        for e in events {
            let (group, plural) = type_of_key(&e.key);
            let Some(t) = reg.position(group, plural) else {
                continue;
            };
            for value in values_of(e, &reg.types[t]) {
                queued.entry((t, value)).or_default().push(e.clone());
            }
        }
        let mut gone = Vec::new();
        for ((t, value), events) in queued {
            let Some(slots) = reg.types[t].by_value.get(&value) else {
                continue;
            };
            let batch = Arc::new(Published::Changes {
                events,
                revision,
                shared: SharedEncodings::default(),
            });
            let TypeWatchers { group, plural, .. } = &reg.types[t];
            for slot in slots.iter().filter(|s| !s.offer(&batch)) {
                gone.push((group.clone(), plural.clone(), value.clone(), slot.id));
            }
        }
        for (group, plural, value, id) in gone {
            reg.remove(&group, &plural, &value, id);
        }
    }

    /// The state was reloaded: every indexed watcher is told so (it ends), and the index is
    /// emptied.
    pub fn reset(&self) {
        let mut reg = self.lock();
        let reset = Arc::new(Published::Reset);
        for slot in reg.types.iter().flat_map(|t| t.by_value.values()).flatten() {
            slot.offer(&reset);
        }
        reg.types.clear();
    }

    /// How many watchers are registered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::scheme::field_selectors;
    use crate::store::cacher::CachedObject;

    const PODS: &str = "/registry/core/pods/";

    fn fields(s: &str) -> FieldSelector {
        FieldSelector::parse(s, field_selectors("", "pods")).unwrap()
    }

    fn pod(name: &str, node: &str, rev: i64) -> Arc<CachedObject> {
        let key = format!("{PODS}default/{name}");
        let obj = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": rev.to_string()},
            "spec": {"nodeName": node}});
        CachedObject::new(&key, obj, rev)
    }

    fn event(rev: i64, name: &str, change: Change, prev: Option<Arc<CachedObject>>) -> Arc<CacheEvent> {
        Arc::new(CacheEvent {
            rev,
            key: format!("{PODS}default/{name}"),
            change,
            prev,
        })
    }

    /// Which of `watchers` have a batch waiting, and the revisions of its events.
    fn woken(watchers: &mut [Indexed]) -> Vec<(usize, Vec<i64>)> {
        let mut out = Vec::new();
        for (i, w) in watchers.iter_mut().enumerate() {
            let mut revs = Vec::new();
            while let Ok(batch) = w.try_recv() {
                if let Published::Changes { events, .. } = &*batch {
                    revs.extend(events.iter().map(|e| e.rev));
                }
            }
            if !revs.is_empty() {
                out.push((i, revs));
            }
        }
        out
    }

    #[test]
    fn an_event_wakes_only_the_watchers_of_its_old_and_new_values() {
        let index = WatcherIndex::default();
        let (_tx, revision) = watch::channel(Some(1));
        let mut watchers: Vec<Indexed> = (0..300)
            .map(|i| {
                let selector = fields(&format!("spec.nodeName=node-{}", i % 100));
                index.register(PODS, &selector, 16, &revision).unwrap()
            })
            .collect();
        // Not indexed: other fields, a negation, another type.
        let not = fields("spec.nodeName!=node-1");
        assert!(index.register(PODS, &not, 16, &revision).is_none());
        assert!(index
            .register(PODS, &fields("status.phase=Running"), 16, &revision)
            .is_none());
        let cm = FieldSelector::parse("metadata.name=a", &[]).unwrap();
        assert!(index
            .register("/registry/core/configmaps/", &cm, 16, &revision)
            .is_none());
        assert_eq!(index.len(), 300);
        let ofs = |node: usize| vec![node, node + 100, node + 200];

        let created = pod("a", "node-7", 2);
        index.dispatch(&[event(2, "a", Change::Put(created.clone()), None)], 2);
        let expect: Vec<_> = ofs(7).into_iter().map(|i| (i, vec![2])).collect();
        assert_eq!(woken(&mut watchers), expect);

        // Moved to node-8: both nodes' watchers, once each.
        let moved = pod("a", "node-8", 3);
        index.dispatch(&[event(3, "a", Change::Put(moved.clone()), Some(created))], 3);
        let mut expect: Vec<_> = ofs(7).into_iter().chain(ofs(8)).map(|i| (i, vec![3])).collect();
        expect.sort();
        assert_eq!(woken(&mut watchers), expect);

        // One batch: an update on node-8, a pod nobody watches, a deletion on node-8.
        let updated = pod("a", "node-8", 4);
        let batch = [
            event(4, "a", Change::Put(updated.clone()), Some(moved)),
            event(4, "b", Change::Put(pod("b", "elsewhere", 4)), None),
            event(5, "a", Change::Deleted(pod("a", "node-8", 5)), Some(updated)),
        ];
        index.dispatch(&batch, 5);
        let expect: Vec<_> = ofs(8).into_iter().map(|i| (i, vec![4, 5])).collect();
        assert_eq!(woken(&mut watchers), expect);

        // A change nobody can read reaches every indexed watcher of the type.
        index.dispatch(&[event(6, "c", Change::Corrupt("bad".into()), None)], 6);
        assert_eq!(woken(&mut watchers).len(), 300);

        // Watchers that end leave the index, and their values with them.
        watchers.truncate(100);
        assert_eq!(index.len(), 100);
        drop(watchers);
        assert!(index.lock().types.is_empty());
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_its_queue_lags_and_leaves_the_index() {
        let index = WatcherIndex::default();
        let (_tx, revision) = watch::channel(Some(1));
        let mut slow = index
            .register(PODS, &fields("spec.nodeName=n"), 2, &revision)
            .unwrap();
        let mut other = index
            .register(PODS, &fields("spec.nodeName=n"), 4, &revision)
            .unwrap();
        for rev in 2..5 {
            index.dispatch(&[event(rev, "a", Change::Put(pod("a", "n", rev)), None)], rev);
        }
        assert!(matches!(slow.recv().await, Err(RecvError::Lagged(_))));
        assert_eq!(index.len(), 1);
        for _ in 2..5 {
            assert!(other.recv().await.is_ok());
        }
        // A reset ends every indexed watcher and empties the index.
        index.reset();
        assert_eq!(index.len(), 0);
        assert!(matches!(other.recv().await.as_deref(), Ok(Published::Reset)));
        assert!(matches!(other.recv().await, Err(RecvError::Closed)));
    }
}
