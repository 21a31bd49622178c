//! What runs behind the requests: the transactional outbox of events and
//! the listener told of its commits (`outbox`, `outbox_listener`), the
//! progress of operations (`progress`), the claims of scheduled maintenance
//! ticks (`schedules`), and the job console's runs, workers, history and
//! audit (`job_console`).

pub mod job_console;
pub mod outbox;
pub mod outbox_listener;
pub mod progress;
pub mod schedules;
