//! Sweeps whose push fails (the queue is away) give their work back: the
//! next sweep offers it again, rather than the one after the resweep
//! interval ten minutes later, so events and delivery attempts flow as soon
//! as the queue is back.

use serde_json::json;
use storage::listings::NewListing;
use storage::webhooks::{Delivery, DeliveryKind, DeliveryStatus, EndpointEnvironment, NewEndpoint};
use storage::{Clock, Environment, Tenant, Timestamp};
use tests::{Backend, TestApp};
use workers::handlers::maintenance::Maintenance;

fn manual_clock() -> Clock {
    Clock::manual(Timestamp::from_micros(1_800_000_000_000_000))
}

#[tokio::test]
async fn events_whose_sweep_could_not_push_are_offered_at_the_next_sweep() {
    let clock = manual_clock();
    let app = TestApp::builder(Backend::Sqlite)
        .clock(clock.clone())
        .spawn()
        .await;
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    // The queue is away from before the commit: the fast path's push fails too.
    app.refuse_jobs("outbox_dispatch", true).await;
    app.store
        .listings()
        .create(
            &tenant,
            NewListing {
                address: "1 Outage Row".into(),
                owner_user_id: agency.owner_id.to_string(),
                agent_one_id: agency.owner_id.to_string(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let events = app
        .store
        .outbox()
        .for_tenant(&tenant, 0, 100)
        .await
        .unwrap();
    assert!(!events.is_empty());
    clock.advance_seconds(10);
    let sweep = Maintenance::SweepOutbox;
    let failed = sweep.run(app.state.platform()).await;
    assert!(failed.is_err(), "the push fails while the queue is away");

    // Back a moment later: the events are offered at once, not in ten minutes.
    app.refuse_jobs("outbox_dispatch", false).await;
    clock.advance_seconds(5);
    let offered = sweep.run(app.state.platform()).await.unwrap();
    assert_eq!(offered, events.len() as u64);
    // Pushed this time, so marked: the next sweep leaves them to their job.
    clock.advance_seconds(5);
    assert_eq!(sweep.run(app.state.platform()).await.unwrap(), 0);
}

#[tokio::test]
async fn attempts_whose_sweep_could_not_push_are_offered_at_the_next_sweep() {
    let clock = manual_clock();
    let app = TestApp::builder(Backend::Sqlite)
        .clock(clock.clone())
        .spawn()
        .await;
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    let webhooks = app.store.webhooks();
    let (endpoint, _) = webhooks
        .create(
            &tenant,
            NewEndpoint {
                name: None,
                url: "https://receiver.example/hooks".into(),
                event_types: None,
                environment: EndpointEnvironment::Live,
                created_by: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let now = clock.now();
    // A delivery whose attempt was due and never pushed.
    let template = Delivery {
        id: storage::ids::DeliveryId::generate(),
        endpoint_id: endpoint.id.clone(),
        agency_id: endpoint.agency_id.clone(),
        kind: DeliveryKind::Event,
        replay_of: None,
        event_id: storage::ids::EventId::generate(),
        event_type: "listing.created".into(),
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
    webhooks
        .create_manual(&endpoint, DeliveryKind::Event, &template)
        .await
        .unwrap();
    clock.advance_seconds(120);
    app.refuse_jobs("webhook_delivery", true).await;
    let sweep = Maintenance::SweepDeliveries;
    assert!(
        sweep.run(app.state.platform()).await.is_err(),
        "the push fails while the queue is away"
    );

    app.refuse_jobs("webhook_delivery", false).await;
    clock.advance_seconds(30);
    assert_eq!(sweep.run(app.state.platform()).await.unwrap(), 1);
    clock.advance_seconds(30);
    assert_eq!(
        sweep.run(app.state.platform()).await.unwrap(),
        0,
        "pushed this time: offered again only after the resweep interval"
    );
}
