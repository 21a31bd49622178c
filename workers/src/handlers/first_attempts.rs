//! This process's slots for first attempts: the attempts it makes straight
//! after fanning their deliveries out, without a round trip through the
//! queue. A process that consumes the delivery queue has as many as the
//! queue's concurrency (`--queue webhook_delivery=N`), besides the N
//! attempts its delivery workers take from the queue.
//!
//! A first attempt skips the queue only when a slot is free this instant,
//! the queue is not paused or this process quieted, and the process is not
//! stopping; otherwise it is pushed as before, and the queue's fair order
//! between endpoints decides when it runs. A pushed one waits for its
//! fan-out's commit; one made here starts at once, its fan-out in the
//! store's open commit. Lost with its process, it is offered again: by the
//! overdue sweep once the fan-out is on disk, like a lost push, or, the
//! fan-out lost with it, by the outbox sweep, which fans its event out again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::pause::Gate;

/// One attempt's hold on a slot, given back when dropped.
#[derive(Debug)]
pub struct FirstAttemptSlot {
    _permit: OwnedSemaphorePermit,
}

/// The first-attempt slots of a process that consumes the delivery queue;
/// none (every first attempt is queued) in one that does not.
#[derive(Clone, Debug, Default)]
pub struct FirstAttemptSlots {
    slots: Option<Arc<Slots>>,
}

#[derive(Debug)]
struct Slots {
    permits: Arc<Semaphore>,
    count: u32,
    gate: Arc<Gate>,
    closed: AtomicBool,
}

impl FirstAttemptSlots {
    /// `count` slots (at least one), closed to first attempts while `gate`
    /// is shut.
    pub fn new(count: usize, gate: Arc<Gate>) -> Self {
        let count = u32::try_from(count.max(1)).unwrap_or(u32::MAX >> 3);
        Self {
            slots: Some(Arc::new(Slots {
                permits: Arc::new(Semaphore::new(count as usize)),
                count,
                gate,
                closed: AtomicBool::new(false),
            })),
        }
    }

    /// A slot for a first attempt now, if one is free and nothing stands in
    /// the way (see the module's notes).
    pub fn try_take(&self) -> Option<FirstAttemptSlot> {
        let slots = self.slots.as_ref()?;
        if slots.closed.load(Ordering::Acquire) || slots.gate.is_paused() {
            return None;
        }
        slots
            .permits
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|permit| FirstAttemptSlot { _permit: permit })
    }

    /// Stops first attempts from skipping the queue: the process is
    /// stopping.
    pub fn close(&self) {
        if let Some(slots) = &self.slots {
            slots.closed.store(true, Ordering::Release);
        }
    }

    /// Waits, at most `grace`, until no first attempt holds a slot; returns
    /// whether none does. Those still running when it gives up are offered
    /// again by the overdue sweep.
    pub async fn drain(&self, grace: Duration) -> bool {
        let Some(slots) = &self.slots else {
            return true;
        };
        tokio::time::timeout(grace, slots.permits.acquire_many(slots.count))
            .await
            .is_ok_and(|held| held.is_ok())
    }

    /// First attempts holding a slot now.
    pub fn busy(&self) -> usize {
        self.slots.as_ref().map_or(0, |slots| {
            (slots.count as usize).saturating_sub(slots.permits.available_permits())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_gate() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    #[test]
    fn no_slots_means_every_first_attempt_is_queued() {
        let none = FirstAttemptSlots::default();
        assert!(none.try_take().is_none());
        assert_eq!(none.busy(), 0);
    }

    #[test]
    fn a_first_attempt_takes_only_a_free_slot() {
        let slots = FirstAttemptSlots::new(2, open_gate());
        let first = slots.try_take().expect("a free slot");
        let _second = slots.try_take().expect("a free slot");
        assert!(slots.try_take().is_none(), "both slots are busy");
        assert_eq!(slots.busy(), 2);
        drop(first);
        assert!(slots.try_take().is_some(), "a slot given back is free");
    }

    #[test]
    fn a_closed_process_queues_its_first_attempts() {
        let slots = FirstAttemptSlots::new(4, open_gate());
        slots.close();
        assert!(slots.try_take().is_none());
    }

    #[tokio::test]
    async fn draining_waits_for_running_attempts() {
        let slots = FirstAttemptSlots::new(2, open_gate());
        let running = slots.try_take().expect("a free slot");
        let draining = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.drain(Duration::from_secs(600)).await })
        };
        tokio::task::yield_now().await;
        assert!(!draining.is_finished());
        drop(running);
        assert!(draining.await.unwrap());
    }
}
