//! Jobs as operators look for them: by state, queue, agency and free text
//! (job id, event id, listing number, error text, anywhere in the payload),
//! on both queues, oldest first. What a filter finds is what a bulk action
//! by that filter touches, so "retry every dead probe" means every one, not
//! one page's worth.

use super::found::{FoundJobs, JobFilter, JobSummary, JobWindow};
use super::queue_admin::QueueAdmin;
use crate::queue::{QueueBackend, QueueError, search_index};

impl QueueAdmin {
    /// Every job the filter finds, in the order of [`Self::find_jobs_in`].
    pub async fn find_jobs(&self, filter: &JobFilter) -> Result<Vec<JobSummary>, QueueError> {
        Ok(self.find_jobs_in(filter, JobWindow::ALL).await?.jobs)
    }

    /// Indexes the text of the jobs pushed since the text index last caught
    /// up (SQLite; Redis has no such index); returns how many.
    pub async fn index_job_text(&self) -> Result<u64, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => Ok(search_index::catch_up(pool).await?),
            QueueBackend::Redis(_) => Ok(0),
        }
    }

    /// The `window` of the jobs the filter finds, and how many it finds.
    /// On SQLite they come oldest due first (`run_at`, then the order they
    /// were pushed), read by the index of their state; done jobs found by a
    /// search or an agency come in the order they were pushed, streamed from
    /// the text index or the agency's own jobs
    /// ([`crate::queue::search_index`]), and their count stops past the
    /// window and a thousand (`total_capped`). The total of a state without
    /// search is the count the queue keeps ([`crate::queue::state_counts`]).
    /// On Redis they come in id order (the order they were pushed), done
    /// jobs walked through the queue's own indexes
    /// ([`super::redis_jobs`]).
    pub async fn find_jobs_in(
        &self,
        filter: &JobFilter,
        window: JobWindow,
    ) -> Result<FoundJobs, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                super::sqlite_jobs::sqlite_jobs(pool, filter, window).await
            }
            QueueBackend::Redis(connection) => {
                super::redis_jobs::redis_jobs(connection, filter, window, self.search_budget).await
            }
        }
    }
}
