//! `GET /webhooks/events`: the catalog of event types an endpoint can
//! subscribe to, each with the JSON Schema of its data and a sample.

use axum::Json;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use storage::rules::event_catalog::{self, CatalogEntry};
use utoipa::ToSchema;

use crate::error::ErrorEnvelope;

/// One subscribable event type.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogEntryOut {
    /// Canonical name, the one deliveries carry.
    pub event_type: String,
    /// Category (listing, invoice, scheduling, media, user, billing, webhook).
    pub category: String,
    /// What it means.
    pub description: String,
    /// Where it is emitted.
    pub emitted_by: String,
    /// Other names accepted on input for this type.
    pub aliases: Vec<String>,
    /// Whether the service emits it today.
    pub active: bool,
    /// `available` (emitted; subscribe to it) or `planned` (listed so
    /// receivers can prepare; refused at subscription until it is emitted).
    #[schema(example = "available")]
    pub status: &'static str,
    /// Sent only by a test fire, to the endpoint being tested.
    pub test_only: bool,
    /// JSON Schema (2020-12) of the envelope's `data`.
    #[schema(value_type = Object)]
    pub data_schema: Value,
    /// A `data` object valid against the schema.
    #[schema(value_type = Object)]
    pub sample: Value,
}

impl From<&CatalogEntry> for CatalogEntryOut {
    fn from(entry: &CatalogEntry) -> Self {
        Self {
            event_type: entry.event_type.to_owned(),
            category: entry.category.to_owned(),
            description: entry.description.to_owned(),
            emitted_by: entry.emitted_by.to_owned(),
            aliases: entry.aliases.iter().map(|a| (*a).to_owned()).collect(),
            active: entry.emitted,
            status: if entry.emitted {
                "available"
            } else {
                "planned"
            },
            test_only: entry.test_only,
            data_schema: entry.data_schema(),
            sample: entry.sample(),
        }
    }
}

/// The event catalog.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogOut {
    /// Every subscribable type.
    pub items: Vec<CatalogEntryOut>,
    /// Envelope data-shape version of every type at launch.
    pub api_version: String,
}

/// Lists every subscribable event type with its schema and a sample.
#[utoipa::path(
    get,
    path = "/webhooks/events",
    tag = "webhooks",
    operation_id = "get_webhook_catalog",
    responses(
        (status = 200, description = "The catalog; may be cached 5 minutes", body = CatalogOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn event_catalog() -> Response {
    let catalog = CatalogOut {
        items: event_catalog::entries()
            .iter()
            .map(CatalogEntryOut::from)
            .collect(),
        api_version: storage::rules::events::API_VERSION.to_owned(),
    };
    (
        [(header::CACHE_CONTROL, "private, max-age=300")],
        Json(catalog),
    )
        .into_response()
}
