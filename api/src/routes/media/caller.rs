//! Who uploads: an API key with `media:write`, or a session of the developer
//! settings (the specification's dual authentication). Keys go through the
//! ordinary guard (rate limits, idempotency); sessions need their CSRF token,
//! spend the agency's upload budget and a per-user one, and go through the
//! same idempotency (keys scoped to the session's agency, live environment).

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use storage::Tenant;
use storage::ids::UserId;
use utoipa_axum::router::UtoipaMethodRouter;

use crate::endpoints::{Endpoint, UPLOADS};
use crate::error::ApiError;
use crate::middleware::auth::{self, Guard, Principal};
use crate::middleware::idempotency;
use crate::middleware::session::{authenticate_session, csrf_matches, session_cookie};
use crate::rate_limit::Bucket;
use crate::state::AppState;

/// Uploads per user per minute through a session (the specification's other figure).
const SESSION_UPLOADS_PER_MINUTE: u32 = 50;

/// The uploader: the tenant and the acting user.
#[derive(Clone, Debug)]
pub struct MediaCaller {
    /// Whose media this is.
    pub tenant: Tenant,
    /// The user acting (the key's creator or the session's user).
    pub user: Option<UserId>,
}

impl<S: Send + Sync> FromRequestParts<S> for MediaCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        if let Some(principal) = parts.extensions.get::<Principal>() {
            return Ok(Self {
                tenant: principal.tenant(),
                user: principal.acting_user.clone(),
            });
        }
        parts
            .extensions
            .get::<MediaCaller>()
            .cloned()
            .ok_or_else(|| ApiError::internal("route is missing its media guard"))
    }
}

#[derive(Clone)]
struct MediaGuard {
    state: AppState,
    endpoint: &'static Endpoint,
}

/// A key (any key header present, or no session cookie) takes the ordinary
/// guard; otherwise the session cookie and its CSRF token.
async fn media_guard(
    State(guard): State<MediaGuard>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let headers = request.headers();
    let has_key = headers.contains_key("x-api-key") || headers.contains_key(header::AUTHORIZATION);
    if has_key || session_cookie(headers).is_none() {
        let key_guard = Guard::new(guard.state.clone(), guard.endpoint);
        return auth::guard(State(key_guard), request, next).await;
    }
    let session = authenticate_session(&guard.state, request.headers()).await?;
    if !csrf_matches(&guard.state, &session, request.headers()) {
        return Err(ApiError::CsrfFailed);
    }
    let agency = session.user.agency_id.clone();
    let buckets = [
        Bucket {
            key: format!("agency:{agency}:live:{}", UPLOADS.name),
            name: UPLOADS.name.to_owned(),
            limit: UPLOADS.limit,
        },
        Bucket {
            key: format!("session:{}:{}", session.user.id, guard.endpoint.name),
            name: guard.endpoint.name.to_owned(),
            limit: SESSION_UPLOADS_PER_MINUTE,
        },
    ];
    let rate_limit_headers = guard.state.rate_limiter().check(&buckets).await?;
    let environment = storage::Environment::Live;
    request.extensions_mut().insert(MediaCaller {
        tenant: Tenant::new(agency.clone(), environment),
        user: Some(session.user.id.clone()),
    });
    // The same idempotency as a key's request, in the session's agency.
    let mut response =
        idempotency::run_scoped(guard.state.store(), &agency, environment, request, next).await;
    rate_limit_headers.apply(response.headers_mut());
    Ok(response)
}

/// Puts the dual guard in front of the handler(s) of `routes`.
pub fn media_guarded(
    state: &AppState,
    endpoint: &'static Endpoint,
    (schemas, paths, method_router): UtoipaMethodRouter<AppState>,
) -> UtoipaMethodRouter<AppState> {
    let guard = MediaGuard {
        state: state.clone(),
        endpoint,
    };
    (
        schemas,
        paths,
        method_router.route_layer(from_fn_with_state(guard, media_guard)),
    )
}
