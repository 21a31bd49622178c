//! Retention of webhook deliveries: the `webhook_delivery_purge` maintenance
//! task deletes a delivery finished more than 30 days ago, with its attempts,
//! and keeps a recent one; `progress_history_purge` forgets progress states
//! recorded more than a week ago and keeps each operation's latest state.
//! Purges delete in transactions of a bounded size, the endpoint's kept
//! total follows them, and a SQLite file gives the freed pages back.

use serde_json::json;
use storage::webhooks::{
    AfterAttempt, Attempt, Delivery, DeliveryKind, DeliveryStatus, EndpointEnvironment,
    NewEndpoint, WebhookEndpoint,
};
use storage::{Clock, Environment, Store, Tenant, Timestamp};
use tests::backend_tests;
use workers::handlers::maintenance::{
    DELIVERY_RETENTION_SECONDS, Maintenance, PROGRESS_HISTORY_RETENTION_SECONDS, Purged,
};

/// A delivery to `endpoint` completed now by one successful attempt.
async fn completed_delivery(store: &Store, endpoint: &WebhookEndpoint) -> Delivery {
    completed_delivery_of(store, endpoint, json!({})).await
}

/// A delivery of `data` to `endpoint` completed now by one successful attempt.
async fn completed_delivery_of(
    store: &Store,
    endpoint: &WebhookEndpoint,
    data: serde_json::Value,
) -> Delivery {
    let webhooks = store.webhooks();
    let now = store.clock().now();
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
        data,
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
        completed_at: None,
    };
    let delivery = webhooks
        .create_manual(endpoint, DeliveryKind::Event, &template)
        .await
        .unwrap();
    let attempt = Attempt {
        attempt: 1,
        nonce: ulid::Ulid::generate().to_string(),
        started_at: now,
        duration_ms: 1,
        outcome: "succeeded".into(),
        status_code: Some(200),
        response_excerpt: None,
        error: None,
    };
    webhooks
        .record_attempt(&delivery, &attempt, AfterAttempt::Succeeded)
        .await
        .unwrap();
    delivery
}

