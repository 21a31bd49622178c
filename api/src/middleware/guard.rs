//! The one per-route guard. The route table says which credentials a route
//! accepts ([`Access`]); the guard runs, in the specification's order:
//! authenticate the credential (tenancy and scope come with it) → spend the
//! rate-limit buckets → attach the [`Credential`] → pace a key's write by
//! its agency's webhook backlog ([`crate::pacing`]) → idempotency → handler,
//! and every response of the route carries the rate-limit headers.
//!
//! | access | credential | buckets | idempotency |
//! |---|---|---|---|
//! | `Key` | API key (`auth`) | agency and key budgets | yes |
//! | `Session` | session cookie, CSRF per route (`session`) | the user's | no |
//! | `KeyOrSession` | a key, else the cookie and its CSRF token | the key's, else the agency's uploads and the user's | yes |
//! | `KeyOrAdministratorSession` | a key, else an agency administrator's cookie (CSRF on changes) | the key's, else the user's | yes |
//! | `KeyOrProgressToken` | the `token` of a progress URL, else a key | none for a token | – (GET) |
//! | `Open` | none: no guard, only the documented query parameters (`guard_method`) | none | no |

use axum::RequestExt;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use storage::Environment;
use storage::api_keys::Scope;
use utoipa_axum::router::UtoipaMethodRouter;

use super::session::{authenticate_session, csrf_matches, session_cookie};
use super::{auth, idempotency, progress_token};
use crate::endpoints::{Endpoint, SessionEndpoint};
use crate::error::{ApiError, Resource};
use crate::principal::{Credential, Principal, SessionPrincipal};
use crate::rate_limit::{
    Bucket, RateLimitHeaders, buckets_for, session_buckets, session_upload_buckets,
};
use crate::state::AppState;

/// A request the test console runs as this stored key (never its
/// plaintext, which the service does not keep).
#[derive(Clone, Debug)]
pub struct ConsoleKey(pub storage::api_keys::Credential);

