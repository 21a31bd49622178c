//! Progress fan-out: a late subscriber starts from the latest state, and
//! progress published on one host reaches subscribers on another through Redis.

use std::time::Duration;

use futures::StreamExt;
use platform::progress::{JobStatus, ProgressEvent, ProgressHub, ProgressState};
use storage::Environment;
use storage::ids::OperationId;
use tests::{Backend, TestApp};

/// A job's state `seq`: processing at step `seq`, or completed.
fn job_state(seq: u64, completed: bool) -> ProgressState {
    let status = if completed {
        JobStatus::Completed {
            steps: None,
            listing_numbers: None,
            attempt: 1,
        }
    } else {
        JobStatus::Processing {
            step: Some(seq),
            steps: None,
            attempt: 1,
        }
    };
    ProgressState {
        event: ProgressEvent::Job(status),
        seq,
    }
}

#[tokio::test]
async fn a_late_subscriber_starts_from_the_latest_state() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
    let hub = &app.state.platform().progress;
    let late = OperationId::generate();
    for seq in 1..=3 {
        hub.publish(&tenant, &late, job_state(seq, false))
            .await
            .unwrap();
    }
    let mut subscription = hub.subscribe(&tenant, &late).await.unwrap();
    let latest = subscription.latest.clone().unwrap();
    assert_eq!(latest.seq, 3);
    assert_eq!(serde_json::to_value(&latest).unwrap()["step"], 3);
    hub.publish(&tenant, &late, job_state(4, true))
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), subscription.live.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.state.seq, 4);
    assert_eq!(
        serde_json::to_value(&next.state).unwrap()["status"],
        "completed"
    );

    // Another tenant sees nothing of it.
    let other = storage::Tenant::new(app.agency().await.id, Environment::Live);
    assert!(hub.subscribe(&other, &late).await.unwrap().latest.is_none());
    let sandbox = storage::Tenant::new(agency.id.clone(), Environment::Sandbox);
    assert!(
        hub.subscribe(&sandbox, &late)
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
    let far = OperationId::generate();
    let mut subscription = subscriber.subscribe(&tenant, &far).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // the relay subscribes
    publisher
        .publish(&tenant, &far, job_state(1, false))
        .await
        .unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), subscription.live.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.state.seq, 1);
    assert_eq!(
        serde_json::to_value(&message.state).unwrap()["status"],
        "processing"
    );
    relay.abort();
}
