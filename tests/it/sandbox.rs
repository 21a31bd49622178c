//! The sandbox pool: the seeding job's three fixture listings (activated and
//! billed, reset rather than duplicated by re-seeding), isolation from live
//! data in both directions, and side effects recorded instead of performed.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::Environment;
use storage::api_keys::{KeyFormat, Scope};
use storage::people::sandbox::{FIXTURES, fixture_number};
use tests::deployment::eventually;
use tests::{TestApp, backend_tests, idempotency_key};

use crate::listings::Ctx;
use crate::support::{expect_error, expect_ok};

async fn seed(ctx: &Ctx, key: &str) -> reqwest::Response {
    ctx.app
        .client
        .post(ctx.app.url("/api/v1/agency/sandbox/seed"))
        .header("X-API-Key", key)
        .header("X-Idempotency-Key", idempotency_key())
        .send()
        .await
        .unwrap()
}

async fn listings_with(ctx: &Ctx, key: &str) -> Vec<Value> {
    let page = expect_ok(
        ctx.app
            .get("/api/v1/listings?limit=200")
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    page["items"].as_array().unwrap().clone()
}

fn numbers(items: &[Value]) -> Vec<String> {
    let mut numbers: Vec<String> = items
        .iter()
        .map(|item| item["listing_number"].as_str().unwrap().to_owned())
        .collect();
    numbers.sort();
    numbers
}

backend_tests! {
    async fn the_seed_job_gives_the_sandbox_exactly_three_billed_fixtures(backend) {
        let ctx = Ctx::with_app(TestApp::builder(backend).with_workers().spawn().await).await;
        let sandbox = ctx.sandbox_key().await;
        let response = seed(&ctx, &sandbox).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let queued: Value = response.json().await.unwrap();
        assert_eq!(queued["status"], "queued");
        assert!(queued["operation_id"].as_str().unwrap().starts_with("op_"));
        let mut expected: Vec<String> = queued["listing_numbers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect();
        expected.sort();
        for prefix in ["snd_active_", "snd_coming_soon_", "snd_sold_"] {
            assert!(expected.iter().any(|n| n.starts_with(prefix)), "{expected:?}");
        }
        let items = eventually(Duration::from_secs(20), "the seeded fixtures", || async {
            let items = listings_with(&ctx, &sandbox).await;
            (items.len() == 3).then_some(items)
        })
        .await;
        assert_eq!(numbers(&items), expected);
        for item in &items {
            let number = item["listing_number"].as_str().unwrap();
            let status = item["status"].as_str().unwrap();
            let wanted = if number.starts_with("snd_active_") {
                "Active"
            } else if number.starts_with("snd_coming_soon_") {
                "Coming Soon"
            } else {
                "Sold"
            };
            assert_eq!(status, wanted, "{number}");
            let orders = expect_ok(
                ctx.app
                    .get(&format!("/api/v1/listings/{number}/orders"))
                    .header("X-API-Key", &sandbox)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            let orders = orders["items"].as_array().unwrap();
            assert_eq!(orders.len(), 1, "{number}");
            assert_eq!(orders[0]["invoice_state"], "paid");
        }
        // Activated and billed: the active fixture may move on at once.
        let active = expected.iter().find(|n| n.starts_with("snd_active_")).unwrap();
        let moved = ctx
            .app
            .client
            .patch(ctx.app.url(&format!("/api/v1/listings/{active}/status")))
            .header("X-API-Key", &sandbox)
            .header("X-Idempotency-Key", idempotency_key())
            .json(&json!({"new_status": "Pending"}))
            .send()
            .await
            .unwrap();
        expect_ok(moved).await;
    }

    async fn reseeding_resets_the_fixtures_and_never_duplicates_them(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox = ctx.sandbox_key().await;
        let sandbox_store = ctx.app.store.sandbox();
        let first = sandbox_store.seed(&ctx.agency.id).await.unwrap();
        assert_eq!(first.len(), 3);
        let active = fixture_number(&ctx.agency.id, &FIXTURES[0]);
        let moved = ctx
            .app
            .client
            .patch(ctx.app.url(&format!("/api/v1/listings/{}/status", active.to_lowercase())))
            .header("X-API-Key", &sandbox)
            .header("X-Idempotency-Key", idempotency_key())
            .json(&json!({"status": "off_market"}))
            .send()
            .await
            .unwrap();
        assert_eq!(expect_ok(moved).await["status"], "Off Market");
        // A sandbox listing made by the developer stays beside the fixtures.
        let own = ctx
            .app
            .client
            .post(ctx.app.url("/api/v1/listings"))
            .header("X-API-Key", &sandbox)
            .header("X-Idempotency-Key", idempotency_key())
            .json(&ctx.new_listing())
            .send()
            .await
            .unwrap();
        assert_eq!(own.status(), StatusCode::CREATED);

        let second = sandbox_store.seed(&ctx.agency.id).await.unwrap();
        let ids = |listings: &[storage::listings::Listing]| listings.iter().map(|l| l.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&first), ids(&second), "re-seeding keeps the same three listings");
        let items = listings_with(&ctx, &sandbox).await;
        assert_eq!(items.len(), 4);
        let reset = items.iter().find(|i| i["listing_number"] == active.as_str()).unwrap();
        assert_eq!(reset["status"], "Active");
        let orders = expect_ok(
            ctx.app
                .get(&format!("/api/v1/listings/{active}/orders"))
                .header("X-API-Key", &sandbox)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(orders["items"].as_array().unwrap().len(), 1, "one paid invoice, not one per seeding");
        // Two seedings charged nobody: six payments recorded as no-ops.
        let effects = sandbox_store.side_effects(&ctx.agency.id).await.unwrap();
        assert_eq!(effects.iter().filter(|e| e.kind == "payment").count(), 6);
        assert!(effects.iter().all(|e| e.detail.contains("\"performed\":false")));
    }

    async fn the_sandbox_and_live_pools_never_see_each_other(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox = ctx.sandbox_key().await;
        let live_number = ctx.listing().await;
        ctx.app.store.sandbox().seed(&ctx.agency.id).await.unwrap();
        let live_items = listings_with(&ctx, &ctx.key).await;
        assert_eq!(numbers(&live_items), std::slice::from_ref(&live_number));
        for fixture in &FIXTURES {
            let number = fixture_number(&ctx.agency.id, fixture);
            let response = ctx.get(&format!("/api/v1/listings/{number}")).await;
            expect_error(response, StatusCode::NOT_FOUND, "listing_not_found").await;
        }
        let from_sandbox = ctx
            .app
            .get(&format!("/api/v1/listings/{live_number}"))
            .header("X-API-Key", &sandbox)
            .send()
            .await
            .unwrap();
        expect_error(from_sandbox, StatusCode::NOT_FOUND, "listing_not_found").await;
        let sandbox_items = listings_with(&ctx, &sandbox).await;
        assert!(!numbers(&sandbox_items).contains(&live_number));
        // Another agency's sandbox key sees none of this agency's fixtures.
        let other = ctx.app.agency().await;
        let other_sandbox = ctx
            .app
            .key_with(&other, &[Scope::ListingsRead], Environment::Sandbox, KeyFormat::Sk)
            .await;
        assert!(listings_with(&ctx, &other_sandbox).await.is_empty());
    }

    async fn only_a_sandbox_key_with_listings_write_seeds(backend) {
        let ctx = Ctx::new(backend).await;
        let live = seed(&ctx, &ctx.key).await;
        expect_error(live, StatusCode::FORBIDDEN, "permission_denied").await;
        let read_only = ctx
            .app
            .key_with(&ctx.agency, &[Scope::ListingsRead], Environment::Sandbox, KeyFormat::Sk)
            .await;
        expect_error(seed(&ctx, &read_only).await, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        let sandbox = ctx.sandbox_key().await;
        let without_key = ctx
            .app
            .client
            .post(ctx.app.url("/api/v1/agency/sandbox/seed"))
            .header("X-API-Key", &sandbox)
            .send()
            .await
            .unwrap();
        expect_error(without_key, StatusCode::BAD_REQUEST, "idempotency.missing").await;
        assert!(listings_with(&ctx, &sandbox).await.is_empty(), "nothing was seeded");
    }

    async fn sandbox_payments_are_recorded_not_charged(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox = ctx.sandbox_key().await;
        let created = ctx
            .app
            .client
            .post(ctx.app.url("/api/v1/listings"))
            .header("X-API-Key", &sandbox)
            .header("X-Idempotency-Key", idempotency_key())
            .json(&ctx.new_listing())
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
        let created: Value = created.json().await.unwrap();
        let number = created["listing_number"].as_str().unwrap().to_owned();
        let tenant = storage::Tenant::new(ctx.agency.id.clone(), Environment::Sandbox);
        ctx.app.store.orders().record_payment(&tenant, &number, None).await.unwrap();
        let live_number = ctx.activated_listing().await;
        let effects = ctx.app.store.sandbox().side_effects(&ctx.agency.id).await.unwrap();
        assert_eq!(effects.len(), 1);
        assert_eq!(effects[0].kind, "payment");
        assert_eq!(effects[0].subject, number);
        assert_ne!(effects[0].subject, live_number);
    }
}
