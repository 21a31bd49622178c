//! Deliveries: signature, headers and envelope; the environment filter; no
//! cross-agency delivery; the retry schedule end to end; failure counting,
//! auto-disable at 50 and re-enabling.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use storage::webhooks::{AfterAttempt, Attempt, DeliveryKind, WebhookEndpoint};
use tests::backend_tests;
use tests::receiver::Received;
use webhook_verify::{Verdict, Verifier};

use super::{Ctx, CtxOptions, SCOPES};
use crate::support::expect_ok;

fn is_ulid(text: &str) -> bool {
    ulid::Ulid::from_string(text).is_ok()
}

/// Checks a delivery's signature, headers and envelope against `secret`.
fn assert_signed_delivery(received: &Received, secret: &str) -> Value {
    let signature = received.header("x-webhook-signature").unwrap();
    let timestamp = received.header("x-webhook-timestamp").unwrap();
    let expected = {
        use hmac::{Hmac, KeyInit, Mac};
        let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(&received.body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    };
    assert_eq!(signature, expected);
    assert_eq!(received.header("x-mediaagency-signature"), Some(signature));
    let now = chrono::Utc::now().timestamp();
    let signed_at: i64 = timestamp.parse().unwrap();
    assert!(
        (now - signed_at).abs() <= 60,
        "signing time {signed_at} vs now {now}"
    );
    assert_eq!(received.header("content-type"), Some("application/json"));
    let envelope = received.json();
    let text = String::from_utf8_lossy(&received.body);
    let positions: Vec<usize> = [
        "event_id",
        "event_type",
        "api_version",
        "timestamp",
        "nonce",
        "is_sandbox",
        "data",
    ]
    .iter()
    .map(|field| {
        text.find(&format!("\"{field}\":"))
            .unwrap_or_else(|| panic!("{field} in {text}"))
    })
    .collect();
    assert!(
        positions.windows(2).all(|p| p[0] < p[1]),
        "the envelope's fields, in order: {text}"
    );
    assert_eq!(envelope.as_object().unwrap().len(), 7);
    assert!(is_ulid(envelope["event_id"].as_str().unwrap()));
    assert!(is_ulid(envelope["nonce"].as_str().unwrap()));
    assert_eq!(received.header("x-event-id"), envelope["event_id"].as_str());
    assert_eq!(
        received.header("x-webhook-event-type"),
        envelope["event_type"].as_str()
    );
    assert_eq!(envelope["api_version"], "2026-05-29");
    assert!(envelope["timestamp"].as_i64().unwrap() > 1_700_000_000);
    assert!(envelope["data"].is_object());
    // And the receiver crate agrees.
    let verdict = Verifier::new(secret)
        .verify_now(&received.headers, &received.body)
        .unwrap();
    assert!(matches!(verdict, Verdict::Accepted(_)));
    envelope
}

/// Records `count` deliveries to `endpoint` whose last attempt failed for
/// good, in its own pool; returns the notification the failures raised, if any.
async fn record_failed_deliveries(
    ctx: &Ctx,
    endpoint: &WebhookEndpoint,
    count: usize,
) -> Option<String> {
    let webhooks = ctx.app.store.webhooks();
    let mut notification = None;
    for _ in 0..count {
        let now = ctx.app.store.clock().now();
        let template = storage::webhooks::Delivery {
            id: String::new(),
            endpoint_id: endpoint.id.clone(),
            agency_id: endpoint.agency_id.clone(),
            kind: DeliveryKind::Event,
            replay_of: None,
            event_id: ulid::Ulid::generate().to_string(),
            event_type: "listing.created".into(),
            api_version: "2026-05-29".into(),
            occurred_at: now,
            is_sandbox: endpoint.pool == storage::Environment::Sandbox,
            data: json!({}),
            status: storage::webhooks::DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: None,
            created_at: now,
            completed_at: None,
        };
        let delivery = webhooks
            .create_manual(endpoint, DeliveryKind::Event, &template)
            .await
            .unwrap();
        let attempt = Attempt {
            attempt: 5,
            nonce: ulid::Ulid::generate().to_string(),
            started_at: now,
            duration_ms: 1,
            outcome: "http_error".into(),
            status_code: Some(500),
            response_excerpt: None,
            error: None,
        };
        let recorded = webhooks
            .record_attempt(&delivery, &attempt, AfterAttempt::Failed)
            .await
            .unwrap();
        notification = notification.or(recorded.notification_id);
    }
    notification
}

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
                    .delivery(&ctx.live(), &delivery_id)
                    .await
                    .unwrap()
                    .unwrap();
                (delivery.attempts >= number).then_some(delivery)
            })
            .await;
        // The next attempt, if any, waits at the receiver: nothing moved since.
        assert_eq!(delivery.attempts, number, "one attempt at a time");
        let log = webhooks.attempts(&delivery_id).await.unwrap();
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
    async fn an_event_is_delivered_signed_with_the_envelope(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, secret) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        let number = ctx.create_listing().await;
        let received = ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
        let envelope = assert_signed_delivery(&received[0], &secret);
        assert_eq!(envelope["event_type"], "listing.created");
        assert_eq!(envelope["is_sandbox"], false);
        assert_eq!(envelope["data"]["listing_number"], number.as_str());
        // invoice.created was not subscribed: nothing else arrives.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(ctx.receiver.received().len(), 1);

        let deliveries = ctx.deliveries(&endpoint_id).await;
        assert_eq!(deliveries.len(), 1);
        let delivery = ctx
            .delivery_until(deliveries[0]["id"].as_str().unwrap(), |d| d["status"] == "succeeded")
            .await;
        assert_eq!(delivery["attempts"], 1);
        assert_eq!(delivery["event_id"], envelope["event_id"]);
        let attempt = &delivery["attempt_log"][0];
        assert_eq!(attempt["outcome"], "succeeded");
        assert_eq!(attempt["status_code"], 200);
        assert_eq!(attempt["nonce"], envelope["nonce"]);
    }

    async fn environments_choose_which_events_an_endpoint_hears(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox_key = ctx.sandbox_key().await;
        let types = json!({ "event_types": ["listing.created"] });
        let mut live_only = types.clone();
        live_only["environment"] = "live".into();
        let mut both = types.clone();
        both["environment"] = "Both".into();
        let (live_id, _) = ctx.register_with(&ctx.key, live_only).await;
        let (both_id, _) = ctx.register_with(&ctx.key, both).await;
        let (sandbox_id, _) = ctx.register_with(&sandbox_key, types).await;

        ctx.create_listing().await;
        ctx.create_listing_with(&sandbox_key).await;
        // live → live and both; sandbox → both and sandbox.
        let received = ctx.receiver.wait_for(4, Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(ctx.receiver.received().len(), 4, "{received:?}");
        let sandboxed = received.iter().filter(|r| r.json()["is_sandbox"] == true).count();
        assert_eq!(sandboxed, 2);

        assert_eq!(ctx.deliveries(&live_id).await.len(), 1);
        assert_eq!(ctx.deliveries(&both_id).await.len(), 2);
        let sandbox_deliveries: Value = ctx
            .send(Method::GET, &format!("/api/v1/webhooks/endpoints/{sandbox_id}/deliveries"), &sandbox_key, None)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(sandbox_deliveries["items"].as_array().unwrap().len(), 1);
        assert_eq!(sandbox_deliveries["items"][0]["is_sandbox"], true);
        let live_deliveries = ctx.deliveries(&live_id).await;
        assert_eq!(live_deliveries[0]["is_sandbox"], false);
    }

    async fn another_agencys_events_never_reach_an_endpoint(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, _) = ctx.register().await;
        // A second agency with its own listing.
        let other = ctx.app.agency().await;
        let other_agent = crate::listings::add_user(&ctx.app, &other, storage::users::Role::Agent).await;
        let other_key = ctx.app.key(&other, &SCOPES).await;
        let body = json!({
            "address": "1 Other Road",
            "owner_user_id": other.owner_id,
            "agent_one_id": other_agent,
        });
        let response = ctx.send(Method::POST, "/api/v1/listings", &other_key, Some(&body)).await;
        assert_eq!(response.status(), 201);
        // Our own listing arrives; theirs never does.
        let number = ctx.create_listing().await;
        let received = ctx.receiver.wait_for(2, Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let received = if received.len() < ctx.receiver.received().len() { ctx.receiver.received() } else { received };
        assert_eq!(received.len(), 2, "listing.created and invoice.created of our listing only");
        for delivery in &received {
            let data = delivery.json()["data"].clone();
            assert_eq!(data["listing_number"], number.as_str(), "{data}");
        }
        assert_eq!(ctx.deliveries(&endpoint_id).await.len(), 2);
    }

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

    async fn fifty_failed_deliveries_in_a_row_disable_the_endpoint_until_reenabled(backend) {
        let relay = tests::smtp::SmtpSink::start().await;
        let ctx = Ctx::with_mail_relay(backend, &relay.url).await;
        crate::support::sql::set_user_email(ctx.app.store.db(), ctx.agency.owner_id.as_str(), "owner@agency.example").await;
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        let endpoint: WebhookEndpoint = ctx.app.store.webhooks().get(&ctx.live(), &endpoint_id).await.unwrap().unwrap();
        // Forty-nine deliveries that already failed for good.
        let webhooks = ctx.app.store.webhooks();
        record_failed_deliveries(&ctx, &endpoint, 49).await;
        let before = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
        assert_eq!(before["consecutive_failures"], 49);
        assert_eq!(before["status"], "enabled");

        // The fiftieth fails through the whole schedule.
        ctx.receiver.answer(503);
        ctx.create_listing().await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let disabled = loop {
            let endpoint = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
            if endpoint["status"] == "disabled" {
                break endpoint;
            }
            assert!(std::time::Instant::now() < deadline, "{endpoint}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(disabled["disabled_reason"], "auto_disabled_consecutive_failures");
        assert_eq!(disabled["consecutive_failures"], 50);
        let notifications = webhooks.notifications(&ctx.agency.id).await.unwrap();
        assert_eq!(notifications.len(), 1);
        assert_eq!(notifications[0].kind, "webhook_endpoint_disabled");
        assert_eq!(notifications[0].user_id.as_ref(), Some(&ctx.agency.owner_id));
        assert!(notifications[0].body.contains(&endpoint_id));
        // And e-mailed to the owner through the relay.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mail = loop {
            if let Some(mail) = relay.received().pop() {
                break mail;
            }
            assert!(std::time::Instant::now() < deadline, "no e-mail reached the relay");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(mail.to, ["owner@agency.example"]);
        assert_eq!(mail.from, "no-reply@example.com");
        assert!(mail.data.contains(&endpoint_id), "{}", mail.data);
        assert!(mail.data.contains("auto_disabled_consecutive_failures"), "{}", mail.data);

        // Disabled: new events are not attempted.
        let attempts_so_far = ctx.receiver.received().len();
        ctx.create_listing().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(ctx.receiver.received().len(), attempts_so_far);
        // ... but recorded as failed without an attempt, to replay later.
        let missed = ctx.deliveries(&endpoint_id).await.remove(0);
        assert_eq!(missed["status"], "failed", "{missed}");
        assert_eq!(missed["attempts"], 0, "{missed}");

        // The owner re-enables it; deliveries resume and the count is reset.
        ctx.receiver.answer(200);
        let enabled = expect_ok(ctx.post(&format!("/api/v1/webhooks/endpoints/{endpoint_id}/enable"), &json!({})).await).await;
        assert_eq!(enabled["status"], "enabled");
        assert_eq!(enabled["consecutive_failures"], 0);
        ctx.create_listing().await;
        ctx.receiver.wait_for(attempts_so_far + 1, Duration::from_secs(20)).await;
    }
}

#[tokio::test]
async fn deliveries_flow_through_the_redis_queue() {
    let ctx = Ctx::with_redis(tests::Backend::Postgres).await;
    let (_, secret) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    let number = ctx.create_listing().await;
    let received = ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
    let envelope = assert_signed_delivery(&received[0], &secret);
    assert_eq!(envelope["data"]["listing_number"], number.as_str());
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
            workers::webhooks::client::signature(&secret, timestamp, &received.body)
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
        let log = webhooks.attempts(&delivery_id).await.unwrap();
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
        .get(&ctx.live(), &endpoint_id)
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
                id: String::new(),
                endpoint_id: endpoint.id.clone(),
                agency_id: endpoint.agency_id.clone(),
                kind: DeliveryKind::Event,
                replay_of: None,
                event_id: ulid::Ulid::generate().to_string(),
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
            .attempts_since(&endpoint_id, now.plus_seconds(-3600))
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
            .delivery(&ctx.live(), &delivery_id)
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
        .delivery_until(&held.id, |d| d["status"] == "succeeded")
        .await;
    assert_eq!(delivered["attempts"], 1);
    let log = webhooks.attempts(&held.id).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].started_at, slot, "made when the slot freed");
}

