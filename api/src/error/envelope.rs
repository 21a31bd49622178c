//! The specification's error envelope: the body an error renders
//! ([`ErrorBody`], kept for idempotent replays) and the JSON it becomes with
//! the request id ([`ErrorEnvelope`]).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// The error part of the envelope, before the request id is added. Serialisable
/// so an idempotent replay can render the same error again.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// Machine-readable code.
    pub code: Cow<'static, str>,
    /// Human-readable message.
    pub message: String,
    /// Structured details; empty when there are none.
    pub details: Map<String, Value>,
    /// Seconds to wait, on 429 only.
    pub retry_after_seconds: Option<u64>,
    /// Whether the endpoint ran and decided this outcome (a missing
    /// resource, a business rule): only such errors are kept as a request's
    /// idempotent outcome. Never rendered.
    #[serde(skip)]
    pub decided: bool,
}

impl ErrorBody {
    /// The full envelope with `request_id`.
    pub fn into_envelope(self, request_id: &str) -> ErrorEnvelope {
        ErrorEnvelope {
            error: ErrorObject {
                code: self.code.into_owned(),
                message: self.message,
                request_id: request_id.to_owned(),
                details: self.details,
                retry_after_seconds: self.retry_after_seconds,
            },
        }
    }
}

/// The error envelope of every 4xx and 5xx response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorObject,
}

/// The error object inside the envelope.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorObject {
    /// Machine-readable code, e.g. `auth.invalid_key`, `validation.failed`.
    pub code: String,
    /// Human-readable explanation; do not parse it.
    pub message: String,
    /// Equals the `X-Request-Id` response header.
    pub request_id: String,
    /// Structured details; `fields` for `validation.failed`. Empty when unpopulated.
    #[schema(value_type = Object)]
    pub details: Map<String, Value>,
    /// On 429 only: seconds to wait before retrying (as `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}
