//! `X-Request-Id`: keep a well-formed client value, otherwise mint a ULID; put it
//! on the request (for the envelope and the log span) and on every response.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Span;

/// The header carrying the request id both ways.
pub static REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-supplied request id we keep.
const MAX_LEN: usize = 128;

/// The request id of the current request.
#[derive(Clone, Debug)]
pub struct RequestId(pub Arc<str>);

/// Whether a client-supplied request id is safe to keep and echo: 1–128
/// characters of letters, digits and `-_.:` (ULIDs and UUIDs qualify).
pub fn is_well_formed(candidate: &str) -> bool {
    !candidate.is_empty()
        && candidate.len() <= MAX_LEN
        && candidate
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Middleware: assigns the request id and echoes it on the response.
pub async fn assign(mut request: Request, next: Next) -> Response {
    let id: Arc<str> = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|value| is_well_formed(value))
        .map(Arc::from)
        .unwrap_or_else(|| Arc::from(ulid::Ulid::generate().to_string()));
    request.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response
            .headers_mut()
            .insert(REQUEST_ID_HEADER.clone(), value);
    }
    response
}

/// The log span of a request: request id, method and path. Never the query
/// string, which is where a careless client would put an API key.
pub fn make_span(request: &Request) -> Span {
    let id = request
        .extensions()
        .get::<RequestId>()
        .map(|id| id.0.clone())
        .unwrap_or_else(|| Arc::from("-"));
    tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
        agency_id = tracing::field::Empty,
        key_id = tracing::field::Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulids_and_uuids_are_kept() {
        assert!(is_well_formed("01JD3Q8W5T7X2Z9Y4V6R1N0M8K"));
        assert!(is_well_formed("4f9c1b7e-2d3a-4c5b-9e8f-0a1b2c3d4e5f"));
    }

    #[test]
    fn unsafe_or_oversized_values_are_replaced() {
        assert!(!is_well_formed(""));
        assert!(!is_well_formed("has space"));
        assert!(!is_well_formed("new\nline"));
        assert!(!is_well_formed("<script>"));
        assert!(!is_well_formed(&"a".repeat(129)));
    }
}
