//! Which endpoints hear an event: the endpoint's environment chooses live,
//! sandbox or both, and another agency's events never reach it.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tests::backend_tests;

use super::{Ctx, SCOPES};

backend_tests! {
    async fn environments_choose_which_events_an_endpoint_hears(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox_key = ctx.sandbox_key().await;
        let types = json!({ "event_types": ["listing.created"] });
        let mut live_only = types.clone();
        live_only["environment"] = "live".into();
        let mut both = types.clone();
        both["environment"] = "Both".into();
        let (live_id, _) = ctx.register_with(&ctx.key, live_only).await;
        let (both_id, _) = ctx.register_with(&ctx.key, both).await;
        let (sandbox_id, _) = ctx.register_with(&sandbox_key, types).await;

        ctx.create_listing().await;
        ctx.create_listing_with(&sandbox_key).await;
        // live → live and both; sandbox → both and sandbox.
        let received = ctx.receiver.wait_for(4, Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(ctx.receiver.received().len(), 4, "{received:?}");
        let sandboxed = received.iter().filter(|r| r.json()["is_sandbox"] == true).count();
        assert_eq!(sandboxed, 2);

        assert_eq!(ctx.deliveries(&live_id).await.len(), 1);
        assert_eq!(ctx.deliveries(&both_id).await.len(), 2);
        let sandbox_deliveries: Value = ctx
            .send(Method::GET, &format!("/api/v1/webhooks/endpoints/{sandbox_id}/deliveries"), &sandbox_key, None)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(sandbox_deliveries["items"].as_array().unwrap().len(), 1);
        assert_eq!(sandbox_deliveries["items"][0]["is_sandbox"], true);
        let live_deliveries = ctx.deliveries(&live_id).await;
        assert_eq!(live_deliveries[0]["is_sandbox"], false);
    }

    async fn another_agencys_events_never_reach_an_endpoint(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created", "invoice.created"] })).await;
        // A second agency with its own listing.
        let other = ctx.app.agency().await;
        let other_agent = crate::listings::add_user(&ctx.app, &other, storage::people::users::Role::Agent).await;
        let other_key = ctx.app.key(&other, &SCOPES).await;
        let body = json!({
            "address": "1 Other Road",
            "owner_user_id": other.owner_id,
            "agent_one_id": other_agent,
        });
        let response = ctx.send(Method::POST, "/api/v1/listings", &other_key, Some(&body)).await;
        assert_eq!(response.status(), 201);
        // Our own listing arrives; theirs never does.
        let number = ctx.create_listing().await;
        let received = ctx.receiver.wait_for(2, Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let received = if received.len() < ctx.receiver.received().len() { ctx.receiver.received() } else { received };
        assert_eq!(received.len(), 2, "listing.created and invoice.created of our listing only");
        for delivery in &received {
            let data = delivery.json()["data"].clone();
            assert_eq!(data["listing_number"], number.as_str(), "{data}");
        }
        assert_eq!(ctx.deliveries(&endpoint_id).await.len(), 2);
    }
}
