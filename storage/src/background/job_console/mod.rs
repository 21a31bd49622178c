//! The ops console's records of the job platform, kept in the database so the
//! console and `api ops` read the same thing from any host: every run of a job
//! (`attempts`), finished runs rolled up per minute and per hour (`history`),
//! the worker processes and what operators asked of them (`workers`), and
//! what operators did (`audit`), and what a search stands for (`search`).

pub(crate) mod attempts;
mod audit;
mod history;
pub(crate) mod search;
mod workers;

pub use attempts::{AttemptRecord, JobAttempts};
pub use audit::{AuditEntry, OpsAudit};
pub use history::{
    Breakdown, HISTORY_HOURS_KEPT_SECONDS, HISTORY_MINUTES_KEPT_SECONDS, HistoryPoint, JobHistory,
    Resolution,
};
pub use search::{JobSearch, RelatedIds};
pub use workers::{WorkerBeat, WorkerProcess, WorkerProcesses, WorkerRequest};
