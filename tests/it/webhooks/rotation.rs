//! Rotating an endpoint's signing secret without a gap, on both profiles and
//! the store's manual clock: during the overlap every delivery carries a
//! signature for the new and the replaced secret, so a receiver that knows
//! only the old one still verifies; after it, only the new one signs. The
//! overlap is on the endpoint; a rotation asks for none, or refuses an
//! overlap out of range.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::{Clock, Timestamp};
use tests::Backend;
use webhook_verify::Verifier;

use super::{Ctx, CtxOptions};
use crate::support::{expect_error, expect_ok};

/// The received delivery `index` verified by a receiver knowing only
/// `secret`, at the delivery's own signing time.
fn verifies(received: &tests::receiver::Received, secret: &str) -> bool {
    let signed_at: i64 = received
        .header("x-webhook-timestamp")
        .and_then(|t| t.parse().ok())
        .expect("a timestamp");
    Verifier::new(secret)
        .verify(&received.headers, &received.body, signed_at)
        .is_ok()
}

async fn rotation_keeps_the_old_secret_signing_for_the_overlap(redis: bool, backend: Backend) {
    let clock = Clock::manual(Timestamp::from(chrono::Utc::now()));
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            clock: Some(clock.clone()),
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, old_secret) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    let path = format!("/api/v1/webhooks/endpoints/{endpoint_id}");

    // An hour's overlap (a whole number, written either way).
    let rotated = expect_ok(
        ctx.post(
            &format!("{path}/rotate-secret"),
            &json!({ "previous_secret_expires_in": 3600.0 }),
        )
        .await,
    )
    .await;
    let new_secret = rotated["secret"].as_str().unwrap().to_owned();
    let until = clock.now().plus_seconds(3600).to_rfc3339();
    assert_eq!(
        rotated["previous_secret_expires_at"],
        until.as_str(),
        "{rotated}"
    );
    let endpoint = expect_ok(ctx.get(&path).await).await;
    assert_eq!(endpoint["previous_secret_expires_at"], until.as_str());
    assert!(
        !endpoint.to_string().contains(&old_secret),
        "no secret is shown"
    );

    ctx.create_listing().await;
    let during = ctx
        .receiver
        .wait_for(1, Duration::from_secs(20))
        .await
        .remove(0);
    let signatures = during.header("x-webhook-signature").unwrap().to_owned();
    assert_eq!(signatures.matches("sha256=").count(), 2, "{signatures}");
    assert!(signatures.contains(", "), "{signatures}");
    assert!(
        verifies(&during, &old_secret),
        "the old secret verifies during the overlap"
    );
    assert!(verifies(&during, &new_secret), "the new one too");

    // An hour and a second later, only the new secret signs.
    clock.advance_seconds(3601);
    ctx.create_listing().await;
    let after = ctx
        .receiver
        .wait_for(2, Duration::from_secs(20))
        .await
        .remove(1);
    let signatures = after.header("x-webhook-signature").unwrap();
    assert_eq!(signatures.matches("sha256=").count(), 1, "{signatures}");
    assert!(
        !verifies(&after, &old_secret),
        "the old secret fails after the overlap"
    );
    assert!(verifies(&after, &new_secret));

    // No overlap asked: the replaced secret stops at once.
    let again = expect_ok(
        ctx.post(
            &format!("{path}/rotate-secret"),
            &json!({ "previous_secret_expires_in": 0 }),
        )
        .await,
    )
    .await;
    assert_eq!(again["previous_secret_expires_at"], Value::Null);
    let newest = again["secret"].as_str().unwrap().to_owned();
    ctx.create_listing().await;
    let last = ctx
        .receiver
        .wait_for(3, Duration::from_secs(20))
        .await
        .remove(2);
    assert!(!verifies(&last, &new_secret));
    assert!(verifies(&last, &newest));

    // Out of range, or not a number: refused, and nothing rotated.
    for body in [
        json!({ "previous_secret_expires_in": 604_801 }),
        json!({ "previous_secret_expires_in": -1 }),
        json!({ "previous_secret_expires_in": "a day" }),
        json!({ "previous_secret_expires_in": 60.5 }),
        json!({ "previous_secret": 5 }),
    ] {
        let refused = ctx.post(&format!("{path}/rotate-secret"), &body).await;
        expect_error(
            refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
    }
    // A body that is not sent as JSON is refused as such.
    let text = ctx
        .app
        .client
        .post(ctx.app.url(&format!("{path}/rotate-secret")))
        .header("X-API-Key", &ctx.key)
        .header("X-Idempotency-Key", tests::idempotency_key())
        .header("Content-Type", "text/plain")
        .body("previous_secret_expires_in=0")
        .send()
        .await
        .unwrap();
    expect_error(
        text,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "request.unsupported_media_type",
    )
    .await;
    // `null` or no body at all: the default overlap of a day.
    let null = expect_ok(
        ctx.post(&format!("{path}/rotate-secret"), &Value::Null)
            .await,
    )
    .await;
    assert_eq!(
        null["previous_secret_expires_at"],
        clock.now().plus_seconds(86_400).to_rfc3339().as_str()
    );
    let default = ctx
        .app
        .client
        .post(ctx.app.url(&format!("{path}/rotate-secret")))
        .header("X-API-Key", &ctx.key)
        .header("X-Idempotency-Key", tests::idempotency_key())
        .send()
        .await
        .unwrap();
    let default: Value = expect_ok(default).await;
    assert_eq!(
        default["previous_secret_expires_at"],
        clock.now().plus_seconds(86_400).to_rfc3339().as_str()
    );
}

#[tokio::test]
async fn rotation_keeps_the_old_secret_signing_for_the_overlap_on_the_embedded_queue() {
    rotation_keeps_the_old_secret_signing_for_the_overlap(false, Backend::Sqlite).await;
}

#[tokio::test]
async fn rotation_keeps_the_old_secret_signing_for_the_overlap_on_the_redis_queue() {
    rotation_keeps_the_old_secret_signing_for_the_overlap(true, Backend::Postgres).await;
}
