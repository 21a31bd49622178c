//! `QueueAdmin`: operator actions on the queues, over the push side's
//! connection.

use crate::queue::JobQueue;

pub(super) use crate::queue::DEAD;

/// Operator actions on the queues.
#[derive(Clone, Debug)]
pub struct QueueAdmin {
    pub(super) queue: JobQueue,
}

impl QueueAdmin {
    /// Administers `queue`.
    pub fn new(queue: JobQueue) -> Self {
        Self { queue }
    }
}
