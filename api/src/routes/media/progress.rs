//! Progress of media operations as server-sent events, at
//! `/api/v1/progress/{operation_id}` and `/v1/progress/{operation_id}`.
//!
//! The route table's guard admits an API key (`media:write`) or, since a
//! browser's `EventSource` cannot send headers, the short-lived signed
//! `token` of the `progress_url` an upload answered with
//! (`middleware::progress_token`). The stream starts
//! with a `snapshot` of where the operation stands, then sends each state as
//! it is published (`queued`, `processing`, `variant_done`, `file_done`,
//! `failed`, `completed`) and closes after `completed`. It also closes when
//! the operation's stored status says it finished, should its `completed`
//! never be published (a worker that failed right after finishing it): that
//! status is read on subscribing and whenever the stream idles.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt, stream};
use serde::Deserialize;
use storage::Tenant;
use storage::ids::OperationId;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use jobs::progress::{MediaStep, ProgressEvent, ProgressState};

use crate::endpoints;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiPath, ApiQuery};
use crate::middleware::guard::{Access, guard_router, guarded};
use crate::middleware::progress_token;
use crate::principal::Credential;
use crate::state::AppState;

/// Comment lines keep idle connections open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a stream waits for a state before it reads the stored status.
const STATUS_CHECK: Duration = Duration::from_secs(5);

/// The documented route (under `/api/v1`).
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(guarded(state, ACCESS, routes!(progress)))
}

/// The same stream at `/v1/progress/{operation_id}`, where the specification puts it.
pub fn alias_router(state: &AppState) -> axum::Router<AppState> {
    let route = axum::Router::new().route("/v1/progress/{operation_id}", get(progress));
    guard_router(state, ACCESS, route)
}

/// A progress URL's token, or an API key with `media:write`.
const ACCESS: Access = Access::KeyOrProgressToken(&endpoints::READ_PROGRESS);

/// The progress URL of an operation, with a token valid for an hour.
pub fn progress_url(state: &AppState, tenant: &Tenant, operation_id: &OperationId) -> String {
    format!(
        "{}/v1/progress/{operation_id}?token={}",
        state.urls().base_url,
        progress_token::issue(state.store(), tenant, operation_id),
    )
}

/// Query of the progress stream.
// The guard reads `token`; the handler declares it for the OpenAPI document
// and so that any other parameter is refused.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ProgressQuery {
    /// The signed token of a `progress_url` (instead of an API key).
    pub token: Option<String>,
}

fn event_of(state: &ProgressState) -> Event {
    Event::default()
        .event(state.event.name())
        .id(state.seq.to_string())
        .data(serde_json::to_string(state).unwrap_or_default())
}

/// The `completed` state of an operation whose stored status says it
/// finished, numbered `seq`; `None` while it runs (or when it cannot be read).
async fn finished_state(
    state: &AppState,
    tenant: &Tenant,
    id: &OperationId,
    seq: u64,
) -> Option<ProgressState> {
    let media = state.store().media();
    let operation = media.operation(tenant, id).await.ok()?;
    if operation.status == "processing" {
        return None;
    }
    let operation = media.snapshot(tenant, id).await.ok()?;
    Some(ProgressState {
        event: ProgressEvent::Media {
            step: MediaStep::completed(),
            operation,
        },
        seq,
    })
}

/// What the live part of a stream carries between its events.
struct Live {
    messages: futures::stream::BoxStream<'static, jobs::progress::ProgressMessage>,
    state: AppState,
    tenant: Tenant,
    id: OperationId,
    /// The last `seq` sent, for a `completed` made from the stored status.
    last_seq: u64,
    done: bool,
}

/// The next event of the live part: the next published state, or, when none
/// comes for a while and the operation finished meanwhile, its end.
async fn next_live(mut live: Live) -> Option<(Event, Live)> {
    if live.done {
        return None;
    }
    loop {
        tokio::select! {
            message = live.messages.next() => {
                let message = message?;
                live.done = message.state.event.is_terminal();
                live.last_seq = live.last_seq.max(message.state.seq);
                return Some((event_of(&message.state), live));
            }
            () = tokio::time::sleep(STATUS_CHECK) => {
                let end = finished_state(&live.state, &live.tenant, &live.id, live.last_seq).await;
                if let Some(end) = end {
                    live.done = true;
                    return Some((event_of(&end), live));
                }
            }
        }
    }
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
    credential: Credential,
    ApiPath(operation_id): ApiPath<String>,
    ApiQuery(_query): ApiQuery<ProgressQuery>,
) -> Result<Response, ApiError> {
    let tenant = credential.tenant();
    let id = OperationId::parse(&operation_id).ok_or(ApiError::NotFound(Resource::Operation))?;
    let media = state.store().media();
    media.operation(&tenant, &id).await?;
    // Subscribed before the stored status is read, so an end is either seen
    // there or arrives live.
    let subscription = state.platform().progress.subscribe(&tenant, &id).await?;
    let after = subscription.latest.as_ref().map_or(0, |latest| latest.seq);
    let snapshot = match subscription.latest.as_ref() {
        Some(latest) => latest
            .event
            .operation()
            .map(serde_json::to_string)
            .transpose()
            .map_err(ApiError::internal)?,
        None => Some(
            serde_json::to_string(&media.snapshot(&tenant, &id).await?)
                .map_err(ApiError::internal)?,
        ),
    };
    let mut opening = vec![
        Event::default()
            .event("snapshot")
            .data(snapshot.unwrap_or_else(|| "null".to_owned())),
    ];
    let end = match subscription
        .latest
        .filter(|latest| latest.event.is_terminal())
    {
        Some(latest) => Some(latest),
        None => finished_state(&state, &tenant, &id, after).await,
    };
    let live: std::pin::Pin<Box<dyn Stream<Item = Event> + Send>> = match end {
        Some(end) => {
            opening.push(event_of(&end));
            Box::pin(stream::empty())
        }
        // Ends right after the final state, without waiting for another.
        None => Box::pin(stream::unfold(
            Live {
                messages: subscription.live,
                state: state.clone(),
                tenant: tenant.clone(),
                id,
                last_seq: after,
                done: false,
            },
            next_live,
        )),
    };
    let events = stream::iter(opening).chain(live).map(Ok::<_, Infallible>);
    let response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    Ok(response)
}