backend_tests! {
    async fn the_sweep_offers_a_lost_attempt_once_per_interval_and_fails_orphaned_test_fires(backend) {
        let start = storage::Timestamp::from_micros(1_800_000_000_000_000);
        let clock = storage::Clock::manual(start);
        let app = tests::TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let tenant = storage::Tenant::new(agency.id.clone(), storage::Environment::Live);
        let webhooks = app.store.webhooks();
        let (endpoint, _) = webhooks
            .create(&tenant, storage::webhooks::NewEndpoint {
                name: None,
                url: "https://receiver.example/hooks".into(),
                event_types: None,
                environment: storage::webhooks::EndpointEnvironment::Live,
                created_by: None,
            })
            .await
            .unwrap();
        let template = |kind| storage::webhooks::Delivery {
            id: String::new(),
            endpoint_id: endpoint.id.clone(),
            agency_id: endpoint.agency_id.clone(),
            kind,
            replay_of: None,
            event_id: ulid::Ulid::generate().to_string(),
            event_type: "listing.created".into(),
            api_version: "2026-05-29".into(),
            occurred_at: start,
            is_sandbox: false,
            data: json!({}),
            status: storage::webhooks::DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: None,
            created_at: start,
            completed_at: None,
        };
        // A delivery whose job was never pushed, and a test fire whose request went away.
        let lost = webhooks.create_manual(&endpoint, DeliveryKind::Event, &template(DeliveryKind::Event)).await.unwrap();
        let orphan = webhooks.create_manual(&endpoint, DeliveryKind::TestFire, &template(DeliveryKind::TestFire)).await.unwrap();

        // Not yet overdue.
        let now = clock.now();
        assert!(webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap().is_empty());
        clock.advance_seconds(120);
        let now = clock.now();
        let offered = webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap();
        assert_eq!(offered, vec![(lost.id.clone(), 1)]);
        // Offered once per interval, not at every tick.
        assert!(webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap().is_empty());
        clock.advance_seconds(700);
        let now = clock.now();
        let again = webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap();
        assert_eq!(again, vec![(lost.id.clone(), 1)]);
        let orphan = webhooks.delivery(&tenant, &orphan.id).await.unwrap().unwrap();
        assert_eq!(orphan.status, storage::webhooks::DeliveryStatus::Failed);
        assert!(orphan.completed_at.is_some());
    }
}

