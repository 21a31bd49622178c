//! Per-agency concurrency caps (`--agency-concurrency QUEUE=N`): at most N
//! jobs of one agency of a fair queue run at once in this process. A job over
//! its agency's cap is not run: it goes back to its queue as a later offer
//! of the same work, due a second later, behind its agency's other jobs
//! (fair queues tag it anew), and the job in hand finishes without an
//! attempt spent. Off unless configured.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The caps by queue and the jobs each agency runs now, by queue.
#[derive(Debug, Default)]
pub struct AgencyCaps {
    caps: BTreeMap<&'static str, usize>,
    running: Mutex<HashMap<(&'static str, String), usize>>,
}

/// A running job's place under its agency's cap; gives it back when dropped.
#[derive(Debug)]
pub struct CapSlot {
    caps: Arc<AgencyCaps>,
    queue: &'static str,
    agency: String,
}

impl AgencyCaps {
    /// Caps of `caps` (queue → jobs of one agency at once).
    pub fn new(caps: BTreeMap<&'static str, usize>) -> Self {
        Self {
            caps,
            running: Mutex::default(),
        }
    }

    /// Whether `queue` has a cap.
    pub fn caps(&self, queue: &str) -> bool {
        self.caps.contains_key(queue)
    }

    /// A slot for a job of `agency` in `queue`; `None` when the agency runs
    /// its cap already. Always a slot when `queue` has no cap.
    pub fn try_start(self: &Arc<Self>, queue: &'static str, agency: &str) -> Option<CapSlot> {
        let cap = self.caps.get(queue).copied().unwrap_or(usize::MAX);
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let count = running.entry((queue, agency.to_owned())).or_default();
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(CapSlot {
            caps: self.clone(),
            queue,
            agency: agency.to_owned(),
        })
    }
}

impl Drop for CapSlot {
    fn drop(&mut self) {
        let mut running = self.caps.running.lock().unwrap_or_else(|p| p.into_inner());
        let key = (self.queue, std::mem::take(&mut self.agency));
        if let Some(count) = running.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agency_runs_at_most_its_cap_and_others_are_not_held_back() {
        let caps = Arc::new(AgencyCaps::new(BTreeMap::from([("media_variants", 2)])));
        let first = caps.try_start("media_variants", "agc_a").unwrap();
        let _second = caps.try_start("media_variants", "agc_a").unwrap();
        assert!(caps.try_start("media_variants", "agc_a").is_none());
        assert!(caps.try_start("media_variants", "agc_b").is_some());
        assert!(
            caps.try_start("probe", "agc_a").is_some(),
            "no cap on probe"
        );
        drop(first);
        assert!(caps.try_start("media_variants", "agc_a").is_some());
    }
}
