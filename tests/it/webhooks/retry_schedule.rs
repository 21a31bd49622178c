//! The retry schedule end to end, read exactly from what the store records:
//! a failing receiver gets every wait of the schedule then the delivery
//! fails; a failure then a success, through the Redis queue; a success
//! resets the endpoint's failure count.

use std::time::Duration;

use serde_json::{Value, json};
use tests::backend_tests;
use tests::receiver::Received;

use super::{Ctx, CtxOptions};
use crate::support::expect_ok;

/// The retry schedule's waits, in seconds, after failed attempts 1 to 4
/// (the specification's table).
const SCHEDULE_SECONDS: [i64; 4] = [30, 300, 1_800, 7_200];

/// A manual store clock a day behind the wall clock, on a whole second. The
/// queue runs a job when the wall clock reaches its `run_at`, so every retry
/// is due at once; the store's times (attempt log, `next_attempt_at`) move
/// only when the test moves them, so the schedule can be read exactly at
/// the real pace (speedup 1).
fn clock_a_day_behind() -> storage::Clock {
    let now = chrono::Utc::now().timestamp();
    storage::Clock::manual(storage::Timestamp::from_micros((now - 86_400) * 1_000_000))
}

/// A context whose deliveries run at the real schedule's pace under `clock`.
async fn ctx_on_clock(backend: tests::Backend, redis: bool, clock: &storage::Clock) -> Ctx {
    Ctx::with(
        backend,
        CtxOptions {
            redis,
            speedup: Some(1),
            clock: Some(clock.clone()),
            ..CtxOptions::default()
        },
    )
    .await
}

/// One failed attempt as the store saw it: when it started, when its
/// failure was recorded, and the `next_attempt_at` it left on the delivery.
#[derive(Debug)]
struct Failure {
    started_at: storage::Timestamp,
    failed_at: storage::Timestamp,
    next_attempt_at: Option<storage::Timestamp>,
}

/// Lets the first `failures` attempts of the endpoint's only delivery fail
/// one at a time through the held receiver (which must answer them with an
/// error). Attempt k, once it is at the receiver, is held while the store's
/// clock moves k seconds (a slow receiver), then answered; the delivery is
/// read once the failure is recorded, before the next attempt (held in its
/// turn) is let through. Returns the delivery's id and the failures.
async fn fail_attempts_one_by_one(
    ctx: &Ctx,
    clock: &storage::Clock,
    endpoint_id: &str,
    failures: usize,
) -> (String, Vec<Failure>) {
    let webhooks = ctx.app.store.webhooks();
    let within = Duration::from_secs(60);
    let mut delivery_id = String::new();
    let mut seen = Vec::new();
    for k in 1..=failures {
        ctx.receiver.wait_for_arrivals(k, within).await;
        if k == 1 {
            let deliveries = ctx.deliveries(endpoint_id).await;
            assert_eq!(deliveries.len(), 1, "{deliveries:?}");
            delivery_id = deliveries[0]["id"].as_str().unwrap().to_owned();
        }
        // Attempt k is held at the receiver. The clock has not moved since
        // attempt k - 1 was recorded, before this one started.
        let started_at = clock.now();
        clock.advance_seconds(i64::try_from(k).unwrap());
        let failed_at = clock.now();
        ctx.receiver.release(1);
        let number = i32::try_from(k).unwrap();
        let delivery =
            tests::deployment::eventually(within, "the failed attempt recorded", || async {
                let delivery = webhooks
                    .delivery(&ctx.live(), &delivery_id.parse().unwrap())
                    .await
                    .unwrap()
                    .unwrap();
                (delivery.attempts >= number).then_some(delivery)
            })
            .await;
        // The next attempt, if any, waits at the receiver: nothing moved since.
        assert_eq!(delivery.attempts, number, "one attempt at a time");
        let log = webhooks
            .attempts(&delivery_id.parse().unwrap())
            .await
            .unwrap();
        assert_eq!(log.len(), k);
        assert_eq!(
            log[k - 1].started_at,
            started_at,
            "attempt {k} started at the recorded time"
        );
        seen.push(Failure {
            started_at,
            failed_at,
            next_attempt_at: delivery.next_attempt_at,
        });
    }
    (delivery_id, seen)
}

