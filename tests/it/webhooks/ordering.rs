//! Ordered endpoints (`ordering: listing`), on both profiles with two worker
//! runtimes consuming the queue: a listing's events arrive in commit order
//! even when the first delivery is retried; another listing is not held up
//! meanwhile; and a delivery that fails for good lets the next one go.

use std::time::Duration;

use serde_json::{Value, json};
use tests::Backend;

use super::{Ctx, CtxOptions};
use crate::support::expect_ok;

const PATIENCE: Duration = Duration::from_secs(60);

async fn ordered_ctx(redis: bool, backend: Backend, speedup: u32) -> (Ctx, String) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            speedup: Some(speedup),
            worker_runtimes: Some(2),
            delivery_concurrency: Some(8),
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, _) = ctx
        .register_with(
            &ctx.key,
            json!({ "event_types": ["listing.created", "listing.status_changed"], "ordering": "listing" }),
        )
        .await;
    let endpoint = expect_ok(
        ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}"))
            .await,
    )
    .await;
    assert_eq!(endpoint["ordering"], "listing");
    (ctx, endpoint_id)
}

/// Paid for, so its status can change.
async fn activate(ctx: &Ctx, number: &str) {
    ctx.app
        .store
        .orders()
        .record_payment(&ctx.live(), number, None)
        .await
        .unwrap();
}

async fn set_status(ctx: &Ctx, number: &str, status: &str) {
    expect_ok(
        ctx.patch(
            &format!("/api/v1/listings/{number}/status"),
            &json!({ "new_status": status }),
        )
        .await,
    )
    .await;
}

/// What arrived for `number`, in arrival order: (event type, status the
/// event carries if any).
fn arrivals_of(ctx: &Ctx, number: &str) -> Vec<(String, Value)> {
    ctx.receiver
        .received()
        .iter()
        .map(tests::receiver::Received::json)
        .filter(|body| body["data"]["listing_number"] == number)
        .map(|body| {
            (
                body["event_type"].as_str().unwrap().to_owned(),
                body["data"]["status"].clone(),
            )
        })
        .collect()
}

async fn order_holds_under_a_retried_first_delivery(redis: bool, backend: Backend) {
    // The first retry comes 3 s after a failure (30 s / 10).
    let (ctx, endpoint_id) = ordered_ctx(redis, backend, 10).await;
    ctx.receiver.script(&[500]);
    let first = ctx.create_listing().await;
    // Its first attempt is refused; then, during the wait for its retry,
    // two more of its events and another listing.
    ctx.receiver.wait_for(1, PATIENCE).await;
    activate(&ctx, &first).await;
    set_status(&ctx, &first, "Active").await;
    set_status(&ctx, &first, "Sold").await;
    // Another listing while the first one's creation waits for its retry.
    let other = ctx.create_listing().await;

    let expected = vec![
        ("listing.created".to_owned(), json!("Coming Soon")),
        ("listing.created".to_owned(), json!("Coming Soon")),
        ("listing.status_changed".to_owned(), json!("Active")),
        ("listing.status_changed".to_owned(), json!("Sold")),
    ];
    tests::deployment::eventually(PATIENCE, "the listing's four arrivals", || async {
        (arrivals_of(&ctx, &first).len() >= 4).then_some(())
    })
    .await;
    // Settled: every delivery to the endpoint is done, so nothing more
    // comes for it.
    tests::deployment::eventually(PATIENCE, "every delivery to be done", || async {
        ctx.deliveries(&endpoint_id)
            .await
            .iter()
            .all(|d| d["status"] == "succeeded" || d["status"] == "failed")
            .then_some(())
    })
    .await;
    assert_eq!(
        arrivals_of(&ctx, &first),
        expected,
        "commit order, retry first"
    );

    // The other listing was not held up: it arrived before the retry.
    let order: Vec<Value> = ctx
        .receiver
        .received()
        .iter()
        .map(|r| r.json()["data"]["listing_number"].clone())
        .collect();
    let other_at = order.iter().position(|n| n == other.as_str()).unwrap();
    let retry_at = order
        .iter()
        .enumerate()
        .filter(|(_, n)| *n == first.as_str())
        .map(|(at, _)| at)
        .nth(1)
        .unwrap();
    assert!(
        other_at < retry_at,
        "another listing goes on meanwhile: {order:?}"
    );

    // The log agrees: each delivery succeeded, the later ones waited for
    // the first one's success.
    let deliveries = ctx.deliveries(&endpoint_id).await;
    assert!(
        deliveries.iter().all(|d| d["status"] == "succeeded"),
        "{deliveries:?}"
    );
}

#[tokio::test]
async fn order_holds_under_a_retried_first_delivery_on_the_embedded_queue() {
    order_holds_under_a_retried_first_delivery(false, Backend::Sqlite).await;
}

#[tokio::test]
async fn order_holds_under_a_retried_first_delivery_on_the_redis_queue() {
    order_holds_under_a_retried_first_delivery(true, Backend::Postgres).await;
}

async fn a_delivery_that_fails_for_good_lets_the_next_go(redis: bool, backend: Backend) {
    // The whole retry schedule in about five seconds.
    let (ctx, endpoint_id) = ordered_ctx(redis, backend, 2000).await;
    ctx.receiver.script(&[500, 500, 500, 500, 500]);
    let number = ctx.create_listing().await;
    activate(&ctx, &number).await;
    set_status(&ctx, &number, "Active").await;

    tests::deployment::eventually(PATIENCE, "five failures, then the next", || async {
        (arrivals_of(&ctx, &number).len() >= 6).then_some(())
    })
    .await;
    let arrivals = arrivals_of(&ctx, &number);
    let types: Vec<&str> = arrivals.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "listing.created",
            "listing.created",
            "listing.created",
            "listing.created",
            "listing.created",
            "listing.status_changed"
        ]
    );
    // Visible as such: the first failed for good, the next succeeded.
    let deliveries = tests::deployment::eventually(PATIENCE, "both settled", || async {
        let deliveries = ctx.deliveries(&endpoint_id).await;
        (deliveries.len() == 2 && deliveries.iter().all(|d| d["status"] != "pending"))
            .then_some(deliveries)
    })
    .await;
    let status_of = |event_type: &str| {
        deliveries
            .iter()
            .find(|d| d["event_type"] == event_type)
            .map(|d| d["status"].clone())
            .unwrap()
    };
    assert_eq!(status_of("listing.created"), "failed");
    assert_eq!(status_of("listing.status_changed"), "succeeded");
}

#[tokio::test]
async fn a_delivery_that_fails_for_good_lets_the_next_go_on_the_embedded_queue() {
    a_delivery_that_fails_for_good_lets_the_next_go(false, Backend::Sqlite).await;
}

#[tokio::test]
async fn a_delivery_that_fails_for_good_lets_the_next_go_on_the_redis_queue() {
    a_delivery_that_fails_for_good_lets_the_next_go(true, Backend::Postgres).await;
}
