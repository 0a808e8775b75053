//! Merge functions: values a transaction computes *in the state machine*, from the key's
//! current value, instead of values its proposer computed from what it read earlier.
//!
//! A compare-and-swap write over a counter that many replicas update (a ResourceQuota's usage)
//! loses whenever another write reaches the counter between its read and its apply, and the
//! losers must read and try again. A merge cannot lose that way: the transaction carries an
//! operand ("add 1 pod"), and every replica applies the function the program registered under
//! the operation's name to the value as it is at that point of the log. The function must be
//! deterministic (no clock, no randomness, no per-replica state) so that every replica stores
//! the same bytes; it may refuse (the quota would be exceeded), which fails the whole
//! transaction as a failed compare would.
//!
//! The storage crate knows no merge function itself: the program that runs the replicas
//! registers them by name in [`Mergers`] before the state machine starts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A deterministic function that computes a key's new value from its current value (`None`
/// when the key is absent) and an operand, or refuses with a reason.
pub trait Merger: Send + Sync {
    /// The new value, or why there is none.
    fn merge(&self, current: Option<&[u8]>, operand: &[u8]) -> Result<Vec<u8>, String>;
}

/// The merge functions a state machine applies, by name.
#[derive(Clone, Default)]
pub struct Mergers(Arc<BTreeMap<String, Arc<dyn Merger>>>);

impl Mergers {
    /// The registry with `merger` added under `name` (replacing one of that name).
    pub fn with(self, name: &str, merger: Arc<dyn Merger>) -> Self {
        let mut all = (*self.0).clone();
        all.insert(name.to_string(), merger);
        Mergers(Arc::new(all))
    }

    /// Applies the function named `name`; an unknown name is a refusal, the same on every
    /// replica that runs the same program.
    pub fn apply(&self, name: &str, current: Option<&[u8]>, operand: &[u8]) -> Result<Vec<u8>, String> {
        match self.0.get(name) {
            Some(m) => m.merge(current, operand),
            None => Err(format!("no merge function named {name:?}")),
        }
    }
}

impl fmt::Debug for Mergers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}
