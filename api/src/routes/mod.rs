//! Routing: the route table (`table`: every route of the public listener,
//! with its policy and handler), the OpenAPI document built from it, and the
//! fallback that makes every other URL a 404 `endpoint_not_in_scope`. Each
//! resource's module holds its handlers and wire types.

pub mod availability;
pub mod changelog;
pub mod delivery_profiles;
pub mod denied;
pub mod developer_keys;
pub mod listings;
pub mod media;
pub mod openapi;
pub mod preferences;
pub mod sandbox;
pub mod session;
pub mod table;
pub mod test_console;
pub mod user_admin;
pub mod users;
pub mod webhooks;
#[cfg(test)]
mod wire_limits;

use std::sync::Arc;

use axum::Router;
use utoipa_axum::router::OpenApiRouter;

use crate::error::ApiError;
use crate::middleware::documented_queries::DocumentedQueries;
use crate::state::AppState;

/// The path prefix of the public API.
pub const API_PREFIX: &str = "/api/v1";

/// The application's routes (without global middleware or state) and its
/// OpenAPI document.
pub fn router(state: AppState) -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let v1 = table::api_v1(&state);
    let (routes, doc) = OpenApiRouter::with_openapi(openapi::base())
        .nest(API_PREFIX, v1)
        .split_for_parts();
    state.set_documented_queries(DocumentedQueries::from_document(&doc, API_PREFIX));
    let doc = openapi::with_servers(doc, state.urls());
    let doc = openapi::with_deprecations(doc);
    let doc = openapi::with_request_guarantees(doc);
    let mut document = serde_json::to_value(&doc).unwrap_or_default();
    openapi::complete(&mut document);
    let document: Arc<str> = Arc::from(document.to_string());
    let router = routes
        .merge(table::outside_the_document(&state, document))
        .route_layer(axum::middleware::from_fn(crate::metrics::tag_route))
        .fallback(|| async { ApiError::EndpointNotInScope });
    (router, doc)
}
