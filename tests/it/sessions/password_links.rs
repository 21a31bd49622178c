//! Password links: an account created without a password is e-mailed a
//! one-time link; `POST /session/password-reset` e-mails a fresh one without
//! telling whether the account exists; `POST /session/password` spends it,
//! sets the password by the rules and signs in.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::ids::{AgencyId, NotificationId, UserId};
use storage::people::accounts::NewAccount;
use storage::people::users::Role;
use tests::smtp::SmtpSink;
use tests::{TestApp, backend_tests};

use super::{PASSWORD, account, login, owner_login, sign_in, unique_email};
use crate::support::{expect_error, expect_ok, sql};

const NEW_PASSWORD: &str = "N3w-Passw0rd!";

/// `text` with quoted-printable soft line breaks and `=3D` undone (the sink
/// keeps lines with `\n`).
fn unfolded(text: &str) -> String {
    text.replace("=\r\n", "")
        .replace("=\n", "")
        .replace("=3D", "=")
}

/// The token of the first password link in `text`: an e-mail as sent or a
/// rendered body.
fn token_in(text: &str) -> String {
    let text = unfolded(text);
    let (_, after) = text.split_once("#token=").expect("a password link");
    after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// The token of a recorded password e-mail, as the mailer would fill it in.
pub(crate) async fn recorded_token(app: &TestApp, notification_id: &NotificationId) -> String {
    let (notification, _, _) = app
        .store
        .webhooks()
        .notification_to_send(notification_id)
        .await
        .unwrap()
        .unwrap();
    let body = app
        .store
        .accounts()
        .mail_body(&notification)
        .await
        .unwrap()
        .expect("a link to send");
    token_in(&body)
}

async fn set_password(app: &TestApp, token: &str, password: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/v1/session/password"))
        .json(&json!({"token": token, "new_password": password}))
        .send()
        .await
        .unwrap()
}

async fn request_reset(app: &TestApp, email: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/v1/session/password-reset"))
        .json(&json!({"email": email}))
        .send()
        .await
        .unwrap()
}

/// The cookie of a 201 sign-in and its body.
async fn signed_in(response: reqwest::Response) -> (String, Value) {
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    for attribute in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
    let body: Value = response.json().await.unwrap();
    assert!(body["csrf_token"].is_string(), "{body}");
    (cookie.split(';').next().unwrap().to_owned(), body)
}

/// An account of a fresh agency created without a password, its link
/// recorded (no relay: nothing is e-mailed): its id, agency, email and the
/// notification carrying the link.
async fn account_without_password(app: &TestApp) -> (UserId, AgencyId, String, NotificationId) {
    let agency = app.agency().await;
    let email = unique_email();
    let account = app
        .store
        .accounts()
        .create(
            &agency.id,
            NewAccount {
                email: email.clone(),
                role: Some(Role::Agent),
                manager_id: Some(agency.owner_id.clone()),
                password_link_base: Some("https://app.example/set-password".into()),
                ..NewAccount::default()
            },
        )
        .await
        .unwrap();
    assert!(account.password_reset_required);
    let link = account
        .password_link
        .expect("a link for an account without a password");
    (account.user.id, agency.id, email, link.notification_id)
}

backend_tests! {
    async fn a_user_created_without_a_password_chooses_one_with_the_mailed_link(backend) {
        let relay = SmtpSink::start().await;
        let app = TestApp::builder(backend).with_workers().mail_relay(&relay.url).spawn().await;
        let agency = app.agency().await;
        let key = app.key_acting_for(&agency, &agency.owner_id, &[Scope::UsersRead, Scope::UsersWrite]).await;
        let email = unique_email();
        let response = app
            .client
            .post(app.url("/api/v1/users"))
            .header("X-API-Key", &key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({"email": email, "role": "agent"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let created: Value = response.json().await.unwrap();
        assert_eq!(created["password_reset_required"], true);
        let user_id = created["id"].as_str().unwrap().to_owned();

        // The notification is recorded for the user, and e-mailed with the link.
        let notifications = app.store.webhooks().notifications(&agency.id).await.unwrap();
        assert_eq!(notifications.len(), 1);
        assert_eq!(notifications[0].kind, "password_first_set");
        assert_eq!(notifications[0].user_id.as_ref().map(UserId::as_str), Some(user_id.as_str()));
        let mail = tests::deployment::eventually(Duration::from_secs(20), "the password e-mail", || async {
            relay.received().pop()
        })
        .await;
        assert_eq!(mail.to, std::slice::from_ref(&email));
        let text = unfolded(&mail.data);
        assert!(text.contains(&format!("{}/set-password#token=", app.base_url)), "{text}");
        let token = token_in(&mail.data);
        assert_eq!(token.len(), 43, "256 random bits: {token}");
        // Only a keyed hash of the token is stored, and the e-mail's copy is sealed.
        assert!(!notifications[0].body.contains(&token));
        assert!(!sql::everything_stored(&app).await.contains(&token));
        // No password yet: signing in is refused like any mismatch.
        expect_error(login(&app, &email, NEW_PASSWORD).await, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;

        let (cookie, body) = signed_in(set_password(&app, &token, NEW_PASSWORD).await).await;
        assert_eq!(body["user"]["id"], user_id.as_str());
        assert!(!body.to_string().contains(&token));
        let current = expect_ok(app.get("/api/v1/session").header("Cookie", &cookie).send().await.unwrap()).await;
        assert_eq!(current["user"]["id"], user_id.as_str());
        assert_eq!(current["csrf_token"], body["csrf_token"]);
        // Counted as a login, and the new password signs in from now on.
        assert_eq!(sql::login_count(app.store.db(), &user_id).await, 1);
        signed_in(login(&app, &email, NEW_PASSWORD).await).await;
        assert_eq!(sql::login_count(app.store.db(), &user_id).await, 2);
        let listed = expect_ok(app.get(&format!("/api/v1/users/{user_id}")).header("X-API-Key", &key).send().await.unwrap()).await;
        assert_eq!(listed["id"], user_id.as_str());

        // The link works once.
        let again = set_password(&app, &token, "An0ther-Password!").await;
        expect_error(again, StatusCode::BAD_REQUEST, "auth.invalid_reset_token").await;
        expect_error(login(&app, &email, "An0ther-Password!").await, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;
        let unknown = set_password(&app, "not-a-token", NEW_PASSWORD).await;
        expect_error(unknown, StatusCode::BAD_REQUEST, "auth.invalid_reset_token").await;
    }

    async fn a_password_link_expires_after_an_hour_and_keeps_the_password_rules(backend) {
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let (user_id, agency_id, email, notification_id) = account_without_password(&app).await;
        let token = recorded_token(&app, &notification_id).await;

        // A weak password: the rules' error of POST /users, and the link stays good.
        for (weak, reason) in [
            ("Sh0rt!", "must be at least 8 characters"),
            ("nouppercase1!", "must contain an upper case letter"),
            ("NoSpecial123", "must contain a special character"),
            (&*format!("Corr3ct-Horse{}", "x".repeat(116)), "must be at most 128 characters"),
        ] {
            let response = set_password(&app, &token, weak).await;
            let body = expect_error(response, StatusCode::BAD_REQUEST, "validation.invalid_value").await;
            assert_eq!(body["error"]["details"]["fields"]["new_password"], reason, "{body}");
        }
        expect_error(login(&app, &email, "Sh0rt!").await, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;

        // At exactly an hour the link has expired.
        clock.advance_seconds(3600);
        let expired = set_password(&app, &token, NEW_PASSWORD).await;
        expect_error(expired, StatusCode::BAD_REQUEST, "auth.invalid_reset_token").await;
        // Its sealed copy is forgotten by the hourly purge: an unsent e-mail is dropped.
        app.store.sessions().purge().await.unwrap();
        let (notification, _, _) = app.store.webhooks().notification_to_send(&notification_id).await.unwrap().unwrap();
        assert!(app.store.accounts().mail_body(&notification).await.unwrap().is_none());

        // A fresh link, asked for by e-mail, works until its hour is up.
        let accepted = request_reset(&app, &email.to_uppercase()).await;
        assert_eq!(accepted.status(), StatusCode::ACCEPTED);
        let reset = tests::deployment::eventually(Duration::from_secs(10), "the reset notification", || async {
            let notifications = app.store.webhooks().notifications(&agency_id).await.unwrap();
            notifications.into_iter().find(|n| n.kind == "password_reset")
        })
        .await;
        assert_eq!(reset.user_id.as_ref(), Some(&user_id));
        let fresh = recorded_token(&app, &reset.id).await;
        assert_ne!(fresh, token);
        clock.advance_seconds(3599);
        let (_, body) = signed_in(set_password(&app, &fresh, NEW_PASSWORD).await).await;
        assert_eq!(body["user"]["id"], user_id.as_str());
        signed_in(login(&app, &email, NEW_PASSWORD).await).await;
        // Spent: its e-mail, were it still unsent, would go nowhere.
        let (notification, _, _) = app.store.webhooks().notification_to_send(&reset.id).await.unwrap().unwrap();
        assert!(app.store.accounts().mail_body(&notification).await.unwrap().is_none());
    }

    async fn a_reset_request_answers_alike_and_mails_only_an_active_account(backend) {
        let relay = SmtpSink::start().await;
        let app = TestApp::builder(backend).with_workers().mail_relay(&relay.url).spawn().await;
        let agency = app.agency().await;
        let email = owner_login(&app, &agency).await;
        let old = sign_in(&app, &email).await;
        let (deactivated, deactivated_email) = account(&app, &agency, Role::Agent).await;
        sql::deactivate_user(app.store.db(), deactivated.as_str()).await;

        // Unknown and deactivated: 202, the same answer, nothing sent.
        let mut answers = Vec::new();
        for unknown in ["nobody@example.com", deactivated_email.as_str()] {
            let response = request_reset(&app, unknown).await;
            assert_eq!(response.status(), StatusCode::ACCEPTED);
            answers.push(response.json::<Value>().await.unwrap());
        }
        // Malformed is no account question: a 422 that says nothing of accounts.
        let malformed = request_reset(&app, "not an email").await;
        expect_error(malformed, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(relay.received().is_empty(), "nobody is e-mailed");
        assert!(app.store.webhooks().notifications(&agency.id).await.unwrap().is_empty());

        // An active account: the same answer, and the link is e-mailed.
        let response = request_reset(&app, &email).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        assert_eq!(response.headers()["x-rate-limit-limit"], "3");
        let answer: Value = response.json().await.unwrap();
        assert!(answers.iter().all(|other| *other == answer), "{answers:?} vs {answer}");
        let mail = tests::deployment::eventually(Duration::from_secs(20), "the reset e-mail", || async {
            relay.received().pop()
        })
        .await;
        assert_eq!(mail.to, std::slice::from_ref(&email));
        let token = token_in(&mail.data);

        // The reset signs in, ends the sessions of the old password, and retires it.
        let (cookie, _) = signed_in(set_password(&app, &token, NEW_PASSWORD).await).await;
        let ended = old.cookie_only(app.get("/api/v1/session")).send().await.unwrap();
        expect_error(ended, StatusCode::UNAUTHORIZED, "auth.session_required").await;
        expect_ok(app.get("/api/v1/session").header("Cookie", &cookie).send().await.unwrap()).await;
        expect_error(login(&app, &email, PASSWORD).await, StatusCode::UNAUTHORIZED, "auth.invalid_credentials").await;
        signed_in(login(&app, &email, NEW_PASSWORD).await).await;

        // Three requests per email per minute.
        let other = unique_email();
        for _ in 0..3 {
            assert_eq!(request_reset(&app, &other).await.status(), StatusCode::ACCEPTED);
        }
        let limited = request_reset(&app, &other).await;
        assert!(limited.headers().contains_key("retry-after"));
        expect_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limit.exceeded").await;
        // A body without the email is refused as any malformed body is.
        let missing = app.client.post(app.url("/api/v1/session/password-reset")).json(&json!({})).send().await.unwrap();
        expect_error(missing, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
    }
}
