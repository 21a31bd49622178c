//! Sessions of the developer settings: login and its refusals, the cookie's
//! attributes, CSRF on every change, logout, impersonation rules, and the
//! session-authenticated key management (including platform identities).
//! Password links are in [`password_links`].

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::accounts::NewAccount;
use storage::agencies::AgencyKind;
use storage::api_keys::Scope;
use storage::ids::UserId;
use storage::users::{NewUser, Role};
use tests::app::TestAgency;
use tests::deployment::{Deployment, serve};
use tests::{Backend, TestApp, backend_tests};

use crate::support::{expect_error, expect_ok, sql};

mod password_links;

pub(crate) const PASSWORD: &str = "Corr3ct-Horse!";

/// A signed-in session: the cookie to send and the CSRF token.
pub(crate) struct Signed {
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

fn unique_email() -> String {
    format!("{}@example.com", ulid::Ulid::generate()).to_lowercase()
}

/// An account with `role` in `agency` and the test password; returns its id and email.
async fn account(app: &TestApp, agency: &TestAgency, role: Role) -> (UserId, String) {
    let email = unique_email();
    let account = app
        .store
        .accounts()
        .create(
            &agency.id,
            NewAccount {
                email: email.clone(),
                password: Some(PASSWORD.to_owned()),
                role: Some(role),
                manager_id: Some(agency.owner_id.clone()),
                ..NewAccount::default()
            },
        )
        .await
        .unwrap();
    (account.user.id, email)
}

/// Gives the agency's owner an email and the test password; returns the email.
pub(crate) async fn owner_login(app: &TestApp, agency: &TestAgency) -> String {
    let email = unique_email();
    sql::set_user_email(app.store.db(), agency.owner_id.as_str(), &email).await;
    app.store
        .accounts()
        .set_password(&agency.id, &agency.owner_id, PASSWORD)
        .await
        .unwrap();
    email
}

async fn login(app: &TestApp, email: &str, password: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/v1/session"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap()
}

pub(crate) async fn sign_in(app: &TestApp, email: &str) -> Signed {
    let response = login(app, email, PASSWORD).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let set_cookie = response
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let body: Value = response.json().await.unwrap();
    Signed {
        cookie,
        csrf: body["csrf_token"].as_str().unwrap().to_owned(),
    }
}

impl Signed {
    /// A request with the cookie and the CSRF token.
    pub(crate) fn send(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request
            .header("Cookie", &self.cookie)
            .header("X-CSRF-Token", &self.csrf)
    }

    /// A request with the cookie only.
    pub(crate) fn cookie_only(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.header("Cookie", &self.cookie)
    }
}

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

