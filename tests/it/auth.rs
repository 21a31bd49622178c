//! Every authentication outcome: both headers, both key formats, both
//! environments, keys in the URL, a cookie or the body, unknown, revoked and
//! expired keys, missing scope; and the database holding no plaintext key.

use reqwest::StatusCode;
use storage::Environment;
use storage::api_keys::{KeyFormat, Scope};
use tests::{TestApp, backend_tests};

use crate::support::{expect_error, expect_ok, sql};

const USERS: &str = "/api/v1/users";

backend_tests! {
    async fn both_headers_and_both_formats_authenticate(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        for format in [KeyFormat::Sk, KeyFormat::Ma] {
            for environment in [Environment::Live, Environment::Sandbox] {
                let key = app.key_with(&agency, &[Scope::UsersRead], environment, format).await;
                let via_header = app.get(USERS).header("X-API-Key", &key).send().await.unwrap();
                expect_ok(via_header).await;
                let via_bearer = app.get(USERS).bearer_auth(&key).send().await.unwrap();
                expect_ok(via_bearer).await;
            }
        }
    }

    async fn missing_and_malformed_keys_are_auth_missing_key(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;

        let none = app.get(USERS).send().await.unwrap();
        let body = expect_error(none, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        assert!(body["error"]["message"].as_str().unwrap().contains("X-API-Key"));

        for malformed in ["nope", "sk_live_short", "ma_live_ak_NOTAULID", "pk_live_abcdefghijklmnopqrstuvwxyz012345"] {
            let response = app.get(USERS).header("X-API-Key", malformed).send().await.unwrap();
            expect_error(response, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        }
        let basic = app.get(USERS).header("Authorization", format!("Basic {key}")).send().await.unwrap();
        expect_error(basic, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        let empty_bearer = app.get(USERS).header("Authorization", "Bearer ").send().await.unwrap();
        expect_error(empty_bearer, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    }

    async fn keys_outside_the_two_headers_are_refused(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;

        // In the query, alone or next to a valid header: refused either way.
        for query in [format!("api_key={key}"), format!("key={key}"), format!("q={key}")] {
            let alone = app.get(&format!("{USERS}?{query}")).send().await.unwrap();
            expect_error(alone, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
            let with_header = app
                .get(&format!("{USERS}?{query}"))
                .header("X-API-Key", &key)
                .send()
                .await
                .unwrap();
            let body = expect_error(with_header, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
            assert!(body["error"]["message"].as_str().unwrap().contains("never in the URL"));
        }
        // In a cookie or the body: not looked at, so the key is missing.
        let cookie = app.get(USERS).header("Cookie", format!("api_key={key}")).send().await.unwrap();
        expect_error(cookie, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        let body = app
            .get(USERS)
            .header("Content-Type", "application/json")
            .body(serde_json::json!({ "api_key": key }).to_string())
            .send()
            .await
            .unwrap();
        expect_error(body, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    }

    async fn conflicting_headers_are_refused(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let one = app.key(&agency, &[Scope::UsersRead]).await;
        let other = app.key(&agency, &[Scope::UsersRead]).await;
        let response = app.get(USERS).header("X-API-Key", &one).bearer_auth(&other).send().await.unwrap();
        expect_error(response, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        let same = app.get(USERS).header("X-API-Key", &one).bearer_auth(&one).send().await.unwrap();
        expect_ok(same).await;
    }

    async fn unknown_revoked_and_expired_keys_are_auth_invalid_key(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;

        let unknown = app.get(USERS).header("X-API-Key", "sk_live_abcdefghijklmnopqrstuvwxyz012345").send().await.unwrap();
        expect_error(unknown, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
        let unknown_ma = app.get(USERS).bearer_auth("ma_live_ak_01ARZ3NDEKTSV4RRFFQ69G5FAV").send().await.unwrap();
        expect_error(unknown_ma, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;

        let revoked = app.key(&agency, &[Scope::UsersRead]).await;
        let record = app.store.api_keys().find_by_plaintext(&revoked).await.unwrap().unwrap();
        app.store.api_keys().revoke(&agency.id, &record.key.id).await.unwrap();
        let response = app.get(USERS).header("X-API-Key", &revoked).send().await.unwrap();
        expect_error(response, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;

        let expired = app.key(&agency, &[Scope::UsersRead]).await;
        let record = app.store.api_keys().find_by_plaintext(&expired).await.unwrap().unwrap();
        let past = app.store.clock().now().plus_seconds(-1);
        sql::expire_key(&app, record.key.id.as_str(), past.as_micros()).await;
        let response = app.get(USERS).header("X-API-Key", &expired).send().await.unwrap();
        expect_error(response, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
    }

    async fn a_revocation_takes_effect_at_once_in_process_and_within_the_ttl_elsewhere(backend) {
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let here = app.key(&agency, &[Scope::UsersRead]).await;
        let elsewhere = app.key(&agency, &[Scope::UsersRead]).await;
        for key in [&here, &elsewhere] {
            expect_ok(app.get(USERS).header("X-API-Key", key).send().await.unwrap()).await;
        }
        for key in [&here, &elsewhere] {
            let record = app.store.api_keys().find_by_plaintext(key).await.unwrap().unwrap();
            app.store.api_keys().revoke(&agency.id, &record.key.id).await.unwrap();
            if key == &here {
                // Revoked by this process: its cache forgets the key at once.
                app.state.key_cache().forget(&record.key.id);
            }
        }
        let response = app.get(USERS).header("X-API-Key", &here).send().await.unwrap();
        expect_error(response, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
        // Revoked by another process: trusted from the cache until its TTL.
        expect_ok(app.get(USERS).header("X-API-Key", &elsewhere).send().await.unwrap()).await;
        clock.advance_seconds(api::middleware::key_cache::TTL_SECONDS);
        let response = app.get(USERS).header("X-API-Key", &elsewhere).send().await.unwrap();
        expect_error(response, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
    }

    async fn a_key_without_the_scope_is_denied(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let default_scope = app.key(&agency, &[]).await;
        let response = app.get(USERS).header("X-API-Key", &default_scope).send().await.unwrap();
        let body = expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        assert_eq!(body["error"]["details"]["required_scope"], "users:read");
        // Authentication comes first: the single-user route is also denied, not 404.
        let single = app
            .get(&format!("{USERS}/{}", agency.owner_id))
            .header("X-API-Key", &default_scope)
            .send()
            .await
            .unwrap();
        expect_error(single, StatusCode::FORBIDDEN, "auth.scope_denied").await;
    }

    async fn the_database_holds_no_plaintext_key(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let mut keys = Vec::new();
        for format in [KeyFormat::Sk, KeyFormat::Ma] {
            for environment in [Environment::Live, Environment::Sandbox] {
                keys.push(app.key_with(&agency, &[Scope::UsersRead], environment, format).await);
            }
        }
        let stored = sql::everything_stored(&app).await;
        for key in &keys {
            // Neither the key nor its random part may appear anywhere.
            let secret_part = &key[key.len() - 20..];
            assert!(!stored.contains(secret_part), "plaintext of {} found in the database", &key[..11]);
        }
        assert!(stored.contains("…"), "the hint is stored, so the search did read the keys table");
    }
}
