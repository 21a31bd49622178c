//! Progress fan-out: a late subscriber starts from the latest state, and
//! progress published on one host reaches subscribers on another through Redis.

use std::time::Duration;

use futures::StreamExt;
use jobs::progress::ProgressHub;
use serde_json::json;
use storage::Environment;
use tests::{Backend, TestApp};

#[tokio::test]
async fn a_late_subscriber_starts_from_the_latest_state() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
    let hub = &app.state.platform().progress;
    for seq in 1..=3 {
        hub.publish(
            &tenant,
            "op_late",
            seq,
            json!({"status": "processing", "step": seq}),
        )
        .await
        .unwrap();
    }
    let mut subscription = hub.subscribe(&tenant, "op_late").await.unwrap();
    let (seq, latest) = subscription.latest.clone().unwrap();
    assert_eq!(seq, 3);
    assert_eq!(latest["step"], 3);
    hub.publish(&tenant, "op_late", 4, json!({"status": "completed"}))
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), subscription.live.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.seq, 4);
    assert_eq!(next.state["status"], "completed");

    // Another tenant sees nothing of it.
    let other = storage::Tenant::new(app.agency().await.id, Environment::Live);
    assert!(
        hub.subscribe(&other, "op_late")
            .await
            .unwrap()
            .latest
            .is_none()
    );
    let sandbox = storage::Tenant::new(agency.id.clone(), Environment::Sandbox);
    assert!(
        hub.subscribe(&sandbox, "op_late")
            .await
            .unwrap()
            .latest
            .is_none()
    );
}

#[tokio::test]
async fn progress_reaches_subscribers_on_another_host_through_redis() {
    let app = TestApp::builder(Backend::Postgres).redis().spawn().await;
    let agency = app.agency().await;
    let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
    let redis_url = app.redis_url.clone().expect("a Redis deployment");
    let connection = apalis_redis::connect(redis_url.as_str()).await.unwrap();
    // Two hosts: two hubs with their own origin; the subscriber's relays Redis.
    let publisher = ProgressHub::new(app.store.clone(), Some(connection.clone()));
    let subscriber = ProgressHub::new(app.store.clone(), Some(connection));
    let relay = subscriber.spawn_redis_relay(redis_url);
    let mut subscription = subscriber.subscribe(&tenant, "op_far").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // the relay subscribes
    publisher
        .publish(&tenant, "op_far", 1, json!({"status": "processing"}))
        .await
        .unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), subscription.live.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.seq, 1);
    assert_eq!(message.state["status"], "processing");
    relay.abort();
}
