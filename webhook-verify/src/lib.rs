#![doc = include_str!("../README.md")]

mod error;
mod headers;
mod rules;
mod signature;
mod store;
mod verifier;

pub use error::{StoreError, VerifyError};
pub use headers::{
    EVENT_ID_HEADER, EVENT_TYPE_HEADER, HeaderLookup, LEGACY_SIGNATURE_HEADER, SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
};
pub use rules::{NONCE_WINDOW_SECS, TIMESTAMP_TOLERANCE_SECS};
pub use signature::sign;
pub use store::{
    DEFAULT_EVENT_RETENTION_SECS, DEFAULT_STORE_CAPACITY, MemoryReplayStore, ReplayStore, Seen,
};
pub use verifier::{Envelope, Verdict, VerifiedDelivery, Verifier};
