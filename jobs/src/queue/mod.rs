//! The durable queue and its push side. The embedded profile keeps jobs in
//! SQLite (a `queue.sqlite3` file beside the data file, see docs/decisions.md);
//! with `REDIS_URL` they live in Redis. Either way a job is pushed with a ULID
//! task id, a priority (honoured on SQLite only) and an optional `run_at`,
//! under the job's dedupe key (a second push with the same key is dropped
//! while the first is kept).
//!
//! One file per part: where the queue lives (`target`), pushing (`push`),
//! counting starts (`starts`), releasing a stopping process's jobs
//! (`release`) and promoting due Redis jobs (`promote`).

mod promote;
mod push;
mod release;
mod starts;
mod target;

pub use promote::promote_due;
pub use push::PushOptions;
pub use release::HeldBy;
pub use starts::STARTS_FIELD;
pub use target::{JobQueue, QueueBackend, QueueError, QueueTarget};