backend_tests! {
    async fn a_sandbox_endpoints_disable_notice_is_recorded_not_emailed(backend) {
        let relay = tests::smtp::SmtpSink::start().await;
        let ctx = Ctx::with_mail_relay(backend, &relay.url).await;
        crate::support::sql::set_user_email(ctx.app.store.db(), ctx.agency.owner_id.as_str(), "owner@agency.example").await;
        let sandbox = ctx.sandbox_key().await;
        let (endpoint_id, _) = ctx.register_with(&sandbox, json!({ "event_types": ["listing.created"] })).await;
        let tenant = storage::Tenant::new(ctx.agency.id.clone(), storage::Environment::Sandbox);
        let endpoint: WebhookEndpoint = ctx.app.store.webhooks().get(&tenant, &endpoint_id).await.unwrap().unwrap();
        let webhooks = ctx.app.store.webhooks();
        let notification = record_failed_deliveries(&ctx, &endpoint, 50).await;
        let notification_id = notification.expect("the fiftieth failure raises a notification");
        ctx.app
            .state
            .platform()
            .queue
            .push(jobs::kinds::SendNotification { notification_id: notification_id.clone() }, jobs::PushOptions::default())
            .await
            .unwrap();
        let effects = tests::deployment::eventually(Duration::from_secs(20), "the recorded e-mail", || async {
            let effects = ctx.app.store.sandbox().side_effects(&ctx.agency.id).await.unwrap();
            (!effects.is_empty()).then_some(effects)
        })
        .await;
        assert_eq!(effects.len(), 1);
        assert_eq!(effects[0].kind, "email");
        assert_eq!(effects[0].subject, "owner@agency.example");
        assert!(effects[0].detail.contains(&notification_id));
        let (_, _, sent_at) = webhooks.notification_to_send(&notification_id).await.unwrap().unwrap();
        assert!(sent_at.is_some(), "settled, so no sweep sends it later");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(relay.received().is_empty(), "the sandbox e-mails nobody");
    }
}

