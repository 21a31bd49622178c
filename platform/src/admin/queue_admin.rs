//! `QueueAdmin`: operator actions on the queues, over the push side's
//! connection.

use crate::queue::JobQueue;

/// SQL condition of a dead job in apalis-sqlite's `Jobs` table.
pub(super) const DEAD: &str =
    "(status = 'Killed' or (status = 'Failed' and attempts >= max_attempts))";

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
