//! A retry never comes before it is due, on any queue.

use std::time::Duration;

use serde_json::json;
use tests::backend_tests;

use super::{Ctx, CtxOptions};

/// A failed first attempt, then a retry the queue must not run before it
/// is due: the retry arrives no sooner than the (sped-up) wait after the
/// first arrived, and starts no sooner than the `next_attempt_at` recorded.
/// Lower bounds only: how late it may come is the machine's business.
async fn a_retry_never_comes_before_its_time(redis: bool, backend: tests::Backend) {
    // 30 s / 30 = 1 s: short, yet long enough that an early run shows.
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            speedup: Some(30),
            ..CtxOptions::default()
        },
    )
    .await;
    ctx.receiver.script(&[500]);
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    let received = ctx.receiver.wait_for(2, Duration::from_secs(60)).await;
    assert!(
        received[1].at.duration_since(received[0].at) >= Duration::from_secs(1),
        "the retry came {:?} after the first attempt",
        received[1].at.duration_since(received[0].at)
    );
    let delivery_id = ctx.deliveries(&endpoint_id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let webhooks = ctx.app.store.webhooks();
    let log = tests::deployment::eventually(Duration::from_secs(20), "two attempts", || async {
        let log = webhooks
            .attempts(&delivery_id.parse().unwrap())
            .await
            .unwrap();
        (log.len() == 2).then_some(log)
    })
    .await;
    // The first failure was recorded after its start: the retry is due a
    // second after that at the earliest.
    assert!(
        log[1].started_at >= log[0].started_at.plus_seconds(1),
        "{log:?}"
    );
    let delivery = ctx
        .delivery_until(&delivery_id, |d| d["status"] == "succeeded")
        .await;
    assert_eq!(delivery["attempts"], 2);
}

#[tokio::test]
async fn a_retry_on_the_redis_queue_never_comes_before_its_time() {
    a_retry_never_comes_before_its_time(true, tests::Backend::Postgres).await;
}

backend_tests! {
    async fn a_retry_never_comes_early(backend) {
        a_retry_never_comes_before_its_time(false, backend).await;
    }
}
