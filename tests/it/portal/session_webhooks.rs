//! The webhook routes accept an administrator's session as well as a key,
//! with the same rules: CSRF on every change, tenancy (another agency's
//! endpoint is not found), the portal's environment switch, and nobody but
//! an administrator.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::Environment;
use storage::api_keys::{KeyFormat, Scope};
use storage::people::users::Role;
use tests::receiver::WebhookReceiver;
use tests::{TestApp, backend_tests, idempotency_key};

use crate::sessions::{account, owner_login, sign_in};
use crate::support::{expect_error, expect_ok};

backend_tests! {
    async fn an_administrators_session_manages_endpoints_under_the_keys_rules(backend) {
        let receiver = WebhookReceiver::start().await;
        let app = TestApp::builder(backend).with_workers().webhooks(receiver.delivery(60)).spawn().await;
        let agency = app.agency().await;
        let admin = sign_in(&app, &owner_login(&app, &agency).await).await;

        let created = admin
            .send(app.client.post(app.url("/api/v1/webhooks/endpoints")))
            .header("X-Idempotency-Key", idempotency_key())
            .json(&json!({"url": receiver.url, "event_types": ["listing.created"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
        let created: Value = created.json().await.unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        assert!(created["secret"].as_str().unwrap().starts_with("whsec_"));

        let listed = expect_ok(admin.cookie_only(app.get("/api/v1/webhooks/endpoints")).send().await.unwrap()).await;
        assert_eq!(listed["items"].as_array().unwrap().len(), 1, "reads need no CSRF token");
        let key = app.key(&agency, &[Scope::WebhooksRead, Scope::WebhooksWrite]).await;
        let by_key = expect_ok(app.get(&format!("/api/v1/webhooks/endpoints/{id}")).header("X-API-Key", &key).send().await.unwrap()).await;
        assert_eq!(by_key["id"], id.as_str(), "the same endpoint a key sees");

        let unprotected = admin
            .cookie_only(app.client.post(app.url(&format!("/api/v1/webhooks/endpoints/{id}/disable"))))
            .header("X-Idempotency-Key", idempotency_key())
            .send()
            .await
            .unwrap();
        expect_error(unprotected, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let tested = admin
            .send(app.client.post(app.url(&format!("/api/v1/webhooks/endpoints/{id}/test"))))
            .header("X-Idempotency-Key", idempotency_key())
            .send()
            .await
            .unwrap();
        assert_eq!(tested.status(), StatusCode::CREATED);
        let tested: Value = tested.json().await.unwrap();
        assert_eq!(tested["verdict"], "Verified");

        // The sandbox switch: another pool of endpoints.
        let sandbox = expect_ok(admin.cookie_only(app.get("/api/v1/webhooks/endpoints")).header("X-Environment", "sandbox").send().await.unwrap()).await;
        assert_eq!(sandbox["items"].as_array().unwrap().len(), 0);
        let in_sandbox = admin
            .send(app.client.post(app.url("/api/v1/webhooks/endpoints")))
            .header("X-Environment", "sandbox")
            .header("X-Idempotency-Key", idempotency_key())
            .json(&json!({"url": receiver.url}))
            .send()
            .await
            .unwrap();
        assert_eq!(in_sandbox.status(), StatusCode::CREATED);
        let sandbox_key = app.key_with(&agency, &[Scope::WebhooksRead], Environment::Sandbox, KeyFormat::Sk).await;
        let seen = expect_ok(app.get("/api/v1/webhooks/endpoints").header("X-API-Key", &sandbox_key).send().await.unwrap()).await;
        assert_eq!(seen["items"].as_array().unwrap().len(), 1, "{seen}");
        let bogus = admin.cookie_only(app.get("/api/v1/webhooks/endpoints")).header("X-Environment", "staging").send().await.unwrap();
        expect_error(bogus, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;

        // Another agency's administrator finds nothing; an agent may not.
        let other = app.agency().await;
        let stranger = sign_in(&app, &owner_login(&app, &other).await).await;
        let hidden = stranger.cookie_only(app.get(&format!("/api/v1/webhooks/endpoints/{id}"))).send().await.unwrap();
        expect_error(hidden, StatusCode::NOT_FOUND, "webhook_endpoint_not_found").await;
        let (_, agent_email) = account(&app, &agency, Role::Agent).await;
        let agent = sign_in(&app, &agent_email).await;
        let refused = agent.cookie_only(app.get("/api/v1/webhooks/endpoints")).send().await.unwrap();
        expect_error(refused, StatusCode::FORBIDDEN, "permission_denied").await;

        let deleted = admin
            .send(app.client.delete(app.url(&format!("/api/v1/webhooks/endpoints/{id}"))))
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    }
}
