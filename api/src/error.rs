//! `ApiError`: every failure a handler or middleware can answer with, and the
//! specification's error envelope it becomes.
//!
//! An `ApiError` turns into a response carrying its status, its headers and an
//! [`ErrorBody`] extension; the envelope middleware (`middleware::envelope`)
//! writes the JSON body with the request id. The same middleware wraps any bare
//! 4xx/5xx produced outside our code (axum's 405, a body-limit 413) in the
//! envelope, so no client ever sees an error without one.

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use storage::api_keys::Scope;
use storage::{Entity, Rule, StorageError};
use utoipa::ToSchema;

/// Which resource a 404 is about; each has its own code in the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// `user_not_found`.
    User,
    /// `listing_not_found`.
    Listing,
    /// `job_not_found`: no dead job with this id (ops listener).
    DeadJob,
    /// `job_not_found`: no job with this id in the state an action takes (ops listener).
    Job,
    /// `worker_not_found`: no running worker process with this id (ops listener).
    Worker,
    /// `webhook_endpoint_not_found`.
    WebhookEndpoint,
    /// `webhook_delivery_not_found`.
    WebhookDelivery,
    /// `api_key_not_found`.
    ApiKey,
    /// `agency_not_found` (platform identities naming an agency).
    Agency,
    /// `operation_not_found`.
    Operation,
    /// `media_not_found`.
    Media,
    /// `agency_owner_not_found`: an agency without its owner account.
    AgencyOwner,
    /// `session_not_found`.
    Session,
    /// `appointment_not_found`: a listing without a shoot appointment.
    Appointment,
    /// `invoice_not_found`: a listing without the invoice asked about.
    Invoice,
    /// `package_not_found`.
    Package,
}

impl Resource {
    const fn not_found_code(self) -> &'static str {
        match self {
            Self::User => "user_not_found",
            Self::Listing => "listing_not_found",
            Self::DeadJob | Self::Job => "job_not_found",
            Self::Worker => "worker_not_found",
            Self::WebhookEndpoint => "webhook_endpoint_not_found",
            Self::WebhookDelivery => "webhook_delivery_not_found",
            Self::ApiKey => "api_key_not_found",
            Self::Agency => "agency_not_found",
            Self::Operation => "operation_not_found",
            Self::Media => "media_not_found",
            Self::AgencyOwner => "agency_owner_not_found",
            Self::Session => "session_not_found",
            Self::Appointment => "appointment_not_found",
            Self::Invoice => "invoice_not_found",
            Self::Package => "package_not_found",
        }
    }

    const fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Listing => "listing",
            Self::DeadJob => "dead job",
            Self::Job => "job in a state this action takes",
            Self::Worker => "running worker process",
            Self::WebhookEndpoint => "webhook endpoint",
            Self::WebhookDelivery => "webhook delivery",
            Self::ApiKey => "API key",
            Self::Agency => "agency",
            Self::Operation => "operation",
            Self::Media => "media item",
            Self::AgencyOwner => "agency owner",
            Self::Session => "session",
            Self::Appointment => "appointment",
            Self::Invoice => "invoice",
            Self::Package => "package",
        }
    }
}

/// Why an upload was refused while it streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadRefusal {
    /// 400 `upload.malformed`: not a multipart body, or a broken one.
    Malformed,
    /// 400 `upload.no_files`: no `files` part.
    NoFiles,
    /// 400 `upload.too_many_files`: more than 200 files.
    TooManyFiles,
    /// 400 `upload.unsupported_format`: content that is none of the formats.
    UnsupportedFormat,
    /// 400 `upload.filename_too_long`: a file name over 255 bytes of UTF-8.
    FilenameTooLong,
    /// 413 `upload.file_too_large`: a file over 50 MB.
    FileTooLarge,
    /// 413 `upload.request_too_large`: the request over 1 GB.
    RequestTooLarge,
    /// 408 `upload.timeout`: the body did not arrive within 60 seconds.
    Timeout,
    /// 500 `upload.storage_unavailable`: the object store failed.
    StorageUnavailable,
}

