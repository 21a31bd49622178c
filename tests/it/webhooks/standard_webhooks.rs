//! Endpoints signed the Standard Webhooks way (`signature_scheme:
//! standard_webhooks`), on both profiles: a delivery carries `webhook-id`,
//! `webhook-timestamp` and `webhook-signature` and verifies with the
//! `standardwebhooks` Python package, the library a receiver would use; a
//! wrong secret does not; during a rotation's overlap either secret does.
//! The scheme is shown on the endpoint, can be changed back, and a scheme
//! that does not exist is refused.

use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use tests::Backend;
use tests::receiver::Received;

use super::{Ctx, CtxOptions};
use crate::support::{expect_error, expect_ok};

/// Verifies `received` with the `standardwebhooks` package and `secret`:
/// the verified payload's event id, or the library's refusal.
fn python_verifies(received: &Received, secret: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, &received.body).unwrap();
    let headers = dir.path().join("headers.json");
    std::fs::write(&headers, serde_json::to_vec(&received.headers).unwrap()).unwrap();
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
secret, body, headers = sys.argv[1], open(sys.argv[2], "rb").read(), json.load(open(sys.argv[3]))
try:
    payload = Webhook(secret).verify(body, headers)
except WebhookVerificationError as err:
    print(f"refused: {err}")
    sys.exit(3)
print(payload["event_id"])
"#;
    let output = Command::new(tests::tools::python_tool("python"))
        .arg("-c")
        .arg(script)
        .arg(secret)
        .arg(&body)
        .arg(&headers)
        .output()
        .expect("the tools' python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match output.status.code() {
        Some(0) => Ok(stdout),
        Some(3) => Err(stdout),
        _ => panic!(
            "the verifier crashed: {}{}",
            stdout,
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

async fn a_standard_webhooks_delivery_verifies_with_the_library(redis: bool, backend: Backend) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, secret) = ctx
        .register_with(
            &ctx.key,
            json!({ "event_types": ["listing.created"], "signature_scheme": "standard_webhooks" }),
        )
        .await;
    let path = format!("/api/v1/webhooks/endpoints/{endpoint_id}");
    let endpoint = expect_ok(ctx.get(&path).await).await;
    assert_eq!(endpoint["signature_scheme"], "standard_webhooks");

    ctx.create_listing().await;
    let first = ctx
        .receiver
        .wait_for(1, Duration::from_secs(20))
        .await
        .remove(0);
    let event_id = first.json()["event_id"].as_str().unwrap().to_owned();
    assert_eq!(first.header("webhook-id"), Some(event_id.as_str()));
    assert_eq!(first.header("x-event-id"), Some(event_id.as_str()));
    assert!(first.header("webhook-timestamp").is_some());
    let signature = first.header("webhook-signature").unwrap();
    assert!(signature.starts_with("v1,"), "{signature}");
    assert!(
        first.header("x-webhook-signature").is_none(),
        "the specification's header is not sent to a Standard Webhooks endpoint"
    );
    assert_eq!(python_verifies(&first, &secret), Ok(event_id.clone()));
    let wrong = python_verifies(&first, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    assert!(wrong.is_err(), "a wrong secret verifies: {wrong:?}");

    // A rotation with an overlap: one signature per secret, either verifies.
    let rotated = expect_ok(
        ctx.post(
            &format!("{path}/rotate-secret"),
            &json!({ "previous_secret_expires_in": 3600 }),
        )
        .await,
    )
    .await;
    let new_secret = rotated["secret"].as_str().unwrap().to_owned();
    assert_eq!(rotated["signature_scheme"], "standard_webhooks");
    ctx.create_listing().await;
    let during = ctx
        .receiver
        .wait_for(2, Duration::from_secs(20))
        .await
        .remove(1);
    let signatures = during.header("webhook-signature").unwrap();
    assert_eq!(signatures.split(' ').count(), 2, "{signatures}");
    let during_id = during.json()["event_id"].as_str().unwrap().to_owned();
    assert_eq!(python_verifies(&during, &secret), Ok(during_id.clone()));
    assert_eq!(python_verifies(&during, &new_secret), Ok(during_id));

    // Back to the specification's scheme.
    let changed = expect_ok(
        ctx.patch(&path, &json!({ "signature_scheme": "spec" }))
            .await,
    )
    .await;
    assert_eq!(changed["signature_scheme"], "spec");
    ctx.create_listing().await;
    let spec = ctx
        .receiver
        .wait_for(3, Duration::from_secs(20))
        .await
        .remove(2);
    assert!(spec.header("x-webhook-signature").is_some());
    assert!(spec.header("webhook-signature").is_none());

    // A scheme that does not exist, on either route.
    let refused = ctx
        .patch(&path, &json!({ "signature_scheme": "svix" }))
        .await;
    expect_error(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    let refused = ctx
        .post(
            "/api/v1/webhooks/endpoints",
            &json!({ "url": ctx.receiver.url, "signature_scheme": 2 }),
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let refused = ctx
        .post(
            "/api/v1/webhooks/endpoints",
            &json!({ "url": ctx.receiver.url, "signature_scheme": "hmac" }),
        )
        .await;
    let body = expect_error(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert!(
        body.to_string().contains("signature_scheme"),
        "the refusal names the field: {body}"
    );
}

#[tokio::test]
async fn a_standard_webhooks_delivery_verifies_with_the_library_on_the_embedded_queue() {
    a_standard_webhooks_delivery_verifies_with_the_library(false, Backend::Sqlite).await;
}

#[tokio::test]
async fn a_standard_webhooks_delivery_verifies_with_the_library_on_the_redis_queue() {
    a_standard_webhooks_delivery_verifies_with_the_library(true, Backend::Postgres).await;
}
