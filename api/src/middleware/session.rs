//! Session authentication for the in-product developer settings: the session
//! cookie (HttpOnly, Secure, SameSite=Strict, `__Host-` prefixed) names a live
//! session, and every request that changes something, plus the routes the
//! specification marks so, must also carry the session's `X-CSRF-Token`.
//! API keys do not open these routes.

use axum::http::{HeaderMap, HeaderValue, header};
use storage::people::sessions::{SESSION_LIFETIME_SECONDS, Session};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::state::AppState;

/// The session cookie. `__Host-` makes browsers insist on Secure, Path=/ and
/// no Domain, so no sibling host can set or shadow it.
pub const SESSION_COOKIE: &str = "__Host-ma_session";
/// The header carrying the session's CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The session cookie's value, from any `Cookie` header.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty())
}

/// The `Set-Cookie` value that hands a session to the browser.
pub fn set_cookie(token: &str) -> HeaderValue {
    let value = format!(
        "{SESSION_COOKIE}={token}; Path=/; Max-Age={SESSION_LIFETIME_SECONDS}; HttpOnly; Secure; SameSite=Strict"
    );
    HeaderValue::from_str(&value).unwrap_or_else(|_| clear_cookie())
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static(
        "__Host-ma_session=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict",
    )
}

/// Whether `headers` carry the CSRF token of `session`.
pub(super) fn csrf_matches(state: &AppState, session: &Session, headers: &HeaderMap) -> bool {
    let expected = state.store().derived_keys().csrf_token(session.id.as_str());
    headers
        .get(CSRF_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|presented| bool::from(presented.as_bytes().ct_eq(expected.as_bytes())))
}

/// The live session a request's cookie names.
pub async fn authenticate_session(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Session, ApiError> {
    let token = session_cookie(headers).ok_or(ApiError::SessionRequired)?;
    let session = state
        .store()
        .sessions()
        .authenticate(token)
        .await?
        .ok_or(ApiError::SessionRequired)?;
    let span = tracing::Span::current();
    span.record("agency_id", session.user.agency_id.as_str());
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("theme=dark"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; __Host-ma_session=abc; b=2"),
        );
        assert_eq!(session_cookie(&headers), Some("abc"));
        assert_eq!(session_cookie(&HeaderMap::new()), None);
        let mut empty = HeaderMap::new();
        empty.append(
            header::COOKIE,
            HeaderValue::from_static("__Host-ma_session="),
        );
        assert_eq!(session_cookie(&empty), None);
    }

    #[test]
    fn the_cookie_is_http_only_secure_and_strict() {
        let cookie = set_cookie("token");
        let text = cookie.to_str().unwrap_or_default();
        for part in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(text.contains(part), "{text}");
        }
        assert!(
            clear_cookie()
                .to_str()
                .unwrap_or_default()
                .contains("Max-Age=0")
        );
    }
}
