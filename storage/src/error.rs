//! The one error type repositories return.

/// Result type of every repository call.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Why a repository call failed. Callers map these onto their own error types;
/// `Database` is the only variant that is the server's fault.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// No row matched, within the caller's tenant.
    #[error("{0} not found")]
    NotFound(Entity),
    /// A uniqueness rule was broken (the field named).
    #[error("{field} is already taken")]
    Conflict {
        /// The field whose value collides with an existing row.
        field: &'static str,
    },
    /// The request refers to something that breaks an invariant (the field named).
    #[error("{field}: {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// A human-readable reason.
        reason: String,
    },
    /// Several fields are invalid, each with its reason.
    #[error("invalid fields: {0:?}")]
    Fields(std::collections::BTreeMap<&'static str, String>),
    /// A business rule refused the change; nothing was written.
    #[error("{0}")]
    Rule(#[from] Rule),
    /// The configured master key is not the one this database was created with.
    #[error(
        "the configured master key does not match the one this database was first used with; \
         refusing to start so that existing API keys and secrets stay valid"
    )]
    MasterKeyMismatch,
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The shared transaction this write was part of failed to commit.
    #[error("commit failed: {0}")]
    CommitFailed(String),
    /// Migrations failed.
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Stored data could not be read back (a bug or a hand-edited row).
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

impl StorageError {
    /// True when the database could not be reached or went away mid-request
    /// (a restart, a failover, a full pool): nothing was committed by this
    /// request's failed statement, and the same request may succeed on retry.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Database(err) => Self::is_connection_error(err),
            // A shared commit that failed on its connection.
            Self::CommitFailed(reason) => {
                reason.contains("communicating with database")
                    || reason.contains("pool timed out")
                    || reason.contains("pool was closed")
            }
            _ => false,
        }
    }

    /// True when `err` says the connection, not the statement, failed.
    pub fn is_connection_error(err: &sqlx::Error) -> bool {
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            // SQLSTATE class 08 (connection exception), 57P01–57P03 (admin
            // shutdown, crash shutdown, cannot connect now), 53300 (too many
            // connections).
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08") || code.starts_with("57P0") || code == "53300"
            }),
            _ => false,
        }
    }

    /// True when the error is a unique-constraint violation reported by the database.
    pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
        matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
    }

    /// True when the error is a foreign-key violation reported by the database.
    pub(crate) fn is_foreign_key_violation(err: &sqlx::Error) -> bool {
        matches!(err, sqlx::Error::Database(db) if db.is_foreign_key_violation())
    }
}

/// What a repository looked for and did not find: each caller maps every
/// variant exhaustively (the API to its 404 codes), so a new kind of row does
/// not compile until someone decides what its absence means to a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entity {
    /// An agency.
    Agency,
    /// The owner account of an agency.
    AgencyOwner,
    /// A user of the tenant's agency.
    User,
    /// A session of the developer settings.
    Session,
    /// An API key of the tenant's agency.
    ApiKey,
    /// A listing of the tenant.
    Listing,
    /// A listing's shoot appointment.
    Appointment,
    /// An unpaid (or paid) invoice of a listing.
    OpenInvoice,
    /// A package of the price list.
    Package,
    /// An uploaded media item of the tenant.
    Media,
    /// An upload or archive operation of the tenant.
    Operation,
    /// A resumable upload of the tenant.
    Upload,
    /// A delivery profile of the tenant.
    DeliveryProfile,
}

impl Entity {
    /// Every entity (the API's tests hold each to a 404 code).
    pub const ALL: [Entity; 13] = [
        Self::Agency,
        Self::AgencyOwner,
        Self::User,
        Self::Session,
        Self::ApiKey,
        Self::Listing,
        Self::Appointment,
        Self::OpenInvoice,
        Self::Package,
        Self::Media,
        Self::Operation,
        Self::Upload,
        Self::DeliveryProfile,
    ];

    /// How messages and operator commands name it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Agency => "agency",
            Self::AgencyOwner => "agency owner",
            Self::User => "user",
            Self::Session => "session",
            Self::ApiKey => "api key",
            Self::Listing => "listing",
            Self::Appointment => "appointment",
            Self::OpenInvoice => "open invoice",
            Self::Package => "package",
            Self::Media => "media",
            Self::Operation => "operation",
            Self::Upload => "upload",
            Self::DeliveryProfile => "delivery profile",
        }
    }
}

impl std::fmt::Display for Entity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A business rule that refused a change. Each maps to its own error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    /// A status change before the listing is activated and billed.
    #[error("the listing is not activated and billed yet")]
    ListingNotActivated,
    /// The requested status is the current one.
    #[error("the listing already has status {0}")]
    NoOpTransition(&'static str),
    /// The lifecycle does not allow this move.
    #[error("a listing cannot move from {from} to {to}")]
    LifecycleViolation {
        /// Current status (display form).
        from: &'static str,
        /// Requested status (display form).
        to: &'static str,
    },
    /// Cancelling a cancelled listing.
    #[error("the listing is already cancelled")]
    ListingAlreadyCancelled,
    /// Cancelling after the no-fee cutoff.
    #[error("the no-fee cancellation window closed at {cutoff_rfc3339}")]
    OutsideCancellationWindow {
        /// When the window closed.
        cutoff_rfc3339: String,
    },
    /// A section body that parsed but makes no sense.
    #[error("{field}: {reason}")]
    InvalidSectionPayload {
        /// The offending field, e.g. `files[2].label`.
        field: String,
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::StorageError;

    #[test]
    fn a_lost_connection_is_unavailable_and_a_bad_statement_is_not() {
        let reset = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(StorageError::Database(reset).is_unavailable());
        assert!(StorageError::Database(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(StorageError::Database(sqlx::Error::PoolClosed).is_unavailable());
        assert!(!StorageError::Database(sqlx::Error::RowNotFound).is_unavailable());
        assert!(
            StorageError::CommitFailed("error communicating with database: broken pipe".into())
                .is_unavailable()
        );
        assert!(!StorageError::Corrupt("status".into()).is_unavailable());
    }
}
