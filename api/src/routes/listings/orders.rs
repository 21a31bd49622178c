//! `GET /listings/{listing_number}/orders`: the listing's orders and invoices.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;

use super::wire::OrderOut;
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit};
use crate::principal::Principal;
use crate::state::AppState;

/// Query of the orders listing.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OrderListQuery {
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<i64>,
}

/// Lists a listing's orders with their invoice and payment state.
#[utoipa::path(
    get,
    path = "/listings/{listing_number}/orders",
    tag = "listings",
    operation_id = "get_listing_orders",
    params(("listing_number" = String, Path, description = "The listing's number"), OrderListQuery),
    responses(
        (status = 200, description = "A page of orders", body = PageOut<OrderOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:read", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
        (status = 422, description = "Invalid limit (validation.failed) or invalid_cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub async fn list_listing_orders(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(listing_number): ApiPath<String>,
    ApiQuery(query): ApiQuery<OrderListQuery>,
) -> Result<Json<PageOut<OrderOut>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let number = storage::listings::normalise_listing_number(&listing_number);
    let scope = CursorScope {
        collection: "orders",
        tenant: principal.tenant(),
        filters: format!("listing={number}"),
    };
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .orders()
        .for_listing(&scope.tenant, &number, after.as_ref(), limit)
        .await?;
    Ok(Json(state.cursors().envelope(&scope, page, OrderOut::from)))
}
