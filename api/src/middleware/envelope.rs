//! Writes the error envelope: every 4xx and 5xx leaves the server as
//! `{"error": {code, message, request_id, details}}` with `request_id` equal to
//! the `X-Request-Id` header, whether it came from an `ApiError` or from a layer
//! or framework default that knows nothing of our envelope.

use axum::Json;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::request_id::RequestId;
use crate::error::{ApiError, ErrorBody};

/// Middleware: renders error responses into the envelope.
pub async fn render(request: Request, next: Next) -> Response {
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .map(|id| id.0.clone());
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    // The portal's pages answer their own errors as pages.
    let is_page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/html"))
        && response.extensions().get::<ErrorBody>().is_none();
    if is_page {
        return response;
    }
    let (mut parts, _body) = response.into_parts();
    let body = parts
        .extensions
        .remove::<ErrorBody>()
        .unwrap_or_else(|| ApiError::body_for_bare_status(status));
    let envelope = body.into_envelope(request_id.as_deref().unwrap_or("-"));
    // Keep the headers that matter (Allow, Retry-After, WWW-Authenticate); the
    // body and its framing are ours now.
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::TRANSFER_ENCODING);
    let mut rendered = Json(envelope).into_response();
    rendered.headers_mut().extend(parts.headers);
    // And the extensions: the metrics layer outside reads the matched route there.
    *rendered.extensions_mut() = parts.extensions;
    *rendered.status_mut() = status;
    rendered
}
