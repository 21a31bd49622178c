//! `POST /listings/{listing_number}/cancel`: the no-fee window, its cutoff,
//! exactly-once emission, and what cancelling does to the shoot and invoice.

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::rules::cancellation::FeeTier;
use storage::rules::events::EventType;
use storage::{Clock, Timestamp};
use tests::{TestApp, backend_tests};

use super::Ctx;
use crate::support::{expect_error, expect_ok};

async fn cancel(ctx: &Ctx, number: &str) -> reqwest::Response {
    ctx.post(&format!("/api/v1/listings/{number}/cancel"), &Value::Null)
        .await
}

backend_tests! {
    async fn cancelling_without_a_shoot_is_free_and_emits_once(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let cancelled = expect_ok(cancel(&ctx, &number).await).await;
        assert_eq!(cancelled["status"], "Cancelled");
        assert_eq!(cancelled["previous_status"], "Coming Soon");
        assert_eq!(cancelled["fee_applied"], json!({"amount": 0, "currency": "USD"}));
        assert_eq!(cancelled["listing_number"], number.as_str());

        let again = cancel(&ctx, &number).await;
        expect_error(again, StatusCode::CONFLICT, "listing_already_cancelled").await;

        let events = ctx.events_of(EventType::ListingCancelled).await;
        assert_eq!(events.len(), 1, "the second cancel emits nothing");
        assert_eq!(events[0].data["fee_applied"], json!({"amount": 0, "currency": "USD"}));
        // The open invoice is voided with it.
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        assert_eq!(listing["orders"][0]["invoice_state"], "void");
        assert_eq!(ctx.events_of(EventType::InvoiceVoided).await.len(), 1);
        // A cancelled listing's status is terminal.
        let patch = ctx.patch(&format!("/api/v1/listings/{number}/status"), &json!({"new_status": "Active"})).await;
        expect_error(patch, StatusCode::CONFLICT, "listing_not_activated").await;
    }

    async fn the_default_tier_closes_the_window_a_day_before_the_shoot(backend) {
        let ctx = Ctx::new(backend).await;
        let early = ctx.listing().await;
        ctx.schedule_in(&early, 48 * 3600).await;
        let cancelled = expect_ok(cancel(&ctx, &early).await).await;
        assert_eq!(cancelled["status"], "Cancelled");
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{early}")).await).await;
        assert_eq!(listing["appointment"]["status"], "cancelled");
        assert_eq!(ctx.events_of(EventType::AppointmentCancelled).await.len(), 1);

        let late = ctx.listing().await;
        let shoot = ctx.schedule_in(&late, 12 * 3600).await;
        let error = expect_error(cancel(&ctx, &late).await, StatusCode::CONFLICT, "outside_cancellation_window").await;
        let details = &error["error"]["details"];
        assert_eq!(details["no_fee_cutoff"], shoot.plus_seconds(-24 * 3600).to_rfc3339());
        assert!(details["remediation_url"].as_str().unwrap().starts_with("http"));
        assert!(details["remediation_url"].as_str().unwrap().contains(&late));
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{late}")).await).await;
        assert_eq!(listing["status"], "Coming Soon", "nothing changed");
        assert_eq!(ctx.events_of(EventType::ListingCancelled).await.len(), 1);
    }

    async fn the_cutoff_instant_is_inside_the_window_and_the_next_is_not(backend) {
        let start = Timestamp::from_micros(1_800_000_000_000_000);
        let clock = Clock::manual(start);
        let ctx = Ctx::with_app(TestApp::builder(backend).clock(clock.clone()).spawn().await).await;
        let tiers = [FeeTier { hours_before: 72, amount: 10_000, currency: "USD".into() }, FeeTier { hours_before: 24, amount: 5_000, currency: "USD".into() }];
        ctx.app.store.cancellation_fees().set(&ctx.agency.id, &ctx.agency.owner_id, &tiers).await.unwrap();

        let on_time = ctx.listing().await;
        let late = ctx.listing().await;
        // Shoots 100 hours out: the 72-hour tier puts the cutoff 28 hours from now.
        ctx.schedule_in(&on_time, 100 * 3600).await;
        ctx.schedule_in(&late, 100 * 3600).await;
        clock.advance_seconds(28 * 3600);
        expect_ok(cancel(&ctx, &on_time).await).await;
        clock.advance_seconds(1);
        let error = expect_error(cancel(&ctx, &late).await, StatusCode::CONFLICT, "outside_cancellation_window").await;
        assert_eq!(error["error"]["details"]["no_fee_cutoff"], start.plus_seconds(28 * 3600).to_rfc3339());
    }

    /// The specification's table: any listing that is not cancelled may be
    /// cancelled inside the window, an Archived one too.
    async fn archived_listings_cancel_inside_the_window_and_strangers_get_404(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        ctx.set_status(&number, "Archived").await;
        let cancelled = expect_ok(cancel(&ctx, &number).await).await;
        assert_eq!(cancelled["status"], "Cancelled");
        let events = ctx.events_of(EventType::ListingCancelled).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data["previous_status"], "Archived", "{}", events[0].data);
        expect_error(cancel(&ctx, &number).await, StatusCode::CONFLICT, "listing_already_cancelled").await;
        expect_error(cancel(&ctx, "ZZZZZZZ").await, StatusCode::NOT_FOUND, "listing_not_found").await;
    }

    async fn a_paid_then_cancelled_listing_cannot_change_status(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        ctx.set_status(&number, "Active").await;
        expect_ok(cancel(&ctx, &number).await).await;
        let path = format!("/api/v1/listings/{number}/status");
        // Activated and billed, so the activation check passes: Cancelled is terminal.
        for target in ["Active", "Coming Soon", "Pending", "Sold", "Off Market", "Archived"] {
            let error = expect_error(ctx.patch(&path, &json!({"new_status": target})).await, StatusCode::UNPROCESSABLE_ENTITY, "lifecycle_violation").await;
            assert_eq!(error["error"]["details"]["from"], "Cancelled", "{target}");
        }
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        assert_eq!(listing["status"], "Cancelled");
        let changes = ctx.events_of(EventType::ListingStatusChanged).await;
        let moves: Vec<(&Value, &Value)> = changes.iter().map(|e| (&e.data["previous_status"], &e.data["status"])).collect();
        assert_eq!(moves, [(&json!("Coming Soon"), &json!("Active"))], "nothing moved after the cancel");
    }

    async fn a_cancel_with_no_body_and_no_content_type_succeeds(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let response = ctx
            .app
            .client
            .post(ctx.app.url(&format!("/api/v1/listings/{number}/cancel")))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &ctx.key)
            .header("Content-Length", "0")
            .send()
            .await
            .unwrap();
        let cancelled = expect_ok(response).await;
        assert_eq!(cancelled["status"], "Cancelled");
        assert_eq!(cancelled["fee_applied"], json!({"amount": 0, "currency": "USD"}));
        assert_eq!(ctx.events_of(EventType::ListingCancelled).await.len(), 1);
    }

    async fn racing_cancels_emit_exactly_once(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let responses = join_all((0..6).map(|_| cancel(&ctx, &number))).await;
        let mut statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409, 409, 409, 409, 409]);
        assert_eq!(ctx.events_of(EventType::ListingCancelled).await.len(), 1);
    }
}
