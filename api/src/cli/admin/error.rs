//! How an admin command fails: a code scripts can branch on and a message,
//! printed as `{"error": {code, message}}`, with the conversions from storage
//! and validation failures.

use storage::StorageError;

use crate::routes::webhooks::endpoint_rules::FieldError;

/// A failed admin command: a code and a message.
pub(super) struct AdminError {
    /// Printed as `error.code`.
    pub(super) code: &'static str,
    /// Printed as `error.message`.
    pub(super) message: String,
}

impl AdminError {
    /// An error with this code and message.
    pub(super) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<StorageError> for AdminError {
    fn from(err: StorageError) -> Self {
        match err {
            StorageError::NotFound(what) => Self::new("not_found", format!("no such {what}")),
            StorageError::Conflict { field } => {
                Self::new("conflict", format!("{field} is already taken"))
            }
            StorageError::Invalid { field, reason } => {
                Self::new("validation.failed", format!("{field}: {reason}"))
            }
            StorageError::Fields(fields) => Self::new("validation.failed", format!("{fields:?}")),
            StorageError::Rule(rule) => Self::new("rule_violation", rule.to_string()),
            other => Self::new("server.internal", other.to_string()),
        }
    }
}

impl From<FieldError> for AdminError {
    fn from(err: FieldError) -> Self {
        Self::new("validation.failed", err.to_string())
    }
}

impl From<anyhow::Error> for AdminError {
    fn from(err: anyhow::Error) -> Self {
        Self::new("server.internal", format!("{err:#}"))
    }
}
