//! The ops credential: HTTP basic auth with the configured operator account,
//! or the API key of a platform identity (`super_admin`, `admin`). Anything
//! else is 401 with a basic-auth challenge, so a browser asks for it. Failed
//! sign-ins are throttled (`sign_in_throttle`): after a few, the listener
//! answers 429 with `Retry-After` until the budget refills.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use storage::api_keys::key_shape;
use subtle::ConstantTimeEq;

use super::sign_in_throttle::{Failure, SignInThrottle};
use crate::error::ApiError;
use crate::middleware::transport::ClientConnection;
use crate::state::AppState;

/// The configured operator account, if any; the password is kept hashed.
#[derive(Clone)]
pub struct OpsAuth {
    basic: Option<(String, [u8; 32])>,
}

impl OpsAuth {
    /// From `--ops-basic-auth`.
    pub fn new(basic: Option<(String, String)>) -> Self {
        Self {
            basic: basic.map(|(user, password)| (user, Sha256::digest(password.as_bytes()).into())),
        }
    }

    fn basic_matches(&self, user: &str, password: &str) -> bool {
        let Some((expected_user, expected_hash)) = &self.basic else {
            return false;
        };
        let hash: [u8; 32] = Sha256::digest(password.as_bytes()).into();
        let user_ok =
            Sha256::digest(user.as_bytes()).ct_eq(&Sha256::digest(expected_user.as_bytes()));
        bool::from(user_ok & hash.ct_eq(expected_hash))
    }
}

/// The guard's state.
#[derive(Clone)]
pub(super) struct Guard {
    pub(super) app: AppState,
    pub(super) auth: OpsAuth,
    pub(super) throttle: std::sync::Arc<SignInThrottle>,
}

fn presented_basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn presented_key(headers: &HeaderMap) -> Option<String> {
    let from_header = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    let from_bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token);
    from_header
        .or(from_bearer)
        .map(|k| k.trim().to_owned())
        .filter(|k| key_shape(k).is_some())
}

/// The operator a platform administrator's key stands for, if it is one.
async fn platform_key_actor(app: &AppState, key: &str) -> Option<OpsActor> {
    let store = app.store();
    let hash = store.derived_keys().hash_api_key(key);
    let Ok(Some(credential)) = store.api_keys().find_by_hash(&hash).await else {
        return None;
    };
    let platform = credential.key.check_usable(store.clock().now()).is_ok()
        && credential
            .creator_role
            .is_some_and(|role| role.is_platform());
    platform.then(|| OpsActor(format!("key {}", credential.key.id)))
}

/// Who an ops request acts for, as the audit log records it: the operator
/// account (`ops:<user>`) or a platform administrator's key (`key <id>`).
#[derive(Clone, Debug)]
pub struct OpsActor(pub String);

fn challenge() -> Response {
    let mut response = ApiError::MissingKey(
        "The ops listener needs the operator account or a platform administrator's API key.",
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"listing-api ops\", charset=\"UTF-8\""),
    );
    response
}

/// Middleware: lets operators through, and slows down whoever keeps failing.
pub(super) async fn require(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    // A browser resends remembered basic credentials with a form posted from
    // any page, so a form elsewhere could otherwise pause a queue.
    if crate::cross_site::is_cross_site(request.method(), request.uri(), headers, &[]) {
        return ApiError::Forbidden(
            "Ops actions are accepted only from the ops pages' own origin.".into(),
        )
        .into_response();
    }
    let basic = presented_basic(headers);
    let presented_anything = basic.is_some()
        || headers.contains_key(header::AUTHORIZATION)
        || headers.contains_key("x-api-key");
    if !presented_anything {
        // A browser's first request carries nothing: the challenge asks for
        // the credentials, and no failure is counted.
        return challenge();
    }
    let address = request
        .extensions()
        .get::<ClientConnection>()
        .and_then(|connection| connection.address);
    let limiter = guard.app.rate_limiter();
    let user = basic.as_ref().map(|(user, _)| user.as_str());
    let attempt = match guard.throttle.begin(limiter, address, user).await {
        Ok(attempt) => attempt,
        Err(wait) => return throttled(address, wait),
    };
    let actor = match basic {
        Some((user, password)) => guard
            .auth
            .basic_matches(&user, &password)
            .then(|| OpsActor(format!("ops:{user}"))),
        None => match presented_key(headers) {
            Some(key) => platform_key_actor(&guard.app, &key).await,
            None => None,
        },
    };
    match actor {
        Some(actor) => {
            guard.throttle.succeeded(limiter, attempt).await;
            let mut request = request;
            request.extensions_mut().insert(actor);
            next.run(request).await
        }
        None => match guard.throttle.failed(limiter, attempt).await {
            Failure::Challenge => challenge(),
            Failure::Wait(wait) => throttled(address, wait),
        },
    }
}

/// The 429 of a throttled sign-in.
fn throttled(address: Option<IpAddr>, wait: u64) -> Response {
    tracing::warn!(client = ?address, wait_seconds = wait, "ops sign-in throttled after repeated failures");
    ApiError::RateLimited {
        retry_after_seconds: wait,
        headers: HeaderMap::new(),
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_configured_account_passes() {
        let auth = OpsAuth::new(Some(("ops".into(), "correct-horse-battery".into())));
        assert!(auth.basic_matches("ops", "correct-horse-battery"));
        assert!(!auth.basic_matches("ops", "wrong"));
        assert!(!auth.basic_matches("root", "correct-horse-battery"));
        assert!(!OpsAuth::new(None).basic_matches("ops", "correct-horse-battery"));
    }

    #[test]
    fn basic_credentials_are_read_from_the_header() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic b3BzOnNlY3JldA=="),
        );
        assert_eq!(
            presented_basic(&headers),
            Some(("ops".into(), "secret".into()))
        );
    }
}
