//! `/settings/uploads`: a shoot's files dropped (or chosen) in the browser
//! go to a listing through the resumable uploads (tus-js-client against
//! `/api/v1/uploads`, with the session and its CSRF token), several at once,
//! each with its progress; a dropped connection resumes by itself, and
//! after a reload the same files chosen again resume from the server's
//! offsets. Once sent, the batch's progress stream shows each file ready.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{Chrome, PortalSession, page};
use crate::state::AppState;

#[derive(Template)]
#[template(path = "portal/uploads.html")]
struct UploadsPage {
    chrome: Chrome,
    max_file_megabytes: u64,
}

/// `GET /settings/uploads`.
pub(crate) async fn uploads_page(State(state): State<AppState>, portal: PortalSession) -> Response {
    let chrome = portal.chrome(&state, "uploads");
    page(
        StatusCode::OK,
        &UploadsPage {
            chrome,
            max_file_megabytes: state.upload_limits().max_file_bytes / (1024 * 1024),
        },
    )
}
