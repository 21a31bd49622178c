//! The headers every response of either listener carries, set once here:
//!
//! - `X-Content-Type-Options: nosniff` on everything, so no browser runs a
//!   JSON answer, an image or an error as a script or a page;
//! - `Strict-Transport-Security` (two years, subdomains too) when the client
//!   reached us over HTTPS, directly or through a trusted proxy; browsers
//!   ignore it over plain HTTP, and local development is left alone;
//! - `Cache-Control: no-store` on every answer that did not choose its own
//!   caching: JSON holds an agency's data (users, listings, keys) and no
//!   shared or browser cache should keep it. Answers meant to be cached (the
//!   property page, signed media variants, static assets) set theirs.
//!
//! It is the outermost layer, so it classifies the connection
//! ([`ClientConnection`]) for every layer inside and sees every answer,
//! refusals included.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

use super::transport::{ClientConnection, TransportPolicy};

/// HSTS: two years (the value the HSTS preload list asks for), subdomains too.
pub const STRICT_TRANSPORT_SECURITY: &str = "max-age=63072000; includeSubDomains";

/// The caching of an answer that names none.
pub const DEFAULT_CACHE_CONTROL: &str = "no-store";

/// Middleware: classifies the connection, then adds the security headers to
/// whatever answer comes back.
pub async fn apply(
    State(policy): State<TransportPolicy>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    let connection: ClientConnection = policy.classify(peer, request.headers());
    request.extensions_mut().insert(connection);
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if connection.https {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(STRICT_TRANSPORT_SECURITY),
        );
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(DEFAULT_CACHE_CONTROL),
        );
    }
    response
}
