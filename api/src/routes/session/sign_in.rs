//! Signing in: `POST /session` (email and password → the session cookie and
//! its CSRF token), and what every way of signing in answers with.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use storage::people::sessions::{Session, StartedSession};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::ApiJson;
use crate::middleware::session::set_cookie;
use crate::rate_limit::{Bucket, RateLimitHeaders};
use crate::routes::users::UserOut;
use crate::state::AppState;

/// Login attempts per email per minute, against password guessing.
pub const LOGIN_ATTEMPTS_PER_MINUTE: u32 = 10;
/// Longest password considered (argon2 of megabytes would be a cheap DoS).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// Body of `POST /session`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginIn {
    /// The login email.
    #[schema(min_length = 1)]
    pub email: String,
    /// The password.
    #[schema(min_length = 1)]
    pub password: String,
}

/// A session as its user sees it; the cookie secret is never in a body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionOut {
    /// The session's id.
    pub id: String,
    /// The user the session acts as (the target while impersonating).
    pub user: UserOut,
    /// The real user while impersonating, else null.
    pub impersonator_id: Option<String>,
    /// Send it as `X-CSRF-Token` with every request that changes something
    /// and with `GET /agency/changelog`.
    pub csrf_token: String,
    /// When the session started, RFC 3339.
    pub created_at: String,
    /// When it ends at the latest, RFC 3339 (it also ends after two idle hours).
    pub expires_at: String,
}

/// A per-email budget named `name`, stored under `prefix`; the email is
/// keyed-hashed so the limiter's keys do not list who tried to sign in.
pub fn email_bucket(prefix: &str, name: &str, email: &str, limit: u32) -> Bucket {
    let throttle = storage::secrets::hmac_sha256(
        b"listing-api/login-throttle",
        email.trim().to_lowercase().as_bytes(),
    );
    Bucket {
        key: format!("{prefix}:{}", hex::encode(&throttle[..12])),
        name: name.to_owned(),
        limit,
    }
}

/// The 201 of a sign-in: the cookie, no caching, the session with its CSRF token.
pub(super) fn signed_in(
    state: &AppState,
    started: StartedSession,
    limits: &RateLimitHeaders,
) -> Response {
    tracing::info!(
        session_id = %started.session.id,
        user_id = %started.session.user.id,
        "session started"
    );
    let cookie = set_cookie(&started.token);
    let mut response = (
        StatusCode::CREATED,
        [
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Json(session_out(state, started.session)),
    )
        .into_response();
    limits.apply(response.headers_mut());
    response
}

pub(super) fn session_out(state: &AppState, session: Session) -> SessionOut {
    SessionOut {
        id: session.id.to_string(),
        csrf_token: state.store().derived_keys().csrf_token(session.id.as_str()),
        impersonator_id: session.impersonator_id.map(|id| id.to_string()),
        created_at: session.created_at.to_rfc3339(),
        expires_at: session.expires_at.to_rfc3339(),
        user: session.user.into(),
    }
}

/// Signs in with an email and a password.
#[utoipa::path(
    post,
    path = "/session",
    tag = "sessions",
    operation_id = "create_session",
    request_body = LoginIn,
    responses(
        (status = 201, description = "Signed in; the session cookie is set (HttpOnly, Secure, SameSite=Strict)", body = SessionOut,
            headers(("Set-Cookie" = String, description = "__Host-ma_session=…"))),
        (status = 401, description = "auth.invalid_credentials: the email and password do not open an active account (also for an account that has no password yet: it sets one with the e-mailed link, or asks for a new link with POST /session/password-reset)", body = ErrorEnvelope),
        (status = 422, description = "validation.failed", body = ErrorEnvelope),
        (status = 429, description = "Too many attempts for this email", body = ErrorEnvelope),
    )
)]
pub(crate) async fn login(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<LoginIn>,
) -> Result<Response, ApiError> {
    if body.password.len() > MAX_PASSWORD_BYTES {
        return Err(ApiError::field(
            "password",
            format!("must be at most {MAX_PASSWORD_BYTES} bytes"),
        ));
    }
    let bucket = email_bucket(
        "login",
        "login_attempts",
        &body.email,
        LOGIN_ATTEMPTS_PER_MINUTE,
    );
    let rate_limit_headers = state.rate_limiter().check(&[bucket]).await?;
    let started = state
        .store()
        .sessions()
        .login(&body.email, &body.password)
        .await?
        .ok_or(ApiError::InvalidCredentials)?;
    Ok(signed_in(&state, started, &rate_limit_headers))
}