/// Which credentials a route accepts, and the policy each is held to.
#[derive(Clone, Copy, Debug)]
pub enum Access {
    /// An API key holding the endpoint's scope.
    Key(&'static Endpoint),
    /// A session of the developer settings.
    Session(&'static SessionEndpoint),
    /// An API key, or a session with its CSRF token (the specification's
    /// dual authentication of uploads).
    KeyOrSession(&'static Endpoint),
    /// An API key, or the session of an agency administrator with its CSRF
    /// token on every change: the routes the portal's administrator pages
    /// call (webhooks, delivery profiles, focal points, archives).
    KeyOrAdministratorSession(&'static Endpoint),
    /// As `KeyOrSession`, for the resumable uploads (tus): their clients
    /// send no `X-Idempotency-Key`, so it is optional; a creation that
    /// sends one is replayed by it, and bytes are made safe to resend by
    /// their offset (`idempotency::run_resumable`).
    Resumable(&'static Endpoint),
    /// The signed token of a progress URL (a browser's `EventSource` sends
    /// no headers), or an API key.
    KeyOrProgressToken(&'static Endpoint),
    /// No credential (signing in, asking for a password link): no guard,
    /// only the documented query parameters are accepted.
    Open,
}

impl Access {
    /// Whether the route takes `X-Idempotency-Key` (required on POST and
    /// PATCH, honoured on PUT and DELETE): every route a key may call; the
    /// developer settings' session routes and open routes never took one.
    pub fn idempotent(self) -> bool {
        !matches!(self, Self::Session(_) | Self::Open | Self::Resumable(_))
    }

    /// The API endpoint's policy, for every access a key may open.
    fn endpoint(self) -> Option<&'static Endpoint> {
        match self {
            Self::Key(endpoint)
            | Self::KeyOrSession(endpoint)
            | Self::Resumable(endpoint)
            | Self::KeyOrAdministratorSession(endpoint)
            | Self::KeyOrProgressToken(endpoint) => Some(endpoint),
            Self::Session(_) | Self::Open => None,
        }
    }
}

impl From<&'static Endpoint> for Access {
    fn from(endpoint: &'static Endpoint) -> Self {
        Self::Key(endpoint)
    }
}

impl From<&'static SessionEndpoint> for Access {
    fn from(endpoint: &'static SessionEndpoint) -> Self {
        Self::Session(endpoint)
    }
}

/// The guard's state: the app and what the route accepts.
#[derive(Clone)]
pub struct Guard {
    state: AppState,
    access: Access,
}

/// Puts the guard of `access` in front of the handler(s) of a documented route.
pub fn guarded(
    state: &AppState,
    access: Access,
    (schemas, paths, method_router): UtoipaMethodRouter<AppState>,
) -> UtoipaMethodRouter<AppState> {
    (schemas, paths, guard_method(state, access, method_router))
}

/// Puts in front of a route's handler(s) what `access` asks for: the guard,
/// or for an open route only the check of its query parameters.
pub fn guard_method(
    state: &AppState,
    access: Access,
    method_router: MethodRouter<AppState>,
) -> MethodRouter<AppState> {
    if matches!(access, Access::Open) {
        return method_router.route_layer(from_fn_with_state(
            state.clone(),
            super::query_params::enforce,
        ));
    }
    let guard = Guard {
        state: state.clone(),
        access,
    };
    method_router.route_layer(from_fn_with_state(guard, self::guard))
}

/// Middleware: authenticate → rate limit → query parameters the document
/// declares → attach → pace a key's write → idempotency → handler.
///
/// Every request's future is this one, built and moved onto the heap by the
/// layer: what only some requests await (a session's lookups, a progress
/// token's, an idempotent write's reservation) is boxed where it is
/// awaited, so a key's read carries about 2 KB here, not the 19 KB the
/// largest of them would make it.
pub async fn guard(
    State(guard): State<Guard>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let state = &guard.state;
    let headers = request.headers();
    let query = request.uri().query();
    if matches!(
        guard.access,
        Access::KeyOrSession(_) | Access::Resumable(_) | Access::KeyOrAdministratorSession(_)
    ) {
        // The document declares the switch on these routes: a value outside
        // it is refused whatever the credential (a key ignores a valid one).
        session_environment(headers)?;
    }
    let console_key = request.extensions().get::<ConsoleKey>().cloned();
    let (credential, buckets) = match (guard.access, console_key) {
        // The test console runs a request as a key it names by id; only a
        // request built in this process carries the extension.
        (Access::Session(_), Some(_)) => return Err(ApiError::SessionRequired),
        // An open route is never guarded (`guard_method`); were one, it
        // would need no credential.
        (Access::Open, _) => return Ok(next.run(request).await),
        (
            Access::Key(endpoint)
            | Access::KeyOrSession(endpoint)
            | Access::Resumable(endpoint)
            | Access::KeyOrAdministratorSession(endpoint)
            | Access::KeyOrProgressToken(endpoint),
            Some(console_key),
        ) => {
            let principal = auth::console_principal(state, console_key.0, endpoint)?;
            let buckets = buckets_for(&principal, endpoint);
            (Credential::Key(principal), buckets)
        }
        (access, None) => match access {
            Access::Open => return Ok(next.run(request).await),
            Access::Key(endpoint) => key(state, headers, query, endpoint).await?,
            Access::Session(endpoint) => {
                let wants_csrf = endpoint.wants_csrf(request.method());
                Box::pin(session(state, headers, endpoint, wants_csrf)).await?
            }
            Access::KeyOrSession(endpoint) | Access::Resumable(endpoint) => {
                if has_key(headers) || session_cookie(headers).is_none() {
                    key(state, headers, query, endpoint).await?
                } else {
                    Box::pin(session_upload(state, headers, endpoint)).await?
                }
            }
            Access::KeyOrAdministratorSession(endpoint) => {
                if has_key(headers) || session_cookie(headers).is_none() {
                    key(state, headers, query, endpoint).await?
                } else {
                    Box::pin(administrator_session(
                        state,
                        headers,
                        endpoint,
                        request.method(),
                    ))
                    .await?
                }
            }
            Access::KeyOrProgressToken(endpoint) => match progress_token(query) {
                Some(token) => {
                    let tenant = Box::pin(token_holder(state, &mut request, &token)).await?;
                    (tenant, Vec::new())
                }
                // The token is a credential in the URL by design; the key is not.
                None => key(state, headers, None, endpoint).await?,
            },
        },
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_owned());
    let counted_route = format!(
        "{} {}",
        request.method(),
        route.as_deref().unwrap_or_else(|| request.uri().path())
    );
    let tenant = credential.tenant();
    let rate_limit_headers = if buckets.is_empty() {
        RateLimitHeaders::default()
    } else {
        match state.rate_limiter().check(&buckets).await {
            Ok(headers) => headers,
            Err(refused) => {
                state.usage().request(
                    state.store(),
                    &tenant,
                    counted_route,
                    429,
                    state.store().clock().now(),
                );
                return Err(refused);
            }
        }
    };
    if let Some(route) = route
        && let Err(err) =
            state
                .documented_queries()
                .check(request.method(), &route, request.uri().query())
    {
        let mut response = err.into_response();
        rate_limit_headers.apply(response.headers_mut());
        return Ok(response);
    }
    // A key's write waits while its agency's webhook backlog is at the
    // limit (`pacing`); the portal's session writes are a person's pace,
    // and managing endpoints is how an agency deals with its backlog.
    if matches!(credential, Credential::Key(_))
        && guard
            .access
            .endpoint()
            .is_some_and(|endpoint| endpoint.scope != Scope::WebhooksWrite)
        && !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        )
    {
        state.write_pacing().admit(&tenant).await;
    }
    let idempotent = guard.access.idempotent();
    match &credential {
        Credential::Key(principal) => {
            request.extensions_mut().insert(principal.clone());
        }
        Credential::Session(session) => {
            request.extensions_mut().insert(session.clone());
        }
        Credential::ProgressToken(_) => {}
    }
    request.extensions_mut().insert(credential);
    let mut response = if matches!(guard.access, Access::Resumable(_)) {
        idempotency::run_resumable(
            state.store(),
            &tenant.agency_id,
            tenant.environment,
            request,
            next,
        )
        .await
    } else if idempotent {
        idempotency::run(
            state.store(),
            &tenant.agency_id,
            tenant.environment,
            request,
            next,
        )
        .await
    } else {
        next.run(request).await
    };
    rate_limit_headers.apply(response.headers_mut());
    state.usage().request(
        state.store(),
        &tenant,
        counted_route,
        response.status().as_u16(),
        state.store().clock().now(),
    );
    Ok(response)
}

type Authenticated = (Credential, Vec<Bucket>);

/// Whether the request presents an API key (in either accepted header).
fn has_key(headers: &HeaderMap) -> bool {
    headers.contains_key("x-api-key") || headers.contains_key(header::AUTHORIZATION)
}

/// The header of the portal's Live/Sandbox switch on session requests.
pub const ENVIRONMENT_HEADER: &str = "x-environment";

/// The environment a session request chose: `X-Environment: live` (the
/// default when absent) or `sandbox`.
fn session_environment(headers: &HeaderMap) -> Result<Environment, ApiError> {
    let Some(value) = headers.get(ENVIRONMENT_HEADER) else {
        return Ok(Environment::Live);
    };
    match value.to_str().map(str::trim) {
        Ok("live") => Ok(Environment::Live),
        Ok("sandbox") => Ok(Environment::Sandbox),
        _ => Err(ApiError::InvalidHeader {
            name: "X-Environment",
            reason: "must be live or sandbox".to_owned(),
        }),
    }
}

/// The session principal of `session` in the request's environment.
fn session_principal(
    session: storage::people::sessions::Session,
    headers: &HeaderMap,
) -> Result<Credential, ApiError> {
    let environment = session_environment(headers)?;
    Ok(Credential::Session(SessionPrincipal {
        session,
        environment,
    }))
}

/// An agency administrator's session, with the CSRF token on a change.
async fn administrator_session(
    state: &AppState,
    headers: &HeaderMap,
    endpoint: &'static Endpoint,
    method: &Method,
) -> Result<Authenticated, ApiError> {
    let session = authenticate_session(state, headers).await?;
    let unsafe_method = !matches!(*method, Method::GET | Method::HEAD);
    if unsafe_method && !csrf_matches(state, &session, headers) {
        return Err(ApiError::CsrfFailed);
    }
    if !session.user.role.is_administrator() {
        return Err(ApiError::Forbidden(
            "Only an agency administrator does this in the developer settings: webhooks, delivery profiles, focal points and archives.".to_owned(),
        ));
    }
    let buckets = vec![Bucket {
        key: format!("session:{}:{}", session.user.id, endpoint.name),
        name: endpoint.name.to_owned(),
        limit: endpoint.key_limit,
    }];
    Ok((session_principal(session, headers)?, buckets))
}

/// An API key holding `endpoint`'s scope; a credential-like value in
/// `query` (the URL's) is refused.
async fn key(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    endpoint: &'static Endpoint,
) -> Result<Authenticated, ApiError> {
    let principal: Principal = auth::authenticate(state, headers, query, endpoint).await?;
    let buckets = buckets_for(&principal, endpoint);
    Ok((Credential::Key(principal), buckets))
}

/// A live session, with its CSRF token where the route wants it.
async fn session(
    state: &AppState,
    headers: &HeaderMap,
    endpoint: &'static SessionEndpoint,
    wants_csrf: bool,
) -> Result<Authenticated, ApiError> {
    let session = authenticate_session(state, headers).await?;
    if wants_csrf && !csrf_matches(state, &session, headers) {
        return Err(ApiError::CsrfFailed);
    }
    let buckets = session_buckets(&session.user.id, endpoint);
    Ok((session_principal(session, headers)?, buckets))
}

/// An upload through a session: the CSRF token always.
async fn session_upload(
    state: &AppState,
    headers: &HeaderMap,
    endpoint: &'static Endpoint,
) -> Result<Authenticated, ApiError> {
    let session = authenticate_session(state, headers).await?;
    if !csrf_matches(state, &session, headers) {
        return Err(ApiError::CsrfFailed);
    }
    let buckets = session_upload_buckets(&session.user.agency_id, &session.user.id, endpoint);
    Ok((session_principal(session, headers)?, buckets))
}

/// The `token` query parameter, if the request carries one.
fn progress_token(query: Option<&str>) -> Option<String> {
    let query = query?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
}

/// The tenant a progress token opens the path's operation to; a bad,
/// expired or foreign token finds no operation.
async fn token_holder(
    state: &AppState,
    request: &mut Request,
    token: &str,
) -> Result<Credential, ApiError> {
    let not_found = || ApiError::NotFound(Resource::Operation);
    let params = request
        .extract_parts::<RawPathParams>()
        .await
        .map_err(|_| not_found())?;
    let operation_id = params
        .iter()
        .find(|(name, _)| *name == "operation_id")
        .map(|(_, value)| value.to_owned())
        .ok_or_else(not_found)?;
    let tenant =
        progress_token::verify(state.store(), &operation_id, token).ok_or_else(not_found)?;
    Ok(Credential::ProgressToken(tenant))
}
