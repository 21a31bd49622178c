//! The address policy: without `--webhook-allow-private-networks`, internal
//! addresses are refused at registration and at delivery.

use reqwest::StatusCode;
use serde_json::json;
use storage::webhooks::{Delivery, DeliveryKind, DeliveryStatus, EndpointEnvironment, NewEndpoint};
use storage::{Environment, Tenant};
use tests::{Backend, TestApp};

use super::SCOPES;
use crate::support::expect_error;

#[tokio::test]
async fn internal_addresses_are_refused_at_registration() {
    // The production policy: no private networks.
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &SCOPES).await;
    for url in [
        "https://127.0.0.1/hooks",
        "https://localhost:8443/hooks",
        "https://10.1.2.3/hooks",
        "https://192.168.0.10/hooks",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/hooks",
        "https://[::1]/hooks",
        "https://[fd00:ec2::254]/hooks",
        "https://[::ffff:127.0.0.1]/hooks",
        "https://0.0.0.0/hooks",
    ] {
        let response = app
            .client
            .post(app.url("/api/v1/webhooks/endpoints"))
            .header("X-API-Key", &key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({ "url": url }))
            .send()
            .await
            .unwrap();
        let error = expect_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
        let reason = error["error"]["details"]["fields"]["url"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(reason.contains("address"), "{url}: {reason}");
    }
}

#[tokio::test]
async fn a_delivery_to_an_address_that_became_internal_is_refused_at_connect_time() {
    // An endpoint whose host now resolves to loopback (as after DNS rebinding):
    // written directly, since registration would refuse it.
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    let (endpoint, secret) = app
        .store
        .webhooks()
        .create(
            &tenant,
            NewEndpoint {
                name: None,
                url: "https://localhost:9/hooks".into(),
                event_types: None,
                environment: EndpointEnvironment::Live,
                created_by: None,
            },
        )
        .await
        .unwrap();
    let now = app.store.clock().now();
    let template = Delivery {
        id: String::new(),
        endpoint_id: endpoint.id.clone(),
        agency_id: agency.id.clone(),
        kind: DeliveryKind::TestFire,
        replay_of: None,
        event_id: ulid::Ulid::generate().to_string(),
        event_type: "webhook.test_fire".into(),
        api_version: "2026-05-29".into(),
        occurred_at: now,
        is_sandbox: false,
        data: json!({}),
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
        completed_at: None,
    };
    let delivery = app
        .store
        .webhooks()
        .create_manual(&endpoint, DeliveryKind::TestFire, &template)
        .await
        .unwrap();
    let (attempt, report) = workers::webhooks::attempt(
        &app.store,
        &app.state.platform().webhooks.client,
        &delivery,
        &endpoint.url,
        &secret,
        1,
    )
    .await;
    assert_eq!(report.outcome, storage::webhooks::AttemptOutcome::Refused);
    assert!(attempt.error.unwrap().contains("loopback"));
    // A literal address is judged too (the resolver never sees it).
    let (_, report) = workers::webhooks::attempt(
        &app.store,
        &app.state.platform().webhooks.client,
        &delivery,
        "https://169.254.169.254/latest",
        &secret,
        1,
    )
    .await;
    assert_eq!(report.outcome, storage::webhooks::AttemptOutcome::Refused);
}
