//! Session routes refuse API keys, missing or forged cookies, and missing,
//! wrong or another session's CSRF tokens, even on reads; a refused change
//! changes nothing.

use reqwest::StatusCode;
use serde_json::json;
use storage::api_keys::Scope;
use tests::{TestApp, backend_tests};

use super::{owner_login, sign_in};
use crate::support::{expect_error, expect_ok};

backend_tests! {
    async fn session_routes_refuse_api_keys_missing_cookies_and_missing_csrf_tokens(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let email = owner_login(&app, &agency).await;
        let key = app.key(&agency, &Scope::ALL).await;
        let signed = sign_in(&app, &email).await;

        for path in ["/api/v1/session", "/api/v1/agency/changelog", "/api/v1/agency/api-keys"] {
            let with_key = app.get(path).header("X-API-Key", &key).send().await.unwrap();
            expect_error(with_key, StatusCode::UNAUTHORIZED, "auth.session_required").await;
        }
        let forged = app.get("/api/v1/session").header("Cookie", "__Host-ma_session=forged").send().await.unwrap();
        expect_error(forged, StatusCode::UNAUTHORIZED, "auth.session_required").await;

        // The changelog wants the token even though it is a read.
        let no_token = signed.cookie_only(app.get("/api/v1/agency/changelog")).send().await.unwrap();
        expect_error(no_token, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let wrong = app
            .get("/api/v1/agency/changelog")
            .header("Cookie", &signed.cookie)
            .header("X-CSRF-Token", "not-the-token")
            .send()
            .await
            .unwrap();
        expect_error(wrong, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        // Another session's token does not fit this one.
        let other = sign_in(&app, &email).await;
        let crossed = app
            .get("/api/v1/agency/changelog")
            .header("Cookie", &signed.cookie)
            .header("X-CSRF-Token", &other.csrf)
            .send()
            .await
            .unwrap();
        expect_error(crossed, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        expect_ok(signed.send(app.get("/api/v1/agency/changelog")).send().await.unwrap()).await;

        // Changes without the token are refused and change nothing.
        let create = signed
            .cookie_only(app.client.post(app.url("/api/v1/agency/api-keys")))
            .json(&json!({"name": "CRM"}))
            .send()
            .await
            .unwrap();
        expect_error(create, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let logout = signed.cookie_only(app.client.delete(app.url("/api/v1/session"))).send().await.unwrap();
        expect_error(logout, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let keys = expect_ok(signed.cookie_only(app.get("/api/v1/agency/api-keys")).send().await.unwrap()).await;
        assert_eq!(keys["items"].as_array().unwrap().len(), 1, "only the test key");
    }
}
