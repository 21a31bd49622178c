//! The signed-in session: `GET /session` reads it (with its CSRF token, for
//! a page that reloaded), `DELETE /session` signs out.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::sign_in::{SessionOut, session_out};
use crate::error::{ApiError, ErrorEnvelope};
use crate::middleware::session::clear_cookie;
use crate::principal::SessionPrincipal;
use crate::state::AppState;

/// The caller's session, with its CSRF token (for a page that reloaded).
#[utoipa::path(
    get,
    path = "/session",
    tag = "sessions",
    operation_id = "read_session",
    responses(
        (status = 200, description = "The session", body = SessionOut),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
    ),
    security(("session_cookie" = []))
)]
pub(crate) async fn current_session(
    State(state): State<AppState>,
    principal: SessionPrincipal,
) -> Json<SessionOut> {
    Json(session_out(&state, principal.session))
}

/// Signs out: the session ends and the cookie is removed.
#[utoipa::path(
    delete,
    path = "/session",
    tag = "sessions",
    operation_id = "end_session",
    responses(
        (status = 204, description = "Signed out"),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn logout(
    State(state): State<AppState>,
    principal: SessionPrincipal,
) -> Result<Response, ApiError> {
    state.store().sessions().end(&principal.session.id).await?;
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, clear_cookie())],
    )
        .into_response())
}
