//! The denied surface: dashboard URLs that exist elsewhere but are deliberately
//! not part of the public API. Each is registered explicitly so it answers
//! 404 `endpoint_not_in_scope` even where a public route shares its path with
//! another method (which would otherwise be a 405).

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{MethodFilter, on};

use crate::error::ApiError;
use crate::state::AppState;

/// The specification's sixteen denied URLs, with axum path syntax. matchit
/// cannot express `{id}:start`, so that one is matched by its whole segment.
pub const DENIED: [(MethodFilter, &str); 16] = [
    (MethodFilter::POST, "/tours/{listing_number}/share"),
    (
        MethodFilter::POST,
        "/tours/{listing_number}/delivery/trigger",
    ),
    (MethodFilter::POST, "/rmd/designs/{id}/export"),
    (MethodFilter::POST, "/orders/submit"),
    (MethodFilter::PATCH, "/appointments/{id}"),
    (MethodFilter::POST, "/invoices"),
    (MethodFilter::POST, "/payments/charge_ccof"),
    (MethodFilter::POST, "/credits/purchase"),
    (MethodFilter::POST, "/users/invite"),
    (MethodFilter::PATCH, "/users/{user_id}"),
    (MethodFilter::DELETE, "/users/{user_id}"),
    (MethodFilter::POST, "/email-campaigns"),
    (MethodFilter::POST, "/cold-calls/campaigns"),
    (MethodFilter::POST, "/cold-calls/campaigns/{id_and_action}"),
    (MethodFilter::POST, "/support/tickets"),
    (MethodFilter::POST, "/webhooks/incoming/{*rest}"),
];

async fn not_in_scope() -> ApiError {
    ApiError::EndpointNotInScope
}

/// The denied routes, to be nested under `/api/v1`.
pub fn router() -> Router<AppState> {
    DENIED.iter().fold(Router::new(), |router, (method, path)| {
        router.route(path, on(*method, not_in_scope))
    })
}

/// Whether `path` (as requested, under `/api/v1`) is an instance of the
/// route template `template`.
fn matches(template: &str, path: &str) -> bool {
    let mut segments = path.trim_start_matches('/').split('/');
    for part in template.trim_start_matches('/').split('/') {
        if part.starts_with("{*") {
            return segments.next().is_some();
        }
        match segments.next() {
            Some(segment) if part.starts_with('{') || part == segment => {}
            _ => return false,
        }
    }
    segments.next().is_none()
}

/// Middleware: a 405's `Allow` names only the methods the path serves, not
/// the denied ones registered beside them (which answer 404).
pub async fn honest_allow(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let mut response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let Some(path) = path.strip_prefix(crate::routes::API_PREFIX) else {
        return response;
    };
    let denied: Vec<MethodFilter> = DENIED
        .iter()
        .filter(|(_, template)| matches(template, path))
        .map(|(method, _)| *method)
        .collect();
    if denied.is_empty() {
        return response;
    }
    let Some(allow) = response
        .headers()
        .get(header::ALLOW)
        .and_then(|value| value.to_str().ok())
    else {
        return response;
    };
    let kept: Vec<&str> = allow
        .split(',')
        .map(str::trim)
        .filter(|name| {
            let method = Method::from_bytes(name.as_bytes()).ok();
            let filter = method.and_then(|m| MethodFilter::try_from(m).ok());
            !filter.is_some_and(|filter| denied.contains(&filter))
        })
        .collect();
    if let Ok(value) = HeaderValue::from_str(&kept.join(",")) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn templates_match_their_instances_only() {
        assert!(matches("/users/{user_id}", "/users/usr_1"));
        assert!(!matches("/users/{user_id}", "/users/usr_1/role"));
        assert!(!matches("/users/invite", "/users/usr_1"));
        assert!(matches(
            "/webhooks/incoming/{*rest}",
            "/webhooks/incoming/a/b"
        ));
        assert!(!matches("/webhooks/incoming/{*rest}", "/webhooks/incoming"));
    }
}
