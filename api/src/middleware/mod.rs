//! The middleware stack, outermost first: security headers (and the
//! connection's classification) → request id → metrics → error
//! envelope → access log → transport policy → panic guard → the route's
//! deadline (`deadline`) → routing; per
//! route (`guard`, from the route table): authentication (`auth`, `session`,
//! `progress_token`), tenancy and scope → rate limit → a key's write paced
//! by its agency's webhook backlog (`crate::pacing`) → idempotency → handler.

pub mod auth;
pub mod deadline;
pub mod documented_queries;
pub mod envelope;
pub mod guard;
pub mod idempotency;
pub mod key_cache;
pub mod progress_token;
pub mod query_params;
pub mod request_id;
pub mod security_headers;
pub mod session;
pub mod transport;

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::error::ApiError;

/// Wraps `router` in the global middleware, in the order the specification
/// implies. Routes add their own per-endpoint guard (`guard::guarded`).
pub fn apply(
    router: Router,
    transport: transport::TransportPolicy,
    deadlines: Option<deadline::Deadlines>,
) -> Router {
    let router = match deadlines {
        Some(deadlines) => router.layer(from_fn_with_state(deadlines, deadline::enforce)),
        None => router,
    };
    router
        .layer(CatchPanicLayer::custom(
            |_panic: Box<dyn std::any::Any + Send>| {
                // The panic hook (telemetry) has already logged message and location
                // inside the request span; the client gets the opaque envelope.
                axum::response::IntoResponse::into_response(ApiError::internal("handler panicked"))
            },
        ))
        .layer(from_fn_with_state(transport.clone(), transport::enforce))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_id::make_span)
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(from_fn(envelope::render))
        .layer(from_fn(crate::metrics::record))
        .layer(from_fn(request_id::assign))
        .layer(from_fn_with_state(transport, security_headers::apply))
}
