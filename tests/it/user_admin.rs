//! `GET /users/{user_id}/can-edit`, `POST /users/batch-can-edit` and
//! `PUT /users/{user_id}/role`, status, team removal and user creation (with
//! and without the trailing slash); sandbox keys read people, never change them.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use storage::Environment;
use storage::api_keys::{KeyFormat, Scope};
use storage::ids::UserId;
use storage::people::users::Role;
use tests::{TestApp, backend_tests};

use crate::support::{expect_error, expect_ok};

async fn send(
    app: &TestApp,
    method: Method,
    key: &str,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = app
        .client
        .request(method, app.url(path))
        .header("X-API-Key", key)
        .header("X-Idempotency-Key", tests::idempotency_key());
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

const ALL: [Scope; 2] = [Scope::UsersRead, Scope::UsersWrite];

backend_tests! {
    async fn can_edit_answers_for_self_managed_users_and_administrators(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let assistant = app.user_managed_by(&agency, Role::Assistant, &agent).await;
        let colleague = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let agent_key = app.key_acting_for(&agency, &agent, &[Scope::UsersRead]).await;
        let owner_key = app.key_acting_for(&agency, &owner, &[Scope::UsersRead]).await;

        let answer = |key: String, target: UserId| {
            let app = &app;
            async move {
                expect_ok(send(app, Method::GET, &key, &format!("/api/v1/users/{target}/can-edit"), None).await).await
            }
        };
        assert_eq!(answer(agent_key.clone(), agent.clone()).await["can_edit"], true);
        assert_eq!(answer(agent_key.clone(), assistant.clone()).await["can_edit"], true);
        assert_eq!(answer(agent_key.clone(), colleague.clone()).await["can_edit"], false);
        assert_eq!(answer(agent_key.clone(), owner.clone()).await["can_edit"], false);
        assert_eq!(answer(owner_key.clone(), colleague.clone()).await["can_edit"], true);
        let one = answer(agent_key.clone(), assistant.clone()).await;
        assert_eq!(one["user_id"], assistant.as_str());

        let other = app.agency().await;
        let response = send(&app, Method::GET, &agent_key, &format!("/api/v1/users/{}/can-edit", other.owner_id), None).await;
        expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;

        let batch = expect_ok(
            send(&app, Method::POST, &agent_key, "/api/v1/users/batch-can-edit", Some(json!({
                "user_ids": [agent, colleague, other.owner_id, "usr_garbage", assistant],
            })))
            .await,
        )
        .await;
        let answers: Vec<(Value, Value)> = batch["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["can_edit"].clone(), i.get("error").cloned().unwrap_or(Value::Null)))
            .collect();
        assert_eq!(
            answers,
            vec![
                (json!(true), Value::Null),
                (json!(false), Value::Null),
                (json!(false), json!("user_not_found")),
                (json!(false), json!("user_not_found")),
                (json!(true), Value::Null),
            ]
        );
        for body in [json!({ "user_ids": [] }), json!({ "user_ids": vec!["usr_x"; 201] }), json!({}), json!({ "user_ids": ["usr_x", ""] })] {
            let response = send(&app, Method::POST, &agent_key, "/api/v1/users/batch-can-edit", Some(body)).await;
            expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        }
    }

    async fn administrators_change_roles_below_their_own(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let owner_key = app.key_acting_for(&agency, &owner, &ALL).await;
        let agent_key = app.key_acting_for(&agency, &agent, &ALL).await;
        let path = format!("/api/v1/users/{agent}/role");

        let changed = expect_ok(send(&app, Method::PUT, &owner_key, &path, Some(json!({ "role": "photographer" }))).await).await;
        assert_eq!(changed["role"], "photographer");
        assert_eq!(changed["id"], agent.as_str());
        let read = expect_ok(send(&app, Method::GET, &owner_key, &format!("/api/v1/users/{agent}"), None).await).await;
        assert_eq!(read["role"], "photographer");

        for role in ["wizard", "admin", "super_admin", "media_agency", "broker"] {
            let response = send(&app, Method::PUT, &owner_key, &path, Some(json!({ "role": role }))).await;
            expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        }
        // Not an administrator; not oneself; not another administrator.
        let response = send(&app, Method::PUT, &agent_key, &path, Some(json!({ "role": "viewer" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let response = send(&app, Method::PUT, &owner_key, &format!("/api/v1/users/{owner}/role"), Some(json!({ "role": "agent" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        // Needs users:write.
        let reader = app.key_acting_for(&agency, &owner, &[Scope::UsersRead]).await;
        let response = send(&app, Method::PUT, &reader, &path, Some(json!({ "role": "viewer" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        // Another agency's user.
        let other = app.agency().await;
        let stranger = app.user_managed_by(&other, Role::Agent, &other.owner_id).await;
        let response = send(&app, Method::PUT, &owner_key, &format!("/api/v1/users/{stranger}/role"), Some(json!({ "role": "viewer" }))).await;
        expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;
        let read = expect_ok(send(&app, Method::GET, &owner_key, &format!("/api/v1/users/{agent}"), None).await).await;
        assert_eq!(read["role"], "photographer", "refused changes changed nothing");
    }
}

backend_tests! {
    async fn administrators_suspend_and_reactivate_users_and_suspension_is_an_event(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let owner_key = app.key_acting_for(&agency, &owner, &ALL).await;
        let agent_key = app.key_acting_for(&agency, &agent, &ALL).await;
        let path = format!("/api/v1/users/{agent}/status");

        let suspended = expect_ok(send(&app, Method::PUT, &owner_key, &path, Some(json!({ "status": "suspended" }))).await).await;
        assert_eq!(suspended["is_active"], false);
        // Again: no change, no second event.
        expect_ok(send(&app, Method::PUT, &owner_key, &path, Some(json!({ "status": "suspended" }))).await).await;
        let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
        let events = app.store.outbox().for_tenant(&tenant, 0, 100).await.unwrap();
        let deactivated: Vec<_> = events.iter().filter(|e| e.event_type == "user.deactivated").collect();
        assert_eq!(deactivated.len(), 1);
        assert_eq!(deactivated[0].data["user_id"], agent.as_str());
        assert_eq!(deactivated[0].data["role"], "agent");
        let entry = storage::rules::event_catalog::resolve("user.deactivated").unwrap();
        let validator = jsonschema::draft202012::new(&entry.data_schema()).unwrap();
        assert!(validator.is_valid(&deactivated[0].data), "{}", deactivated[0].data);
        // The suspended user's key no longer acts: it may not edit even itself.
        let own = expect_ok(send(&app, Method::GET, &agent_key, &format!("/api/v1/users/{agent}/can-edit"), None).await).await;
        assert_eq!(own["can_edit"], false);

        let active = expect_ok(send(&app, Method::PUT, &owner_key, &path, Some(json!({ "status": "active" }))).await).await;
        assert_eq!(active["is_active"], true);

        let response = send(&app, Method::PUT, &owner_key, &path, Some(json!({ "status": "retired" }))).await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let response = send(&app, Method::PUT, &agent_key, &path, Some(json!({ "status": "suspended" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let response = send(&app, Method::PUT, &owner_key, &format!("/api/v1/users/{owner}/status"), Some(json!({ "status": "suspended" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let other = app.agency().await;
        let response = send(&app, Method::PUT, &owner_key, &format!("/api/v1/users/{}/status", other.owner_id), Some(json!({ "status": "suspended" }))).await;
        expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;
    }

    async fn a_manager_takes_an_assistant_off_the_team(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let other_agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let assistant = app.user_managed_by(&agency, Role::Assistant, &agent).await;
        let agent_key = app.key_acting_for(&agency, &agent, &ALL).await;
        let other_key = app.key_acting_for(&agency, &other_agent, &ALL).await;
        let path = format!("/api/v1/users/team/{assistant}");

        let response = send(&app, Method::DELETE, &other_key, &path, None).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let response = send(&app, Method::DELETE, &agent_key, &format!("/api/v1/users/team/{other_agent}"), None).await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;

        let removed = expect_ok(send(&app, Method::DELETE, &agent_key, &path, None).await).await;
        assert_eq!(removed["is_active"], false);
        assert_eq!(removed["managerId"], Value::Null);
        let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
        let events = app.store.outbox().for_tenant(&tenant, 0, 100).await.unwrap();
        let hierarchy: Vec<_> = events.iter().filter(|e| e.event_type == "user.hierarchy_changed").collect();
        assert_eq!(hierarchy.len(), 1);
        assert_eq!(hierarchy[0].data["previous_manager_id"], agent.as_str());
        assert_eq!(hierarchy[0].data["manager_id"], Value::Null);
        let entry = storage::rules::event_catalog::resolve("user.hierarchy_changed").unwrap();
        assert!(jsonschema::draft202012::new(&entry.data_schema()).unwrap().is_valid(&hierarchy[0].data));
        assert_eq!(events.iter().filter(|e| e.event_type == "user.deactivated").count(), 1);

        // No longer the agent's: a second removal by the same agent is refused.
        let response = send(&app, Method::DELETE, &agent_key, &path, None).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let other = app.agency().await;
        let stranger = app.user_managed_by(&other, Role::Assistant, &other.owner_id).await;
        let response = send(&app, Method::DELETE, &agent_key, &format!("/api/v1/users/team/{stranger}"), None).await;
        expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;
    }
}

backend_tests! {
    async fn administrators_create_accounts_with_the_rules_and_defaults_of_the_spec(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let owner_key = app.key_acting_for(&agency, &owner, &ALL).await;
        let agent_key = app.key_acting_for(&agency, &agent, &ALL).await;
        let email = format!("{}@Example.com", ulid::Ulid::generate());

        let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(json!({
            "email": email,
            "password": "Corr3ct-Horse",
            "role": "agent",
            "name": "Ana Agent",
            "first_name": "Ana",
            "last_name": "Agent",
            "brokerage_name": "Bolt Realty",
            "office_name": "Downtown",
        }))).await;
        assert_eq!(response.status(), 201);
        let created: Value = response.json().await.unwrap();
        // The agent joined: `user.signed_up` and `user.agent_created`, each
        // matching its catalog schema.
        let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
        let events = app.store.outbox().for_tenant(&tenant, 0, 100).await.unwrap();
        for event_type in ["user.signed_up", "user.agent_created"] {
            let joined: Vec<_> = events.iter().filter(|e| e.event_type == event_type && e.data["user_id"] == created["id"]).collect();
            assert_eq!(joined.len(), 1, "{event_type}");
            assert_eq!(joined[0].data["manager_id"], owner.as_str());
            let entry = storage::rules::event_catalog::resolve(event_type).unwrap();
            assert!(jsonschema::draft202012::new(&entry.data_schema()).unwrap().is_valid(&joined[0].data), "{}", joined[0].data);
        }
        assert_eq!(created["email"], email.to_lowercase());
        assert_eq!(created["role"], "agent");
        assert_eq!(created["is_active"], true);
        assert_eq!(created["is_verified"], false);
        assert_eq!(created["timezone"], "America/Los_Angeles");
        assert_eq!(created["login_count"], 0);
        assert_eq!(created["password_reset_required"], false);
        assert_eq!(created["managerId"], owner.as_str());
        assert_eq!(created["first_name"], "Ana");
        let text = created.to_string();
        assert!(!text.contains("Corr3ct") && !text.contains("argon2"), "no password, no hash: {text}");
        // The stored hash is argon2, never the password.
        let stored = crate::support::sql::everything_stored(&app).await;
        assert!(!stored.contains("Corr3ct-Horse"));
        // It is listed.
        let listed = expect_ok(send(&app, Method::GET, &owner_key, &format!("/api/v1/users/{}", created["id"].as_str().unwrap()), None).await).await;
        assert_eq!(listed["email"], email.to_lowercase());

        // Without a password, a reset is forced at first login.
        let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(json!({
            "email": format!("{}@example.com", ulid::Ulid::generate()), "role": "viewer",
        }))).await;
        assert_eq!(response.status(), 201);
        let created: Value = response.json().await.unwrap();
        assert_eq!(created["password_reset_required"], true);
        // Its user is sent a link to choose the password (one notification,
        // none for the account created with a password).
        let notifications = app.store.webhooks().notifications(&agency.id).await.unwrap();
        assert_eq!(notifications.len(), 1, "{notifications:?}");
        assert_eq!(notifications[0].kind, "password_first_set");
        assert_eq!(notifications[0].user_id.as_ref().map(UserId::as_str), created["id"].as_str());
        assert!(notifications[0].body.contains("/set-password#token="));

        // 400 for invalid data, each field named; a taken email too.
        for (body, field) in [
            (json!({ "email": "nope", "role": "agent" }), "email"),
            (json!({ "email": "a@example.com", "role": "wizard" }), "role"),
            (json!({ "email": "b@example.com", "role": "broker" }), "role"),
            (json!({ "email": "c@example.com", "role": "agent", "password": "short1!" }), "password"),
            (json!({ "email": "d@example.com", "role": "agent", "password": "nouppercase1!" }), "password"),
            (json!({ "email": "e@example.com", "role": "agent", "password": "NoSpecial123" }), "password"),
            (json!({ "email": email.to_uppercase(), "role": "agent" }), "email"),
            (json!({ "email": "f@example.com", "role": "agent", "manager_id": "usr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K" }), "manager_id"),
        ] {
            let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(body.clone())).await;
            let error = expect_error(response, StatusCode::BAD_REQUEST, "validation.invalid_value").await;
            assert!(error["error"]["details"]["fields"][field].is_string(), "{body}: {error}");
        }
        // 422 for the wrong shape; 403 for a non-administrator or without users:write.
        let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(json!({ "email": "g@example.com" }))).await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let response = send(&app, Method::POST, &agent_key, "/api/v1/users", Some(json!({ "email": "h@example.com", "role": "viewer" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let reader = app.key_acting_for(&agency, &owner, &[Scope::UsersRead]).await;
        let response = send(&app, Method::POST, &reader, "/api/v1/users", Some(json!({ "email": "i@example.com", "role": "viewer" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        // Another agency's manager is not this agency's user.
        let other = app.agency().await;
        let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(json!({ "email": "j@example.com", "role": "agent", "manager_id": other.owner_id }))).await;
        expect_error(response, StatusCode::BAD_REQUEST, "validation.invalid_value").await;
    }
}

/// The user's fields and preferences as a live reader sees them.
async fn snapshot(app: &TestApp, key: &str, user: &UserId) -> (Value, Value) {
    let fields = expect_ok(
        send(
            app,
            Method::GET,
            key,
            &format!("/api/v1/users/{user}"),
            None,
        )
        .await,
    )
    .await;
    let preferences = expect_ok(
        send(
            app,
            Method::GET,
            key,
            &format!("/api/v1/users/{user}/preferences"),
            None,
        )
        .await,
    )
    .await;
    (fields, preferences)
}

backend_tests! {
    async fn sandbox_keys_read_people_but_never_change_them(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let assistant = app.user_managed_by(&agency, Role::Assistant, &agent).await;
        let live = app.key_acting_for(&agency, &owner, &ALL).await;
        let sandbox = app.key_with(&agency, &ALL, Environment::Sandbox, KeyFormat::Sk).await;
        let before = [snapshot(&app, &live, &agent).await, snapshot(&app, &live, &assistant).await];
        let live_tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
        let setup_seq = app.store.outbox().for_tenant(&live_tenant, 0, 1000).await.unwrap().last().map_or(0, |e| e.seq);
        let people = expect_ok(send(&app, Method::GET, &live, "/api/v1/users", None).await).await;

        let email = format!("{}@example.com", ulid::Ulid::generate());
        let changes = [
            (Method::POST, "/api/v1/users".to_owned(), Some(json!({ "email": email, "role": "agent" }))),
            (Method::POST, "/api/v1/users/".to_owned(), Some(json!({ "email": email, "role": "agent" }))),
            (Method::PUT, format!("/api/v1/users/{agent}/status"), Some(json!({ "status": "suspended" }))),
            (Method::PUT, format!("/api/v1/users/{agent}/role"), Some(json!({ "role": "viewer" }))),
            (Method::DELETE, format!("/api/v1/users/team/{assistant}"), None),
            (Method::PATCH, format!("/api/v1/users/{agent}/preferences"), Some(json!({ "theme": "dark" }))),
        ];
        for (method, path, body) in &changes {
            let response = send(&app, method.clone(), &sandbox, path, body.clone()).await;
            let error = expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("Sandbox keys cannot change people"), "{method} {path}: {error}");
        }

        // Nothing changed, and no event was written in either environment.
        let after = [snapshot(&app, &live, &agent).await, snapshot(&app, &live, &assistant).await];
        assert_eq!(before, after);
        let listed = expect_ok(send(&app, Method::GET, &live, "/api/v1/users", None).await).await;
        assert_eq!(listed["items"], people["items"], "no user was created");
        for environment in [Environment::Live, Environment::Sandbox] {
            let tenant = storage::Tenant::new(agency.id.clone(), environment);
            let events = app.store.outbox().for_tenant(&tenant, setup_seq, 100).await.unwrap();
            assert!(
                events.iter().all(|e| !e.event_type.starts_with("user.")),
                "{environment:?}: {:?}",
                events.iter().map(|e| &e.event_type).collect::<Vec<_>>()
            );
        }

        // Reads stay open to sandbox keys.
        let reads = [
            "/api/v1/users".to_owned(),
            format!("/api/v1/users/{agent}"),
            format!("/api/v1/users/{agent}/preferences"),
            format!("/api/v1/users/{agent}/can-edit"),
        ];
        for path in &reads {
            expect_ok(send(&app, Method::GET, &sandbox, path, None).await).await;
        }
        let batch = send(&app, Method::POST, &sandbox, "/api/v1/users/batch-can-edit", Some(json!({ "user_ids": [agent] }))).await;
        expect_ok(batch).await;

        // The same changes with the live key go through.
        for (method, path, body) in changes.iter().skip(1) {
            let response = send(&app, method.clone(), &live, path, body.clone()).await;
            assert!(response.status().is_success(), "{method} {path}: {}", response.status());
        }
        let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
        let events = app.store.outbox().for_tenant(&tenant, 0, 100).await.unwrap();
        assert!(events.iter().any(|e| e.event_type == "user.deactivated"));
    }

    async fn users_are_created_with_and_without_the_trailing_slash(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner_key = app.key_acting_for(&agency, &agency.owner_id, &ALL).await;
        for path in ["/api/v1/users", "/api/v1/users/"] {
            let email = format!("{}@example.com", ulid::Ulid::generate()).to_lowercase();
            let response = send(&app, Method::POST, &owner_key, path, Some(json!({ "email": email, "role": "viewer" }))).await;
            assert_eq!(response.status(), StatusCode::CREATED, "{path}");
            let created: Value = response.json().await.unwrap();
            assert_eq!(created["email"], email.as_str(), "{path}");
            let read = expect_ok(send(&app, Method::GET, &owner_key, &format!("/api/v1/users/{}", created["id"].as_str().unwrap()), None).await).await;
            assert_eq!(read["role"], "viewer", "{path}");
            // Both spellings are guarded alike.
            let reader = app.key_acting_for(&agency, &agency.owner_id, &[Scope::UsersRead]).await;
            let response = send(&app, Method::POST, &reader, path, Some(json!({ "email": "x@example.com", "role": "viewer" }))).await;
            expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
            let response = app.client.post(app.url(path)).json(&json!({})).send().await.unwrap();
            expect_error(response, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        }
    }

    async fn another_administrator_is_neither_suspended_nor_demoted(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let tenant = storage::Tenant::new(agency.id.clone(), Environment::Live);
        let owner_role = app.store.users().get(&tenant, &owner).await.unwrap().role;
        assert!(owner_role.is_administrator());
        let peer = app.user_managed_by(&agency, owner_role, &owner).await;
        let owner_key = app.key_acting_for(&agency, &owner, &ALL).await;
        let before = expect_ok(send(&app, Method::GET, &owner_key, &format!("/api/v1/users/{peer}"), None).await).await;
        assert_eq!(before["role"], owner_role.as_str());

        let response = send(&app, Method::PUT, &owner_key, &format!("/api/v1/users/{peer}/status"), Some(json!({ "status": "suspended" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        let response = send(&app, Method::PUT, &owner_key, &format!("/api/v1/users/{peer}/role"), Some(json!({ "role": "agent" }))).await;
        expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;

        let after = expect_ok(send(&app, Method::GET, &owner_key, &format!("/api/v1/users/{peer}"), None).await).await;
        assert_eq!(before, after, "nothing changed");
        assert_eq!(after["is_active"], true);
        let events = app.store.outbox().for_tenant(&tenant, 0, 100).await.unwrap();
        assert!(events.iter().all(|e| e.event_type != "user.deactivated"));
    }

    async fn passwords_are_stored_as_argon2id_and_every_rule_fails_alike(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner_key = app.key_acting_for(&agency, &agency.owner_id, &ALL).await;
        let email = format!("{}@example.com", ulid::Ulid::generate());
        let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(json!({
            "email": email, "role": "agent", "password": "Corr3ct-Horse",
        }))).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        let created: Value = response.json().await.unwrap();
        let hash = stored_password_hash(&app, created["id"].as_str().unwrap()).await;
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains("Corr3ct"));

        // Each rule on its own: too short, no upper case, no lower case, no
        // digit, no special character. Every one is the same 400, naming
        // only the password.
        // And too long: the document's 128 characters (129 here) are the
        // service's limit too.
        let too_long = format!("Corr3ct-Horse{}", "x".repeat(116));
        assert_eq!(too_long.chars().count(), 129);
        for password in ["Sh0rt!", "lowercase1!", "UPPERCASE1!", "NoDigits!!", "NoSpecial12", too_long.as_str()] {
            let email = format!("{}@example.com", ulid::Ulid::generate());
            let response = send(&app, Method::POST, &owner_key, "/api/v1/users", Some(json!({
                "email": email, "role": "agent", "password": password,
            }))).await;
            let error = expect_error(response, StatusCode::BAD_REQUEST, "validation.invalid_value").await;
            let fields = error["error"]["details"]["fields"].as_object().unwrap();
            assert_eq!(fields.keys().collect::<Vec<_>>(), ["password"], "{password}: {error}");
            assert!(fields["password"].is_string(), "{password}: {error}");
            assert!(!error.to_string().contains(password), "the password is not echoed");
        }
    }
}

/// The password hash stored for `user_id`.
async fn stored_password_hash(app: &TestApp, user_id: &str) -> String {
    let sql = "select password_hash from users where id = $1";
    match app.store.db() {
        storage::Database::Sqlite(sqlite) => {
            sqlx::query_scalar(sql)
                .bind(user_id)
                .fetch_one(sqlite.pool())
                .await
        }
        storage::Database::Postgres(pool) => {
            sqlx::query_scalar(sql).bind(user_id).fetch_one(pool).await
        }
    }
    .unwrap()
}

/// A user creation that cannot finish within its deadline (here the users
/// table is locked against writes) answers 503 `server.timeout`, keeps
/// nothing it started, and runs anew when repeated with the same key.
#[tokio::test]
async fn a_user_creation_past_its_deadline_is_a_503_that_keeps_nothing() {
    let deadlines = api::middleware::deadline::RequestDeadlines {
        user_creation: std::time::Duration::from_secs(1),
        ..Default::default()
    };
    let app = TestApp::builder(tests::Backend::Postgres)
        .request_deadlines(deadlines)
        .spawn()
        .await;
    let agency = app.agency().await;
    let owner_key = app.key_acting_for(&agency, &agency.owner_id, &ALL).await;
    let storage::Database::Postgres(pool) = app.store.db() else {
        unreachable!("a PostgreSQL deployment")
    };
    let email = format!("{}@example.com", ulid::Ulid::generate()).to_lowercase();
    let body =
        json!({"email": email, "password": "Corr3ct-Horse", "role": "agent", "name": "Slow Sam"});
    let create = || {
        app.client
            .post(app.url("/api/v1/users"))
            .header("X-API-Key", &owner_key)
            .header("X-Idempotency-Key", "slow-user")
            .json(&body)
            .send()
    };
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("lock table users in share mode")
        .execute(&mut *lock)
        .await
        .unwrap();
    let stopped = create().await.unwrap();
    assert_eq!(stopped.headers()["retry-after"], "1");
    let error = expect_error(stopped, StatusCode::SERVICE_UNAVAILABLE, "server.timeout").await;
    assert_eq!(error["error"]["details"]["deadline_seconds"], 1);
    // The key was given back before the 503 went out (the users table is
    // still locked): a retry at once runs instead of meeting it in flight.
    let held: i64 =
        sqlx::query_scalar("select count(*) from idempotency_records where idempotency_key = $1")
            .bind("slow-user")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(held, 0, "the stopped request's key is free");
    lock.rollback().await.unwrap();

    let users: i64 = sqlx::query_scalar("select count(*) from users where email = $1")
        .bind(&email)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(users, 0, "nothing of the stopped creation was kept");
    let created = create().await.unwrap();
    assert_eq!(
        created.status(),
        StatusCode::CREATED,
        "the same key runs again"
    );
}