/// The first delivery of `endpoint_id` once it has made `attempts` attempts.
async fn first_delivery_after(ctx: &Ctx, endpoint_id: &str, attempts: i64) -> Value {
    let deliveries = ctx.deliveries(endpoint_id).await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let id = deliveries[0]["id"].as_str().unwrap();
    ctx.delivery_until(id, |d| d["attempts"].as_i64() >= Some(attempts))
        .await
}

backend_tests! {
    async fn an_attempt_keeps_at_most_a_kib_of_the_receivers_answer(backend) {
        let ctx = Ctx::new(backend).await;
        // Over 1 KiB, with a two-byte character across the 1024th byte: the
        // excerpt must stop before it rather than split it.
        let body = format!("{}é{}", "e".repeat(1023), "z".repeat(2000));
        ctx.receiver.answer_with_body(500, body.clone());
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        ctx.create_listing().await;
        ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
        let delivery = first_delivery_after(&ctx, &endpoint_id, 1).await;
        for attempt in delivery["attempt_log"].as_array().unwrap() {
            assert_eq!(attempt["outcome"], "http_error", "{attempt}");
            assert_eq!(attempt["status_code"], 500);
            assert!(attempt["duration_ms"].as_u64().is_some(), "{attempt}");
            let excerpt = attempt["response_excerpt"].as_str().unwrap();
            assert!(excerpt.len() <= 1024, "{} bytes", excerpt.len());
            assert!(body.starts_with(excerpt), "a prefix of the answer: {excerpt:?}");
            assert_eq!(excerpt, "e".repeat(1023), "all that fits, whole characters only");
        }
    }

    async fn redirects_are_not_followed_and_the_attempt_fails(backend) {
        // The real schedule: the second attempt is 30 seconds away, so the
        // delivery rests in its retrying state while the test reads it.
        let ctx = Ctx::with_speedup(backend, 1).await;
        // The target shares the receiver's certificate: were the redirect
        // followed, the request would reach it.
        let target = ctx.receiver.beside().await;
        ctx.receiver.redirect_to(302, &target.url);
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        ctx.create_listing().await;
        ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
        let delivery = first_delivery_after(&ctx, &endpoint_id, 1).await;
        assert_eq!(delivery["status"], "retrying", "{delivery}");
        assert_eq!(delivery["attempts"], 1);
        assert!(delivery["completed_at"].is_null());
        let attempt = &delivery["attempt_log"][0];
        assert_eq!(attempt["outcome"], "http_error", "{attempt}");
        assert_eq!(attempt["status_code"], 302);
        let started = chrono::DateTime::parse_from_rfc3339(attempt["started_at"].as_str().unwrap()).unwrap();
        let next = chrono::DateTime::parse_from_rfc3339(delivery["next_attempt_at"].as_str().unwrap()).unwrap();
        let wait = (next - started).num_milliseconds();
        assert!((29_000..=31_000).contains(&wait), "the second attempt 30 s later, not {wait} ms");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(target.received().is_empty(), "the redirect target heard nothing");
        assert_eq!(ctx.receiver.received().len(), 1);
    }
}
