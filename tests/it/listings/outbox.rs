//! Events are written in the transaction of their change: in order, with the
//! envelope's fields, and not at all when the change rolls back.

use reqwest::StatusCode;
use storage::events::API_VERSION;
use tests::backend_tests;

use super::Ctx;
use crate::support::{expect_error, sql};

backend_tests! {
    async fn a_creation_writes_its_events_in_order_with_envelope_fields(backend) {
        let ctx = Ctx::new(backend).await;
        let created = ctx.create().await;
        let events = ctx.events().await;
        let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(types, ["listing.created", "invoice.created"]);
        let event = &events[0];
        assert!(ulid::Ulid::from_string(&event.event_id).is_ok());
        assert_eq!(event.api_version, API_VERSION);
        assert_eq!(event.agency_id, ctx.agency.id);
        assert!(!event.environment.is_sandbox());
        assert!(event.occurred_at.as_unix_seconds() > 1_700_000_000);
        assert!(event.dispatched_at.is_none());
        assert_eq!(event.data["listing_number"], created["listing_number"]);
        assert_eq!(event.data["status"], "Coming Soon");
        assert_eq!(event.data["address"], created["address"]);
        assert!(events[0].seq < events[1].seq);

        // Sandbox activity is flagged.
        let sandbox = ctx.sandbox_key().await;
        let response = ctx.app.client.post(ctx.app.url("/api/v1/listings")).header("X-API-Key", &sandbox).header("X-Idempotency-Key", tests::idempotency_key()).json(&ctx.new_listing()).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let sandbox_tenant = storage::Tenant::new(ctx.agency.id.clone(), storage::Environment::Sandbox);
        let sandbox_events = ctx.app.store.outbox().for_tenant(&sandbox_tenant, 0, 10).await.unwrap();
        assert_eq!(sandbox_events.len(), 2);
        assert!(sandbox_events.iter().all(|e| e.environment.is_sandbox()));
    }

    async fn a_rolled_back_change_leaves_no_event_and_no_row(backend) {
        let ctx = Ctx::new(backend).await;
        // The second event of a creation fails to insert: the listing, its order
        // and its first event must all disappear with the transaction.
        sql::fail_inserts_of_event(ctx.app.store.db(), "invoice.created").await;
        let response = ctx.post("/api/v1/listings", &ctx.new_listing()).await;
        expect_error(response, StatusCode::INTERNAL_SERVER_ERROR, "server.internal").await;
        let agency = ctx.agency.id.as_str();
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "listings", agency).await, 0);
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "orders", agency).await, 0);
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "events", agency).await, 0);
    }
}
