//! `/settings/webhooks`: the environment's endpoints (create, edit,
//! disable/enable, rotate the secret, delete), each endpoint's delivery log
//! filterable by status and event type with replay and a test event, and
//! `/settings/events`: the event catalog with each type's schema and sample.

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use storage::ids::WebhookEndpointId;
use storage::rules::event_catalog::{self, CatalogEntry};
use storage::webhooks::{Attempt, Delivery, DeliveryStatus, WebhookEndpoint};

use super::{Chrome, PortalSession, page, problem, query_value, unavailable, when, when_or_dash};
use crate::state::AppState;

/// How many deliveries the log shows (newest).
const DELIVERIES_SHOWN: u32 = 100;

/// An event type a person can subscribe to.
pub(super) struct EventType {
    pub name: &'static str,
    pub description: &'static str,
    pub checked: bool,
}

fn subscribable(selected: Option<&[String]>) -> Vec<EventType> {
    event_catalog::entries()
        .iter()
        .filter(|entry| entry.emitted && !entry.test_only)
        .map(|entry| EventType {
            name: entry.event_type,
            description: entry.description,
            checked: selected.is_some_and(|types| types.iter().any(|t| t == entry.event_type)),
        })
        .collect()
}

pub(super) struct EndpointRow {
    pub id: String,
    pub name: String,
    pub url: String,
    pub events: String,
    pub environment: &'static str,
    pub status: &'static str,
    pub enabled: bool,
    pub failures: i32,
    pub disabled_reason: String,
    /// When the replaced secret stops signing, while the overlap runs.
    pub overlap_until: String,
    /// `spec` or `standard_webhooks`.
    pub signature_scheme: &'static str,
    /// Deliveries per hour; empty: no budget.
    pub hourly_budget: String,
    /// Seconds between released deliveries once a burst is spent.
    pub budget_spacing: String,
    /// Deliveries the budget holds back now.
    pub held_back: i64,
    /// When the next of them is released.
    pub next_release_at: String,
    /// `none` or `listing`.
    pub ordering: &'static str,
}

impl From<&WebhookEndpoint> for EndpointRow {
    fn from(endpoint: &WebhookEndpoint) -> Self {
        Self {
            id: endpoint.id.to_string(),
            name: endpoint.name.clone().unwrap_or_default(),
            url: endpoint.url.clone(),
            events: endpoint
                .event_types
                .as_ref()
                .map_or_else(|| "every type".to_owned(), |types| types.join(", ")),
            environment: endpoint.environment.as_str(),
            status: endpoint.status.as_str(),
            enabled: endpoint.status.as_str() == "enabled",
            failures: endpoint.consecutive_failures,
            disabled_reason: endpoint.disabled_reason.clone().unwrap_or_default(),
            overlap_until: endpoint
                .overlap_until(storage::Timestamp::from(chrono::Utc::now()))
                .map(|until| until.to_rfc3339())
                .unwrap_or_default(),
            signature_scheme: endpoint.signature_scheme.as_str(),
            hourly_budget: endpoint
                .hourly_budget
                .map(|budget| budget.to_string())
                .unwrap_or_default(),
            budget_spacing: endpoint
                .hourly_budget
                .map(|budget| format!("{:.1}", 3600.0 / f64::from(budget.max(1))))
                .unwrap_or_default(),
            held_back: endpoint.held_back.count,
            next_release_at: endpoint
                .held_back
                .next_release_at
                .map(|at| at.to_rfc3339())
                .unwrap_or_default(),
            ordering: endpoint.ordering.as_str(),
        }
    }
}

#[derive(Template)]
#[template(path = "portal/webhooks.html")]
struct EndpointsPage {
    chrome: Chrome,
    endpoints: Vec<EndpointRow>,
    event_types: Vec<EventType>,
}

/// `GET /settings/webhooks`.
pub(crate) async fn endpoints_page(
    State(state): State<AppState>,
    portal: PortalSession,
) -> Response {
    let chrome = portal.chrome(&state, "webhooks");
    let endpoints = if chrome.is_admin {
        match state
            .store()
            .webhooks()
            .list(&portal.tenant(), None, 200)
            .await
        {
            Ok(page) => page.items.iter().map(EndpointRow::from).collect(),
            Err(err) => return unavailable(&err),
        }
    } else {
        Vec::new()
    };
    page(
        StatusCode::OK,
        &EndpointsPage {
            chrome,
            endpoints,
            event_types: subscribable(None),
        },
    )
}

pub(super) struct AttemptRow {
    pub number: i32,
    pub started: String,
    pub outcome: String,
    pub status_code: String,
    pub duration_ms: i32,
    pub excerpt: String,
}

impl From<&Attempt> for AttemptRow {
    fn from(attempt: &Attempt) -> Self {
        Self {
            number: attempt.attempt,
            started: when(attempt.started_at),
            outcome: attempt.outcome.clone(),
            status_code: attempt
                .status_code
                .map_or_else(|| "–".to_owned(), |code| code.to_string()),
            duration_ms: attempt.duration_ms,
            excerpt: attempt
                .response_excerpt
                .clone()
                .or_else(|| attempt.error.clone())
                .unwrap_or_default(),
        }
    }
}

