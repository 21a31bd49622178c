//! `POST /api/v1/agency/test-console`: a request run as a chosen key goes
//! through the key's real scopes, limits and idempotency; what the console
//! cannot run is refused with the envelope; 60 runs a minute per agency.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::ids::ApiKeyId;
use storage::people::users::Role;
use tests::{TestApp, backend_tests};

use crate::sessions::{Signed, account, owner_login, sign_in};
use crate::support::{expect_error, expect_ok};

const CONSOLE: &str = "/api/v1/agency/test-console";

async fn key_id(app: &TestApp, plaintext: &str) -> ApiKeyId {
    app.store
        .api_keys()
        .find_by_plaintext(plaintext)
        .await
        .unwrap()
        .unwrap()
        .key
        .id
}

async fn console(app: &TestApp, admin: &Signed, body: Value) -> reqwest::Response {
    admin
        .send(app.client.post(app.url(CONSOLE)))
        .json(&body)
        .send()
        .await
        .unwrap()
}

backend_tests! {
    async fn the_console_runs_a_request_as_the_key_with_its_scopes_and_idempotency(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let admin = sign_in(&app, &owner_login(&app, &agency).await).await;
        let reader = key_id(&app, &app.key(&agency, &[Scope::ListingsRead]).await).await;
        let writer = key_id(&app, &app.key(&agency, &[Scope::ListingsWrite, Scope::ListingsRead]).await).await;

        let read = expect_ok(console(&app, &admin, json!({"key_id": reader.as_str(), "method": "GET", "path": "/api/v1/listings?limit=2"})).await).await;
        assert_eq!(read["status"], 200, "{read}");
        assert!(read["body"]["items"].is_array(), "{read}");
        assert!(read["headers"]["x-ratelimit-limit"].is_string(), "the key's own budget headers: {read}");

        let denied = expect_ok(console(&app, &admin, json!({"key_id": reader.as_str(), "method": "GET", "path": "/api/v1/users"})).await).await;
        assert_eq!(denied["status"], 403, "the key lacks users:read: {denied}");
        assert_eq!(denied["body"]["error"]["code"], "auth.scope_denied");

        let new_listing = json!({
            "address": "4 Quay Road, Falmouth",
            "owner_user_id": agency.owner_id.as_str(),
            "agent_one_id": agency.owner_id.as_str(),
        });
        let without_key = expect_ok(console(&app, &admin, json!({"key_id": writer.as_str(), "method": "POST", "path": "/api/v1/listings", "body": new_listing})).await).await;
        assert_eq!(without_key["status"], 400, "a POST without an idempotency key: {without_key}");
        assert_eq!(without_key["body"]["error"]["code"], "idempotency.missing");
        let run_once = || console(&app, &admin, json!({
            "key_id": writer.as_str(), "method": "POST", "path": "/api/v1/listings",
            "body": new_listing, "headers": {"X-Idempotency-Key": "console-create-1"},
        }));
        let first = expect_ok(run_once().await).await;
        assert_eq!(first["status"], 201, "{first}");
        let again = expect_ok(run_once().await).await;
        assert_eq!(again["status"], 201, "{again}");
        assert_eq!(again["body"]["listing_number"], first["body"]["listing_number"], "replayed, not created twice");
        let listings = app.store.listings().list(
            &storage::Tenant::new(agency.id.clone(), storage::Environment::Live),
            &storage::listings::ListingFilter::default(),
            None,
            10,
        ).await.unwrap();
        assert_eq!(listings.items.len(), 1);

        let sse = expect_ok(console(&app, &admin, json!({"key_id": reader.as_str(), "method": "GET", "path": "/api/v1/agency/changelog"})).await).await;
        assert_eq!(sse["status"], 401, "a session-only route is not opened by a key: {sse}");
    }

    async fn the_console_refuses_what_it_cannot_run(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let other = app.agency().await;
        let admin = sign_in(&app, &owner_login(&app, &agency).await).await;
        let own = app.key(&agency, &[Scope::ListingsRead]).await;
        let own_id = key_id(&app, &own).await;
        let foreign = key_id(&app, &app.key(&other, &[Scope::ListingsRead]).await).await;

        let refused = console(&app, &admin, json!({"key_id": foreign.as_str(), "method": "GET", "path": "/api/v1/listings"})).await;
        expect_error(refused, StatusCode::NOT_FOUND, "api_key_not_found").await;
        for (body, field) in [
            (json!({"key_id": own_id.as_str(), "method": "TRACE", "path": "/api/v1/listings"}), "method"),
            (json!({"key_id": own_id.as_str(), "method": "GET", "path": "/ops/api/queues"}), "path"),
            (json!({"key_id": own_id.as_str(), "method": "GET", "path": "https://elsewhere.example/api/v1/listings"}), "path"),
            (json!({"key_id": own_id.as_str(), "method": "POST", "path": CONSOLE}), "path"),
            (json!({"key_id": own_id.as_str(), "method": "GET", "path": "/api/v1/listings", "headers": {"X-API-Key": own}}), "headers"),
        ] {
            let refused = expect_error(console(&app, &admin, body).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(refused["error"]["details"]["fields"][field].is_string(), "{refused}");
        }
        let unknown_field = console(&app, &admin, json!({"key_id": own_id.as_str(), "method": "GET", "path": "/api/v1/listings", "as": "root"})).await;
        assert_eq!(unknown_field.status(), StatusCode::UNPROCESSABLE_ENTITY);

        app.store.api_keys().revoke(&agency.id, &own_id).await.unwrap();
        let revoked = console(&app, &admin, json!({"key_id": own_id.as_str(), "method": "GET", "path": "/api/v1/listings"})).await;
        let revoked = expect_error(revoked, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert!(revoked["error"]["details"]["fields"]["key_id"].as_str().unwrap().contains("revoked"));

        let no_csrf = admin.cookie_only(app.client.post(app.url(CONSOLE))).json(&json!({})).send().await.unwrap();
        expect_error(no_csrf, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let with_key = app.client.post(app.url(CONSOLE)).header("X-API-Key", &own).json(&json!({})).send().await.unwrap();
        expect_error(with_key, StatusCode::UNAUTHORIZED, "auth.session_required").await;
        let (_, agent_email) = account(&app, &agency, Role::Agent).await;
        let agent = sign_in(&app, &agent_email).await;
        let fresh = key_id(&app, &app.key(&agency, &[Scope::ListingsRead]).await).await;
        let by_agent = console(&app, &agent, json!({"key_id": fresh.as_str(), "method": "GET", "path": "/api/v1/listings"})).await;
        expect_error(by_agent, StatusCode::FORBIDDEN, "permission_denied").await;
    }

    async fn an_agency_has_sixty_console_runs_a_minute_whoever_runs_them(backend) {
        // A standing clock: the budget refills only when the test says, so
        // the sixty-first run is refused however slowly the sixty ran.
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).rate_limits_on(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let owner = sign_in(&app, &owner_login(&app, &agency).await).await;
        let (admin_id, admin_email) = account(&app, &agency, Role::Agent).await;
        crate::support::sql::set_user_role(app.store.db(), admin_id.as_str(), "broker").await;
        let admin = sign_in(&app, &admin_email).await;
        let key = key_id(&app, &app.key(&agency, &[Scope::ListingsRead]).await).await;
        let body = json!({"key_id": key.as_str(), "method": "GET", "path": "/api/v1/listings?limit=1"});
        for index in 0..60 {
            let who = if index % 2 == 0 { &owner } else { &admin };
            let response = console(&app, who, body.clone()).await;
            assert_eq!(response.status(), StatusCode::OK, "run {index}");
        }
        let refused = console(&app, &admin, body.clone()).await;
        assert!(refused.headers().contains_key("retry-after"));
        expect_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limit.exceeded").await;
        // A second on, one more run fits.
        clock.advance_seconds(1);
        assert_eq!(console(&app, &owner, body.clone()).await.status(), StatusCode::OK);
        let other = app.agency().await;
        let other_admin = sign_in(&app, &owner_login(&app, &other).await).await;
        let other_key = key_id(&app, &app.key(&other, &[Scope::ListingsRead]).await).await;
        let elsewhere = console(&app, &other_admin, json!({"key_id": other_key.as_str(), "method": "GET", "path": "/api/v1/listings"})).await;
        assert_eq!(elsewhere.status(), StatusCode::OK, "another agency has its own budget");
    }
}