impl UploadRefusal {
    /// The HTTP status.
    pub const fn status(self) -> StatusCode {
        match self {
            Self::Malformed
            | Self::NoFiles
            | Self::TooManyFiles
            | Self::UnsupportedFormat
            | Self::FilenameTooLong => StatusCode::BAD_REQUEST,
            Self::FileTooLarge | Self::RequestTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Timeout => StatusCode::REQUEST_TIMEOUT,
            Self::StorageUnavailable => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The error code.
    pub const fn code(self) -> &'static str {
        match self {
            Self::Malformed => "upload.malformed",
            Self::NoFiles => "upload.no_files",
            Self::TooManyFiles => "upload.too_many_files",
            Self::UnsupportedFormat => "upload.unsupported_format",
            Self::FilenameTooLong => "upload.filename_too_long",
            Self::FileTooLarge => "upload.file_too_large",
            Self::RequestTooLarge => "upload.request_too_large",
            Self::Timeout => "upload.timeout",
            Self::StorageUnavailable => "upload.storage_unavailable",
        }
    }
}

/// Per-field reasons of a `validation.failed` answer (`details.fields`).
pub type FieldErrors = BTreeMap<String, String>;

/// Every error the API answers with. The variant fixes status and code.
#[derive(Debug)]
pub enum ApiError {
    /// 401 `auth.missing_key`: no key, a malformed key, or a key in a place keys
    /// are never accepted from (URL).
    MissingKey(&'static str),
    /// 401 `auth.invalid_key`: unknown, revoked or expired key.
    InvalidKey,
    /// 403 `auth.scope_denied`: the key lacks the route's scope.
    ScopeDenied(Scope),
    /// 401 `auth.session_required`: a session route without a live session
    /// cookie (an API key does not open these routes).
    SessionRequired,
    /// 401 `auth.invalid_credentials`: a login whose email and password do not
    /// open an active account (which part failed is not said).
    InvalidCredentials,
    /// 403 `auth.csrf_failed`: a session request without the session's
    /// `X-CSRF-Token`.
    CsrfFailed,
    /// 400 `auth.invalid_reset_token`: a password link's token that is
    /// unknown, already used or expired (which one is not said).
    InvalidResetToken,
    /// An upload refused while it streamed: 400 `upload.too_many_files`,
    /// `upload.unsupported_format`, `upload.filename_too_long`,
    /// `upload.no_files`, `upload.malformed`;
    /// 413 `upload.file_too_large`, `upload.request_too_large`; 408
    /// `upload.timeout`; 500 `upload.storage_unavailable`.
    Upload {
        /// Which refusal, fixing status and code.
        refusal: UploadRefusal,
        /// What went wrong, naming the file when there is one.
        message: String,
    },
    /// 410 `endpoint_removed`: a route that existed and was removed, with its
    /// changelog entry and replacement.
    EndpointRemoved {
        /// The changelog entry announcing the removal.
        changelog_url: String,
        /// What to call instead.
        replacement: &'static str,
    },
    /// 403 `transport.tls_required`: a plain-HTTP request the server may not serve.
    TlsRequired,
    /// 404 `endpoint_not_in_scope`: not part of the public surface.
    EndpointNotInScope,
    /// 404 `<resource>_not_found`, also for another agency's resource.
    NotFound(Resource),
    /// 404 `section_not_exposed`: a section other than tour3d or floorplan.
    SectionNotExposed,
    /// 405 `request.method_not_allowed`.
    MethodNotAllowed,
    /// 409 `listing_not_activated`: a status change before activation and billing.
    ListingNotActivated,
    /// 409 `no_op_transition`: the listing already has the requested status.
    NoOpTransition(&'static str),
    /// 409 `listing_already_cancelled`.
    ListingAlreadyCancelled,
    /// 409 `listing_status_conflict`: another change moved the listing between
    /// this request's read and its write; nothing was changed.
    ListingStatusConflict {
        /// The status the request was judged against.
        expected: &'static str,
        /// The status the other change left.
        current: &'static str,
    },
    /// 409 `outside_cancellation_window`, with the cutoff and where to go instead.
    OutsideCancellationWindow {
        /// When the no-fee window closed (RFC 3339).
        cutoff: String,
        /// Where the agency can cancel with a fee.
        remediation_url: String,
    },
    /// 422 `lifecycle_violation`: the lifecycle does not allow the move.
    LifecycleViolation {
        /// Current status.
        from: &'static str,
        /// Requested status.
        to: &'static str,
    },
    /// 422 `invalid_section_payload`, naming the field and the reason.
    InvalidSectionPayload {
        /// The offending field.
        field: String,
        /// Why.
        reason: String,
    },
    /// 400 `idempotency.missing`: a POST or PATCH without `X-Idempotency-Key`.
    IdempotencyMissing,
    /// 422 `validation.failed` about a header (named in `details.fields`).
    InvalidHeader {
        /// The header.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// 409 `idempotency_key_conflict`: the key was used for another request.
    IdempotencyKeyConflict,
    /// 409 `idempotency_key_in_progress`, with `Retry-After: 5`.
    IdempotencyKeyInProgress,
    /// 429 `rate_limit.exceeded`, with `Retry-After`, `error.retry_after_seconds`
    /// and the rate-limit headers.
    RateLimited {
        /// Seconds until a retry would be admitted.
        retry_after_seconds: u64,
        /// The rate-limit headers.
        headers: axum::http::HeaderMap,
    },
    /// 400 `request.malformed`: the body could not be parsed at all.
    MalformedBody(String),
    /// 413 `request.too_large`.
    PayloadTooLarge,
    /// 415 `request.unsupported_media_type`.
    UnsupportedMediaType(String),
    /// 422 `validation.failed` with `details.fields`.
    Validation(FieldErrors),
    /// 400 `validation.invalid_value` with `details.fields`: well-formed
    /// values outside their field's set (the preference routes' 400).
    InvalidValues(FieldErrors),
    /// 403 `permission_denied`: the key's user may not act on this resource.
    Forbidden(String),
    /// 422 `invalid_cursor`: a tampered, malformed or foreign cursor.
    InvalidCursor,
    /// 500 `server.internal`; the cause is logged, never shown.
    Internal(String),
    /// 503 `server.timeout`: the request ran past its route's deadline (the
    /// seconds) and was stopped; nothing it started was kept.
    Timeout(u64),
    /// 503 `server.not_ready`: a dependency (`database`, `queue`) does not
    /// answer (readiness probe of the ops listener).
    NotReady(&'static str),
}

impl ApiError {
    /// A `validation.failed` for one field.
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Validation(BTreeMap::from([(field.into(), reason.into())]))
    }

    /// A 500 whose cause is logged with the request id and not shown to the client.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::Internal(cause.to_string())
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingKey(_)
            | Self::InvalidKey
            | Self::SessionRequired
            | Self::InvalidCredentials => StatusCode::UNAUTHORIZED,
            Self::ScopeDenied(_) | Self::TlsRequired | Self::CsrfFailed => StatusCode::FORBIDDEN,
            Self::EndpointRemoved { .. } => StatusCode::GONE,
            Self::Upload { refusal, .. } => refusal.status(),
            Self::EndpointNotInScope | Self::NotFound(_) | Self::SectionNotExposed => {
                StatusCode::NOT_FOUND
            }
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::ListingNotActivated
            | Self::NoOpTransition(_)
            | Self::ListingAlreadyCancelled
            | Self::ListingStatusConflict { .. }
            | Self::OutsideCancellationWindow { .. } => StatusCode::CONFLICT,
            Self::LifecycleViolation { .. } | Self::InvalidSectionPayload { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::MalformedBody(_) | Self::IdempotencyMissing => StatusCode::BAD_REQUEST,
            Self::IdempotencyKeyConflict | Self::IdempotencyKeyInProgress => StatusCode::CONFLICT,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Validation(_) | Self::InvalidHeader { .. } | Self::InvalidCursor => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::InvalidValues(_) | Self::InvalidResetToken => StatusCode::BAD_REQUEST,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotReady(_) | Self::Timeout(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The machine-readable code clients branch on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingKey(_) => "auth.missing_key",
            Self::InvalidKey => "auth.invalid_key",
            Self::ScopeDenied(_) => "auth.scope_denied",
            Self::SessionRequired => "auth.session_required",
            Self::InvalidCredentials => "auth.invalid_credentials",
            Self::CsrfFailed => "auth.csrf_failed",
            Self::InvalidResetToken => "auth.invalid_reset_token",
            Self::EndpointRemoved { .. } => "endpoint_removed",
            Self::Upload { refusal, .. } => refusal.code(),
            Self::TlsRequired => "transport.tls_required",
            Self::EndpointNotInScope => "endpoint_not_in_scope",
            Self::NotFound(resource) => resource.not_found_code(),
            Self::SectionNotExposed => "section_not_exposed",
            Self::MethodNotAllowed => "request.method_not_allowed",
            Self::ListingNotActivated => "listing_not_activated",
            Self::NoOpTransition(_) => "no_op_transition",
            Self::ListingAlreadyCancelled => "listing_already_cancelled",
            Self::ListingStatusConflict { .. } => "listing_status_conflict",
            Self::OutsideCancellationWindow { .. } => "outside_cancellation_window",
            Self::LifecycleViolation { .. } => "lifecycle_violation",
            Self::InvalidSectionPayload { .. } => "invalid_section_payload",
            Self::MalformedBody(_) => "request.malformed",
            Self::IdempotencyMissing => "idempotency.missing",
            Self::InvalidHeader { .. } => "validation.failed",
            Self::IdempotencyKeyConflict => "idempotency_key_conflict",
            Self::IdempotencyKeyInProgress => "idempotency_key_in_progress",
            Self::RateLimited { .. } => "rate_limit.exceeded",
            Self::PayloadTooLarge => "request.too_large",
            Self::UnsupportedMediaType(_) => "request.unsupported_media_type",
            Self::Validation(_) => "validation.failed",
            Self::InvalidValues(_) => "validation.invalid_value",
            Self::Forbidden(_) => "permission_denied",
            Self::InvalidCursor => "invalid_cursor",
            Self::Internal(_) => "server.internal",
            Self::NotReady(_) => "server.not_ready",
            Self::Timeout(_) => "server.timeout",
        }
    }

    fn message(&self) -> Cow<'static, str> {
        match self {
            Self::MissingKey(why) => Cow::Borrowed(why),
            Self::InvalidKey => "The API key is unknown, revoked or expired.".into(),
            Self::ScopeDenied(scope) => format!(
                "The API key lacks the scope {} that this endpoint requires.",
                scope.as_str()
            )
            .into(),
            Self::SessionRequired => {
                "This route needs a session: sign in with POST /api/v1/session; API keys are not accepted here."
                    .into()
            }
            Self::InvalidCredentials => "The email or password is not correct.".into(),
            Self::CsrfFailed => {
                "The X-CSRF-Token header is missing or does not belong to this session.".into()
            }
            Self::InvalidResetToken => {
                "This password link is unknown, already used or expired; ask for a new one with POST /api/v1/session/password-reset."
                    .into()
            }
            Self::Upload { message, .. } => message.clone().into(),
            Self::EndpointRemoved { replacement, .. } => {
                format!("This endpoint was removed; use {replacement}.").into()
            }
            Self::TlsRequired => {
                "This API is served over HTTPS only; plain HTTP requests are refused.".into()
            }
            Self::EndpointNotInScope => "This endpoint is not part of the public API.".into(),
            Self::NotFound(resource) => format!("No such {}.", resource.name()).into(),
            Self::SectionNotExposed => {
                "Only the tour3d and floorplan sections can be changed through the API.".into()
            }
            Self::MethodNotAllowed => "This method is not allowed on this endpoint.".into(),
            Self::ListingNotActivated => {
                "The listing's status cannot change until it is activated and billed.".into()
            }
            Self::NoOpTransition(status) => format!("The listing already has status {status}.").into(),
            Self::ListingAlreadyCancelled => "The listing is already cancelled.".into(),
            Self::ListingStatusConflict { expected, current } => format!(
                "The listing's status changed from {expected} to {current} while this request was processed; nothing was changed."
            )
            .into(),
            Self::OutsideCancellationWindow { cutoff, .. } => format!(
                "The no-fee cancellation window closed at {cutoff}; cancel from the dashboard, where the fee applies."
            )
            .into(),
            Self::LifecycleViolation { from, to } => {
                format!("A listing cannot move from {from} to {to}.").into()
            }
            Self::InvalidSectionPayload { field, reason } => format!("{field} {reason}.").into(),
            Self::MalformedBody(why) => {
                format!("The request body could not be parsed: {why}").into()
            }
            Self::PayloadTooLarge => "The request body is too large.".into(),
            Self::IdempotencyMissing => {
                "POST and PATCH requests must carry an X-Idempotency-Key header.".into()
            }
            Self::InvalidHeader { name, reason } => format!("The {name} header {reason}.").into(),
            Self::IdempotencyKeyConflict => {
                "This idempotency key was already used for a different request.".into()
            }
            Self::IdempotencyKeyInProgress => {
                "A request with this idempotency key is still being processed; retry shortly.".into()
            }
            Self::RateLimited { retry_after_seconds, .. } => format!(
                "Rate limit exceeded; retry after {retry_after_seconds} seconds."
            )
            .into(),
            Self::UnsupportedMediaType(why) => why.clone().into(),
            Self::Validation(fields) => {
                let names: Vec<&str> = fields.keys().map(String::as_str).collect();
                format!("The request is invalid: {}.", names.join(", ")).into()
            }
            Self::InvalidValues(fields) => {
                let names: Vec<&str> = fields.keys().map(String::as_str).collect();
                format!("Invalid value for {}.", names.join(", ")).into()
            }
            Self::Forbidden(why) => why.clone().into(),
            Self::InvalidCursor => {
                "The cursor is malformed, tampered with or from another query.".into()
            }
            Self::Internal(_) => {
                "An unexpected error occurred. It is safe to retry with the same idempotency key."
                    .into()
            }
            Self::NotReady(component) => format!("The {component} does not answer.").into(),
            Self::Timeout(seconds) => format!(
                "The request did not finish within {seconds} seconds and was stopped; nothing it started was kept. Repeat it (with the same idempotency key)."
            )
            .into(),
        }
    }

    fn details(&self) -> Map<String, Value> {
        let mut details = Map::new();
        match self {
            Self::ScopeDenied(scope) => {
                details.insert("required_scope".into(), scope.as_str().into());
            }
            Self::NoOpTransition(status) => {
                details.insert("status".into(), (*status).into());
            }
            Self::OutsideCancellationWindow {
                cutoff,
                remediation_url,
            } => {
                details.insert("no_fee_cutoff".into(), cutoff.as_str().into());
                details.insert("remediation_url".into(), remediation_url.as_str().into());
            }
            Self::LifecycleViolation { from, to } => {
                details.insert("from".into(), (*from).into());
                details.insert("to".into(), (*to).into());
            }
            Self::ListingStatusConflict { expected, current } => {
                details.insert("expected_status".into(), (*expected).into());
                details.insert("current_status".into(), (*current).into());
            }
            Self::NotReady(component) => {
                details.insert("component".into(), (*component).into());
            }
            Self::Timeout(seconds) => {
                details.insert("deadline_seconds".into(), (*seconds).into());
            }
            Self::EndpointRemoved {
                changelog_url,
                replacement,
            } => {
                details.insert("changelog_url".into(), changelog_url.as_str().into());
                details.insert("replacement".into(), (*replacement).into());
            }
            Self::InvalidSectionPayload { field, reason } => {
                details.insert("field".into(), field.as_str().into());
                details.insert("reason".into(), reason.as_str().into());
            }
            Self::InvalidHeader { name, reason } => {
                let fields = Map::from_iter([((*name).to_owned(), Value::from(reason.as_str()))]);
                details.insert("fields".into(), Value::Object(fields));
            }
            Self::Validation(fields) | Self::InvalidValues(fields) => {
                let fields = fields
                    .iter()
                    .map(|(name, reason)| (name.clone(), Value::from(reason.as_str())))
                    .collect();
                details.insert("fields".into(), Value::Object(fields));
            }
            _ => {}
        }
        details
    }

    /// The body this error renders, without the request id.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code().into(),
            message: self.message().into_owned(),
            details: self.details(),
            retry_after_seconds: match self {
                Self::RateLimited {
                    retry_after_seconds,
                    ..
                } => Some(*retry_after_seconds),
                _ => None,
            },
            decided: self.is_decided(),
        }
    }

