//! `ApiError` and what each variant answers: status, code, message and
//! whether it is the request's decided outcome, read from one table
//! ([`ApiError::answer`]); its structured details and headers.

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use storage::api_keys::Scope;

use super::envelope::ErrorBody;
use super::resource::Resource;
use super::upload::UploadRefusal;

/// What an error answers, as [`ApiError::answer`] reads it off its table.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The machine-readable code clients branch on.
    pub code: &'static str,
    /// What went wrong and what to do next.
    pub message: Cow<'static, str>,
    /// Whether the endpoint ran and decided this outcome from the state it
    /// found, so the same request under the same idempotency key gets it
    /// again: a missing resource and the listing rules. Everything else was
    /// refused before the request did anything (credentials, validation,
    /// budgets, a concurrent change, an unavailable dependency) and keeps no
    /// idempotent result, as Stripe does: a client may fix its request, or
    /// wait, and retry under the same key.
    pub decided: bool,
}

fn answer(status: StatusCode, code: &'static str, message: impl Into<Cow<'static, str>>) -> Answer {
    Answer {
        status,
        code,
        message: message.into(),
        decided: false,
    }
}

/// An answer the endpoint decided (kept under the idempotency key).
fn decided(
    status: StatusCode,
    code: &'static str,
    message: impl Into<Cow<'static, str>>,
) -> Answer {
    Answer {
        decided: true,
        ..answer(status, code, message)
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

    /// What this error answers: one row per variant.
    #[rustfmt::skip]
    pub fn answer(&self) -> Answer {
        use StatusCode as S;
        match self {
            Self::MissingKey(why) => answer(S::UNAUTHORIZED, "auth.missing_key", *why),
            Self::InvalidKey => answer(S::UNAUTHORIZED, "auth.invalid_key", "The API key is unknown, revoked or expired."),
            Self::ScopeDenied(scope) => answer(S::FORBIDDEN, "auth.scope_denied", format!("The API key lacks the scope {} that this endpoint requires.", scope.as_str())),
            Self::SessionRequired => answer(S::UNAUTHORIZED, "auth.session_required", "This route needs a session: sign in with POST /api/v1/session; API keys are not accepted here."),
            Self::InvalidCredentials => answer(S::UNAUTHORIZED, "auth.invalid_credentials", "The email or password is not correct."),
            Self::CsrfFailed => answer(S::FORBIDDEN, "auth.csrf_failed", "The X-CSRF-Token header is missing or does not belong to this session."),
            Self::InvalidResetToken => answer(S::BAD_REQUEST, "auth.invalid_reset_token", "This password link is unknown, already used or expired; ask for a new one with POST /api/v1/session/password-reset."),
            Self::Upload { refusal, message } => answer(refusal.status(), refusal.code(), message.clone()),
            Self::EndpointRemoved { replacement, .. } => answer(S::GONE, "endpoint_removed", format!("This endpoint was removed; use {replacement}.")),
            Self::TlsRequired => answer(S::FORBIDDEN, "transport.tls_required", "This API is served over HTTPS only; plain HTTP requests are refused."),
            Self::EndpointNotInScope => answer(S::NOT_FOUND, "endpoint_not_in_scope", "This endpoint is not part of the public API."),
            Self::NotFound(resource) => decided(S::NOT_FOUND, resource.not_found_code(), format!("No such {}.", resource.name())),
            Self::SectionNotExposed => answer(S::NOT_FOUND, "section_not_exposed", "Only the tour3d and floorplan sections can be changed through the API."),
            Self::MethodNotAllowed => answer(S::METHOD_NOT_ALLOWED, "request.method_not_allowed", "This method is not allowed on this endpoint."),
            Self::ListingNotActivated => decided(S::CONFLICT, "listing_not_activated", "The listing's status cannot change until it is activated and billed."),
            Self::NoOpTransition(status) => decided(S::CONFLICT, "no_op_transition", format!("The listing already has status {status}.")),
            Self::ListingAlreadyCancelled => decided(S::CONFLICT, "listing_already_cancelled", "The listing is already cancelled."),
            Self::ListingStatusConflict { expected, current } => answer(S::CONFLICT, "listing_status_conflict", format!("The listing's status changed from {expected} to {current} while this request was processed; nothing was changed.")),
            Self::OutsideCancellationWindow { cutoff, .. } => decided(S::CONFLICT, "outside_cancellation_window", format!("The no-fee cancellation window closed at {cutoff}; cancel from the dashboard, where the fee applies.")),
            Self::LifecycleViolation { from, to } => decided(S::UNPROCESSABLE_ENTITY, "lifecycle_violation", format!("A listing cannot move from {from} to {to}.")),
            Self::InvalidSectionPayload { field, reason } => answer(S::UNPROCESSABLE_ENTITY, "invalid_section_payload", format!("{field} {reason}.")),
            Self::IdempotencyMissing => answer(S::BAD_REQUEST, "idempotency.missing", "POST and PATCH requests must carry an X-Idempotency-Key header."),
            Self::InvalidHeader { name, reason } => answer(S::UNPROCESSABLE_ENTITY, "validation.failed", format!("The {name} header {reason}.")),
            Self::IdempotencyKeyConflict => answer(S::CONFLICT, "idempotency_key_conflict", "This idempotency key was already used for a different request."),
            Self::IdempotencyKeyInProgress => answer(S::CONFLICT, "idempotency_key_in_progress", "A request with this idempotency key is still being processed; retry shortly."),
            Self::RateLimited { retry_after_seconds, .. } => answer(S::TOO_MANY_REQUESTS, "rate_limit.exceeded", format!("Rate limit exceeded; retry after {retry_after_seconds} seconds.")),
            Self::MalformedBody(why) => answer(S::BAD_REQUEST, "request.malformed", format!("The request body could not be parsed: {why}")),
            Self::PayloadTooLarge => answer(S::PAYLOAD_TOO_LARGE, "request.too_large", "The request body is too large."),
            Self::UnsupportedMediaType(why) => answer(S::UNSUPPORTED_MEDIA_TYPE, "request.unsupported_media_type", why.clone()),
            Self::Validation(fields) => answer(S::UNPROCESSABLE_ENTITY, "validation.failed", format!("The request is invalid: {}.", field_names(fields))),
            Self::InvalidValues(fields) => answer(S::BAD_REQUEST, "validation.invalid_value", format!("Invalid value for {}.", field_names(fields))),
            Self::Forbidden(why) => answer(S::FORBIDDEN, "permission_denied", why.clone()),
            Self::InvalidCursor => answer(S::UNPROCESSABLE_ENTITY, "invalid_cursor", "The cursor is malformed, tampered with or from another query."),
            Self::Internal(_) => answer(S::INTERNAL_SERVER_ERROR, "server.internal", "An unexpected error occurred. It is safe to retry with the same idempotency key."),
            Self::Timeout(seconds) => answer(S::SERVICE_UNAVAILABLE, "server.timeout", format!("The request did not finish within {seconds} seconds and was stopped; nothing it started was kept. Repeat it (with the same idempotency key).")),
            Self::NotReady(component) => answer(S::SERVICE_UNAVAILABLE, "server.not_ready", format!("The {component} does not answer.")),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.answer().status
    }

    /// The machine-readable code clients branch on.
    pub fn code(&self) -> &'static str {
        self.answer().code
    }

    /// Whether the endpoint ran and decided this outcome (see [`Answer::decided`]).
    pub fn is_decided(&self) -> bool {
        self.answer().decided
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
        let answer = self.answer();
        ErrorBody {
            code: answer.code.into(),
            message: answer.message.into_owned(),
            details: self.details(),
            retry_after_seconds: match self {
                Self::RateLimited {
                    retry_after_seconds,
                    ..
                } => Some(*retry_after_seconds),
                _ => None,
            },
            decided: answer.decided,
        }
    }
}

/// The fields a validation failure names, for its message.
fn field_names(fields: &FieldErrors) -> String {
    fields
        .keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let answer = self.answer();
        write!(f, "{}: {}", answer.code, answer.message)
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

impl ApiError {
    /// The body for an error response that did not come from an `ApiError`
    /// (axum's own 405, a layer's 413 or 408).
    pub fn body_for_bare_status(status: StatusCode) -> ErrorBody {
        let error = match status {
            StatusCode::NOT_FOUND => ApiError::EndpointNotInScope,
            StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::UnsupportedMediaType("Unsupported content type.".into())
            }
            status if status.is_client_error() => {
                return ErrorBody {
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
}