backend_tests! {
    async fn a_failing_receiver_gets_the_retry_schedule_then_the_delivery_fails(backend) {
        // The real schedule on a store clock the test moves: each failure's
        // wait is read exactly from what the store recorded.
        let clock = clock_a_day_behind();
        let ctx = ctx_on_clock(backend, false, &clock).await;
        ctx.receiver.answer(500);
        ctx.receiver.hold();
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        ctx.create_listing().await;
        let (delivery_id, failures) = fail_attempts_one_by_one(&ctx, &clock, &endpoint_id, 5).await;
        // After each of the first four failures the next attempt is due
        // exactly the schedule's wait after the failure was recorded (not
        // after the attempt started: attempt k was held k seconds).
        let waits: Vec<i64> = failures[..4]
            .iter()
            .map(|f| {
                let next = f.next_attempt_at.unwrap_or_else(|| panic!("a retry after {f:?}"));
                assert_eq!((next.as_micros() - f.failed_at.as_micros()) % 1_000_000, 0, "{f:?}");
                (next.as_micros() - f.failed_at.as_micros()) / 1_000_000
            })
            .collect();
        assert_eq!(waits, SCHEDULE_SECONDS, "{failures:?}");
        for (k, failure) in failures.iter().enumerate() {
            let held = i64::try_from(k + 1).unwrap();
            assert_eq!(failure.failed_at, failure.started_at.plus_seconds(held));
        }
        // The fifth failure is final: nothing more is due.
        assert_eq!(failures[4].next_attempt_at, None, "{failures:?}");
        ctx.receiver.stop_holding();
        let received = ctx.receiver.wait_for(5, Duration::from_secs(20)).await;
        // Every attempt has a new nonce and the same event id.
        let envelopes: Vec<Value> = received.iter().map(Received::json).collect();
        let mut nonces: Vec<&str> = envelopes.iter().map(|e| e["nonce"].as_str().unwrap()).collect();
        nonces.sort_unstable();
        nonces.dedup();
        assert_eq!(nonces.len(), 5);
        assert!(envelopes.iter().all(|e| e["event_id"] == envelopes[0]["event_id"]));
        assert!(received.iter().all(|r| r.header("x-event-id") == envelopes[0]["event_id"].as_str()));

        let failed = ctx.delivery_until(&delivery_id, |d| d["status"] == "failed").await;
        assert_eq!(failed["attempts"], 5);
        assert!(failed["next_attempt_at"].is_null(), "{failed}");
        let outcomes: Vec<&Value> = failed["attempt_log"].as_array().unwrap().iter().map(|a| &a["status_code"]).collect();
        assert_eq!(outcomes, vec![&json!(500); 5]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(ctx.receiver.arrivals(), 5, "no sixth attempt");
        let endpoint = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
        assert_eq!(endpoint["consecutive_failures"], 1);

        // A success resets the count.
        ctx.receiver.answer(200);
        ctx.create_listing().await;
        ctx.receiver.wait_for(6, Duration::from_secs(20)).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let endpoint = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
            if endpoint["consecutive_failures"] == 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{endpoint}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_delivery_failing_then_succeeding_is_retried_on_the_schedule_through_the_redis_queue() {
    let clock = clock_a_day_behind();
    let ctx = ctx_on_clock(tests::Backend::Postgres, true, &clock).await;
    ctx.receiver.script(&[500, 503]);
    ctx.receiver.hold();
    let (endpoint_id, secret) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    let number = ctx.create_listing().await;
    let (delivery_id, failures) = fail_attempts_one_by_one(&ctx, &clock, &endpoint_id, 2).await;
    let waits: Vec<i64> = failures
        .iter()
        .map(|f| {
            let next = f.next_attempt_at.expect("a retry is due");
            next.as_micros() - f.failed_at.as_micros()
        })
        .collect();
    assert_eq!(waits, [30_000_000, 300_000_000], "{failures:?}");
    // The third attempt is at the receiver: let it succeed.
    ctx.receiver
        .wait_for_arrivals(3, Duration::from_secs(60))
        .await;
    ctx.receiver.stop_holding();
    let received = ctx.receiver.wait_for(3, Duration::from_secs(20)).await;
    let delivered = ctx
        .delivery_until(&delivery_id, |d| d["status"] == "succeeded")
        .await;
    assert_eq!(delivered["attempts"], 3);
    let log = delivered["attempt_log"].as_array().unwrap();
    let codes: Vec<&Value> = log.iter().map(|a| &a["status_code"]).collect();
    assert_eq!(codes, [&json!(500), &json!(503), &json!(200)]);
    // One event id throughout, a new nonce per attempt, each recorded with
    // its attempt, every attempt signed.
    let envelopes: Vec<Value> = received.iter().map(Received::json).collect();
    for (envelope, attempt) in envelopes.iter().zip(log) {
        assert_eq!(envelope["event_id"], delivered["event_id"]);
        assert_eq!(envelope["nonce"], attempt["nonce"]);
        assert_eq!(envelope["data"]["listing_number"], number.as_str());
    }
    for received in &received {
        assert_eq!(
            received.header("x-event-id"),
            delivered["event_id"].as_str()
        );
        let signature = received.header("x-webhook-signature").unwrap();
        let timestamp: i64 = received
            .header("x-webhook-timestamp")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            signature,
            platform::webhooks::client::signature(&secret, timestamp, &received.body)
        );
    }
    let mut nonces: Vec<&str> = envelopes
        .iter()
        .map(|e| e["nonce"].as_str().unwrap())
        .collect();
    nonces.sort_unstable();
    nonces.dedup();
    assert_eq!(nonces.len(), 3, "a new nonce per attempt");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ctx.receiver.arrivals(), 3, "nothing after the success");
}
