//! A delivery's first attempt is made by the process that fanned it out,
//! without a round trip through the queue, while that process has a free
//! delivery slot; the console still counts it as a run of the delivery
//! queue. A paused delivery queue stops these attempts too.

use std::time::Duration;

use jobs::Job;
use jobs::admin::QueueAdmin;
use jobs::kinds::DeliverWebhook;
use serde_json::json;
use tests::Backend;
use tests::deployment::eventually;

use super::{Ctx, CtxOptions};

/// Guards against a hang; never what a test passes by.
const PATIENCE: Duration = Duration::from_secs(30);

/// Every job the delivery queue holds or held, whatever its state.
async fn delivery_jobs(ctx: &Ctx) -> u64 {
    QueueAdmin::new(ctx.app.state.platform().queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == DeliverWebhook::KIND)
        .map_or(0, |depth| {
            depth.pending
                + depth.scheduled
                + depth.retrying
                + depth.running
                + depth.done
                + depth.dead
        })
}

async fn a_first_attempt_skips_the_queue(backend: Backend, redis: bool) {
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
}

async fn a_paused_delivery_queue_holds_first_attempts(backend: Backend, redis: bool) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            paused_queues: vec![DeliverWebhook::KIND],
            ..CtxOptions::default()
        },
    )
    .await;
    ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    // The attempt waits in the paused queue rather than being made here.
    eventually(PATIENCE, "the first attempt queued", || async {
        (delivery_jobs(&ctx).await == 1).then_some(())
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
        .set_paused(DeliverWebhook::KIND, false)
        .await
        .expect("resume deliveries");
    ctx.receiver.wait_for_arrivals(1, PATIENCE).await;
}

#[tokio::test]
async fn a_first_attempt_skips_the_sqlite_queue() {
    a_first_attempt_skips_the_queue(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn a_first_attempt_skips_the_redis_queue() {
    a_first_attempt_skips_the_queue(Backend::Postgres, true).await;
}

#[tokio::test]
async fn a_paused_sqlite_delivery_queue_holds_first_attempts() {
    a_paused_delivery_queue_holds_first_attempts(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn a_paused_redis_delivery_queue_holds_first_attempts() {
    a_paused_delivery_queue_holds_first_attempts(Backend::Postgres, true).await;
}
