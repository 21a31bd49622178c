//! Registering and managing endpoints: validation, the secret shown once and
//! sealed at rest, list/get/update/disable/enable/rotate/delete, tenancy.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use storage::api_keys::Scope;
use tests::backend_tests;

use super::{Ctx, SCOPES};
use crate::support::{expect_error, expect_ok};

backend_tests! {
    async fn registration_returns_the_secret_once_and_stores_it_sealed(backend) {
        let ctx = Ctx::new(backend).await;
        let response = ctx
            .post(
                "/api/v1/webhooks/endpoints",
                &json!({
                    "url": ctx.receiver.url,
                    "name": "Orders feed",
                    "event_types": ["listing.created", "invoice.payment_made", "listing.created"],
                    "environment": "Live events only",
                }),
            )
            .await;
        assert_eq!(response.status(), 201);
        let created: Value = response.json().await.unwrap();
        let secret = created["secret"].as_str().unwrap();
        let random = secret.strip_prefix("whsec_").expect("whsec_ prefix");
        assert!(random.len() >= 43, "at least 32 bytes of entropy: {secret}");
        assert_eq!(created["event_types"], json!(["listing.created", "invoice.paid"]));
        assert_eq!(created["environment"], "live");
        assert_eq!(created["status"], "enabled");
        assert_eq!(created["consecutive_failures"], 0);
        assert_eq!(created["name"], "Orders feed");
        let id = created["id"].as_str().unwrap();

        // Never shown again.
        let read = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{id}")).await).await;
        assert!(read.get("secret").is_none(), "{read}");
        let list = expect_ok(ctx.get("/api/v1/webhooks/endpoints").await).await;
        assert_eq!(list["total"], 1);
        assert!(!list.to_string().contains(secret));

        // Sealed at rest: the stored value is not the secret and does not contain it.
        let sealed = ctx.app.store.webhooks().sealed_secret(&id.parse().unwrap()).await.unwrap().unwrap();
        assert!(!sealed.contains(random), "{sealed}");
        if let Some(file) = ctx.app.db.sqlite_file() {
            let mut bytes = std::fs::read(&file).unwrap();
            if let Ok(wal) = std::fs::read(file.with_extension("sqlite3-wal")) {
                bytes.extend(wal);
            }
            assert!(!String::from_utf8_lossy(&bytes).contains(random));
        }
    }

    async fn bad_registrations_are_refused_field_by_field(backend) {
        let ctx = Ctx::new(backend).await;
        let cases = [
            (json!({ "url": "http://localhost/hooks" }), "url"),
            (json!({ "url": "not a url" }), "url"),
            (json!({ "url": "https://user:pw@localhost/hooks" }), "url"),
            (json!({ "url": ctx.receiver.url, "event_types": ["listing.exploded"] }), "event_types"),
            (json!({ "url": ctx.receiver.url, "event_types": [] }), "event_types"),
            (json!({ "url": ctx.receiver.url, "event_types": ["webhook.test_fire"] }), "event_types"),
            // Planned types are listed in the catalog but not subscribable yet.
            (json!({ "url": ctx.receiver.url, "event_types": ["listing.created", "invoice.overdue"] }), "event_types"),
            (json!({ "url": ctx.receiver.url, "environment": "staging" }), "environment"),
            (json!({ "url": ctx.receiver.url, "name": "x".repeat(201) }), "name"),
        ];
        for (body, field) in cases {
            let response = ctx.post("/api/v1/webhooks/endpoints", &body).await;
            let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"][field].is_string(), "{body} → {error}");
        }
        let response = ctx.post("/api/v1/webhooks/endpoints", &json!({ "url": ctx.receiver.url, "colour": "red" })).await;
        assert_eq!(response.status(), 422);
        let response = ctx.post("/api/v1/webhooks/endpoints", &json!({})).await;
        assert_eq!(response.status(), 422);
        // Nothing was registered.
        let list = expect_ok(ctx.get("/api/v1/webhooks/endpoints").await).await;
        assert_eq!(list["total"], 0);
    }

    async fn a_sandbox_key_registers_sandbox_endpoints_only(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox = ctx.sandbox_key().await;
        let response = ctx
            .send(Method::POST, "/api/v1/webhooks/endpoints", &sandbox, Some(&json!({ "url": ctx.receiver.url, "environment": "both" })))
            .await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let (id, _) = ctx.register_with(&sandbox, json!({})).await;
        let endpoint: Value = ctx
            .send(Method::GET, &format!("/api/v1/webhooks/endpoints/{id}"), &sandbox, None)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(endpoint["environment"], "sandbox");
        // Each pool sees its own endpoints only.
        let live = ctx.get(&format!("/api/v1/webhooks/endpoints/{id}")).await;
        expect_error(live, StatusCode::NOT_FOUND, "webhook_endpoint_not_found").await;
    }

    async fn owners_update_disable_enable_rotate_and_delete(backend) {
        let ctx = Ctx::new(backend).await;
        let (id, secret) = ctx.register().await;
        let path = format!("/api/v1/webhooks/endpoints/{id}");

        let updated = expect_ok(
            ctx.send(Method::PATCH, &path, &ctx.key, Some(&json!({
                "name": "renamed",
                "event_types": ["listing.section_modified"],
                "environment": "both",
            })))
            .await,
        )
        .await;
        assert_eq!(updated["name"], "renamed");
        assert_eq!(updated["event_types"], json!(["listing.section_updated"]));
        assert_eq!(updated["environment"], "both");
        let cleared = expect_ok(
            ctx.send(Method::PATCH, &path, &ctx.key, Some(&json!({ "event_types": null, "name": null }))).await,
        )
        .await;
        assert_eq!(cleared["event_types"], Value::Null);
        assert_eq!(cleared["name"], Value::Null);
        assert_eq!(cleared["environment"], "both", "untouched fields stay");
        let refused = ctx.send(Method::PATCH, &path, &ctx.key, Some(&json!({ "url": "http://example.com" }))).await;
        expect_error(refused, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;

        let disabled = expect_ok(ctx.post(&format!("{path}/disable"), &json!({})).await).await;
        assert_eq!(disabled["status"], "disabled");
        assert_eq!(disabled["disabled_reason"], "disabled_by_owner");
        let enabled = expect_ok(ctx.post(&format!("{path}/enable"), &json!({})).await).await;
        assert_eq!(enabled["status"], "enabled");
        assert_eq!(enabled["disabled_reason"], Value::Null);

        let rotated = expect_ok(ctx.post(&format!("{path}/rotate-secret"), &json!({})).await).await;
        let new_secret = rotated["secret"].as_str().unwrap();
        assert!(new_secret.starts_with("whsec_"));
        assert_ne!(new_secret, secret);

        let deleted = ctx.send(Method::DELETE, &path, &ctx.key, None).await;
        assert_eq!(deleted.status(), 204);
        expect_error(ctx.get(&path).await, StatusCode::NOT_FOUND, "webhook_endpoint_not_found").await;
        let again = ctx.send(Method::DELETE, &path, &ctx.key, None).await;
        expect_error(again, StatusCode::NOT_FOUND, "webhook_endpoint_not_found").await;
    }

    async fn another_agencys_endpoint_is_not_found_on_every_route(backend) {
        let ctx = Ctx::new(backend).await;
        let (id, _) = ctx.register().await;
        let other = ctx.app.agency().await;
        let stranger = ctx.app.key(&other, &SCOPES).await;
        let path = format!("/api/v1/webhooks/endpoints/{id}");
        let routes = [
            (Method::GET, path.clone(), None),
            (Method::PATCH, path.clone(), Some(json!({ "name": "mine now" }))),
            (Method::POST, format!("{path}/disable"), None),
            (Method::POST, format!("{path}/enable"), None),
            (Method::POST, format!("{path}/rotate-secret"), None),
            (Method::POST, format!("{path}/test"), None),
            (Method::GET, format!("{path}/deliveries"), None),
            (Method::POST, format!("{path}/recover"), Some(json!({ "since": "2026-01-01T00:00:00Z" }))),
            (Method::GET, format!("{path}/recoveries/whr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K"), None),
            (Method::DELETE, path.clone(), None),
        ];
        for (method, path, body) in routes {
            let response = ctx.send(method.clone(), &path, &stranger, body.as_ref()).await;
            expect_error(response, StatusCode::NOT_FOUND, "webhook_endpoint_not_found").await;
        }
        let list = expect_ok(ctx.send(Method::GET, "/api/v1/webhooks/endpoints", &stranger, None).await).await;
        assert_eq!(list["total"], 0);
        // Nor are its deliveries, to read or to replay.
        ctx.create_listing().await;
        let delivery = loop {
            if let Some(first) = ctx.deliveries(&id).await.into_iter().next() {
                break first["id"].as_str().unwrap().to_owned();
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let response = ctx.send(Method::GET, &format!("/api/v1/webhooks/deliveries/{delivery}"), &stranger, None).await;
        expect_error(response, StatusCode::NOT_FOUND, "webhook_delivery_not_found").await;
        let response = ctx.send(Method::POST, &format!("/api/v1/webhooks/deliveries/{delivery}/replay"), &stranger, None).await;
        expect_error(response, StatusCode::NOT_FOUND, "webhook_delivery_not_found").await;
        // The owner's endpoint is untouched.
        let endpoint = expect_ok(ctx.get(&path_of(&id)).await).await;
        assert_eq!(endpoint["status"], "enabled");
    }
}

fn path_of(id: &str) -> String {
    format!("/api/v1/webhooks/endpoints/{id}")
}

#[tokio::test]
async fn managing_endpoints_needs_webhooks_write() {
    let ctx = Ctx::new(tests::Backend::Sqlite).await;
    let reader = ctx.app.key(&ctx.agency, &[Scope::WebhooksRead]).await;
    let response = ctx
        .send(
            Method::POST,
            "/api/v1/webhooks/endpoints",
            &reader,
            Some(&json!({ "url": ctx.receiver.url })),
        )
        .await;
    expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
    let response = ctx
        .send(Method::GET, "/api/v1/webhooks/endpoints", &reader, None)
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn endpoint_and_delivery_pages_refuse_bad_limits_and_cursors() {
    let ctx = Ctx::new(tests::Backend::Sqlite).await;
    let (id, _) = ctx.register().await;
    for path in [
        "/api/v1/webhooks/endpoints".to_owned(),
        format!("/api/v1/webhooks/endpoints/{id}/deliveries"),
    ] {
        for query in ["limit=0", "limit=201", "cursor=not-a-cursor"] {
            let response = ctx.get(&format!("{path}?{query}")).await;
            let code = if query.starts_with("cursor") {
                "invalid_cursor"
            } else {
                "validation.failed"
            };
            expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, code).await;
        }
        let response = ctx.get(&format!("{path}?colour=red")).await;
        expect_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
    }
}
