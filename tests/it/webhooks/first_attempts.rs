//! Work done where it is committed: a process whose workers consume the
//! dispatch queue fans its own events out without a dispatch job, and makes
//! a delivery's first attempt without a delivery job while it has a free
//! slot; the console still counts both as runs of their queues. Pausing
//! either queue sends that work through the queue again.

use std::time::Duration;

use jobs::Job;
use jobs::admin::QueueAdmin;
use jobs::kinds::{DeliverWebhook, DispatchEvents};
use serde_json::json;
use tests::Backend;
use tests::deployment::eventually;

use super::{Ctx, CtxOptions};

/// Guards against a hang; never what a test passes by.
const PATIENCE: Duration = Duration::from_secs(30);

/// Every job the delivery queue holds or held, whatever its state.
async fn delivery_jobs(ctx: &Ctx) -> u64 {
    jobs_of(ctx, DeliverWebhook::KIND).await
}

/// Every job `queue` holds or held, whatever its state.
async fn jobs_of(ctx: &Ctx, queue: &str) -> u64 {
    QueueAdmin::new(ctx.app.state.platform().queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == queue)
        .map_or(0, |depth| {
            depth.pending
                + depth.scheduled
                + depth.retrying
                + depth.running
                + depth.done
                + depth.dead
        })
}

async fn dispatch_and_first_attempts_skip_the_queue(backend: Backend, redis: bool) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    // The test's workers start beside it: once their process is registered,
    // its runtime has taken over this process's dispatch and first attempts.
    eventually(PATIENCE, "the workers running", || async {
        let processes = ctx.app.store.worker_processes().list().await.unwrap();
        (!processes.is_empty()).then_some(())
    })
    .await;
    ctx.create_listing().await;
    ctx.receiver.wait_for_arrivals(1, PATIENCE).await;
    let deliveries = ctx.deliveries(&endpoint_id).await;
    let [delivery] = deliveries.as_slice() else {
        panic!("one delivery expected: {deliveries:?}");
    };
    let delivery_id = delivery["id"].as_str().unwrap().to_owned();
    let delivered = ctx
        .delivery_until(&delivery_id, |d| d["status"] == "succeeded")
        .await;
    assert_eq!(delivered["attempts"], 1, "{delivered}");
    assert_eq!(delivery_jobs(&ctx).await, 0, "the queue never held it");

    // The console counts it as a run of the delivery queue, under the
    // delivery's id.
    let run = eventually(PATIENCE, "the run recorded for the console", || async {
        let runs = ctx
            .app
            .store
            .job_attempts()
            .of_job(&delivery_id)
            .await
            .unwrap();
        runs.into_iter()
            .find(|run| run.outcome.as_deref() == Some("succeeded"))
    })
    .await;
    assert_eq!(run.queue, DeliverWebhook::KIND);
    assert_eq!(run.attempt, 1);
    assert_eq!(run.endpoint_id.as_deref(), Some(endpoint_id.as_str()));
    // The listing's events were dispatched here, not by a job (events the
    // setup committed before the workers started were pushed as jobs): a
    // dispatch done here is a run under the first event of its batch, which
    // no job's id is.
    let events: Vec<_> = ctx
        .app
        .store
        .outbox()
        .for_tenant(&ctx.live(), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| ["listing.created", "invoice.created"].contains(&event.event_type.as_str()))
        .collect();
    assert!(!events.is_empty(), "the listing's events");
    eventually(
        PATIENCE,
        "the dispatch recorded for the console",
        || async {
            for event in &events {
                let runs = ctx
                    .app
                    .store
                    .job_attempts()
                    .of_job(event.event_id.as_str())
                    .await
                    .unwrap();
                if runs.iter().any(|run| run.queue == DispatchEvents::KIND) {
                    return Some(());
                }
            }
            None
        },
    )
    .await;
}

/// With `queue` paused, the work it names waits in it as a job rather than
/// being done where it was committed, and resuming it delivers.
async fn a_paused_queue_takes_its_work_back(backend: Backend, redis: bool, queue: &'static str) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            paused_queues: vec![queue],
            ..CtxOptions::default()
        },
    )
    .await;
    ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    eventually(PATIENCE, "the work queued", || async {
        (jobs_of(&ctx, queue).await >= 1).then_some(())
    })
    .await;
    assert_eq!(
        ctx.receiver.arrivals(),
        0,
        "a paused queue delivers nothing"
    );
    ctx.app
        .store
        .schedules()
        .set_paused(queue, false)
        .await
        .expect("resume the queue");
    ctx.receiver.wait_for_arrivals(1, PATIENCE).await;
}

#[tokio::test]
async fn dispatch_and_first_attempts_skip_the_sqlite_queue() {
    dispatch_and_first_attempts_skip_the_queue(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn dispatch_and_first_attempts_skip_the_redis_queue() {
    dispatch_and_first_attempts_skip_the_queue(Backend::Postgres, true).await;
}

#[tokio::test]
async fn a_paused_sqlite_delivery_queue_holds_first_attempts() {
    a_paused_queue_takes_its_work_back(Backend::Sqlite, false, DeliverWebhook::KIND).await;
}

#[tokio::test]
async fn a_paused_redis_delivery_queue_holds_first_attempts() {
    a_paused_queue_takes_its_work_back(Backend::Postgres, true, DeliverWebhook::KIND).await;
}

#[tokio::test]
async fn a_paused_sqlite_dispatch_queue_holds_dispatch() {
    a_paused_queue_takes_its_work_back(Backend::Sqlite, false, DispatchEvents::KIND).await;
}

#[tokio::test]
async fn a_paused_redis_dispatch_queue_holds_dispatch() {
    a_paused_queue_takes_its_work_back(Backend::Postgres, true, DispatchEvents::KIND).await;
}
