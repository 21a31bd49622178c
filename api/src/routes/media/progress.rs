//! Progress of media operations as server-sent events, at
//! `/api/v1/progress/{operation_id}` and `/v1/progress/{operation_id}`.
//!
//! A caller authenticates with an API key (`media:write`) or, since a
//! browser's `EventSource` cannot send headers, with the short-lived signed
//! `token` of the `progress_url` an upload answered with. The stream starts
//! with a `snapshot` of where the operation stands, then sends each state as
//! it is published (`queued`, `processing`, `variant_done`, `file_done`,
//! `failed`, `completed`) and closes after `completed`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt, stream};
use serde::Deserialize;
use serde_json::Value;
use storage::ids::{AgencyId, OperationId};
use storage::{Environment, Tenant};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::endpoints;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiPath, ApiQuery};
use crate::middleware::auth::authenticate;
use crate::rate_limit::buckets_for;
use crate::state::AppState;

/// How long a progress URL's token is accepted.
pub const TOKEN_LIFETIME_SECONDS: i64 = 3600;
/// Comment lines keep idle connections open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The documented route (under `/api/v1`).
pub fn router(_state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(progress))
}

/// The same stream at `/v1/progress/{operation_id}`, where the specification puts it.
pub fn alias_router() -> axum::Router<AppState> {
    axum::Router::new().route("/v1/progress/{operation_id}", get(progress))
}

fn token_message(tenant: &Tenant, operation_id: &str, expires: i64) -> String {
    format!(
        "progress|{operation_id}|{}|{}|{expires}",
        tenant.agency_id,
        tenant.environment.as_str()
    )
}

/// The progress URL of an operation, with a token valid for an hour.
pub fn progress_url(state: &AppState, tenant: &Tenant, operation_id: &OperationId) -> String {
    let expires = state.store().clock().now().as_unix_seconds() + TOKEN_LIFETIME_SECONDS;
    let signature = state.store().derived_keys().url_signature(&token_message(
        tenant,
        operation_id.as_str(),
        expires,
    ));
    format!(
        "{}/v1/progress/{operation_id}?token={}.{}.{expires}.{signature}",
        state.urls().base_url,
        tenant.agency_id,
        tenant.environment.as_str(),
    )
}

/// The tenant a token was issued to, if it is genuine, unexpired and for
/// this operation. Format: `<agency>.<environment>.<expires>.<signature>`.
fn tenant_of_token(state: &AppState, operation_id: &str, token: &str) -> Option<Tenant> {
    let mut parts = token.splitn(4, '.');
    let agency = AgencyId::parse(parts.next()?)?;
    let environment = match parts.next()? {
        "live" => Environment::Live,
        "sandbox" => Environment::Sandbox,
        _ => return None,
    };
    let expires: i64 = parts.next()?.parse().ok()?;
    let signature = parts.next()?;
    if expires < state.store().clock().now().as_unix_seconds() {
        return None;
    }
    let tenant = Tenant::new(agency, environment);
    state
        .store()
        .derived_keys()
        .verify_url_signature(&token_message(&tenant, operation_id, expires), signature)
        .then_some(tenant)
}

/// Query of the progress stream.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ProgressQuery {
    /// The signed token of a `progress_url` (instead of an API key).
    pub token: Option<String>,
}

/// The tenant of the request: from the token, else from the API key.
async fn caller_tenant(
    state: &AppState,
    headers: &HeaderMap,
    operation_id: &str,
    token: Option<&str>,
) -> Result<(Tenant, Option<crate::rate_limit::RateLimitHeaders>), ApiError> {
    if let Some(token) = token {
        let tenant = tenant_of_token(state, operation_id, token)
            .ok_or(ApiError::NotFound(Resource::Operation))?;
        return Ok((tenant, None));
    }
    let principal = authenticate(state, headers, None, &endpoints::READ_PROGRESS).await?;
    let limits = state
        .rate_limiter()
        .check(&buckets_for(&principal, &endpoints::READ_PROGRESS))
        .await?;
    Ok((principal.tenant(), Some(limits)))
}

fn event_of(state: &Value) -> Event {
    let name = state
        .get("event")
        .and_then(Value::as_str)
        .unwrap_or("state");
    let seq = state.get("seq").and_then(Value::as_u64).unwrap_or(0);
    Event::default()
        .event(name)
        .id(seq.to_string())
        .data(state.to_string())
}

fn is_final(state: &Value) -> bool {
    state.get("event").and_then(Value::as_str) == Some("completed")
}

/// Streams an operation's progress.
#[utoipa::path(
    get,
    path = "/progress/{operation_id}",
    tag = "media",
    operation_id = "read_progress",
    params(("operation_id" = String, Path, description = "The operation (op_…)"), ProgressQuery),
    responses(
        (status = 200, description = "text/event-stream: snapshot, then queued, processing, variant_done, file_done, failed, completed", content_type = "text/event-stream", body = String),
        (status = 401, description = "No key and no token", body = ErrorEnvelope),
        (status = 404, description = "operation_not_found: unknown, another agency's, or a bad or expired token", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn progress(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiPath(operation_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ProgressQuery>,
) -> Result<Response, ApiError> {
    let (tenant, limits) =
        caller_tenant(&state, &headers, &operation_id, query.token.as_deref()).await?;
    let id = OperationId::parse(&operation_id).ok_or(ApiError::NotFound(Resource::Operation))?;
    let media = state.store().media();
    media.operation(&tenant, &id).await?;
    let subscription = state
        .platform()
        .progress
        .subscribe(&tenant, id.as_str())
        .await?;
    let (snapshot, first) = match subscription.latest {
        Some((_, latest)) => (latest.get("operation").cloned(), Some(latest)),
        None => (Some(media.snapshot(&tenant, &id).await?), None),
    };
    let mut opening = vec![
        Event::default()
            .event("snapshot")
            .data(snapshot.unwrap_or(Value::Null).to_string()),
    ];
    let finished = first.as_ref().is_some_and(is_final);
    if let Some(latest) = first.filter(|_| finished) {
        opening.push(event_of(&latest));
    }
    let live: std::pin::Pin<Box<dyn Stream<Item = Event> + Send>> = if finished {
        Box::pin(stream::empty())
    } else {
        // Ends right after the final state, without waiting for another.
        Box::pin(stream::unfold(
            (subscription.live, false),
            |(mut live, done)| async move {
                if done {
                    return None;
                }
                let message = live.next().await?;
                let finished = is_final(&message.state);
                Some((event_of(&message.state), (live, finished)))
            },
        ))
    };
    let events = stream::iter(opening).chain(live).map(Ok::<_, Infallible>);
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    if let Some(limits) = limits {
        limits.apply(response.headers_mut());
    }
    Ok(response)
}
