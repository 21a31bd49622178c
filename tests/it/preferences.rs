//! `GET` and `PATCH /users/{user_id}/preferences`: defaults, partial updates,
//! value checks against real time-zone and language-tag rules, who may read
//! and change them, and tenancy.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::ids::UserId;
use storage::people::users::Role;
use tests::{TestApp, backend_tests};

use crate::support::{expect_error, expect_ok};

const SCOPES: [Scope; 2] = [Scope::UsersRead, Scope::UsersWrite];

async fn call(
    app: &TestApp,
    method: Method,
    key: &str,
    user: &UserId,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = app
        .client
        .request(
            method,
            app.url(&format!("/api/v1/users/{user}/preferences")),
        )
        .header("X-API-Key", key)
        .header("X-Idempotency-Key", tests::idempotency_key());
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

backend_tests! {
    async fn preferences_start_at_the_defaults_and_change_one_field_at_a_time(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key_acting_for(&agency, &agency.owner_id, &SCOPES).await;
        let owner = &agency.owner_id;
        let defaults = expect_ok(call(&app, Method::GET, &key, owner, None).await).await;
        assert_eq!(
            defaults,
            json!({
                "date_time_format": "friendly",
                "timezone": "America/Los_Angeles",
                "language": "en-US",
                "measurement_unit": "imperial",
                "theme": "system",
            })
        );
        let dark = expect_ok(call(&app, Method::PATCH, &key, owner, Some(json!({ "theme": "dark" }))).await).await;
        assert_eq!(dark["theme"], "dark");
        assert_eq!(dark["timezone"], "America/Los_Angeles", "untouched fields keep their values");
        let moved = expect_ok(
            call(&app, Method::PATCH, &key, owner, Some(json!({ "timezone": "Europe/Berlin", "language": "en-gb", "measurement_unit": "metric", "date_time_format": "uk" }))).await,
        )
        .await;
        assert_eq!(moved["timezone"], "Europe/Berlin");
        assert_eq!(moved["language"], "en-GB", "stored in canonical form");
        assert_eq!(moved["theme"], "dark");
        let read = expect_ok(call(&app, Method::GET, &key, owner, None).await).await;
        assert_eq!(read, moved);
        // An empty patch changes nothing.
        assert_eq!(expect_ok(call(&app, Method::PATCH, &key, owner, Some(json!({}))).await).await, moved);
    }

    async fn invalid_values_are_400_naming_each_field_and_change_nothing(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key_acting_for(&agency, &agency.owner_id, &SCOPES).await;
        let owner = &agency.owner_id;
        let response = call(&app, Method::PATCH, &key, owner, Some(json!({
            "date_time_format": "iso",
            "timezone": "Mars/Olympus_Mons",
            "language": "not a tag!",
            "measurement_unit": "furlongs",
            "theme": "purple",
        }))).await;
        let error = expect_error(response, StatusCode::BAD_REQUEST, "validation.invalid_value").await;
        let fields = error["error"]["details"]["fields"].as_object().unwrap();
        let mut named: Vec<&str> = fields.keys().map(String::as_str).collect();
        named.sort_unstable();
        assert_eq!(named, ["date_time_format", "language", "measurement_unit", "theme", "timezone"]);
        // One bad field spoils the whole change.
        let response = call(&app, Method::PATCH, &key, owner, Some(json!({ "theme": "dark", "timezone": "Nowhere/Town" }))).await;
        expect_error(response, StatusCode::BAD_REQUEST, "validation.invalid_value").await;
        let read = expect_ok(call(&app, Method::GET, &key, owner, None).await).await;
        assert_eq!(read["theme"], "system");
        // Unknown fields and wrong types are schema errors.
        let response = call(&app, Method::PATCH, &key, owner, Some(json!({ "colour": "red" }))).await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let response = call(&app, Method::PATCH, &key, owner, Some(json!({ "theme": 3 }))).await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
    }

    async fn the_user_an_administrator_or_the_users_manager_may_and_no_one_else(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let assistant = app.user_managed_by(&agency, Role::Assistant, &agent).await;
        let colleague = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let owner_key = app.key_acting_for(&agency, &owner, &SCOPES).await;
        let agent_key = app.key_acting_for(&agency, &agent, &SCOPES).await;
        let assistant_key = app.key_acting_for(&agency, &assistant, &SCOPES).await;

        // Self.
        expect_ok(call(&app, Method::PATCH, &agent_key, &agent, Some(json!({ "theme": "light" }))).await).await;
        // The manager of the user.
        expect_ok(call(&app, Method::PATCH, &agent_key, &assistant, Some(json!({ "theme": "dark" }))).await).await;
        // The agency's administrator, for anyone.
        let colleague_prefs = expect_ok(call(&app, Method::GET, &owner_key, &colleague, None).await).await;
        assert_eq!(colleague_prefs["theme"], "system");
        // Not a colleague's, not one's manager's.
        for (key, target) in [(&agent_key, &colleague), (&agent_key, &owner), (&assistant_key, &agent)] {
            let response = call(&app, Method::GET, key, target, None).await;
            expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
            let response = call(&app, Method::PATCH, key, target, Some(json!({ "theme": "dark" }))).await;
            expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        }
        let read = expect_ok(call(&app, Method::GET, &owner_key, &owner, None).await).await;
        assert_eq!(read["theme"], "system", "refused changes changed nothing");

        // Changing needs users:write.
        let reader = app.key_acting_for(&agency, &owner, &[Scope::UsersRead]).await;
        let response = call(&app, Method::PATCH, &reader, &owner, Some(json!({ "theme": "dark" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        expect_ok(call(&app, Method::GET, &reader, &owner, None).await).await;
    }

    async fn another_agencys_user_is_not_found(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let other = app.agency().await;
        let key = app.key_acting_for(&agency, &agency.owner_id, &SCOPES).await;
        for method in [Method::GET, Method::PATCH] {
            let body = (method == Method::PATCH).then(|| json!({ "theme": "dark" }));
            let response = call(&app, method.clone(), &key, &other.owner_id, body.clone()).await;
            expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;
            let response = app
                .client
                .request(method, app.url("/api/v1/users/usr_garbage/preferences"))
                .header("X-API-Key", &key)
                .header("X-Idempotency-Key", tests::idempotency_key())
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;
        }
        let theirs = app.key_acting_for(&other, &other.owner_id, &SCOPES).await;
        let untouched = expect_ok(call(&app, Method::GET, &theirs, &other.owner_id, None).await).await;
        assert_eq!(untouched["theme"], "system");
    }
}
