//! Local development: `GET /webhooks/listen` streams the caller's events
//! (its agency, its key's environment) as server-sent events, for `api
//! listen` to forward to a local receiver; `POST /webhooks/trigger` emits an
//! event type's catalog sample into the sandbox, for `api trigger`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream;
use platform::webhooks::client::EventFields;
use serde::{Deserialize, Serialize};
use storage::rules::events::EventType;
use storage::{Environment, Tenant};
use utoipa::{IntoParams, ToSchema};

use super::endpoint_rules;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, ApiQuery};
use crate::principal::Credential;
use crate::state::AppState;

/// How often the stream looks for new events when it has none to send.
const POLL: Duration = Duration::from_millis(200);
/// Events read at a time.
const BATCH: u32 = 100;
/// A comment line this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Query of `GET /webhooks/listen`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListenQuery {
    /// Comma-separated event types (canonical names or aliases); omitted:
    /// every type.
    events: Option<String>,
}

/// Streams the caller's events as they are committed, from now on: each is
/// an SSE event named by its type, with its event id as `id` and, as
/// `data`, the event as deliveries carry it (without the per-attempt nonce).
/// The stream does not end by itself; a keep-alive comment comes every 15 s.
#[utoipa::path(
    get,
    path = "/webhooks/listen",
    tag = "webhooks",
    operation_id = "listen_webhook_events",
    params(ListenQuery),
    responses(
        (status = 200, description = "text/event-stream of the caller's events (event: type, id: event id, data: {event_id, event_type, api_version, timestamp, is_sandbox, data})", content_type = "text/event-stream", body = String),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: an unknown event type in `events`", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn listen(
    State(state): State<AppState>,
    principal: Credential,
    ApiQuery(query): ApiQuery<ListenQuery>,
) -> Result<Response, ApiError> {
    let tenant = principal.tenant();
    let types = match query.events.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(list) => endpoint_rules::event_types(Some(
            list.split(',').map(|t| t.trim().to_owned()).collect(),
        ))?,
    };
    let after = state.store().outbox().latest_seq(&tenant).await?;
    let reading = Reading {
        state,
        tenant,
        types,
        after,
        ready: VecDeque::new(),
    };
    let events = stream::unfold(reading, |mut reading| async move {
        let event = reading.next().await?;
        Some((Ok::<_, Infallible>(event), reading))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// Where a listening stream stands.
struct Reading {
    state: AppState,
    tenant: Tenant,
    types: Option<Vec<String>>,
    after: i64,
    ready: VecDeque<Event>,
}

impl Reading {
    /// The next event to send; `None` ends the stream (the store failed:
    /// the client reconnects).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            let batch = match self
                .state
                .store()
                .outbox()
                .for_tenant(&self.tenant, self.after, BATCH)
                .await
            {
                Ok(batch) => batch,
                Err(err) => {
                    tracing::warn!(%err, "listen stream: reading events failed; closing");
                    return None;
                }
            };
            if batch.is_empty() {
                tokio::time::sleep(POLL).await;
                continue;
            }
            for stored in batch {
                self.after = stored.seq;
                let wanted = self
                    .types
                    .as_ref()
                    .is_none_or(|types| types.contains(&stored.event_type));
                if !wanted {
                    continue;
                }
                let fields = EventFields {
                    event_id: stored.event_id.to_string(),
                    event_type: stored.event_type.clone(),
                    api_version: stored.api_version.clone(),
                    timestamp: stored.occurred_at.as_unix_seconds(),
                    is_sandbox: stored.environment == Environment::Sandbox,
                    data: stored.data,
                };
                let data = serde_json::to_string(&fields).unwrap_or_default();
                self.ready.push_back(
                    Event::default()
                        .event(fields.event_type)
                        .id(fields.event_id)
                        .data(data),
                );
            }
        }
    }
}

/// Body of `POST /webhooks/trigger`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerIn {
    /// The event type (canonical name or alias) whose catalog sample to emit.
    event_type: String,
}

/// The event a trigger emitted.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TriggerOut {
    /// Its id (`X-Event-Id` of its deliveries).
    pub event_id: String,
    /// Its canonical type.
    pub event_type: String,
    /// Its data: the catalog's sample.
    pub data: serde_json::Value,
}

/// Emits an event type's catalog sample into the sandbox, as if it had
/// happened: it reaches the agency's sandbox endpoints that subscribe, and
/// `api listen`. Sandbox keys only.
#[utoipa::path(
    post,
    path = "/webhooks/trigger",
    tag = "webhooks",
    operation_id = "trigger_webhook_event",
    request_body = TriggerIn,
    responses(
        (status = 201, description = "The event emitted", body = TriggerOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: a live key, or a type that is unknown, planned or test-only", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn trigger(
    State(state): State<AppState>,
    principal: Credential,
    ApiJson(body): ApiJson<TriggerIn>,
) -> Result<(StatusCode, Json<TriggerOut>), ApiError> {
    let tenant = principal.tenant();
    if tenant.environment != Environment::Sandbox {
        return Err(ApiError::field(
            "event_type",
            "triggers emit into the sandbox only: use a sandbox key",
        ));
    }
    let canonical = endpoint_rules::event_types(Some(vec![body.event_type]))?
        .and_then(|types| types.into_iter().next())
        .unwrap_or_default();
    let event_type = EventType::ALL
        .iter()
        .copied()
        .find(|t| t.as_str() == canonical)
        .ok_or_else(|| ApiError::field("event_type", "is not an event type this service emits"))?;
    let data = event_type.catalog_entry().sample();
    let event_id = state
        .store()
        .outbox()
        .emit(&tenant, event_type, data.clone())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(TriggerOut {
            event_id: event_id.to_string(),
            event_type: event_type.as_str().to_owned(),
            data,
        }),
    ))
}
