//! How a session ends: logout ends it and clears the cookie (other sessions
//! live on until the user is deactivated), and it ends after its idle limit.

use reqwest::StatusCode;
use storage::people::users::Role;
use tests::{TestApp, backend_tests};

use super::{account, sign_in};
use crate::support::{expect_error, expect_ok, sql};

backend_tests! {
    async fn logout_ends_the_session_and_clears_the_cookie(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let (user, email) = account(&app, &agency, Role::Agent).await;
        let signed = sign_in(&app, &email).await;
        let kept = sign_in(&app, &email).await;
        let response = signed.send(app.client.delete(app.url("/api/v1/session"))).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        assert!(response.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
        let after = signed.cookie_only(app.get("/api/v1/session")).send().await.unwrap();
        expect_error(after, StatusCode::UNAUTHORIZED, "auth.session_required").await;
        // Other sessions of the user live on, until the user is deactivated.
        expect_ok(kept.cookie_only(app.get("/api/v1/session")).send().await.unwrap()).await;
        sql::deactivate_user(app.store.db(), user.as_str()).await;
        let deactivated = kept.cookie_only(app.get("/api/v1/session")).send().await.unwrap();
        expect_error(deactivated, StatusCode::UNAUTHORIZED, "auth.session_required").await;
    }

    async fn a_session_ends_after_its_idle_limit(backend) {
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let (_, email) = account(&app, &agency, Role::Agent).await;
        let signed = sign_in(&app, &email).await;
        clock.advance_seconds(3600);
        expect_ok(signed.cookie_only(app.get("/api/v1/session")).send().await.unwrap()).await;
        // Used an hour in: the idle limit counts from then.
        clock.advance_seconds(2 * 3600 - 60);
        expect_ok(signed.cookie_only(app.get("/api/v1/session")).send().await.unwrap()).await;
        clock.advance_seconds(2 * 3600 + 1);
        let idle = signed.cookie_only(app.get("/api/v1/session")).send().await.unwrap();
        expect_error(idle, StatusCode::UNAUTHORIZED, "auth.session_required").await;
    }
}
