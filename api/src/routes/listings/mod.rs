//! The listing routes: create, list, read, orders, status, cancel, sections.
//! Each action has its own file; the wire types are in `wire`.

pub mod cancel;
pub mod create;
pub mod orders;
pub mod read;
pub mod sections;
pub mod status;
pub mod wire;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::endpoints;
use crate::middleware::guard::guarded;
use crate::state::AppState;

/// The routes of this resource.
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(guarded(
            state,
            &endpoints::CREATE_LISTING,
            routes!(create::create_listing),
        ))
        .routes(guarded(
            state,
            &endpoints::READ_LISTINGS_LIST,
            routes!(read::list_listings),
        ))
        .routes(guarded(
            state,
            &endpoints::READ_LISTING_SINGLE,
            routes!(read::read_listing),
        ))
        .routes(guarded(
            state,
            &endpoints::GET_LISTING_ORDERS,
            routes!(orders::list_listing_orders),
        ))
        .routes(guarded(
            state,
            &endpoints::UPDATE_LISTING_STATUS,
            routes!(status::update_listing_status),
        ))
        .routes(guarded(
            state,
            &endpoints::CANCEL_LISTING,
            routes!(cancel::cancel_listing),
        ))
        .routes(guarded(
            state,
            &endpoints::UPDATE_SECTION,
            routes!(sections::update_section),
        ))
}
