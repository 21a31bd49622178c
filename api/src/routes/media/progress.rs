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
//!
//! Every event has an `id`: a state's number within its operation (the
//! snapshot takes the number of the state it shows). A reconnect naming the
//! last id it saw (`Last-Event-ID`, which `EventSource` sends, or the
//! `last_event_id` parameter) gets the recorded states after it, then the live
//! ones, with no snapshot. The terminal event is always a stream's last, so a
//! reconnect naming it knows everything: it is answered 204, which tells
//! `EventSource` to stop reconnecting. Each stream opens with a `retry` hint
//! of two seconds.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt, stream};
use serde::Deserialize;
use storage::Tenant;
use storage::ids::OperationId;
use utoipa::IntoParams;

use platform::progress::{MediaStep, ProgressEvent, ProgressState};

use crate::error::{ApiError, ErrorEnvelope, FieldErrors, Resource};
use crate::extract::{ApiPath, ApiQuery};
use crate::middleware::progress_token;
use crate::principal::Credential;
use crate::state::AppState;

/// Comment lines keep idle connections open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The reconnection delay a stream asks browsers for.
const RECONNECT: Duration = Duration::from_secs(2);
/// How long a stream waits for a state before it reads the stored status.
const STATUS_CHECK: Duration = Duration::from_secs(5);

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
    /// Resume after this event id, for clients that cannot send
    /// `Last-Event-ID`; the header wins when both are given.
    #[param(pattern = "^[0-9]*$", max_length = 19)]
    pub last_event_id: Option<String>,
}

/// The events of a stream.
type EventStream = std::pin::Pin<Box<dyn Stream<Item = Event> + Send>>;

fn event_of(state: &ProgressState) -> Event {
    Event::default()
        .event(state.event.name())
        .id(state.seq.to_string())
        .data(serde_json::to_string(state).unwrap_or_default())
}