pub(super) struct DeliveryRow {
    pub id: String,
    pub event_type: String,
    pub event_id: String,
    pub kind: &'static str,
    pub status: &'static str,
    pub badge: &'static str,
    pub created: String,
    pub next_retry: String,
    pub attempts: Vec<AttemptRow>,
}

impl DeliveryRow {
    fn new(delivery: &Delivery, attempts: &[Attempt]) -> Self {
        let status = delivery.status.as_str();
        Self {
            id: delivery.id.to_string(),
            event_type: delivery.event_type.clone(),
            event_id: delivery.event_id.to_string(),
            kind: delivery.kind.as_str(),
            status,
            badge: match delivery.status {
                DeliveryStatus::Succeeded => "ok",
                DeliveryStatus::Failed => "error",
                DeliveryStatus::Retrying => "warn",
                DeliveryStatus::Pending => "muted",
            },
            created: when(delivery.created_at),
            next_retry: if matches!(
                delivery.status,
                DeliveryStatus::Retrying | DeliveryStatus::Pending
            ) {
                when_or_dash(delivery.next_attempt_at)
            } else {
                "–".to_owned()
            },
            attempts: attempts.iter().map(AttemptRow::from).collect(),
        }
    }
}

#[derive(Template)]
#[template(path = "portal/endpoint.html")]
struct EndpointPage {
    chrome: Chrome,
    endpoint: EndpointRow,
    event_types: Vec<EventType>,
    deliveries: Vec<DeliveryRow>,
    statuses: [&'static str; 4],
    status_filter: String,
    type_filter: String,
    all_types: Vec<&'static str>,
}

/// `GET /settings/webhooks/{endpoint_id}?status=…&event_type=…`.
pub(crate) async fn endpoint_page(
    State(state): State<AppState>,
    portal: PortalSession,
    Path(endpoint_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let chrome = portal.chrome(&state, "webhooks");
    let not_found = || {
        problem(
            StatusCode::NOT_FOUND,
            "No such endpoint",
            "This environment has no endpoint with this id. Go back to the webhooks page and pick one from the list (check the Live/Sandbox switch).",
        )
    };
    if !chrome.is_admin {
        return not_found();
    }
    let Some(id) = WebhookEndpointId::parse(&endpoint_id) else {
        return not_found();
    };
    let webhooks = state.store().webhooks();
    let endpoint = match webhooks.get(&portal.tenant(), &id).await {
        Ok(Some(endpoint)) => endpoint,
        Ok(None) => return not_found(),
        Err(err) => return unavailable(&err),
    };
    let status_filter = query_value(query.as_deref(), "status").unwrap_or_default();
    let type_filter = query_value(query.as_deref(), "event_type").unwrap_or_default();
    let status = DeliveryStatus::parse(&status_filter).ok();
    let event_type = event_catalog::canonical(&type_filter);
    let deliveries = match webhooks
        .recent_deliveries(&endpoint.id, status, event_type, DELIVERIES_SHOWN)
        .await
    {
        Ok(deliveries) => deliveries,
        Err(err) => return unavailable(&err),
    };
    let ids: Vec<_> = deliveries
        .iter()
        .map(|delivery| delivery.id.clone())
        .collect();
    let attempts = match webhooks.attempts_of(&ids).await {
        Ok(attempts) => attempts,
        Err(err) => return unavailable(&err),
    };
    let rows = deliveries
        .iter()
        .map(|delivery| {
            let of = attempts.get(&delivery.id).map_or(&[][..], Vec::as_slice);
            DeliveryRow::new(delivery, of)
        })
        .collect();
    page(
        StatusCode::OK,
        &EndpointPage {
            chrome,
            event_types: subscribable(endpoint.event_types.as_deref()),
            endpoint: EndpointRow::from(&endpoint),
            deliveries: rows,
            statuses: ["pending", "retrying", "succeeded", "failed"],
            status_filter: status.map(|s| s.as_str().to_owned()).unwrap_or_default(),
            type_filter: event_type.unwrap_or_default().to_owned(),
            all_types: event_catalog::entries()
                .iter()
                .map(|entry| entry.event_type)
                .collect(),
        },
    )
}

pub(super) struct CatalogRow {
    pub event_type: &'static str,
    pub category: &'static str,
    pub description: &'static str,
    pub emitted_by: &'static str,
    pub status: &'static str,
    pub schema: String,
    pub sample: String,
}

impl From<&CatalogEntry> for CatalogRow {
    fn from(entry: &CatalogEntry) -> Self {
        let pretty =
            |value: serde_json::Value| serde_json::to_string_pretty(&value).unwrap_or_default();
        Self {
            event_type: entry.event_type,
            category: entry.category,
            description: entry.description,
            emitted_by: entry.emitted_by,
            status: if entry.emitted { "active" } else { "planned" },
            schema: pretty(entry.data_schema()),
            sample: pretty(entry.sample()),
        }
    }
}

#[derive(Template)]
#[template(path = "portal/events.html")]
struct CatalogPage {
    chrome: Chrome,
    entries: Vec<CatalogRow>,
}

/// `GET /settings/events`.
pub(crate) async fn catalog_page(State(state): State<AppState>, portal: PortalSession) -> Response {
    page(
        StatusCode::OK,
        &CatalogPage {
            chrome: portal.chrome(&state, "events"),
            entries: event_catalog::entries()
                .iter()
                .map(CatalogRow::from)
                .collect(),
        },
    )
}
