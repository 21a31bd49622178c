//! Key management in a session: administrators create, list, rotate and
//! revoke keys (audited), nobody else may, and platform identities mint keys
//! that act for a customer agency.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::people::users::{NewUser, Role};
use tests::{TestApp, backend_tests};

use super::{PASSWORD, account, owner_login, sign_in, unique_email};
use crate::support::{expect_error, expect_ok};

backend_tests! {
    async fn administrators_create_list_rotate_and_revoke_keys_in_a_session(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let email = owner_login(&app, &agency).await;
        let admin = sign_in(&app, &email).await;
        let created = admin
            .send(app.client.post(app.url("/api/v1/agency/api-keys")))
            .json(&json!({"name": "CRM sync", "scopes": ["users:read"], "format": "ma"}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
        let created: Value = created.json().await.unwrap();
        let secret = created["secret"].as_str().unwrap().to_owned();
        let key_id = created["key"]["id"].as_str().unwrap().to_owned();
        assert!(secret.starts_with("ma_live_ak_"));
        assert_eq!(created["key"]["created_by"], agency.owner_id.as_str());
        expect_ok(app.get("/api/v1/users").header("X-API-Key", &secret).send().await.unwrap()).await;

        let listed = expect_ok(admin.cookie_only(app.get("/api/v1/agency/api-keys")).send().await.unwrap()).await;
        assert_eq!(listed["items"].as_array().unwrap().len(), 1);
        assert!(!listed.to_string().contains(&secret), "a listing never shows a plaintext");

        let rotated = expect_ok(
            admin
                .send(app.client.post(app.url(&format!("/api/v1/agency/api-keys/{key_id}/rotate"))))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(rotated["rotated"]["status"], "rotating");
        let new_secret = rotated["secret"].as_str().unwrap().to_owned();
        let new_id = rotated["key"]["id"].as_str().unwrap().to_owned();
        for key in [&secret, &new_secret] {
            expect_ok(app.get("/api/v1/users").header("X-API-Key", key).send().await.unwrap()).await;
        }
        let revoked = expect_ok(
            admin
                .send(app.client.delete(app.url(&format!("/api/v1/agency/api-keys/{new_id}"))))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(revoked["status"], "revoked");
        let refused = app.get("/api/v1/users").header("X-API-Key", &new_secret).send().await.unwrap();
        expect_error(refused, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;

        let audit = expect_ok(admin.cookie_only(app.get("/api/v1/agency/api-keys/audit")).send().await.unwrap()).await;
        let actions: Vec<&str> = audit["items"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
        for action in ["issued", "rotated", "revoked"] {
            assert!(actions.contains(&action), "{actions:?}");
        }
        assert_eq!(audit["total"].as_u64().unwrap() as usize, actions.len());
        assert_eq!(audit["next_cursor"], "");
        // Both lists page through the envelope's cursor.
        for path in ["/api/v1/agency/api-keys", "/api/v1/agency/api-keys/audit"] {
            let whole = expect_ok(admin.cookie_only(app.get(path)).send().await.unwrap()).await;
            let first = expect_ok(admin.cookie_only(app.get(&format!("{path}?limit=1"))).send().await.unwrap()).await;
            assert_eq!(first["items"][0], whole["items"][0], "{path}");
            assert_eq!(first["total"], whole["total"], "{path}");
            let cursor = first["next_cursor"].as_str().unwrap();
            assert!(!cursor.is_empty(), "{path}: more than one item");
            let second = expect_ok(admin.cookie_only(app.get(&format!("{path}?limit=1&cursor={cursor}"))).send().await.unwrap()).await;
            assert_eq!(second["items"][0], whole["items"][1], "{path}");
        }
        let issued_by = format!("issued by {}", agency.owner_id);
        assert!(audit["items"].as_array().unwrap().iter().any(|e| e["detail"] == issued_by.as_str()));

        // Another agency's key is not found; bad choices are named.
        let other = app.agency().await;
        let foreign_key = app.key(&other, &[Scope::UsersRead]).await;
        let foreign_id = app.store.api_keys().find_by_plaintext(&foreign_key).await.unwrap().unwrap().key.id;
        let response = admin
            .send(app.client.delete(app.url(&format!("/api/v1/agency/api-keys/{foreign_id}"))))
            .send()
            .await
            .unwrap();
        expect_error(response, StatusCode::NOT_FOUND, "api_key_not_found").await;
        expect_ok(app.get("/api/v1/users").header("X-API-Key", &foreign_key).send().await.unwrap()).await;
        let invalid = admin
            .send(app.client.post(app.url("/api/v1/agency/api-keys")))
            .json(&json!({"name": "x", "scopes": ["everything"], "environment": "staging", "rate_limit_overrides": {"nope": 5}}))
            .send()
            .await
            .unwrap();
        let body = expect_error(invalid, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let fields = &body["error"]["details"]["fields"];
        for field in ["scopes[0]", "environment", "rate_limit_overrides.nope"] {
            assert!(fields[field].is_string(), "{body}");
        }
        let elsewhere = admin
            .send(app.client.post(app.url("/api/v1/agency/api-keys")))
            .json(&json!({"name": "x", "agency_id": other.id}))
            .send()
            .await
            .unwrap();
        expect_error(elsewhere, StatusCode::FORBIDDEN, "permission_denied").await;
    }

    async fn only_administrators_manage_keys(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let (_, email) = account(&app, &agency, Role::Photographer).await;
        let photographer = sign_in(&app, &email).await;
        let list = photographer.cookie_only(app.get("/api/v1/agency/api-keys")).send().await.unwrap();
        expect_error(list, StatusCode::FORBIDDEN, "permission_denied").await;
        let create = photographer
            .send(app.client.post(app.url("/api/v1/agency/api-keys")))
            .json(&json!({"name": "mine"}))
            .send()
            .await
            .unwrap();
        expect_error(create, StatusCode::FORBIDDEN, "permission_denied").await;
    }

    async fn platform_identities_mint_keys_that_act_for_the_agency(backend) {
        let app = TestApp::spawn(backend).await;
        let platform = app.agency().await;
        let email = unique_email();
        let operator = app
            .store
            .users()
            .create(&platform.id, NewUser { role: Role::SuperAdmin, email: Some(email.clone()), name: None, manager_id: None })
            .await
            .unwrap();
        app.store.accounts().set_password(&platform.id, &operator.id, PASSWORD).await.unwrap();
        let customer = app.agency().await;
        let signed = sign_in(&app, &email).await;

        let minted = signed
            .send(app.client.post(app.url("/api/v1/agency/api-keys")))
            .json(&json!({"name": "support", "scopes": ["users:read"], "agency_id": customer.id}))
            .send()
            .await
            .unwrap();
        assert_eq!(minted.status(), StatusCode::CREATED);
        let minted: Value = minted.json().await.unwrap();
        assert_eq!(minted["key"]["agency_id"], customer.id.as_str());
        assert_eq!(minted["key"]["created_by"], customer.owner_id.as_str());
        let secret = minted["secret"].as_str().unwrap();
        // The key sees the customer's people, not the platform's.
        let users = expect_ok(app.get("/api/v1/users").header("X-API-Key", secret).send().await.unwrap()).await;
        let ids: Vec<&str> = users["items"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap()).collect();
        assert_eq!(ids, [customer.owner_id.as_str()]);
        let listed = expect_ok(
            signed
                .cookie_only(app.get(&format!("/api/v1/agency/api-keys?agency_id={}", customer.id)))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(listed["items"].as_array().unwrap().len(), 1);
        let audit = app.store.api_keys().audit_log(&customer.id).await.unwrap();
        assert_eq!(audit[0].detail.as_deref(), Some(format!("issued by {}", operator.id).as_str()));
        let unknown = signed
            .cookie_only(app.get("/api/v1/agency/api-keys?agency_id=agc_01JD00000000000000000000ZZ"))
            .send()
            .await
            .unwrap();
        expect_error(unknown, StatusCode::NOT_FOUND, "agency_not_found").await;
    }
}
