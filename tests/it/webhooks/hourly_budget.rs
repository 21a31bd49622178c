//! The hourly budget: an endpoint over its thousand attempts an hour has new
//! deliveries deferred to the second a slot frees, not dropped.

use std::time::Duration;

use serde_json::json;
use storage::webhooks::{AfterAttempt, Attempt, DeliveryKind};

use super::{Ctx, CtxOptions};
use crate::support::expect_ok;

#[tokio::test]
async fn an_endpoint_over_its_hourly_budget_has_deliveries_delayed_not_dropped() {
    // A manual store clock kept on the wall clock's seconds until the test
    // moves it: the queue runs the deferred job by the wall clock, the
    // budget is counted by the store's.
    let clock = storage::Clock::manual(storage::Timestamp::from_micros(
        chrono::Utc::now().timestamp() * 1_000_000,
    ));
    let ctx = Ctx::with(
        tests::Backend::Sqlite,
        CtxOptions {
            clock: Some(clock.clone()),
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    let endpoint = ctx
        .app
        .store
        .webhooks()
        .get(&ctx.live(), &endpoint_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let webhooks = ctx.app.store.webhooks();
    // A successful attempt of a delivery of its own at `started_at` (the
    // failure count stays out of it).
    let fill = |started_at: storage::Timestamp| {
        let endpoint = endpoint.clone();
        let webhooks = ctx.app.store.webhooks();
        async move {
            let template = storage::webhooks::Delivery {
                id: storage::ids::DeliveryId::generate(),
                endpoint_id: endpoint.id.clone(),
                agency_id: endpoint.agency_id.clone(),
                kind: DeliveryKind::Event,
                replay_of: None,
                event_id: storage::ids::EventId::generate(),
                event_type: "listing.created".into(),
                api_version: "2026-05-29".into(),
                occurred_at: started_at,
                is_sandbox: false,
                data: json!({}),
                status: storage::webhooks::DeliveryStatus::Pending,
                attempts: 0,
                next_attempt_at: None,
                created_at: started_at,
                completed_at: None,
            };
            let delivery = webhooks
                .create_manual(&endpoint, DeliveryKind::Event, &template)
                .await
                .unwrap();
            let attempt = Attempt {
                attempt: 1,
                nonce: ulid::Ulid::generate().to_string(),
                started_at,
                duration_ms: 1,
                outcome: "succeeded".into(),
                status_code: Some(200),
                response_excerpt: None,
                error: None,
            };
            webhooks
                .record_attempt(&delivery, &attempt, AfterAttempt::Succeeded)
                .await
                .unwrap();
        }
    };
    // 999 attempts within the last minute...
    let filled_at = clock.now();
    futures::future::join_all((1..1000).map(|i| fill(filled_at.plus_seconds(-i64::from(i % 60)))))
        .await;
    // ... and, the store's clock put back on the wall clock's next second,
    // the oldest of the hour's thousand, which leaves the hour `SLACK`
    // seconds from now: the slot it frees comes soon by the wall clock too.
    const SLACK: i64 = 8;
    let behind = chrono::Utc::now().timestamp() + 1 - clock.now().as_unix_seconds();
    clock.advance_seconds(behind.max(0));
    let now = clock.now();
    let oldest = now.plus_seconds(-3600 + SLACK);
    fill(oldest).await;
    assert_eq!(
        webhooks
            .attempts_since(&endpoint_id.parse().unwrap(), now.plus_seconds(-3600))
            .await
            .unwrap(),
        1000
    );

    ctx.create_listing().await;
    // The new delivery is held back: no attempt, still pending, and its next
    // attempt recorded for the second the oldest attempt leaves the hour.
    let slot = oldest.plus_seconds(3601);
    let delivery_id =
        tests::deployment::eventually(Duration::from_secs(30), "the delivery", || async {
            let newest = ctx.deliveries(&endpoint_id).await.remove(0);
            (newest["attempts"] == 0).then(|| newest["id"].as_str().unwrap().to_owned())
        })
        .await;
    // Created due now; deferred, due later.
    let held = tests::deployment::eventually(Duration::from_secs(30), "the deferral", || async {
        let delivery = webhooks
            .delivery(&ctx.live(), &delivery_id.parse().unwrap())
            .await
            .unwrap()
            .unwrap();
        (delivery.next_attempt_at > Some(now)).then_some(delivery)
    })
    .await;
    assert_eq!(held.next_attempt_at, Some(slot), "{held:?}");
    assert_eq!(held.status, storage::webhooks::DeliveryStatus::Pending);
    assert_eq!(held.attempts, 0);
    assert!(webhooks.attempts(&held.id).await.unwrap().is_empty());
    assert_eq!(ctx.receiver.arrivals(), 0, "over budget: delayed");
    let read = expect_ok(
        ctx.get(&format!("/api/v1/webhooks/deliveries/{}", held.id))
            .await,
    )
    .await;
    assert_eq!(read["next_attempt_at"], slot.to_rfc3339(), "{read}");

    // The hour of the oldest attempt passes: the deferred attempt is made
    // (not by the overdue sweep: it is not a minute late), at its slot.
    clock.advance_seconds(SLACK + 1);
    let received = ctx.receiver.wait_for(1, Duration::from_secs(60)).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].json()["event_id"], held.event_id.as_str());
    let delivered = ctx
        .delivery_until(held.id.as_str(), |d| d["status"] == "succeeded")
        .await;
    assert_eq!(delivered["attempts"], 1);
    let log = webhooks.attempts(&held.id).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].started_at, slot, "made when the slot freed");
}
