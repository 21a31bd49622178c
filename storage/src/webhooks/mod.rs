//! Webhooks: the endpoints an agency registers, one delivery per (event,
//! endpoint), every attempt of a delivery, and the notification sent to an
//! agency's owner when an endpoint is disabled.
//!
//! Endpoints belong to the pool of the key that registered them (live or
//! sandbox), like every other row. A live endpoint chooses which events it
//! hears (`live`, `sandbox` or `both`); a sandbox endpoint hears sandbox
//! events only. Signing secrets are sealed with a key derived from the master
//! key and opened only to sign a delivery.
//!
//! One file per part: the endpoint and delivery records (`endpoint_record`,
//! `delivery_record`), managing endpoints (`endpoints`), fanning committed
//! events out (`fan_out`), reading and creating deliveries (`deliveries`),
//! recording attempts (`attempts`), an agency's backlog (`backlog`), the
//! sweeps that recover and purge (`sweeps`), and the owner's notifications
//! (`notifications`).

mod attempts;
mod backlog;
mod budget;
pub(crate) mod deliveries;
pub(crate) mod delivery_counts;
mod delivery_record;
mod endpoint_record;
mod endpoints;
mod fan_out;
pub mod health;
mod notification_record;
mod notifications;
mod ordering;
pub(crate) mod recoveries;
pub(crate) mod sweeps;

pub use budget::BudgetSlot;
pub use delivery_record::{
    AfterAttempt, Attempt, AttemptOutcome, AttemptRecorded, AttemptToRecord, Delivery,
    DeliveryKind, DeliveryStatus, DeliveryTarget, DueAttempt, FanOut,
};
pub use endpoint_record::{
    AUTO_DISABLE_AFTER, AUTO_DISABLED_REASON, DEFAULT_HOURLY_BUDGET,
    DEFAULT_SECRET_OVERLAP_SECONDS, DeliveryOrdering, EndpointChanges, EndpointEnvironment,
    EndpointStatus, HeldBack, MANUALLY_DISABLED_REASON, MAX_HOURLY_BUDGET,
    MAX_SECRET_OVERLAP_SECONDS, NewEndpoint, SignatureScheme, WebhookEndpoint, generate_secret,
    standard_webhooks_key,
};
pub use notification_record::Notification;
pub use recoveries::{Recovery, RecoveryStatus};

use crate::Store;

/// Webhook repository; see [`Store::webhooks`].
pub struct Webhooks<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Webhook endpoints, deliveries and their attempts.
    pub fn webhooks(&self) -> Webhooks<'_> {
        Webhooks { store: self }
    }
}
