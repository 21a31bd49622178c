//! Signing in to the portal (a form that works without script), and the
//! set-password page the e-mailed link opens.

use askama::Template;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{page, problem, query_value};
use crate::middleware::session::set_cookie;
use crate::routes::session::{LOGIN_ATTEMPTS_PER_MINUTE, MAX_PASSWORD_BYTES, email_bucket};
use crate::state::AppState;

/// The one message of a failed sign-in: it never says which part was wrong,
/// so it tells no one whether an account exists.
const WRONG: &str = "The email or password is not right. Check both and try again, or choose a new password with “Forgot your password?” below.";

#[derive(Template)]
#[template(path = "portal/sign_in.html")]
struct SignInPage {
    message: Option<String>,
    email: String,
    next: String,
}

#[derive(Template)]
#[template(path = "portal/set_password.html")]
struct SetPasswordPage;

#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: String,
}

/// Where to go after signing in: a portal path only (never another site).
fn destination(next: &str) -> String {
    let local = next.starts_with("/settings") && !next.starts_with("//") && !next.contains('\\');
    if local {
        next.to_owned()
    } else {
        "/settings/keys".to_owned()
    }
}

/// `GET /settings/sign-in`.
pub(crate) async fn sign_in_page(RawQuery(query): RawQuery) -> Response {
    let next = query_value(query.as_deref(), "next").unwrap_or_default();
    page(
        StatusCode::OK,
        &SignInPage {
            message: None,
            email: String::new(),
            next: destination(&next),
        },
    )
}

/// `POST /settings/sign-in`: the form's email and password open a session
/// (the same rules and per-email budget as `POST /api/v1/session`).
pub(crate) async fn sign_in(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Login CSRF: another site's form would sign the browser in to the
    // attacker's account, and whatever the victim then sets up is his.
    let urls = state.urls();
    let own_origins: Vec<&str> = std::iter::once(urls.base_url.as_str())
        .chain(urls.legacy_base_url.as_deref())
        .collect();
    if crate::cross_site::is_cross_site(&Method::POST, &uri, &headers, &own_origins) {
        return problem(
            StatusCode::FORBIDDEN,
            "Sign in here",
            "Another site tried to sign you in. Open the developer settings yourself and sign in there.",
        );
    }
    let form: SignInForm = serde_urlencoded::from_bytes(&body).unwrap_or(SignInForm {
        email: String::new(),
        password: String::new(),
        next: String::new(),
    });
    let again = |status: StatusCode, message: &str| {
        page(
            status,
            &SignInPage {
                message: Some(message.to_owned()),
                email: form.email.clone(),
                next: destination(&form.next),
            },
        )
    };
    if form.email.trim().is_empty() || form.password.is_empty() {
        return again(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Enter your email and your password.",
        );
    }
    if form.password.len() > MAX_PASSWORD_BYTES {
        return again(StatusCode::UNAUTHORIZED, WRONG);
    }
    let bucket = email_bucket(
        "login",
        "login_attempts",
        &form.email,
        LOGIN_ATTEMPTS_PER_MINUTE,
    );
    if let Err(refused) = state.rate_limiter().check(&[bucket]).await {
        let mut response = again(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many attempts for this email. Wait a minute, then try again.",
        );
        if let Some(retry) = refused.into_response().headers().get(header::RETRY_AFTER) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry.clone());
        }
        return response;
    }
    match state
        .store()
        .sessions()
        .login(&form.email, &form.password)
        .await
    {
        Ok(Some(started)) => {
            tracing::info!(
                session_id = %started.session.id,
                user_id = %started.session.user.id,
                "session started in the portal"
            );
            let mut response = Redirect::to(&destination(&form.next)).into_response();
            response
                .headers_mut()
                .insert(header::SET_COOKIE, set_cookie(&started.token));
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Ok(None) => again(StatusCode::UNAUTHORIZED, WRONG),
        Err(err) => {
            tracing::error!(%err, "sign-in failed");
            again(
                StatusCode::SERVICE_UNAVAILABLE,
                "Signing in is not possible just now. Try again in a few seconds.",
            )
        }
    }
}

/// `GET /set-password`: the page of the e-mailed link; its script reads the
/// token from the fragment (which browsers never send) and posts it to
/// `POST /api/v1/session/password`.
pub(crate) async fn set_password_page() -> Response {
    page(StatusCode::OK, &SetPasswordPage)
}
