//! Another agency's listing, and the other environment's, is 404 on every
//! listing route, and nothing changes.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use storage::api_keys::Scope;
use tests::backend_tests;

use super::Ctx;
use crate::support::{expect_error, expect_ok, sql};

backend_tests! {
    async fn every_listing_route_hides_other_tenants_listings(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        let stranger_agency = ctx.app.agency().await;
        let stranger = ctx.app.key(&stranger_agency, &[Scope::ListingsRead, Scope::ListingsWrite]).await;
        let sandbox = ctx.sandbox_key().await;
        let events_before = ctx.events().await.len();

        let attempts: Vec<(Method, String, Value)> = vec![
            (Method::GET, format!("/api/v1/listings/{number}"), Value::Null),
            (Method::GET, format!("/api/v1/listings/{number}/orders"), Value::Null),
            (Method::PATCH, format!("/api/v1/listings/{number}/status"), json!({"new_status": "Active"})),
            (Method::POST, format!("/api/v1/listings/{number}/cancel"), Value::Null),
            (Method::PATCH, format!("/api/v1/listings/{number}/sections/tour3d"), json!({"operation": "set", "url": "https://evil.example.com"})),
            (Method::PATCH, format!("/api/v1/listings/{number}/sections/floorplan"), json!({"operation": "set", "files": [{"url": "https://evil.example.com/f.pdf", "label": "x"}]})),
        ];
        for key in [&stranger, &sandbox] {
            for (method, path, body) in &attempts {
                let mut request = ctx.app.client.request(method.clone(), ctx.app.url(path)).header("X-API-Key", key).header("X-Idempotency-Key", tests::idempotency_key());
                if !body.is_null() {
                    request = request.json(body);
                }
                let response = request.send().await.unwrap();
                expect_error(response, StatusCode::NOT_FOUND, "listing_not_found").await;
            }
            let list = expect_ok(ctx.app.get("/api/v1/listings").header("X-API-Key", key).send().await.unwrap()).await;
            assert_eq!(list["total"], 0);
        }

        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        assert_eq!(listing["status"], "Coming Soon");
        assert_eq!(listing["sections"]["tour3d"]["url"], Value::Null);
        assert_eq!(ctx.events().await.len(), events_before);
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "events", stranger_agency.id.as_str()).await, 0);
    }
}
