//! What the layers below answer, as `ApiError`s: the repositories' errors
//! (a missing row is its resource's 404, an unavailable database 503), the
//! queue's, and the domain's rules.

use storage::{Entity, Rule, StorageError};

use super::api_error::ApiError;
use super::resource::Resource;

impl From<StorageError> for ApiError {
    fn from(err: StorageError) -> Self {
        match err {
            StorageError::NotFound(entity) => Self::not_found(entity),
            StorageError::Invalid { field, reason } => Self::field(field, reason),
            StorageError::Fields(fields) => Self::Validation(
                fields
                    .into_iter()
                    .map(|(field, reason)| (field.to_owned(), reason))
                    .collect(),
            ),
            StorageError::Conflict { field } => Self::field(field, "is already taken"),
            StorageError::Rule(rule) => rule.into(),
            other if other.is_unavailable() => {
                tracing::warn!(cause = %other, "the database is unavailable");
                Self::NotReady("database")
            }
            other => Self::internal(other),
        }
    }
}

impl ApiError {
    /// The answer to a repository's `NotFound`: every entity has its 404
    /// code, so whatever a handler looks up, a missing row is never a 500.
    fn not_found(entity: Entity) -> Self {
        Self::NotFound(match entity {
            Entity::User => Resource::User,
            Entity::Listing => Resource::Listing,
            Entity::ApiKey => Resource::ApiKey,
            Entity::Operation => Resource::Operation,
            Entity::Media => Resource::Media,
            Entity::Agency => Resource::Agency,
            Entity::AgencyOwner => Resource::AgencyOwner,
            Entity::Session => Resource::Session,
            Entity::Appointment => Resource::Appointment,
            Entity::OpenInvoice => Resource::Invoice,
            Entity::Package => Resource::Package,
            Entity::Upload => Resource::Upload,
            Entity::DeliveryProfile => Resource::DeliveryProfile,
        })
    }
}

impl From<platform::QueueError> for ApiError {
    /// The job queue did not take or give a job: it is away (Redis
    /// restarting, the queue file locked), and the request may be repeated.
    fn from(err: platform::QueueError) -> Self {
        tracing::warn!(cause = %err, "the job queue is unavailable");
        Self::NotReady("job queue")
    }
}

impl From<Rule> for ApiError {
    fn from(rule: Rule) -> Self {
        match rule {
            Rule::ListingNotActivated => Self::ListingNotActivated,
            Rule::NoOpTransition(status) => Self::NoOpTransition(status),
            Rule::LifecycleViolation { from, to } => Self::LifecycleViolation { from, to },
            Rule::ListingAlreadyCancelled => Self::ListingAlreadyCancelled,
            Rule::InvalidSectionPayload { field, reason } => {
                Self::InvalidSectionPayload { field, reason }
            }
            // The handler knows where to send the client; this is the bare fallback.
            Rule::OutsideCancellationWindow { cutoff_rfc3339 } => Self::OutsideCancellationWindow {
                cutoff: cutoff_rfc3339,
                remediation_url: String::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use storage::{Entity, StorageError};

    use super::super::api_error::ApiError;

    #[test]
    fn every_missing_entity_is_a_404_with_its_own_code() {
        let mut codes = std::collections::BTreeSet::new();
        for entity in Entity::ALL {
            let error = ApiError::from(StorageError::NotFound(entity));
            assert_eq!(
                error.status(),
                axum::http::StatusCode::NOT_FOUND,
                "{entity}"
            );
            let code = error.code();
            assert!(code.ends_with("_not_found"), "{entity}: {code}");
            assert!(codes.insert(code), "{entity} shares {code}");
            assert!(
                error.is_decided(),
                "a missing {entity} is the request's outcome"
            );
        }
    }
}
