//! The job handlers, one module per kind, and what they share: the state
//! every handler reaches, and the runner (`runner`) that wraps each kind's
//! [`Handler`] in the same start count, metrics and settlement.

pub mod agency_caps;
pub mod archive;
pub mod deliver;
pub mod dispatch;
pub mod first_attempts;
pub mod maintenance;
pub mod media;
pub mod notify;
pub mod probe;
pub mod recover;
mod runner;
pub mod sandbox;
mod state;

pub use runner::{Handler, JobError, handle, observe, run_here};
pub use state::{WebhookDelivery, WorkerState};
