//! apalis-board on the ops listener: its UI at `/` and its API at `/api/v1`
//! (both compiled into the prebuilt UI), one registration per queue.

use apalis_board::axum::framework::{ApiBuilder, RegisterRoute};
use apalis_board::axum::sse::TracingBroadcaster;
use apalis_board::axum::ui::ServeUI;
use axum::{Extension, Router};
use jobs::kinds::{
    BuildArchive, DeliverWebhook, DispatchEvents, Probe, ProcessMedia, SeedSandbox,
    SendNotification,
};
use jobs::queue::QueueBackend;
use jobs::{Job, JobQueue};

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
                BuildArchive::KIND,
                JobQueue::redis_storage::<BuildArchive>(connection),
            )
            .register(Probe::KIND, JobQueue::redis_storage::<Probe>(connection))
            .build(),
    };
    Router::new()
        .nest("/api/v1", api)
        .layer(Extension(TracingBroadcaster::create()))
        .fallback_service(ServeUI::new())
}
