//! Request deadlines: every request of the public API answers within its
//! route's deadline. One that runs longer is stopped (its future dropped, so
//! its open transaction rolls back and its idempotency key is released) and
//! answers 503 `server.timeout` with `Retry-After`: repeating it with the same
//! idempotency key is safe. The specification's figures: 10 seconds for user
//! creation, 60 seconds for an upload to arrive (the upload's own 408
//! `upload.timeout`; its deadline adds time to store and queue what arrived);
//! a default for everything else. Progress streams are open-ended.

use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::UploadLimits;
use crate::error::ApiError;

/// The deadlines of the public routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestDeadlines {
    /// `POST /users` (the specification's 10 seconds).
    pub user_creation: Duration,
    /// Uploads: the time the body has to arrive plus this margin to store
    /// the rows and queue the jobs.
    pub upload_margin: Duration,
    /// Every other route but the progress streams.
    pub default: Duration,
}

impl Default for RequestDeadlines {
    fn default() -> Self {
        Self {
            user_creation: Duration::from_secs(10),
            upload_margin: Duration::from_secs(30),
            default: Duration::from_secs(30),
        }
    }
}

impl RequestDeadlines {
    /// The deadline of `method` on the route `route` (its template, as
    /// matched), or `None` for a stream that stays open until it ends.
    pub fn of(&self, method: &Method, route: &str, uploads: &UploadLimits) -> Option<Duration> {
        let route = route.trim_end_matches('/');
        if route.ends_with("/progress/{operation_id}") {
            return None;
        }
        Some(match (method, route) {
            (&Method::POST, "/api/v1/users") => self.user_creation,
            (&Method::POST, "/api/v1/media/upload" | "/api/v1/listings/{listing_number}/media") => {
                uploads.timeout + self.upload_margin
            }
            _ => self.default,
        })
    }
}

/// What the deadline middleware needs.
#[derive(Clone, Debug)]
pub struct Deadlines {
    /// The deadlines.
    pub deadlines: RequestDeadlines,
    /// The upload limits (an upload's deadline follows its timeout).
    pub uploads: UploadLimits,
}

/// Middleware: runs the request under its route's deadline.
pub async fn enforce(State(config): State<Deadlines>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_owned());
    let deadline = match &route {
        Some(route) => config
            .deadlines
            .of(request.method(), route, &config.uploads),
        // Unrouted (404, 405): answered at once anyway.
        None => Some(config.deadlines.default),
    };
    let Some(deadline) = deadline else {
        return next.run(request).await;
    };
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                route = route.as_deref().unwrap_or(""),
                seconds = deadline.as_secs(),
                "request stopped at its deadline"
            );
            ApiError::Timeout(deadline.as_secs()).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specification_figures_and_open_streams() {
        let deadlines = RequestDeadlines::default();
        let uploads = UploadLimits::default();
        let of = |method: Method, route: &str| deadlines.of(&method, route, &uploads);
        assert_eq!(
            of(Method::POST, "/api/v1/users"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            of(Method::POST, "/api/v1/users/"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            of(Method::GET, "/api/v1/users"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            of(Method::POST, "/api/v1/media/upload"),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            of(Method::POST, "/api/v1/listings/{listing_number}/media"),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            of(Method::POST, "/api/v1/listings"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(of(Method::GET, "/api/v1/progress/{operation_id}"), None);
        assert_eq!(of(Method::GET, "/v1/progress/{operation_id}"), None);
    }
}
