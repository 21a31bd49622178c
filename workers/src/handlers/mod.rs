//! The job handlers, one module per kind, named as the kind's payload file
//! in `platform/src/kinds/` (`deliver_webhook.rs` runs
//! `platform::kinds::DeliverWebhook`), and what they share: the state every
//! handler reaches, the runner (`runner`) that wraps each kind's [`Handler`]
//! in the same start count, metrics and settlement, the first-attempt slots
//! of deliveries, the per-agency caps and the scheduled maintenance.

pub mod agency_caps;
pub mod build_archive;
pub mod deliver_webhook;
pub mod dispatch_events;
pub mod first_attempts;
pub mod maintenance;
pub mod probe;
pub mod process_media;
pub mod recover_webhook_endpoint;
pub mod render_outputs;
mod runner;
pub mod seed_sandbox;
pub mod send_notification;
mod state;

pub use runner::{Handler, JobError, handle, observe, run_here};
pub use state::WorkerState;
