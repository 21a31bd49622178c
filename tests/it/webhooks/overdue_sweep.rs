//! The overdue sweep offers a lost attempt once per interval and fails
//! orphaned test fires.

use serde_json::json;
use storage::webhooks::DeliveryKind;
use tests::backend_tests;

backend_tests! {
    async fn the_sweep_offers_a_lost_attempt_once_per_interval_and_fails_orphaned_test_fires(backend) {
        let start = storage::Timestamp::from_micros(1_800_000_000_000_000);
        let clock = storage::Clock::manual(start);
        let app = tests::TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let tenant = storage::Tenant::new(agency.id.clone(), storage::Environment::Live);
        let webhooks = app.store.webhooks();
        let (endpoint, _) = webhooks
            .create(&tenant, storage::webhooks::NewEndpoint {
                name: None,
                url: "https://receiver.example/hooks".into(),
                event_types: None,
                environment: storage::webhooks::EndpointEnvironment::Live,
                created_by: None,
                ..Default::default()
            })
            .await
            .unwrap();
        let template = |kind| storage::webhooks::Delivery {
            id: storage::ids::DeliveryId::generate(),
            endpoint_id: endpoint.id.clone(),
            agency_id: endpoint.agency_id.clone(),
            kind,
            replay_of: None,
            event_id: storage::ids::EventId::generate(),
            event_type: "listing.created".into(),
            api_version: "2026-05-29".into(),
            occurred_at: start,
            is_sandbox: false,
            data: json!({}),
            status: storage::webhooks::DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: None,
            created_at: start,
            completed_at: None,
        };
        // A delivery whose job was never pushed, and a test fire whose request went away.
        let lost = webhooks.create_manual(&endpoint, DeliveryKind::Event, &template(DeliveryKind::Event)).await.unwrap();
        let orphan = webhooks.create_manual(&endpoint, DeliveryKind::TestFire, &template(DeliveryKind::TestFire)).await.unwrap();

        // Not yet overdue.
        let now = clock.now();
        assert!(webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap().is_empty());
        clock.advance_seconds(120);
        let now = clock.now();
        let offered = webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap();
        let due = storage::webhooks::DueAttempt {
            delivery_id: lost.id.clone(),
            endpoint_id: endpoint.id.clone(),
            attempt: 1,
        };
        assert_eq!(offered, vec![due.clone()]);
        // Offered once per interval, not at every tick.
        assert!(webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap().is_empty());
        clock.advance_seconds(700);
        let now = clock.now();
        let again = webhooks.sweep_overdue(now.plus_seconds(-60), now.plus_seconds(600), 500).await.unwrap();
        assert_eq!(again, vec![due]);
        let orphan = webhooks.delivery(&tenant, &orphan.id).await.unwrap().unwrap();
        assert_eq!(orphan.status, storage::webhooks::DeliveryStatus::Failed);
        assert!(orphan.completed_at.is_some());
    }
}
