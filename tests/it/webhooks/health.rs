//! Endpoint health, on both profiles: the owner is e-mailed a warning at
//! forty failed deliveries in a row, before the disable at fifty; the
//! agency's other endpoints that subscribe hear `webhook.endpoint.disabled`
//! and, at the first success after it, `webhook.endpoint.recovered`, and the
//! endpoint itself is never sent news of its own health. `recover` re-sends
//! every delivery that failed since a time, in one job whose progress can be
//! read, and refuses what it cannot do.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::webhooks::WebhookEndpoint;
use tests::Backend;
use tests::deployment::eventually;
use tests::receiver::Received;

use super::auto_disable::record_failed_deliveries;
use super::{Ctx, CtxOptions};
use crate::support::{expect_error, expect_ok};

const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until the e-mail relay got a message containing `text`.
async fn mail_containing(relay: &tests::smtp::SmtpSink, text: &str) -> String {
    tests::deployment::eventually(PATIENCE, "the e-mail", || async {
        relay
            .received()
            .into_iter()
            .find(|mail| mail.data.contains(text))
            .map(|mail| mail.data)
    })
    .await
}

/// Waits until `receiver` got a delivery whose body `matches`; returns it.
async fn arrival_matching(
    receiver: &tests::receiver::WebhookReceiver,
    matches: impl Fn(&Value) -> bool,
) -> Value {
    tests::deployment::eventually(PATIENCE, "a matching delivery", || async {
        receiver
            .received()
            .iter()
            .map(Received::json)
            .find(|body| matches(body))
    })
    .await
}

/// The health events among `received`.
fn health_events(received: &[Received]) -> Vec<Value> {
    received
        .iter()
        .map(Received::json)
        .filter(|body| {
            body["event_type"]
                .as_str()
                .is_some_and(|t| t.starts_with("webhook.endpoint."))
        })
        .collect()
}

