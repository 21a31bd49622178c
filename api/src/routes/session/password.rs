//! Password links: `POST /session/password-reset` e-mails a link to choose a
//! password (to an active account only, answering alike for any email), and
//! `POST /session/password` spends the link's token to set the password and
//! sign in. `POST /users` without a password e-mails the first link.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use storage::people::accounts::PasswordLink;
use utoipa::ToSchema;

use super::sign_in::{SessionOut, email_bucket, signed_in};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::ApiJson;
use crate::rate_limit::Bucket;
use crate::state::AppState;

/// Password-link requests per email per minute: each may send an e-mail.
const RESET_REQUESTS_PER_MINUTE: u32 = 3;
/// Attempts per password-link token per minute.
const LINK_ATTEMPTS_PER_MINUTE: u32 = 10;

/// Where password links point: the product's page that asks for the new
/// password, with the token in the fragment (never sent to a server, so it
/// stays out of access logs and `Referer` headers).
pub(crate) fn password_link_base(state: &AppState) -> String {
    format!("{}/set-password", state.urls().base_url)
}

/// Has the e-mail carrying a password link sent now. Without a mail relay
/// the job leaves it recorded; if the push fails, the delivery sweep pushes
/// it later.
pub(crate) async fn send_password_link(state: &AppState, link: &PasswordLink) {
    let job = platform::kinds::SendNotification {
        notification_id: link.notification_id.clone(),
    };
    if let Err(err) = state
        .platform()
        .queue
        .push(job, platform::PushOptions::default())
        .await
    {
        tracing::warn!(%err, notification_id = %link.notification_id, "could not push the password e-mail; the sweep will");
    }
    tracing::info!(user_id = %link.user_id, notification_id = %link.notification_id, "password link issued");
}

/// Body of `POST /session/password-reset`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordResetIn {
    /// The login email of the account.
    #[schema(
        max_length = 254,
        pattern = r"^[^@\s\x85]+@[^@\s\x85.][^@\s\x85]*\.[^@\s\x85]*[^@\s\x85.]$"
    )]
    pub email: String,
}

/// The answer to a password-link request, the same whoever asks.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PasswordResetOut {
    /// What happens next.
    pub message: String,
}

/// E-mails a link to choose a new password to the active account with this
/// email. The answer is the same, and as quick, whether or not there is one.
#[utoipa::path(
    post,
    path = "/session/password-reset",
    tag = "sessions",
    operation_id = "request_password_reset",
    request_body = PasswordResetIn,
    responses(
        (status = 202, description = "Accepted; if an active account has this email, a link that works once within an hour is e-mailed to it", body = PasswordResetOut),
        (status = 422, description = "validation.failed", body = ErrorEnvelope),
        (status = 429, description = "Too many requests for this email", body = ErrorEnvelope),
    )
)]
pub(crate) async fn request_password_reset(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<PasswordResetIn>,
) -> Result<Response, ApiError> {
    // Malformed is not an account question: refusing it says nothing of
    // whether an account exists.
    if storage::people::users::normalise_email(&body.email).is_none() {
        return Err(ApiError::field("email", "is not a valid email address"));
    }
    let bucket = email_bucket(
        "password_reset",
        "password_reset_requests",
        &body.email,
        RESET_REQUESTS_PER_MINUTE,
    );
    let rate_limit_headers = state.rate_limiter().check(&[bucket]).await?;
    let link_base = password_link_base(&state);
    let worker = state.clone();
    // The answer does not wait for the lookup, so its timing does not tell
    // whether the account exists either.
    tokio::spawn(async move {
        let accounts = worker.store().accounts();
        match accounts
            .request_password_reset(&body.email, &link_base)
            .await
        {
            Ok(Some(link)) => send_password_link(&worker, &link).await,
            Ok(None) => {}
            Err(err) => tracing::error!(%err, "could not issue a password link"),
        }
    });
    let mut response = (
        StatusCode::ACCEPTED,
        Json(PasswordResetOut {
            message: "If an active account has this email, a link to choose a new password is on its way. It works once, within an hour."
                .to_owned(),
        }),
    )
        .into_response();
    rate_limit_headers.apply(response.headers_mut());
    Ok(response)
}

/// Body of `POST /session/password`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPasswordIn {
    /// The token of the e-mailed link (after `#token=`).
    #[schema(min_length = 1)]
    pub token: String,
    /// At least 8 characters with upper case, lower case, a digit and a
    /// special character (the rules of `POST /users`).
    #[schema(
        max_length = 128,
        pattern = r"^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9])(?=.*[!-/:-@\[-`{-~]).{8,}$"
    )]
    pub new_password: String,
}

/// Sets the password with an e-mailed link's token and signs in, as
/// `POST /session` does. The link is spent (with any other of the user's),
/// and the user's other sessions end.
#[utoipa::path(
    post,
    path = "/session/password",
    tag = "sessions",
    operation_id = "set_password",
    request_body = NewPasswordIn,
    responses(
        (status = 201, description = "Password set and signed in; the session cookie is set (HttpOnly, Secure, SameSite=Strict)", body = SessionOut,
            headers(("Set-Cookie" = String, description = "__Host-ma_session=…"))),
        (status = 400, description = "auth.invalid_reset_token: the token is unknown, used or expired; or validation.invalid_value: the password breaks the rules (details.fields.new_password), the token is then still good", body = ErrorEnvelope),
        (status = 422, description = "validation.failed", body = ErrorEnvelope),
        (status = 429, description = "Too many attempts with this token", body = ErrorEnvelope),
    )
)]
pub(crate) async fn set_password(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewPasswordIn>,
) -> Result<Response, ApiError> {
    let throttle =
        storage::secrets::hmac_sha256(b"listing-api/password-link-throttle", body.token.as_bytes());
    let bucket = Bucket {
        key: format!("password_link:{}", hex::encode(&throttle[..12])),
        name: "password_link_attempts".to_owned(),
        limit: LINK_ATTEMPTS_PER_MINUTE,
    };
    let rate_limit_headers = state.rate_limiter().check(&[bucket]).await?;
    let started = match state
        .store()
        .accounts()
        .set_password_with_token(&body.token, &body.new_password)
        .await
    {
        Ok(Some(started)) => started,
        Ok(None) => return Err(ApiError::InvalidResetToken),
        Err(storage::StorageError::Invalid { reason, .. }) => {
            return Err(ApiError::InvalidValues(
                [("new_password".to_owned(), reason)].into(),
            ));
        }
        Err(other) => return Err(other.into()),
    };
    tracing::info!(user_id = %started.session.user.id, "password set with a link");
    Ok(signed_in(&state, started, &rate_limit_headers))
}