/// An app on a standing clock, an agency's live tenant and its endpoint.
async fn with_endpoint(
    backend: tests::Backend,
) -> (Clock, tests::TestApp, Tenant, WebhookEndpoint) {
    let clock = Clock::manual(Timestamp::from_micros(1_800_000_000_000_000));
    let app = tests::TestApp::builder(backend)
        .clock(clock.clone())
        .spawn()
        .await;
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    let (endpoint, _) = app
        .store
        .webhooks()
        .create(
            &tenant,
            NewEndpoint {
                url: "https://receiver.example/hooks".into(),
                environment: EndpointEnvironment::Live,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    (clock, app, tenant, endpoint)
}

backend_tests! {
    async fn deliveries_finished_past_retention_go_with_their_attempts(backend) {
        let (clock, app, tenant, endpoint) = with_endpoint(backend).await;
        let webhooks = app.store.webhooks();
        let old = completed_delivery(&app.store, &endpoint).await;
        // The old one is a day past retention when the recent one completes.
        clock.advance_seconds(DELIVERY_RETENTION_SECONDS + 86_400 - 3_600);
        let recent = completed_delivery(&app.store, &endpoint).await;
        clock.advance_seconds(3_600);
        assert_eq!(webhooks.attempts(&old.id).await.unwrap().len(), 1);

        let purged = Maintenance::PurgeDeliveries.run(app.state.platform()).await.unwrap();
        assert_eq!(purged, 1);
        assert!(webhooks.delivery(&tenant, &old.id).await.unwrap().is_none(), "past retention: gone");
        assert!(webhooks.attempts(&old.id).await.unwrap().is_empty(), "its attempts with it");
        let kept = webhooks.delivery(&tenant, &recent.id).await.unwrap().expect("recent: kept");
        assert_eq!(kept.status, DeliveryStatus::Succeeded);
        assert_eq!(webhooks.attempts(&recent.id).await.unwrap().len(), 1);

        // Within retention it stays; past it, it goes too.
        assert_eq!(Maintenance::PurgeDeliveries.run(app.state.platform()).await.unwrap(), 0);
        clock.advance_seconds(DELIVERY_RETENTION_SECONDS);
        assert_eq!(Maintenance::PurgeDeliveries.run(app.state.platform()).await.unwrap(), 1);
        assert!(webhooks.delivery(&tenant, &recent.id).await.unwrap().is_none());
    }

    async fn progress_states_past_retention_go_and_the_latest_stays(backend) {
        let clock = Clock::manual(Timestamp::from_micros(1_800_000_000_000_000));
        let app = tests::TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let tenant = Tenant::new(agency.id.clone(), Environment::Live);
        let progress = app.store.progress();
        let state = |seq: u64| json!({"status": "processing", "attempt": 1, "seq": seq});
        progress.record(&tenant, "op_old", 1, &state(1), false).await.unwrap();
        progress.record(&tenant, "op_old", 2, &state(2), false).await.unwrap();
        clock.advance_seconds(PROGRESS_HISTORY_RETENTION_SECONDS - 60);
        progress.record(&tenant, "op_recent", 1, &state(1), false).await.unwrap();
        clock.advance_seconds(120);

        let purged = Maintenance::PurgeProgressHistory.run(app.state.platform()).await.unwrap();
        assert_eq!(purged, 2);
        assert!(progress.steps_after(&tenant, "op_old", 0, 10).await.unwrap().is_empty());
        let latest = progress.latest(&tenant, "op_old").await.unwrap().expect("the latest state stays");
        assert_eq!(latest.state["seq"], 2);
        let recent = progress.steps_after(&tenant, "op_recent", 0, 10).await.unwrap();
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].step, state(1));
        assert_eq!(Maintenance::PurgeProgressHistory.run(app.state.platform()).await.unwrap(), 0);
    }

    async fn a_purge_deletes_in_bounded_batches_and_gives_the_space_back(backend) {
        let (clock, app, _, endpoint) = with_endpoint(backend).await;
        let webhooks = app.store.webhooks();
        // 250 deliveries of 8 KB past retention, 3 within it.
        const EXPIRED: u64 = 250;
        let payload = json!({"listing": {"notes": "n".repeat(8_000)}});
        for _ in 0..EXPIRED {
            completed_delivery_of(&app.store, &endpoint, payload.clone()).await;
        }
        clock.advance_seconds(DELIVERY_RETENTION_SECONDS + 60);
        let mut kept = Vec::new();
        for _ in 0..3 {
            kept.push(completed_delivery(&app.store, &endpoint).await.id);
        }
        let total = |page: storage::page::Page<Delivery>| page.total;
        assert_eq!(total(webhooks.deliveries(&endpoint.id, None, 10).await.unwrap()), 253);
        let before = app.store.file_space().await.unwrap();

        // At most forty to a transaction (fewer while a batch takes long):
        // at least six full batches and a short one.
        let purged = Maintenance::PurgeDeliveries
            .purge(app.state.platform(), 40)
            .await
            .unwrap()
            .expect("a purge");
        assert_eq!(purged.rows, EXPIRED);
        assert!(purged.batches >= 7, "{purged:?}");
        let page = webhooks.deliveries(&endpoint.id, None, 10).await.unwrap();
        assert_eq!(page.total, 3, "the kept total follows the purge");
        let mut listed: Vec<_> = page.items.iter().map(|d| d.id.clone()).collect();
        listed.sort();
        kept.sort();
        assert_eq!(listed, kept);
        assert_eq!(
            Maintenance::PurgeDeliveries.purge(app.state.platform(), 40).await.unwrap(),
            Some(Purged { rows: 0, batches: 1 }),
            "nothing left: one short batch"
        );
        assert_eq!(Maintenance::SweepOutbox.purge(app.state.platform(), 40).await.unwrap(), None);

        // SQLite: the two megabytes purged went back to the file system,
        // bar the reserve of a quarter of the file.
        if let (Some(before), Some(after)) = (before, app.store.file_space().await.unwrap()) {
            assert!(after.incremental, "a new file vacuums incrementally");
            assert!(after.pages < before.pages, "{before:?} -> {after:?}");
            assert!(after.free_pages <= after.pages / 4, "{after:?}");
        }
    }
}
