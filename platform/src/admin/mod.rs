//! Queue administration for operators: depth by state, dead jobs with their
//! last error, and putting a dead job back in its queue or throwing it away.
//! apalis 1.0 offers neither update nor delete, so these act on its documented
//! storage: the `Jobs` table on SQLite, the per-queue keys on Redis.
//!
//! One file per part: the operator's handle (`queue_admin`), depth by state
//! (`depths`), the oldest job's age by state (`ages`), dead jobs and their
//! retry or discard (`dead`), jobs found by filter (`listing`, with what
//! its filters are made of in `found`), one job and
//! the actions on waiting ones (`controls`), the purge of finished jobs
//! (`purge`), and each queue's side of finding jobs (`sqlite_jobs`,
//! `redis_jobs`).

mod ages;
mod controls;
mod dead;
mod depths;
mod found;
mod listing;
mod purge;
mod queue_admin;
mod redis_jobs;
mod sqlite_jobs;

pub use ages::{AGE_STATES, OldestJob};
pub use controls::{CANCELLED, JobDetail};
pub use dead::DeadJob;
pub use depths::QueueDepth;
pub use found::{FoundJobs, JOB_STATES, JobFilter, JobSummary, JobWindow, SEARCH_BUDGET, redacted};
pub use queue_admin::QueueAdmin;