async fn the_owner_is_warned_and_other_endpoints_hear_of_disable_and_recovery(
    redis: bool,
    backend: Backend,
) {
    let relay = tests::smtp::SmtpSink::start().await;
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            mail_relay: Some(relay.url.clone()),
            ..CtxOptions::default()
        },
    )
    .await;
    crate::support::sql::set_user_email(
        ctx.app.store.db(),
        ctx.agency.owner_id.as_str(),
        "owner@agency.example",
    )
    .await;
    // The failing endpoint hears the health events too, were they sent to it.
    let health = ["webhook.endpoint.disabled", "webhook.endpoint.recovered"];
    let (failing_id, _) = ctx
        .register_with(
            &ctx.key,
            json!({ "event_types": ["listing.created", health[0], health[1]], "name": "CRM" }),
        )
        .await;
    let observer = ctx.receiver.beside().await;
    let (observer_id, _) = ctx
        .register_with(
            &ctx.key,
            json!({ "url": observer.url, "event_types": health }),
        )
        .await;
    let failing: WebhookEndpoint = ctx
        .app
        .store
        .webhooks()
        .get(&ctx.live(), &failing_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let path = format!("/api/v1/webhooks/endpoints/{failing_id}");

    // Thirty-nine failed for good; the fortieth fails through the schedule
    // and warns the owner by e-mail, before any disable.
    record_failed_deliveries(&ctx, &failing, 39).await;
    ctx.receiver.answer(503);
    ctx.create_listing().await;
    let warning = mail_containing(&relay, "is failing").await;
    assert!(warning.contains(&failing_id), "{warning}");
    assert!(warning.contains("failed 40 times in a row"), "{warning}");
    assert!(
        warning.contains("/recover"),
        "the warning says what to do: {warning}"
    );
    let endpoint = expect_ok(ctx.get(&path).await).await;
    assert_eq!(endpoint["consecutive_failures"], 40);
    assert_eq!(endpoint["status"], "enabled");

    // Nine more, then the fiftieth through the schedule: disabled, and the
    // other endpoint hears of it.
    record_failed_deliveries(&ctx, &failing, 9).await;
    ctx.create_listing().await;
    let disabled = observer.wait_for(1, PATIENCE).await.remove(0).json();
    assert_eq!(
        disabled["event_type"], "webhook.endpoint.disabled",
        "{disabled}"
    );
    assert_eq!(disabled["data"]["endpoint_id"], failing_id.as_str());
    assert_eq!(disabled["data"]["consecutive_failures"], 50);
    assert_eq!(
        disabled["data"]["reason"],
        "auto_disabled_consecutive_failures"
    );
    assert_eq!(disabled["data"]["name"], "CRM");
    assert_eq!(disabled["data"]["url"], ctx.receiver.url.as_str());
    mail_containing(&relay, "auto_disabled_consecutive_failures").await;
    let notifications = ctx
        .app
        .store
        .webhooks()
        .notifications(&ctx.agency.id)
        .await
        .unwrap();
    let kinds: Vec<&str> = notifications.iter().map(|n| n.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["webhook_endpoint_disabled", "webhook_endpoint_failing"]
    );

    // Fixed and re-enabled: the first success is a recovery after fifty.
    ctx.receiver.answer(200);
    expect_ok(ctx.post(&format!("{path}/enable"), &json!({})).await).await;
    let listing_number = ctx.create_listing().await;
    let arrived = arrival_matching(&ctx.receiver, |body| {
        body["data"]["listing_number"] == listing_number.as_str()
    })
    .await;
    assert_eq!(arrived["event_type"], "listing.created");
    let recovered = observer.wait_for(2, PATIENCE).await.remove(1).json();
    assert_eq!(
        recovered["event_type"], "webhook.endpoint.recovered",
        "{recovered}"
    );
    assert_eq!(recovered["data"]["endpoint_id"], failing_id.as_str());
    assert_eq!(recovered["data"]["failures_before_recovery"], 50);
    // Another success is not another recovery.
    let next_number = ctx.create_listing().await;
    let next = arrival_matching(&ctx.receiver, |body| {
        body["data"]["listing_number"] == next_number.as_str()
    })
    .await;
    // Its success is recorded in the transaction that would emit a
    // recovery: once it is, the outbox holds every health event there is.
    eventually(PATIENCE, "the second success to be recorded", || async {
        ctx.deliveries(&failing_id)
            .await
            .iter()
            .any(|d| d["event_id"] == next["event_id"] && d["status"] == "succeeded")
            .then_some(())
    })
    .await;
    let outbox = ctx
        .app
        .store
        .outbox()
        .for_tenant(&ctx.live(), 0, 10_000)
        .await
        .unwrap();
    let emitted: Vec<&str> = outbox
        .iter()
        .map(|event| event.event_type.as_str())
        .filter(|event_type| health.contains(event_type))
        .collect();
    assert_eq!(emitted, health, "one disable, one recovery");
    assert_eq!(health_events(&observer.received()).len(), 2);
    // The endpoint was never told of its own health.
    assert!(
        health_events(&ctx.receiver.received()).is_empty(),
        "an endpoint hears nothing of its own health"
    );
    // The observer's own deliveries list both.
    let observed = ctx.deliveries(&observer_id).await;
    assert_eq!(observed.len(), 2, "{observed:?}");
}

#[tokio::test]
async fn the_owner_is_warned_and_other_endpoints_hear_of_disable_and_recovery_on_the_embedded_queue()
 {
    the_owner_is_warned_and_other_endpoints_hear_of_disable_and_recovery(false, Backend::Sqlite)
        .await;
}

#[tokio::test]
async fn the_owner_is_warned_and_other_endpoints_hear_of_disable_and_recovery_on_the_redis_queue() {
    the_owner_is_warned_and_other_endpoints_hear_of_disable_and_recovery(true, Backend::Postgres)
        .await;
}

