//! The durable queue and its push side. The embedded profile keeps jobs in
//! SQLite (a `queue.sqlite3` file beside the data file, see docs/decisions.md);
//! with `REDIS_URL` they live in Redis. Either way a job is pushed with a ULID
//! task id, a priority (honoured on SQLite only) and an optional `run_at`,
//! under the job's dedupe key (a second push with the same key is dropped
//! while the first is kept).
//!
//! One file per part: where the queue lives (`target`), pushing (`push`),
//! counting starts (`starts`), the Redis queue's
//! indexes for the console (`redis_index`, and of its dead jobs
//! `redis_dead`), releasing a stopping process's jobs
//! (`release`), promoting due Redis jobs (`promote`), fair shares between
//! agencies (`fair`) over this process's worker slots (`slots`), and waking
//! idle workers when work arrives (`wake`).

mod dead_index;
mod fair;
pub mod job_names;
mod promote;
mod push;
pub mod redis_dead;
pub mod redis_index;
mod release;
pub(crate) mod search_index;
mod slots;
mod starts;
pub(crate) mod state_counts;
mod target;
#[cfg(test)]
mod test_queue;
mod wake;

pub use fair::{FAIR_SPAN, PARKED_AT, feed, sqlite_priority};
pub use promote::promote_due;
pub use push::PushOptions;
pub use release::HeldBy;
pub use slots::FairSlot;
pub use starts::STARTS_FIELD;
pub(crate) use target::DEAD;
pub use target::{JobQueue, QueueBackend, QueueError, QueueTarget};
pub use wake::{
    Bell, BellOrInterval, Bells, WAKE_CHANNEL_PREFIX, spawn_redis_listener, spawn_sqlite_watch,
    wake_channel,
};
