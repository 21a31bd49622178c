//! Signing in: the session cookie's attributes and the login count, logins
//! that match no active account refused alike, and attempts per e-mail
//! limited.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::people::accounts::NewAccount;
use storage::people::users::Role;
use tests::{TestApp, backend_tests};

use super::{PASSWORD, account, login, sign_in, unique_email};
use crate::support::{expect_error, expect_ok, sql};

backend_tests! {
    async fn login_sets_a_strict_http_only_cookie_and_counts_the_login(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let (user, email) = account(&app, &agency, Role::Agent).await;

        let response = login(&app, &email.to_uppercase(), PASSWORD).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()["cache-control"], "no-store");
        let cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
        assert!(cookie.starts_with("__Host-ma_session="), "{cookie}");
        for attribute in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
        }
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["user"]["id"], user.as_str());
        assert!(body["impersonator_id"].is_null());
        let token = cookie.split(';').next().unwrap().split_once('=').unwrap().1;
        assert!(!body.to_string().contains(token), "the cookie secret is never in a body");
        assert_eq!(sql::login_count(app.store.db(), user.as_str()).await, 1);

        let again = sign_in(&app, &email).await;
        assert_eq!(sql::login_count(app.store.db(), user.as_str()).await, 2);
        let current = expect_ok(
            again.cookie_only(app.get("/api/v1/session")).send().await.unwrap(),
        )
        .await;
        assert_eq!(current["user"]["id"], user.as_str());
        assert_eq!(current["csrf_token"], again.csrf.as_str());
    }

    async fn logins_that_do_not_match_an_active_account_are_refused_alike(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let (user, email) = account(&app, &agency, Role::Agent).await;
        let without_password = unique_email();
        app.store
            .accounts()
            .create(
                &agency.id,
                NewAccount {
                    email: without_password.clone(),
                    role: Some(Role::Viewer),
                    ..NewAccount::default()
                },
            )
            .await
            .unwrap();
        for (email, password) in [
            (email.as_str(), "Wr0ng-Password!"),
            ("nobody@example.com", PASSWORD),
            (without_password.as_str(), PASSWORD),
            ("not an email", PASSWORD),
        ] {
            let response = login(&app, email, password).await;
            expect_error(response, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;
        }
        sql::deactivate_user(app.store.db(), user.as_str()).await;
        expect_error(login(&app, &email, PASSWORD).await, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;
        assert_eq!(sql::login_count(app.store.db(), user.as_str()).await, 0);

        let missing = app.client.post(app.url("/api/v1/session")).json(&json!({"email": email})).send().await.unwrap();
        let body = expect_error(missing, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert!(body["error"]["details"]["fields"]["password"].is_string());
        let huge = "A".repeat(2000);
        expect_error(login(&app, &email, &huge).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
    }

    async fn login_attempts_per_email_are_limited(backend) {
        let app = TestApp::spawn(backend).await;
        let email = unique_email();
        for _ in 0..10 {
            expect_error(login(&app, &email, "Wr0ng-Password!").await, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;
        }
        let response = login(&app, &email, "Wr0ng-Password!").await;
        assert!(response.headers().contains_key("retry-after"));
        expect_error(response, StatusCode::TOO_MANY_REQUESTS, "rate_limit.exceeded").await;
    }
}