async fn recover_resends_what_failed_since_a_time(redis: bool, backend: Backend) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    let path = format!("/api/v1/webhooks/endpoints/{endpoint_id}");
    let since = chrono::Utc::now() - chrono::Duration::seconds(5);

    // Three events whose deliveries fail through the whole schedule.
    ctx.receiver.answer(500);
    for _ in 0..3 {
        ctx.create_listing().await;
    }
    let failed: Vec<Value> =
        tests::deployment::eventually(PATIENCE, "three deliveries failed for good", || async {
            let deliveries = ctx.deliveries(&endpoint_id).await;
            (deliveries.len() == 3 && deliveries.iter().all(|d| d["status"] == "failed"))
                .then_some(deliveries)
        })
        .await;
    let mut failed_events: Vec<String> = failed
        .iter()
        .map(|d| d["event_id"].as_str().unwrap().to_owned())
        .collect();
    failed_events.sort();
    let attempts_so_far = ctx.receiver.arrivals();

    // The receiver is fixed; one recovery re-sends all three, once each.
    ctx.receiver.answer(200);
    let response = ctx
        .post(
            &format!("{path}/recover"),
            &json!({ "since": since.to_rfc3339() }),
        )
        .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let started: Value = response.json().await.unwrap();
    assert_eq!(started["total"], 3, "{started}");
    assert_eq!(started["endpoint_id"], endpoint_id.as_str());
    let recovery_path = format!("{path}/recoveries/{}", started["id"].as_str().unwrap());
    let finished = tests::deployment::eventually(PATIENCE, "the recovery to finish", || async {
        let recovery: Value = ctx.get(&recovery_path).await.json().await.unwrap();
        (recovery["status"] == "completed").then_some(recovery)
    })
    .await;
    assert_eq!(finished["resent"], 3, "{finished}");
    assert_eq!(finished["succeeded"], 3);
    assert_eq!(finished["failed"], 0);
    assert!(finished["finished_at"].is_string());
    let resent = ctx.receiver.received()[attempts_so_far..].to_vec();
    let mut resent_events: Vec<String> = resent
        .iter()
        .map(|r| r.header("x-event-id").unwrap().to_owned())
        .collect();
    resent_events.sort();
    assert_eq!(
        resent_events, failed_events,
        "each failed event once, its id kept"
    );
    // Each re-send is a replay in the log.
    let log = ctx.deliveries(&endpoint_id).await;
    assert_eq!(
        log.iter()
            .filter(|d| d["kind"] == "replay" && d["status"] == "succeeded")
            .count(),
        3
    );

    // Nothing failed since now: an empty recovery completes at once.
    let empty = ctx
        .post(
            &format!("{path}/recover"),
            &json!({ "since": chrono::Utc::now().to_rfc3339() }),
        )
        .await;
    assert_eq!(empty.status(), StatusCode::ACCEPTED);
    let empty: Value = empty.json().await.unwrap();
    assert_eq!(empty["total"], 0);

    // Its own budget: two a minute per endpoint.
    let limited = ctx
        .post(
            &format!("{path}/recover"),
            &json!({ "since": since.to_rfc3339() }),
        )
        .await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);

    // Refusals.
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let long_ago = (chrono::Utc::now() - chrono::Duration::days(31)).to_rfc3339();
    for body in [
        json!({ "since": future }),
        json!({ "since": long_ago }),
        json!({ "since": "yesterday" }),
        json!({ "since": 5 }),
        json!({}),
        json!({ "since": since.to_rfc3339(), "all": true }),
    ] {
        let refused = ctx.post(&format!("{path}/recover"), &body).await;
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let unknown = ctx
        .get(&format!("{path}/recoveries/whr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K"))
        .await;
    expect_error(unknown, StatusCode::NOT_FOUND, "operation_not_found").await;
    let other_endpoint = ctx
        .post(
            "/api/v1/webhooks/endpoints/whe_01JD3Q8W5T7X2Z9Y4V6R1N0M8K/recover",
            &json!({ "since": since.to_rfc3339() }),
        )
        .await;
    expect_error(
        other_endpoint,
        StatusCode::NOT_FOUND,
        "webhook_endpoint_not_found",
    )
    .await;
    // Another agency cannot read this one's recovery.
    let other_agency = ctx.app.agency().await;
    let other = ctx.app.key(&other_agency, &super::SCOPES).await;
    let foreign = ctx
        .send(reqwest::Method::GET, &recovery_path, &other, None)
        .await;
    expect_error(foreign, StatusCode::NOT_FOUND, "webhook_endpoint_not_found").await;
    // A disabled endpoint is enabled first.
    expect_ok(ctx.post(&format!("{path}/disable"), &json!({})).await).await;
    let (second_id, _) = ctx.register_with(&ctx.key, json!({})).await;
    let second = format!("/api/v1/webhooks/endpoints/{second_id}");
    expect_ok(ctx.post(&format!("{second}/disable"), &json!({})).await).await;
    let disabled = ctx
        .post(
            &format!("{second}/recover"),
            &json!({ "since": since.to_rfc3339() }),
        )
        .await;
    let body = expect_error(
        disabled,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert!(body.to_string().contains("enable"), "{body}");
}

#[tokio::test]
async fn recover_resends_what_failed_since_a_time_on_the_embedded_queue() {
    recover_resends_what_failed_since_a_time(false, Backend::Sqlite).await;
}

#[tokio::test]
async fn recover_resends_what_failed_since_a_time_on_the_redis_queue() {
    recover_resends_what_failed_since_a_time(true, Backend::Postgres).await;
}
