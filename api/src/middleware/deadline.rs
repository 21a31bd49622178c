//! Request deadlines: every request of the public API answers within its
//! route's deadline. One that runs longer is stopped (its future dropped, so
//! its open transaction rolls back and its idempotency key is released) and
//! answers 503 `server.timeout` with `Retry-After`: repeating it with the same
//! idempotency key is safe. The specification's figures: 10 seconds for user
//! creation, 60 seconds for an upload to arrive (the upload's own 408
//! `upload.timeout`; its deadline adds time to store and queue what arrived);
//! a default for everything else. Progress streams are open-ended.
//!
//! What a stopped request gives back (its idempotency key) is given back
//! before the 503 is sent: a client that retries at once never meets its own
//! stopped request still holding the key.

use std::sync::{Arc, Mutex};
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
        // A resumable upload's bytes take as long as the link needs; a
        // silent client is let go after the idle limit, its bytes kept.
        if matches!(
            (method, route),
            (&Method::POST, "/api/v1/uploads") | (&Method::PATCH, "/api/v1/uploads/{upload_id}")
        ) {
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

/// The longest a stopped request's answer waits for its clean-ups.
const CLEANUP_GRACE: Duration = Duration::from_secs(5);

/// Clean-ups a request starts when it is stopped (dropped) at its deadline,
/// which its 503 waits for. Found in the request's extensions; a layer that
/// holds something to give back registers the task that gives it back.
#[derive(Clone, Debug, Default)]
pub struct StopCleanups(Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl StopCleanups {
    /// Registers a clean-up already spawned.
    pub fn register(&self, cleanup: tokio::task::JoinHandle<()>) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(cleanup);
    }

    /// Waits for every registered clean-up, at most [`CLEANUP_GRACE`].
    async fn finish(&self) {
        let cleanups = std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if cleanups.is_empty() {
            return;
        }
        if tokio::time::timeout(CLEANUP_GRACE, futures::future::join_all(cleanups))
            .await
            .is_err()
        {
            tracing::warn!("a stopped request's clean-up outlasted its grace; answering anyway");
        }
    }
}

/// Middleware: runs the request under its route's deadline.
pub async fn enforce(
    State(config): State<Deadlines>,
    mut request: Request,
    next: Next,
) -> Response {
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
    let cleanups = StopCleanups::default();
    request.extensions_mut().insert(cleanups.clone());
    // A statement of its own, so the stopped request's future is dropped
    // (and its clean-ups registered) before the answer waits for them.
    let outcome = tokio::time::timeout(deadline, next.run(request)).await;
    match outcome {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                route = route.as_deref().unwrap_or(""),
                seconds = deadline.as_secs(),
                "request stopped at its deadline"
            );
            // What the dropped request gives back is on its way; the answer
            // waits for it.
            cleanups.finish().await;
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

    /// Given back when dropped, by a task of its own, as the idempotency
    /// layer gives back its key.
    struct GivenBackOnDrop {
        cleanups: StopCleanups,
        given_back: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Drop for GivenBackOnDrop {
        fn drop(&mut self) {
            let given_back = self.given_back.clone();
            self.cleanups.register(tokio::spawn(async move {
                // Not done at once: it needs a turn of the runtime.
                tokio::task::yield_now().await;
                given_back.store(true, std::sync::atomic::Ordering::SeqCst);
            }));
        }
    }

    /// On one thread, a spawned clean-up runs only when the test's task
    /// yields; the stopped request's answer comes after it all the same.
    #[tokio::test(flavor = "current_thread")]
    async fn a_stopped_request_answers_after_its_clean_ups() {
        use axum::Extension;
        use axum::body::Body;
        use axum::middleware::from_fn_with_state;
        use axum::routing::get;
        use std::sync::atomic::{AtomicBool, Ordering};
        use tower::ServiceExt;

        let given_back = Arc::new(AtomicBool::new(false));
        let handler_given_back = given_back.clone();
        let app = axum::Router::new()
            .route(
                "/stuck",
                get(move |Extension(cleanups): Extension<StopCleanups>| {
                    let guard = GivenBackOnDrop {
                        cleanups,
                        given_back: handler_given_back.clone(),
                    };
                    async move {
                        let _held = guard;
                        std::future::pending::<()>().await;
                    }
                }),
            )
            .layer(from_fn_with_state(
                Deadlines {
                    deadlines: RequestDeadlines {
                        default: Duration::from_millis(20),
                        ..RequestDeadlines::default()
                    },
                    uploads: UploadLimits::default(),
                },
                enforce,
            ));
        let response = app
            .oneshot(Request::get("/stuck").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        );
        assert!(
            given_back.load(Ordering::SeqCst),
            "the 503 went out before the stopped request gave back what it held"
        );
    }
}