    /// Whether the endpoint ran and decided this outcome from the state it
    /// found, so the same request under the same idempotency key gets it
    /// again: a missing resource and the listing rules. Everything else was
    /// refused before the request did anything (credentials, validation,
    /// budgets, a concurrent change, an unavailable dependency) and keeps no
    /// idempotent result, as Stripe does: a client may fix its request, or
    /// wait, and retry under the same key.
    pub fn is_decided(&self) -> bool {
        match self {
            Self::NotFound(_)
            | Self::ListingNotActivated
            | Self::NoOpTransition(_)
            | Self::ListingAlreadyCancelled
            | Self::OutsideCancellationWindow { .. }
            | Self::LifecycleViolation { .. } => true,
            Self::MissingKey(_)
            | Self::InvalidKey
            | Self::ScopeDenied(_)
            | Self::SessionRequired
            | Self::InvalidCredentials
            | Self::CsrfFailed
            | Self::InvalidResetToken
            | Self::Upload { .. }
            | Self::EndpointRemoved { .. }
            | Self::TlsRequired
            | Self::EndpointNotInScope
            | Self::SectionNotExposed
            | Self::MethodNotAllowed
            | Self::ListingStatusConflict { .. }
            | Self::InvalidSectionPayload { .. }
            | Self::MalformedBody(_)
            | Self::IdempotencyMissing
            | Self::InvalidHeader { .. }
            | Self::IdempotencyKeyConflict
            | Self::IdempotencyKeyInProgress
            | Self::RateLimited { .. }
            | Self::PayloadTooLarge
            | Self::UnsupportedMediaType(_)
            | Self::Validation(_)
            | Self::InvalidValues(_)
            | Self::Forbidden(_)
            | Self::InvalidCursor
            | Self::Internal(_)
            | Self::Timeout(_)
            | Self::NotReady(_) => false,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(cause) = &self {
            // Logged inside the request span, so the line carries the request id.
            tracing::error!(%cause, "internal error");
        }
        let mut response = self.status().into_response();
        match &self {
            Self::MissingKey(_) | Self::InvalidKey => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Self::IdempotencyKeyInProgress => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            Self::RateLimited {
                retry_after_seconds,
                headers,
            } => {
                response.headers_mut().extend(headers.clone());
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_seconds));
            }
            Self::NotReady(_) | Self::Timeout(_) => {
                // A restart or failover takes seconds; the request is safe
                // to repeat (with the same idempotency key).
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        response.extensions_mut().insert(self.body());
        response
    }
}

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
    /// The body for an error response that did not come from an `ApiError`
    /// (axum's own 405, a layer's 413 or 408).
    pub fn for_bare_status(status: StatusCode) -> Self {
        let error = match status {
            StatusCode::NOT_FOUND => ApiError::EndpointNotInScope,
            StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::UnsupportedMediaType("Unsupported content type.".into())
            }
            status if status.is_client_error() => {
                return Self {
                    code: "request.invalid".into(),
                    message: status
                        .canonical_reason()
                        .unwrap_or("The request could not be served.")
                        .to_owned(),
                    details: Map::new(),
                    retry_after_seconds: None,
                    decided: false,
                };
            }
            _ => ApiError::Internal(format!("bare {status} response")),
        };
        error.body()
    }

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

#[cfg(test)]
mod tests {
    use storage::{Entity, StorageError};

    use super::ApiError;

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
