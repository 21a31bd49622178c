//! Counting a job's starts, runs cut short by a dead worker included, so a
//! job that takes its worker down every time runs out of attempts.

use super::target::{JobQueue, QueueBackend, QueueError};
use crate::kinds::Job;

/// Field of a Redis job's meta hash counting its starts (`count_start`).
pub const STARTS_FIELD: &str = "starts";

impl JobQueue {
    /// Counts a start of job `task_id` of kind `J` whose apalis attempt is
    /// `attempt`, and returns how many times it has started, runs cut short by
    /// a dead worker included. apalis-sqlite counts those itself (an orphaned
    /// job comes back with `attempts + 1`); apalis-redis re-queues an orphan
    /// without counting it, so a job that kills its worker every time would
    /// run forever: on Redis the starts are counted in the job's meta hash.
    pub async fn count_start<J: Job>(
        &self,
        task_id: &str,
        attempt: usize,
    ) -> Result<usize, QueueError> {
        match &self.backend {
            QueueBackend::Sqlite(_) => Ok(attempt),
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let starts: u64 = redis::cmd("HINCRBY")
                    .arg(format!("{}:meta:{task_id}", J::KIND))
                    .arg(STARTS_FIELD)
                    .arg(1)
                    .query_async(&mut connection)
                    .await?;
                Ok(attempt.max(usize::try_from(starts).unwrap_or(usize::MAX)))
            }
        }
    }
}
