//! The denied surface: dashboard URLs that exist elsewhere but are deliberately
//! not part of the public API. Each is registered explicitly so it answers
//! 404 `endpoint_not_in_scope` even where a public route shares its path with
//! another method (which would otherwise be a 405).

use axum::Router;
use axum::routing::{MethodFilter, on};

use crate::error::ApiError;
use crate::state::AppState;

/// The specification's sixteen denied URLs, with axum path syntax. matchit
/// cannot express `{id}:start`, so that one is matched by its whole segment.
pub const DENIED: [(MethodFilter, &str); 16] = [
    (MethodFilter::POST, "/tours/{listing_number}/share"),
    (
        MethodFilter::POST,
        "/tours/{listing_number}/delivery/trigger",
    ),
    (MethodFilter::POST, "/rmd/designs/{id}/export"),
    (MethodFilter::POST, "/orders/submit"),
    (MethodFilter::PATCH, "/appointments/{id}"),
    (MethodFilter::POST, "/invoices"),
    (MethodFilter::POST, "/payments/charge_ccof"),
    (MethodFilter::POST, "/credits/purchase"),
    (MethodFilter::POST, "/users/invite"),
    (MethodFilter::PATCH, "/users/{user_id}"),
    (MethodFilter::DELETE, "/users/{user_id}"),
    (MethodFilter::POST, "/email-campaigns"),
    (MethodFilter::POST, "/cold-calls/campaigns"),
    (MethodFilter::POST, "/cold-calls/campaigns/{id_and_action}"),
    (MethodFilter::POST, "/support/tickets"),
    (MethodFilter::POST, "/webhooks/incoming/{*rest}"),
];

async fn not_in_scope() -> ApiError {
    ApiError::EndpointNotInScope
}

/// The denied routes, to be nested under `/api/v1`.
pub fn router() -> Router<AppState> {
    DENIED.iter().fold(Router::new(), |router, (method, path)| {
        router.route(path, on(*method, not_in_scope))
    })
}
