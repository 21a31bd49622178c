#![doc = include_str!("../README.md")]

mod error;
mod headers;
mod signature;
mod store;
mod verifier;

pub use error::{StoreError, VerifyError};
pub use headers::HeaderLookup;
pub use signature::sign;
pub use store::{
    DEFAULT_EVENT_RETENTION_SECS, DEFAULT_STORE_CAPACITY, MemoryReplayStore, ReplayStore, Seen,
};
pub use verifier::{Envelope, Verdict, VerifiedDelivery, Verifier};

/// Header carrying `sha256=<hex>`; read first.
pub const SIGNATURE_HEADER: &str = "X-Webhook-Signature";
/// The earlier, service-specific name of the signature header; read when the first is absent.
pub const LEGACY_SIGNATURE_HEADER: &str = "X-MediaAgency-Signature";
/// Header carrying the signing time in Unix seconds; its text is what was signed.
pub const TIMESTAMP_HEADER: &str = "X-Webhook-Timestamp";
/// Header carrying the event type (not covered by the signature; use the envelope's).
pub const EVENT_TYPE_HEADER: &str = "X-Webhook-Event-Type";
/// Header carrying the event id, which must equal the envelope's `event_id`.
pub const EVENT_ID_HEADER: &str = "X-Event-Id";

/// Largest accepted difference, either way, between the signing time and the local clock.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 300;
/// How long a nonce is remembered: one seen within this many seconds is a replay.
pub const NONCE_WINDOW_SECS: i64 = 600;
