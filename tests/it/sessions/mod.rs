//! Sessions of the developer settings: the shared sign-in helpers (also used
//! by other areas), and one module per behaviour: sign-in and its refusals,
//! CSRF, logout and the idle limit, impersonation, session-authenticated key
//! management, the operator's first login from the command line, and
//! password links.

mod csrf;
mod impersonation;
mod key_management;
mod logout_and_idle;
mod operator_bootstrap;
pub(crate) mod password_links;
mod sign_in;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::ids::UserId;
use storage::people::accounts::NewAccount;
use storage::people::users::Role;
use tests::TestApp;
use tests::app::TestAgency;
use tests::deployment::Deployment;

use crate::support::sql;

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
pub(crate) async fn account(app: &TestApp, agency: &TestAgency, role: Role) -> (UserId, String) {
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
