//! Media: uploads (streamed to the object store), their progress as
//! server-sent events, and signed downloads of stored variants.

pub mod archive;
pub mod downloads;
pub mod progress;
pub mod upload;

use axum::extract::DefaultBodyLimit;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::endpoints;
use crate::middleware::guard::{Access, guarded};
use crate::state::AppState;

/// The routes of this resource under `/api/v1`.
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    let uploads = Access::KeyOrSession(&endpoints::UPLOAD_MEDIA);
    let (schemas, paths, upload) = guarded(state, uploads, routes!(upload::upload));
    let (listing_schemas, listing_paths, upload_to_listing) =
        guarded(state, uploads, routes!(upload::upload_to_listing));
    // Uploads enforce their own limits while streaming.
    OpenApiRouter::new()
        .routes((schemas, paths, upload.layer(DefaultBodyLimit::disable())))
        .routes((
            listing_schemas,
            listing_paths,
            upload_to_listing.layer(DefaultBodyLimit::disable()),
        ))
        .merge(progress::router(state))
        .merge(archive::router(state))
}