    async fn brokers_impersonate_strictly_lower_roles_of_their_own_agency(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency_of_kind(AgencyKind::Broker).await;
        let broker_email = owner_login(&app, &agency).await;
        let (agent, agent_email) = account(&app, &agency, Role::Agent).await;
        let (viewer, _) = account(&app, &agency, Role::Viewer).await;
        let other = app.agency().await;
        let (stranger, _) = account(&app, &other, Role::Viewer).await;
        let broker = sign_in(&app, &broker_email).await;
        let impersonate = |id: &UserId| app.client.post(app.url(&format!("/api/v1/users/{id}/impersonate")));

        let no_token = broker.cookie_only(impersonate(&agent)).send().await.unwrap();
        expect_error(no_token, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let foreign = broker.send(impersonate(&stranger)).send().await.unwrap();
        expect_error(foreign, StatusCode::NOT_FOUND, "user_not_found").await;
        let garbage = broker.send(app.client.post(app.url("/api/v1/users/usr_nope/impersonate"))).send().await.unwrap();
        expect_error(garbage, StatusCode::NOT_FOUND, "user_not_found").await;
        let own = broker.send(impersonate(&agency.owner_id)).send().await.unwrap();
        expect_error(own, StatusCode::FORBIDDEN, "permission_denied").await;

        let switched = expect_ok(broker.send(impersonate(&agent)).send().await.unwrap()).await;
        assert_eq!(switched["user"]["id"], agent.as_str());
        assert_eq!(switched["impersonator_id"], agency.owner_id.as_str());
        let current = expect_ok(broker.cookie_only(app.get("/api/v1/session")).send().await.unwrap()).await;
        assert_eq!(current["user"]["id"], agent.as_str());
        // Rules stay those of the real user: a broker moves on to the viewer.
        let onward = expect_ok(broker.send(impersonate(&viewer)).send().await.unwrap()).await;
        assert_eq!(onward["user"]["id"], viewer.as_str());
        assert_eq!(onward["impersonator_id"], agency.owner_id.as_str());
        // Acting as a viewer, the session manages no keys.
        let keys = broker.cookie_only(app.get("/api/v1/agency/api-keys")).send().await.unwrap();
        expect_error(keys, StatusCode::FORBIDDEN, "permission_denied").await;
        let back = expect_ok(
            broker.send(app.client.delete(app.url("/api/v1/session/impersonation"))).send().await.unwrap(),
        )
        .await;
        assert_eq!(back["user"]["id"], agency.owner_id.as_str());
        assert!(back["impersonator_id"].is_null());

        // An agent is below broker: no impersonation at all.
        let agent_session = sign_in(&app, &agent_email).await;
        let refused = agent_session.send(impersonate(&viewer)).send().await.unwrap();
        expect_error(refused, StatusCode::FORBIDDEN, "permission_denied").await;
        // A deactivated target cannot be impersonated.
        sql::deactivate_user(app.store.db(), viewer.as_str()).await;
        let inactive = broker.send(impersonate(&viewer)).send().await.unwrap();
        expect_error(inactive, StatusCode::FORBIDDEN, "permission_denied").await;
    }

    async fn a_broker_cannot_impersonate_an_equal_or_higher_role(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner_email = owner_login(&app, &agency).await;
        let brokers: Vec<UserId> = {
            let mut ids = Vec::new();
            for _ in 0..2 {
                let user = app
                    .store
                    .users()
                    .create(&agency.id, NewUser { role: Role::Broker, email: Some(unique_email()), name: None, manager_id: None })
                    .await
                    .unwrap();
                ids.push(user.id);
            }
            ids
        };
        let email = unique_email();
        sql::set_user_email(app.store.db(), brokers[0].as_str(), &email).await;
        app.store.accounts().set_password(&agency.id, &brokers[0], PASSWORD).await.unwrap();
        let broker = sign_in(&app, &email).await;
        for target in [&brokers[1], &agency.owner_id] {
            let response = broker
                .send(app.client.post(app.url(&format!("/api/v1/users/{target}/impersonate"))))
                .send()
                .await
                .unwrap();
            expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        }
        // The media agency owner is above a broker.
        let owner = sign_in(&app, &owner_email).await;
        let response = owner
            .send(app.client.post(app.url(&format!("/api/v1/users/{}/impersonate", brokers[1]))))
            .send()
            .await
            .unwrap();
        expect_ok(response).await;
    }

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

/// Runs `api admin set-password`, writing `password` to its standard input.
pub(crate) fn set_password(
    deployment: &Deployment,
    agency: &str,
    user: &str,
    password: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut child = deployment
        .command(&["admin", "set-password", "--agency", agency, "--user", user])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn an_operator_bootstraps_a_platform_login_from_the_command_line() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let client = tests::app::base_client().build().unwrap();
    let agency = deployment.admin_ok(&["create-agency", "--name", "Platform"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let created = deployment.admin_ok(&[
        "create-user",
        "--agency",
        &agency_id,
        "--role",
        "super_admin",
        "--email",
        "ops@example.com",
    ]);
    let user_id = created["user_id"].as_str().unwrap().to_owned();
    let weak = set_password(&deployment, &agency_id, &user_id, "short");
    assert_eq!(weak.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&weak.stderr).contains("validation.failed"));
    let done = set_password(&deployment, &agency_id, &user_id, PASSWORD);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(!String::from_utf8_lossy(&done.stdout).contains(PASSWORD));

    let mut server = serve(&deployment, &["--no-workers"], &client, "http").await;
    let response = client
        .post(format!("{}/api/v1/session", server.base_url))
        .json(&json!({"email": "OPS@example.com", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["user"]["role"], "super_admin");
    server.process.terminate(std::time::Duration::from_secs(10));
}
