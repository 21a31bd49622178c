//! This process's worker slots for each fair queue it consumes: how many
//! jobs its workers hold at once, and how many fair jobs run here now.
//! [`super::fair`] feeds a Redis fair queue's ready list into the free ones.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fair job this process is running: counted against its worker slots
/// until dropped.
#[derive(Debug)]
pub struct FairSlot {
    running: Arc<AtomicUsize>,
}

impl Drop for FairSlot {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// This process's worker slots for one fair queue.
#[derive(Debug, Default)]
pub(super) struct WorkerSlots {
    /// The most jobs of the queue its workers here hold at once (their
    /// concurrency, and what a fetch claims ahead of it).
    holding: usize,
    /// Fair jobs of the queue running here.
    running: Arc<AtomicUsize>,
}

impl WorkerSlots {
    /// The workers here hold at most `holding` jobs at once (at least one).
    pub(super) fn set_holding(&mut self, holding: usize) {
        self.holding = holding.max(1);
    }

    /// Counts a fair job as running until the slot is dropped.
    pub(super) fn start(&self) -> FairSlot {
        self.running.fetch_add(1, Ordering::AcqRel);
        FairSlot {
            running: self.running.clone(),
        }
    }

    /// Slots no running fair job takes.
    pub(super) fn free(&self) -> usize {
        self.holding
            .saturating_sub(self.running.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_job_takes_a_slot_until_dropped() {
        let mut slots = WorkerSlots::default();
        slots.set_holding(0);
        assert_eq!(slots.free(), 1, "at least one slot");
        slots.set_holding(2);
        let first = slots.start();
        let second = slots.start();
        assert_eq!(slots.free(), 0);
        let third = slots.start();
        assert_eq!(slots.free(), 0, "never below zero");
        drop((first, third));
        assert_eq!(slots.free(), 1);
        drop(second);
        assert_eq!(slots.free(), 2);
    }
}
