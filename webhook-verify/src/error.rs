//! Why a delivery was rejected, with a stable code per reason.

/// A delivery that must not be processed; answer it with a 4xx (or 5xx for [`VerifyError::Store`]).
///
/// A duplicate is not an error: see [`crate::Verdict::Duplicate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// Neither `X-Webhook-Signature` nor `X-MediaAgency-Signature` is present.
    #[error("no X-Webhook-Signature or X-MediaAgency-Signature header")]
    MissingSignature,
    /// The signature header is not `sha256=` followed by 64 lowercase hex digits.
    #[error(
        "the signature header is not `sha256=` followed by 64 lowercase hex digits (several separated by commas)"
    )]
    MalformedSignature,
    /// No configured secret produces this signature over the timestamp and body.
    #[error("the signature does not match the timestamp and body under any configured secret")]
    SignatureMismatch,
    /// `X-Webhook-Timestamp` is absent.
    #[error("no X-Webhook-Timestamp header")]
    MissingTimestamp,
    /// `X-Webhook-Timestamp` is not 1 to 15 ASCII digits.
    #[error("X-Webhook-Timestamp is not a Unix time in seconds")]
    MalformedTimestamp,
    /// The signing time is more than 300 seconds from the local clock, either way.
    #[error("signed at {timestamp}, {} s from the local clock {now}; at most 300 s is allowed", timestamp.abs_diff(*now))]
    TimestampOutOfTolerance {
        /// The signing time from `X-Webhook-Timestamp`.
        timestamp: i64,
        /// The local clock passed to the verifier.
        now: i64,
    },
    /// The body is not an event envelope (it is authentic, so the sender has a bug).
    #[error("the body is not an event envelope: {0}")]
    MalformedBody(String),
    /// `X-Event-Id` is absent.
    #[error("no X-Event-Id header")]
    MissingEventId,
    /// `X-Event-Id` differs from the envelope's `event_id`.
    #[error("X-Event-Id {header:?} differs from the body's event_id {body:?}")]
    EventIdMismatch {
        /// The `X-Event-Id` header value (unauthenticated).
        header: String,
        /// The envelope's `event_id` (covered by the signature).
        body: String,
    },
    /// This nonce was seen within the last 10 minutes: the delivery is a replay.
    #[error("nonce seen within the last 600 s")]
    NonceReplayed,
    /// The replay store could not be consulted; answer 5xx so the sender retries.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl VerifyError {
    /// A stable snake_case code for logs and metrics; the receiver snippets in
    /// `docs/receivers/` report the same codes.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingSignature => "missing_signature",
            Self::MalformedSignature => "malformed_signature",
            Self::SignatureMismatch => "signature_mismatch",
            Self::MissingTimestamp => "missing_timestamp",
            Self::MalformedTimestamp => "malformed_timestamp",
            Self::TimestampOutOfTolerance { .. } => "timestamp_out_of_tolerance",
            Self::MalformedBody(_) => "malformed_body",
            Self::MissingEventId => "missing_event_id",
            Self::EventIdMismatch { .. } => "event_id_mismatch",
            Self::NonceReplayed => "nonce_replayed",
            Self::Store(_) => "store_unavailable",
        }
    }
}

/// A [`crate::ReplayStore`] that could not answer (for example, its database is down).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replay store unavailable: {0}")]
pub struct StoreError(pub String);
