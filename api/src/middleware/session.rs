//! Session authentication for the in-product developer settings: the session
//! cookie (HttpOnly, Secure, SameSite=Strict, `__Host-` prefixed) names a live
//! session, and every request that changes something, plus the routes the
//! specification marks so, must also carry the session's `X-CSRF-Token`.
//! API keys do not open these routes.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use storage::sessions::{SESSION_LIFETIME_SECONDS, Session};
use storage::users::User;
use storage::{Environment, Tenant};
use subtle::ConstantTimeEq;
use utoipa_axum::router::UtoipaMethodRouter;

use crate::error::ApiError;
use crate::rate_limit::Bucket;
use crate::state::AppState;

/// The session cookie. `__Host-` makes browsers insist on Secure, Path=/ and
/// no Domain, so no sibling host can set or shadow it.
pub const SESSION_COOKIE: &str = "__Host-ma_session";
/// The header carrying the session's CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// When a session route wants the CSRF token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Csrf {
    /// On every request, reads included (`GET /agency/changelog`).
    Always,
    /// On every method but GET and HEAD.
    UnsafeMethods,
}

/// One session route's policy.
#[derive(Debug)]
pub struct SessionEndpoint {
    /// Name of its per-user budget.
    pub name: &'static str,
    /// When it wants the CSRF token.
    pub csrf: Csrf,
    /// Requests per minute per user.
    pub user_limit: u32,
}

/// A request authenticated by a session.
#[derive(Clone, Debug)]
pub struct SessionPrincipal {
    /// The session, with the user it acts as.
    pub session: Session,
}

impl SessionPrincipal {
    /// The user the session acts as (the target while impersonating).
    pub fn user(&self) -> &User {
        &self.session.user
    }

    /// Sessions act on live data; the sandbox is reached with sandbox keys.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(self.session.user.agency_id.clone(), Environment::Live)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SessionPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<SessionPrincipal>()
            .cloned()
            .ok_or_else(|| ApiError::internal("route is missing its session guard"))
    }
}

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
pub(crate) fn csrf_matches(state: &AppState, session: &Session, headers: &HeaderMap) -> bool {
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

/// The per-route guard's state.
#[derive(Clone)]
pub struct SessionGuard {
    state: AppState,
    endpoint: &'static SessionEndpoint,
}

/// Middleware: session cookie → CSRF token (when the route wants it) → the
/// user's budget for the route → handler.
pub async fn session_guard(
    State(guard): State<SessionGuard>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let session = authenticate_session(&guard.state, request.headers()).await?;
    let wants_csrf = match guard.endpoint.csrf {
        Csrf::Always => true,
        Csrf::UnsafeMethods => !matches!(*request.method(), Method::GET | Method::HEAD),
    };
    if wants_csrf && !csrf_matches(&guard.state, &session, request.headers()) {
        return Err(ApiError::CsrfFailed);
    }
    let bucket = Bucket {
        key: format!("session:{}:{}", session.user.id, guard.endpoint.name),
        name: guard.endpoint.name.to_owned(),
        limit: guard.endpoint.user_limit,
    };
    let rate_limit_headers = guard.state.rate_limiter().check(&[bucket]).await?;
    request
        .extensions_mut()
        .insert(SessionPrincipal { session });
    let mut response = next.run(request).await;
    rate_limit_headers.apply(response.headers_mut());
    Ok(response)
}

/// Puts a session guard in front of the handler(s) of `routes`.
pub fn session_guarded(
    state: &AppState,
    endpoint: &'static SessionEndpoint,
    (schemas, paths, method_router): UtoipaMethodRouter<AppState>,
) -> UtoipaMethodRouter<AppState> {
    let guard = SessionGuard {
        state: state.clone(),
        endpoint,
    };
    (
        schemas,
        paths,
        method_router.route_layer(from_fn_with_state(guard, session_guard)),
    )
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
