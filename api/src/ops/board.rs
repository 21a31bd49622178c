//! apalis-board on the ops listener: its UI at `/` and its API at `/api/v1`
//! (both compiled into the prebuilt UI), one registration per queue. Here it
//! is read-only: its API answers reads only (pushing, retrying or killing a
//! job is the ops console's, `/ops/`, where it is audited), and its Logs
//! page, which nothing feeds, is hidden and its path sent to the board's home.

use apalis_board::axum::framework::{ApiBuilder, RegisterRoute};
use apalis_board::axum::sse::TracingBroadcaster;
use apalis_board::axum::ui::ServeUI;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Router};
use platform::kinds::{
    BuildArchive, DeliverWebhook, DispatchEvents, Probe, ProcessMedia, RenderOutputs, SeedSandbox,
    SendNotification,
};
use platform::queue::QueueBackend;
use platform::{Job, JobQueue};

use crate::error::ApiError;

/// The board: its API over every queue, and its UI for every other path.
pub(super) fn router(queue: &JobQueue) -> Router {
    let api = match queue.backend() {
        QueueBackend::Sqlite(pool) => ApiBuilder::new(Router::new())
            .register(
                DispatchEvents::KIND,
                JobQueue::sqlite_storage::<DispatchEvents>(pool),
            )
            .register(
                DeliverWebhook::KIND,
                JobQueue::sqlite_storage::<DeliverWebhook>(pool),
            )
            .register(
                SendNotification::KIND,
                JobQueue::sqlite_storage::<SendNotification>(pool),
            )
            .register(
                SeedSandbox::KIND,
                JobQueue::sqlite_storage::<SeedSandbox>(pool),
            )
            .register(
                ProcessMedia::KIND,
                JobQueue::sqlite_storage::<ProcessMedia>(pool),
            )
            .register(
                RenderOutputs::KIND,
                JobQueue::sqlite_storage::<RenderOutputs>(pool),
            )
            .register(
                BuildArchive::KIND,
                JobQueue::sqlite_storage::<BuildArchive>(pool),
            )
            .register(Probe::KIND, JobQueue::sqlite_storage::<Probe>(pool))
            .build(),
        QueueBackend::Redis(connection) => ApiBuilder::new(Router::new())
            .register(
                DispatchEvents::KIND,
                JobQueue::redis_storage::<DispatchEvents>(connection),
            )
            .register(
                DeliverWebhook::KIND,
                JobQueue::redis_storage::<DeliverWebhook>(connection),
            )
            .register(
                SendNotification::KIND,
                JobQueue::redis_storage::<SendNotification>(connection),
            )
            .register(
                SeedSandbox::KIND,
                JobQueue::redis_storage::<SeedSandbox>(connection),
            )
            .register(
                ProcessMedia::KIND,
                JobQueue::redis_storage::<ProcessMedia>(connection),
            )
            .register(
                RenderOutputs::KIND,
                JobQueue::redis_storage::<RenderOutputs>(connection),
            )
            .register(
                BuildArchive::KIND,
                JobQueue::redis_storage::<BuildArchive>(connection),
            )
            .register(Probe::KIND, JobQueue::redis_storage::<Probe>(connection))
            .build(),
    };
    Router::new()
        .nest("/api/v1", api.layer(axum::middleware::from_fn(read_only)))
        .route("/logs", axum::routing::get(|| async { Redirect::to("/") }))
        .layer(Extension(TracingBroadcaster::create()))
        .fallback_service(ServeUI::new())
        .layer(axum::middleware::from_fn(hide_logs))
}

/// Refuses every board API request that would change something.
async fn read_only(request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let mut refused = ApiError::MethodNotAllowed.into_response();
    refused
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    refused
}

/// The style that hides the board's Logs link.
const HIDE_LOGS: &str =
    r#"<style>a[href="/logs"], a[href="logs"] { display: none !important; }</style>"#;

/// Adds [`HIDE_LOGS`] to the board's page.
async fn hide_logs(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let is_html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/html"));
    if !is_html {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1024 * 1024).await else {
        return ApiError::internal("the board's page did not read").into_response();
    };
    let html =
        String::from_utf8_lossy(&bytes).replacen("</head>", &format!("{HIDE_LOGS}</head>"), 1);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(html))
}