/// The `completed` state of an operation whose stored status says it
/// finished although no terminal state was recorded; `None` while it runs
/// (or when it cannot be read). It is numbered one above the operation's
/// highest recorded state, so a reconnect naming it is told the stream ended.
async fn finished_state(
    state: &AppState,
    tenant: &Tenant,
    id: &OperationId,
) -> Option<ProgressState> {
    let media = state.store().media();
    let operation = media.operation(tenant, id).await.ok()?;
    if operation.status == "processing" {
        return None;
    }
    let ending = state
        .store()
        .progress()
        .ending(tenant, id.as_str())
        .await
        .ok()?;
    let seq = ending.terminal_seq.unwrap_or(ending.highest_seq + 1);
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
    messages: futures::stream::BoxStream<'static, platform::progress::ProgressMessage>,
    state: AppState,
    tenant: Tenant,
    id: OperationId,
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
                return Some((event_of(&message.state), live));
            }
            () = tokio::time::sleep(STATUS_CHECK) => {
                let end = finished_state(&live.state, &live.tenant, &live.id).await;
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
    params(
        ("operation_id" = String, Path, description = "The operation (op_…)"),
        ("Last-Event-ID" = Option<String>, Header, description = "The `id` of the last event received: the stream resumes after it, without a snapshot. Browsers send it when an `EventSource` reconnects."),
        ProgressQuery,
    ),
    responses(
        (status = 200, description = "text/event-stream: a `retry` hint, then snapshot, queued, processing, variant_done, file_done, failed, completed, each with an `id`; it closes after the terminal event", content_type = "text/event-stream", body = String),
        (status = 204, description = "The operation finished and `Last-Event-ID` names its terminal event: nothing more will come, and an `EventSource` stops reconnecting"),
        (status = 401, description = "No key and no token", body = ErrorEnvelope),
        (status = 404, description = "operation_not_found: unknown, another agency's, or a bad or expired token", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: `Last-Event-ID` is not an event id of this stream", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn progress(
    State(state): State<AppState>,
    credential: Credential,
    headers: HeaderMap,
    ApiPath(operation_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ProgressQuery>,
) -> Result<Response, ApiError> {
    let tenant = credential.tenant();
    let id = OperationId::parse(&operation_id).ok_or(ApiError::NotFound(Resource::Operation))?;
    state.store().media().operation(&tenant, &id).await?;
    let resume = last_event_id(&headers, query.last_event_id.as_deref())?;
    let events = match resume {
        None => from_the_start(&state, &tenant, id).await?,
        Some(after) => match resumed(&state, &tenant, id, after).await? {
            Some(events) => events,
            None => return Ok(StatusCode::NO_CONTENT.into_response()),
        },
    };
    let hint = stream::once(async { Event::default().retry(RECONNECT) });
    let events = hint.chain(events).map(Ok::<_, Infallible>);
    let response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    Ok(response)
}

/// The event id to resume after: the `Last-Event-ID` header, else the
/// `last_event_id` parameter; `None` for a stream from the start.
fn last_event_id(headers: &HeaderMap, parameter: Option<&str>) -> Result<Option<u64>, ApiError> {
    let invalid = |field: &str| {
        let mut errors = FieldErrors::new();
        errors.insert(
            field.into(),
            "must be the id of an event of this stream (a whole number)".into(),
        );
        ApiError::Validation(errors)
    };
    let parse = |field: &str, value: &str| -> Result<Option<u64>, ApiError> {
        // EventSource sends an empty header when no event had an id yet.
        if value.is_empty() {
            return Ok(None);
        }
        // At most 19 digits: every such number is an event id's range.
        if value.len() > 19 || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(field));
        }
        value.parse::<u64>().map(Some).map_err(|_| invalid(field))
    };
    // Both are checked; the header (what a reconnecting EventSource sends) wins.
    let header = match headers.get("last-event-id") {
        Some(value) => {
            let value = value.to_str().map_err(|_| invalid("Last-Event-ID"))?;
            parse("Last-Event-ID", value.trim())?
        }
        None => None,
    };
    let query = match parameter {
        Some(value) => parse("last_event_id", value)?,
        None => None,
    };
    Ok(header.or(query))
}

/// A stream from the start: a snapshot numbered as the latest state, then the
/// states after it, or the end when the operation has finished.
async fn from_the_start(
    state: &AppState,
    tenant: &Tenant,
    id: OperationId,
) -> Result<EventStream, ApiError> {
    let media = state.store().media();
    // Subscribed before the stored status is read, so an end is either seen
    // there or arrives live.
    let subscription = state.platform().progress.subscribe(tenant, &id).await?;
    let after = subscription.latest.as_ref().map_or(0, |latest| latest.seq);
    let snapshot = match subscription.latest.as_ref() {
        Some(latest) => latest
            .event
            .operation()
            .map(serde_json::to_string)
            .transpose()
            .map_err(ApiError::internal)?,
        None => Some(
            serde_json::to_string(&media.snapshot(tenant, &id).await?)
                .map_err(ApiError::internal)?,
        ),
    };
    let mut opening = vec![
        Event::default()
            .event("snapshot")
            .id(after.to_string())
            .data(snapshot.unwrap_or_else(|| "null".to_owned())),
    ];
    let end = match subscription
        .latest
        .filter(|latest| latest.event.is_terminal())
    {
        Some(latest) => Some(latest),
        None => finished_state(state, tenant, &id).await,
    };
    Ok(match end {
        Some(end) => {
            opening.push(event_of(&end));
            Box::pin(stream::iter(opening))
        }
        None => {
            Box::pin(stream::iter(opening).chain(live_part(state, tenant, id, subscription.live)))
        }
    })
}

/// A stream resumed after the event numbered `after`: the recorded states
/// above it, then the live ones. `None` when `after` is the operation's
/// terminal event: the stream has nothing more to say.
async fn resumed(
    state: &AppState,
    tenant: &Tenant,
    id: OperationId,
    after: u64,
) -> Result<Option<EventStream>, ApiError> {
    let resumption = state.platform().progress.resume(tenant, &id, after).await?;
    let recorded_end = resumption.ending.terminal_seq;
    let end = match recorded_end {
        Some(_) => None,
        None => finished_state(state, tenant, &id).await,
    };
    let end_seq = recorded_end.or(end.as_ref().map(|end| end.seq));
    if end_seq == Some(after) {
        return Ok(None);
    }
    let replay: Vec<Event> = resumption.replay.iter().map(event_of).collect();
    let ended = end_seq.is_some();
    let replayed = stream::iter(replay).chain(stream::iter(end.as_ref().map(event_of)));
    Ok(Some(if ended {
        Box::pin(replayed)
    } else {
        Box::pin(replayed.chain(live_part(state, tenant, id, resumption.live)))
    }))
}

/// The live part of a stream: published states until the terminal one, or
/// the end the stored status tells of.
fn live_part(
    state: &AppState,
    tenant: &Tenant,
    id: OperationId,
    messages: futures::stream::BoxStream<'static, platform::progress::ProgressMessage>,
) -> EventStream {
    Box::pin(stream::unfold(
        Live {
            messages,
            state: state.clone(),
            tenant: tenant.clone(),
            id,
            done: false,
        },
        next_live,
    ))
}
