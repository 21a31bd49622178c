//! Query parameters are treated alike on every route: a parameter the
//! OpenAPI document does not declare for the operation is refused with 422
//! `validation.failed` naming it ("is not a known parameter"), whether or
//! not the handler would have read it. The document is the contract; the
//! check is built from it, so the two cannot drift apart.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// Middleware for routes without the guard (`Access::Open`; the guard checks
/// after it has authenticated the caller): refuses undeclared query
/// parameters.
pub async fn enforce(State(documented): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_owned());
    if let Some(route) = route
        && let Err(err) =
            documented
                .documented_queries()
                .check(request.method(), &route, request.uri().query())
    {
        return err.into_response();
    }
    next.run(request).await
}
