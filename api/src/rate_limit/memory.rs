//! The in-process limiter of the embedded profile: TATs in a map behind one
//! mutex, checked and committed together so a request passes every bucket or
//! spends none.

use std::collections::HashMap;
use std::sync::Mutex;

use super::gcra::{self, Outcome};
use storage::Clock;

use super::Bucket;

/// Buckets kept in memory.
#[derive(Debug, Default)]
pub struct MemoryLimiter {
    tats: Mutex<HashMap<String, i64>>,
    clock: Clock,
}

/// How many buckets may accumulate before idle ones are swept.
const SWEEP_AT: usize = 100_000;

impl MemoryLimiter {
    /// Buckets whose time is `clock`'s.
    pub fn on(clock: Clock) -> Self {
        Self {
            tats: Mutex::default(),
            clock,
        }
    }

    /// Evaluates every bucket and, if all admit, commits them.
    pub fn check(&self, buckets: &[Bucket]) -> Vec<Outcome> {
        let now = self.clock.now().as_micros();
        let mut tats = self
            .tats
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let outcomes: Vec<Outcome> = buckets
            .iter()
            .map(|bucket| gcra::evaluate(tats.get(&bucket.key).copied(), now, bucket.limit))
            .collect();
        if outcomes.iter().all(|o| o.allowed) {
            if tats.len() > SWEEP_AT {
                // A bucket whose TAT has passed is indistinguishable from a fresh one.
                tats.retain(|_, tat| *tat > now);
            }
            for (bucket, outcome) in buckets.iter().zip(&outcomes) {
                tats.insert(bucket.key.clone(), outcome.new_tat);
            }
        }
        outcomes
    }

    /// Gives back one request to each bucket.
    pub fn refund(&self, buckets: &[Bucket]) {
        let now = self.clock.now().as_micros();
        let mut tats = self
            .tats
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for bucket in buckets {
            match gcra::refunded(tats.get(&bucket.key).copied(), now, bucket.limit) {
                Some(tat) => tats.insert(bucket.key.clone(), tat),
                None => tats.remove(&bucket.key),
            };
        }
    }

    /// Each bucket evaluated now as `check` would, committing nothing.
    pub fn peek(&self, buckets: &[Bucket]) -> Vec<Outcome> {
        let now = self.clock.now().as_micros();
        let tats = self
            .tats
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        buckets
            .iter()
            .map(|bucket| gcra::evaluate(tats.get(&bucket.key).copied(), now, bucket.limit))
            .collect()
    }

    /// What each bucket would admit now, spending nothing.
    pub fn headroom(&self, buckets: &[Bucket]) -> Vec<u32> {
        self.peek(buckets).iter().map(gcra::admits).collect()
    }
}
