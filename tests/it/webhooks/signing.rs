//! A delivery is signed, with its headers and the envelope's fields in order,
//! whichever queue (SQLite, PostgreSQL or Redis) carries it.

use std::time::Duration;

use serde_json::{Value, json};
use tests::backend_tests;
use tests::receiver::Received;
use webhook_verify::{Verdict, Verifier};

use super::Ctx;

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
