//! Endpoints take turns on the delivery queue: while one endpoint's backlog
//! waits behind a slow receiver, another endpoint's delivery is the next one
//! made, not the last, on both queue backends.

use std::time::Duration;

use platform::Job;
use platform::admin::QueueAdmin;
use platform::kinds::DeliverWebhook;
use serde_json::json;
use storage::people::users::Role;
use tests::Backend;
use tests::deployment::eventually;

use super::{Ctx, CtxOptions, SCOPES};
use crate::listings::add_user;

const PATIENCE: Duration = Duration::from_secs(60);
/// Deliveries in the busy endpoint's backlog.
const BACKLOG: usize = 10;

/// Deliveries waiting in the queue, and those its worker holds.
async fn queued_deliveries(ctx: &Ctx) -> (u64, u64) {
    QueueAdmin::new(ctx.app.state.platform().queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == DeliverWebhook::KIND)
        .map_or((0, 0), |depth| (depth.pending, depth.running))
}

async fn a_single_delivery_overtakes_another_endpoints_backlog(backend: Backend, redis: bool) {
    // One delivery at a time, so the order they are taken in is the order
    // the receivers see them.
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            delivery_concurrency: Some(1),
            ..CtxOptions::default()
        },
    )
    .await;
    let busy = &ctx.receiver;
    busy.hold();
    ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    // Another agency, its endpoint on a receiver of its own.
    let quiet = busy.beside().await;
    let other = ctx.app.agency().await;
    let other_agent = add_user(&ctx.app, &other, Role::Agent).await;
    let other_key = ctx.app.key(&other, &SCOPES).await;
    let registered = ctx
        .send(
            reqwest::Method::POST,
            "/api/v1/webhooks/endpoints",
            &other_key,
            Some(&json!({ "url": quiet.url, "event_types": ["listing.created"] })),
        )
        .await;
    assert_eq!(registered.status(), 201);

    for _ in 0..BACKLOG {
        ctx.create_listing().await;
    }
    // The first is made at once, after its fan-out, in the one first-attempt
    // slot; the queue's one worker takes the second; both are held at the
    // receiver and the rest wait in the queue.
    busy.wait_for_arrivals(1, PATIENCE).await;
    eventually(PATIENCE, "the backlog queued", || async {
        (queued_deliveries(&ctx).await == ((BACKLOG - 2) as u64, 1)).then_some(())
    })
    .await;
    let body = json!({
        "address": "3 Quiet Lane, Springfield",
        "owner_user_id": other.owner_id,
        "agent_one_id": other_agent,
    });
    let created = ctx
        .send(
            reqwest::Method::POST,
            "/api/v1/listings",
            &other_key,
            Some(&body),
        )
        .await;
    assert_eq!(created.status(), 201);
    eventually(PATIENCE, "the other delivery queued", || async {
        (queued_deliveries(&ctx).await == ((BACKLOG - 1) as u64, 1)).then_some(())
    })
    .await;

    // Each answer frees the one worker slot; the quiet endpoint's delivery
    // takes the first one freed, before the busy one's backlog does.
    let mut busy_before_quiet = busy.arrivals();
    while quiet.arrivals() == 0 {
        let arrived = busy.arrivals();
        busy.release(1);
        eventually(PATIENCE, "the next delivery", || async {
            (quiet.arrivals() > 0 || busy.arrivals() > arrived).then_some(())
        })
        .await;
        if quiet.arrivals() == 0 {
            busy_before_quiet = busy.arrivals();
        }
    }
    // Only the deliveries in hand when the quiet one was queued go first:
    // the two held at the receiver. On Redis
    // one more is tolerated: a poll tick that lands between the worker
    // claiming its next delivery and starting it sees the slot still free
    // and feeds it another.
    let tolerated = if redis { 3 } else { 2 };
    assert!(
        busy_before_quiet <= tolerated,
        "the quiet endpoint waited for {busy_before_quiet} of {BACKLOG} busy deliveries"
    );
    busy.stop_holding();
    busy.wait_for_arrivals(BACKLOG, PATIENCE).await;
    assert_eq!(quiet.arrivals(), 1);
}

#[tokio::test]
async fn endpoints_take_turns_on_the_sqlite_queue() {
    a_single_delivery_overtakes_another_endpoints_backlog(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn endpoints_take_turns_on_the_redis_queue() {
    a_single_delivery_overtakes_another_endpoints_backlog(Backend::Postgres, true).await;
}
