//! Replay of a past delivery and test fires with each verdict, and their
//! per-endpoint budgets.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tests::backend_tests;
use webhook_verify::Verifier;

use super::Ctx;
use crate::support::{expect_created, expect_error, expect_ok};

backend_tests! {
    async fn a_replay_resends_the_event_signed_with_the_current_secret(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, old_secret) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        ctx.create_listing().await;
        let first = ctx.receiver.wait_for(1, Duration::from_secs(20)).await.remove(0);
        let original_id = ctx.deliveries(&endpoint_id).await[0]["id"].as_str().unwrap().to_owned();

        // No overlap: the old secret stops at once.
        let rotated = expect_ok(ctx.post(&format!("/api/v1/webhooks/endpoints/{endpoint_id}/rotate-secret"), &json!({ "previous_secret_expires_in": 0 })).await).await;
        let new_secret = rotated["secret"].as_str().unwrap();

        let response = ctx.post(&format!("/api/v1/webhooks/deliveries/{original_id}/replay"), &json!({})).await;
        assert_eq!(response.status(), 201);
        let replay: Value = response.json().await.unwrap();
        assert_eq!(replay["kind"], "replay");
        assert_eq!(replay["replay_of"], original_id.as_str());
        assert_eq!(replay["status"], "succeeded");
        assert_eq!(replay["attempts"], 1);

        let second = ctx.receiver.wait_for(2, Duration::from_secs(5)).await.remove(1);
        assert_eq!(second.header("x-event-id"), first.header("x-event-id"));
        let (a, b) = (first.json(), second.json());
        for field in ["event_id", "event_type", "api_version", "timestamp", "is_sandbox", "data"] {
            assert_eq!(a[field], b[field], "{field} is the original's");
        }
        assert_ne!(a["nonce"], b["nonce"], "a new nonce, so receivers do not take it for a replay attack");
        assert!(Verifier::new(new_secret).verify_now(&second.headers, &second.body).is_ok());
        assert!(Verifier::new(&old_secret).verify_now(&second.headers, &second.body).is_err());

        let missing = ctx.post("/api/v1/webhooks/deliveries/whd_01ARZ3NDEKTSV4RRFFQ69G5FAV/replay", &json!({})).await;
        expect_error(missing, StatusCode::NOT_FOUND, "webhook_delivery_not_found").await;
    }

    async fn test_fires_report_each_verdict(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, secret) = ctx.register().await;
        let path = format!("/api/v1/webhooks/endpoints/{endpoint_id}/test");
        for (status, verdict) in [(200, "Verified"), (401, "Signature rejected"), (403, "Signature rejected"), (500, "Handler error")] {
            ctx.receiver.script(&[status]);
            // Each test fire spends the endpoint's budget of 5 per minute; stay under it.
            // A test fire makes a delivery and answers 201, as a replay does.
            let fired = expect_created(ctx.post(&path, &json!({})).await).await;
            assert_eq!(fired["verdict"], verdict, "{status}: {fired}");
            assert_eq!(fired["delivery"]["kind"], "test_fire");
            assert_eq!(fired["delivery"]["event_type"], "webhook.test_fire");
        }
        let received = ctx.receiver.received();
        let last = received.last().unwrap();
        assert!(Verifier::new(&secret).verify_now(&last.headers, &last.body).is_ok());
        assert_eq!(last.json()["event_type"], "webhook.test_fire");
        assert_eq!(last.json()["data"]["endpoint_id"], endpoint_id.as_str());
        // The fifth in the minute is allowed, the sixth is not.
        expect_created(ctx.post(&path, &json!({})).await).await;
        let refused = ctx.post(&path, &json!({})).await;
        assert!(refused.headers().contains_key("retry-after"));
        assert_eq!(refused.headers()["x-rate-limit-limit"], "5");
        expect_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limit.exceeded").await;
        // Test fires do not count against the endpoint's health.
        let endpoint = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
        assert_eq!(endpoint["consecutive_failures"], 0);
    }
}

#[tokio::test]
async fn a_test_fire_to_a_closed_port_is_a_connection_failure() {
    let ctx = Ctx::new(tests::Backend::Sqlite).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let (endpoint_id, _) = ctx
        .register_with(
            &ctx.key,
            json!({ "url": format!("https://localhost:{closed}/hooks") }),
        )
        .await;
    let fired = expect_created(
        ctx.post(
            &format!("/api/v1/webhooks/endpoints/{endpoint_id}/test"),
            &json!({}),
        )
        .await,
    )
    .await;
    assert_eq!(fired["verdict"], "Connection failed", "{fired}");
    assert_eq!(
        fired["delivery"]["attempt_log"][0]["outcome"],
        "connection_failed"
    );
}

#[tokio::test]
async fn a_test_fire_to_a_receiver_slower_than_ten_seconds_times_out() {
    let ctx = Ctx::new(tests::Backend::Sqlite).await;
    let (endpoint_id, _) = ctx.register().await;
    ctx.receiver.delay(Duration::from_secs(12));
    let fired = expect_created(
        ctx.post(
            &format!("/api/v1/webhooks/endpoints/{endpoint_id}/test"),
            &json!({}),
        )
        .await,
    )
    .await;
    assert_eq!(fired["verdict"], "Timeout", "{fired}");
    assert_eq!(fired["delivery"]["attempt_log"][0]["outcome"], "timeout");
}

#[tokio::test]
async fn replays_are_limited_to_ten_a_minute_per_endpoint() {
    let ctx = Ctx::new(tests::Backend::Sqlite).await;
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
    let original = ctx.deliveries(&endpoint_id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/webhooks/deliveries/{original}/replay");
    for _ in 0..10 {
        assert_eq!(
            ctx.send(Method::POST, &path, &ctx.key, None).await.status(),
            201
        );
    }
    // The refusal describes the endpoint's budget that refused it, not the
    // key's, and keeps no result under its idempotency key: a retry under
    // the same key is refused afresh (or runs, once the minute is over),
    // never replayed.
    let refuse = || {
        ctx.app
            .client
            .post(ctx.app.url(&path))
            .header("X-API-Key", &ctx.key)
            .header("X-Idempotency-Key", "eleventh-replay")
            .send()
    };
    for _ in 0..2 {
        let refused = refuse().await.unwrap();
        assert!(refused.headers().get("x-idempotent-replay").is_none());
        assert_eq!(refused.headers()["x-rate-limit-limit"], "10");
        assert_eq!(refused.headers()["x-rate-limit-remaining"], "0");
        assert!(refused.headers().contains_key("retry-after"));
        expect_error(
            refused,
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit.exceeded",
        )
        .await;
    }
}
