//! What an attempt records and does: at most a KiB of the receiver's answer,
//! cut on a character boundary, and a redirect is not followed but fails the
//! attempt.

use std::time::Duration;

use serde_json::{Value, json};
use tests::backend_tests;

use super::Ctx;

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
