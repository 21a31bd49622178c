//! API-key authentication, tenancy and scope: find the key in the two
//! accepted headers (never the URL, a cookie or the body), look it up by
//! keyed hash (cached, revocation-aware), check the endpoint's scope, and
//! answer the caller's [`Principal`], whose agency and environment every
//! repository call then uses. The guard (`guard.rs`) calls it.

use axum::http::{HeaderMap, header};
use storage::api_keys::key_shape;

use super::key_cache::{Cached, CachedKey};
use crate::endpoints::Endpoint;
use crate::error::ApiError;
use crate::principal::Principal;
use crate::state::AppState;

/// The header of variant A (preferred by the specification).
const API_KEY_HEADER: &str = "x-api-key";

/// Query parameter names that suggest a key was put in the URL.
const CREDENTIAL_PARAMS: [&str; 6] = [
    "api_key",
    "apikey",
    "key",
    "access_token",
    "token",
    "x-api-key",
];

/// Where a credential must never be: the URL. Returns an error when a query
/// parameter is named like a credential or holds something shaped like a key.
fn refuse_credentials_in_url(query: Option<&str>) -> Result<(), ApiError> {
    let Some(query) = query else { return Ok(()) };
    let leaked = form_urlencoded::parse(query.as_bytes()).any(|(name, value)| {
        CREDENTIAL_PARAMS.contains(&name.to_ascii_lowercase().as_str())
            || key_shape(&value).is_some()
    });
    if leaked {
        Err(ApiError::MissingKey(
            "API keys are accepted only in the X-API-Key or Authorization: Bearer header, never in the URL.",
        ))
    } else {
        Ok(())
    }
}

/// The key presented in the headers: `X-API-Key: <key>` or
/// `Authorization: Bearer <key>` (both allowed when they agree).
fn presented_key(headers: &HeaderMap) -> Result<&str, ApiError> {
    let single = |name: &str| -> Result<Option<&str>, ApiError> {
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (None, _) => Ok(None),
            (Some(value), None) => value
                .to_str()
                .map(|v| Some(v.trim()))
                .map_err(|_| ApiError::MissingKey("The API key header is not valid text.")),
            (Some(_), Some(_)) => Err(ApiError::MissingKey(
                "The API key header was sent more than once.",
            )),
        }
    };
    let from_api_key_header = single(API_KEY_HEADER)?;
    let from_bearer = match single(header::AUTHORIZATION.as_str())? {
        None => None,
        Some(value) => {
            let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
            if !scheme.eq_ignore_ascii_case("bearer") {
                return Err(ApiError::MissingKey(
                    "The Authorization header must use the Bearer scheme.",
                ));
            }
            Some(token.trim())
        }
    };
    let key = match (from_api_key_header, from_bearer) {
        (None, None) => {
            return Err(ApiError::MissingKey(
                "No API key was sent. Send it as X-API-Key: <key> or Authorization: Bearer <key>.",
            ));
        }
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::MissingKey(
                "X-API-Key and Authorization carry different keys; send one key.",
            ));
        }
        (Some(key), _) | (None, Some(key)) => key,
    };
    if key_shape(key).is_none() {
        return Err(ApiError::MissingKey("The API key is malformed."));
    }
    Ok(key)
}

/// Looks the key up (in the cache, else by its keyed hash) and checks the
/// endpoint's scope.
pub(super) async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    endpoint: &Endpoint,
) -> Result<Principal, ApiError> {
    refuse_credentials_in_url(query)?;
    let presented = presented_key(headers)?;
    let store = state.store();
    let now = store.clock().now();
    let hash = store.derived_keys().hash_api_key(presented);
    let cached = match state.key_cache().get(&hash, now) {
        Cached::Hit(cached) => cached,
        Cached::Miss(ticket) => {
            let credential = store
                .api_keys()
                .find_by_hash(&hash)
                .await?
                .ok_or(ApiError::InvalidKey)?;
            let cached = CachedKey::new(credential, now);
            state.key_cache().put(hash, cached.clone(), ticket);
            cached
        }
    };
    principal_of(state, &cached.credential, &cached.principal, endpoint)
}

/// The principal of a stored key the test console runs a request as: the
/// same checks as a presented key's.
pub(super) fn console_principal(
    state: &AppState,
    credential: storage::api_keys::Credential,
    endpoint: &Endpoint,
) -> Result<Principal, ApiError> {
    principal_of(state, &credential, &Principal::of(&credential), endpoint)
}

/// A found key's principal, if it is usable and holds the endpoint's scope.
fn principal_of(
    state: &AppState,
    credential: &storage::api_keys::Credential,
    principal: &Principal,
    endpoint: &Endpoint,
) -> Result<Principal, ApiError> {
    let store = state.store();
    let now = store.clock().now();
    let key = &credential.key;
    let span = tracing::Span::current();
    span.record("agency_id", key.agency_id.as_str());
    span.record("key_id", key.id.as_str());
    if let Err(why) = key.check_usable(now) {
        tracing::info!(?why, "refused an unusable API key");
        return Err(ApiError::InvalidKey);
    }
    state.usage().key_used(store, &key.id, now);
    if !key.has_scope(endpoint.scope) {
        return Err(ApiError::ScopeDenied(endpoint.scope));
    }
    Ok(principal.clone())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const SK: &str = "sk_live_abcdefghijklmnopqrstuvwxyz012345";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn code(result: Result<&str, ApiError>) -> &'static str {
        result.err().map(|e| e.code()).unwrap_or("ok")
    }

    #[test]
    fn both_headers_are_accepted() {
        assert_eq!(presented_key(&headers(&[("x-api-key", SK)])).ok(), Some(SK));
        let bearer = format!("Bearer {SK}");
        assert_eq!(
            presented_key(&headers(&[("authorization", &bearer)])).ok(),
            Some(SK)
        );
        let lower = format!("bearer {SK}");
        assert_eq!(
            presented_key(&headers(&[("authorization", &lower), ("x-api-key", SK)])).ok(),
            Some(SK)
        );
    }

    #[test]
    fn missing_malformed_and_conflicting_keys_are_missing_key() {
        assert_eq!(code(presented_key(&HeaderMap::new())), "auth.missing_key");
        assert_eq!(
            code(presented_key(&headers(&[("x-api-key", "nope")]))),
            "auth.missing_key"
        );
        let basic = format!("Basic {SK}");
        assert_eq!(
            code(presented_key(&headers(&[("authorization", &basic)]))),
            "auth.missing_key"
        );
        let other = "sk_live_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ";
        let bearer = format!("Bearer {other}");
        assert_eq!(
            code(presented_key(&headers(&[
                ("authorization", &bearer),
                ("x-api-key", SK)
            ]))),
            "auth.missing_key"
        );
        assert_eq!(
            code(presented_key(&headers(&[
                ("x-api-key", SK),
                ("x-api-key", SK)
            ]))),
            "auth.missing_key"
        );
    }

    #[test]
    fn keys_in_the_url_are_refused() {
        assert!(refuse_credentials_in_url(None).is_ok());
        assert!(refuse_credentials_in_url(Some("limit=5&role=agent")).is_ok());
        assert!(refuse_credentials_in_url(Some("api_key=whatever")).is_err());
        assert!(refuse_credentials_in_url(Some(&format!("x={SK}"))).is_err());
    }
}
