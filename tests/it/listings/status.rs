//! `PATCH /listings/{listing_number}/status`: activation, no-ops, the
//! lifecycle, spellings, and racing writers.

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::json;
use storage::rules::events::EventType;
use tests::backend_tests;

use super::Ctx;
use crate::support::expect_error;

backend_tests! {
    async fn status_changes_wait_for_activation_and_billing(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let path = format!("/api/v1/listings/{number}/status");
        let response = ctx.patch(&path, &json!({"new_status": "Active"})).await;
        expect_error(response, StatusCode::CONFLICT, "listing_not_activated").await;
        assert!(ctx.events_of(EventType::ListingStatusChanged).await.is_empty());

        ctx.app.store.orders().record_payment(&ctx.live(), &number, None).await.unwrap();
        let changed = ctx.set_status(&number, "Active").await;
        assert_eq!(changed["status"], "Active");
        assert_eq!(changed["previous_status"], "Coming Soon");
        assert_eq!(changed["activated"], true);
        let events = ctx.events_of(EventType::ListingStatusChanged).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data["status"], "Active");
        assert_eq!(events[0].data["previous_status"], "Coming Soon");
        assert_eq!(events[0].data["listing_number"], number.as_str());
    }

    async fn every_spelling_of_both_variants_is_accepted(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        let path = format!("/api/v1/listings/{number}/status");
        for (sent, shown) in [("active", "Active"), ("OFF MARKET", "Off Market"), ("coming_soon", "Coming Soon"), ("Active", "Active"), ("pending", "Pending"), ("Sold", "Sold"), ("archived", "Archived")] {
            let response = ctx.patch(&path, &json!({"status": sent})).await;
            assert_eq!(response.status(), StatusCode::OK, "{sent}");
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["status"], shown);
        }
    }

    async fn no_ops_lifecycle_violations_and_unknown_values_are_refused(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        let path = format!("/api/v1/listings/{number}/status");

        let error = expect_error(ctx.patch(&path, &json!({"new_status": "coming soon"})).await, StatusCode::CONFLICT, "no_op_transition").await;
        assert_eq!(error["error"]["details"]["status"], "Coming Soon");
        let error = expect_error(ctx.patch(&path, &json!({"new_status": "Sold"})).await, StatusCode::UNPROCESSABLE_ENTITY, "lifecycle_violation").await;
        assert_eq!(error["error"]["details"], json!({"from": "Coming Soon", "to": "Sold"}));
        expect_error(ctx.patch(&path, &json!({"new_status": "Cancelled"})).await, StatusCode::UNPROCESSABLE_ENTITY, "lifecycle_violation").await;

        for bad in [json!({"new_status": "Open House"}), json!({"new_status": ""})] {
            let error = expect_error(ctx.patch(&path, &bad).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"]["new_status"].as_str().unwrap().starts_with("must be one of"));
        }
        let error = expect_error(ctx.patch(&path, &json!({})).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert_eq!(error["error"]["details"]["fields"]["new_status"], "is required");
        expect_error(ctx.patch(&path, &json!({"new_status": 3})).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;

        ctx.set_status(&number, "Archived").await;
        for target in ["Active", "Coming Soon", "Sold"] {
            expect_error(ctx.patch(&path, &json!({"new_status": target})).await, StatusCode::UNPROCESSABLE_ENTITY, "lifecycle_violation").await;
        }
        expect_error(ctx.patch("/api/v1/listings/ZZZZZZZ/status", &json!({"new_status": "Active"})).await, StatusCode::NOT_FOUND, "listing_not_found").await;

        // Only the two successful moves produced events.
        assert_eq!(ctx.events_of(EventType::ListingStatusChanged).await.len(), 1);
    }

    async fn racing_status_changes_from_one_state_have_one_winner(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        ctx.set_status(&number, "Active").await;
        let path = format!("/api/v1/listings/{number}/status");
        let body = json!({"new_status": "Sold"});
        let responses = join_all((0..8).map(|_| ctx.patch(&path, &body))).await;
        let mut statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409, 409, 409, 409, 409, 409, 409]);
        for response in responses.into_iter().filter(|r| r.status() == StatusCode::CONFLICT) {
            expect_error(response, StatusCode::CONFLICT, "no_op_transition").await;
        }
        let sold: Vec<_> = ctx
            .events_of(EventType::ListingStatusChanged)
            .await
            .into_iter()
            .filter(|e| e.data["status"] == "Sold")
            .collect();
        assert_eq!(sold.len(), 1, "exactly one event for the one winner");
    }
}
