//! The `Retry-After` a priority level's refusals carry, as kube's dropped-requests tracker
//! sets it: one second while refusals are rare, doubled (up to 32) when a level keeps
//! refusing at least three times as many requests per window as the current value, and
//! lowered by one second again once refusals fall below one per second of it.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

/// The most a client is told to wait.
const MAX: u64 = 32;

/// One level's refusals and the wait it currently asks for.
#[derive(Debug, Clone)]
pub struct RetryAfter {
    value: u64,
    last_raised: u64,
    /// Refusals per second (Unix seconds), the last [`MAX`] seconds at most.
    refusals: VecDeque<(u64, u64)>,
}

impl Default for RetryAfter {
    fn default() -> Self {
        RetryAfter {
            value: 1,
            last_raised: 0,
            refusals: VecDeque::new(),
        }
    }
}

/// Now, in Unix seconds.
pub fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl RetryAfter {
    /// Records a refusal at `now` and returns the `Retry-After` (seconds) to send with it. The
    /// value is reconsidered on the first refusal of each second.
    pub fn dropped(&mut self, now: u64) -> u64 {
        match self.refusals.back_mut() {
            Some((second, count)) if *second == now => *count += 1,
            _ => {
                while self.refusals.front().is_some_and(|(s, _)| s + MAX < now) {
                    self.refusals.pop_front();
                }
                let window_start = now.saturating_sub(self.value);
                let recent: u64 = self
                    .refusals
                    .iter()
                    .filter(|(s, _)| *s >= window_start && *s < now)
                    .map(|(_, c)| c)
                    .sum();
                if recent >= 3 * self.value && now.saturating_sub(self.last_raised) >= self.value {
                    self.value = (self.value * 2).min(MAX);
                    self.last_raised = now;
                } else if recent < self.value && self.value > 1 {
                    self.value -= 1;
                }
                self.refusals.push_back((now, 1));
            }
        }
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_under_sustained_refusals_and_decays_after() {
        let mut r = RetryAfter::default();
        let t = 1_000_000;
        assert_eq!(r.dropped(t), 1);
        for _ in 0..5 {
            r.dropped(t);
        }
        // Six refusals in the last second: at least three per second of the current value.
        assert_eq!(r.dropped(t + 1), 2);
        for _ in 0..10 {
            r.dropped(t + 1);
        }
        assert_eq!(
            r.dropped(t + 2),
            2,
            "raised no sooner than one value's time after"
        );
        assert_eq!(r.dropped(t + 3), 4);
        // Quiet: one refusal after a long pause lowers it by one.
        assert_eq!(r.dropped(t + 60), 3);
        assert_eq!(r.dropped(t + 120), 2);
    }
}
