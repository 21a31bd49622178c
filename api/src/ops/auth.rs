//! The ops credential: HTTP basic auth with the configured operator account,
//! or the API key of a platform identity (`super_admin`, `admin`). Anything
//! else is 401 with a basic-auth challenge, so a browser asks for it.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use storage::api_keys::key_shape;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
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

/// Whether a request that changes something comes from another site's page.
/// A browser resends remembered basic credentials with any request to the
/// listener, so a form elsewhere could otherwise pause a queue or discard a
/// job; browsers name the initiating site in `Sec-Fetch-Site` and `Origin`.
fn cross_site(method: &Method, headers: &HeaderMap) -> bool {
    if method.is_safe() {
        return false;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site") {
        return !matches!(site, "same-origin" | "none");
    }
    match (header("origin"), header(header::HOST.as_str())) {
        (Some(origin), Some(host)) => {
            let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
            !origin_host.eq_ignore_ascii_case(host)
        }
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Middleware: lets operators through.
pub(super) async fn require(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if cross_site(request.method(), headers) {
        return ApiError::Forbidden(
            "Ops actions are accepted only from the ops pages' own origin.".into(),
        )
        .into_response();
    }
    let actor = match presented_basic(headers) {
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
            let mut request = request;
            request.extensions_mut().insert(actor);
            next.run(request).await
        }
        None => challenge(),
    }
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

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn actions_from_another_site_are_refused() {
        let post = Method::POST;
        assert!(!cross_site(
            &post,
            &headers(&[("sec-fetch-site", "same-origin")])
        ));
        assert!(!cross_site(&post, &headers(&[("sec-fetch-site", "none")])));
        assert!(cross_site(
            &post,
            &headers(&[("sec-fetch-site", "cross-site")])
        ));
        assert!(cross_site(
            &post,
            &headers(&[("sec-fetch-site", "same-site")])
        ));
        let same = headers(&[
            ("origin", "https://ops.example:8081"),
            ("host", "ops.example:8081"),
        ]);
        assert!(!cross_site(&post, &same));
        let other = headers(&[
            ("origin", "https://evil.example"),
            ("host", "ops.example:8081"),
        ]);
        assert!(cross_site(&post, &other));
        // Scripts and curl send neither header; reads are never refused.
        assert!(!cross_site(&post, &HeaderMap::new()));
        assert!(!cross_site(&Method::GET, &other));
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
