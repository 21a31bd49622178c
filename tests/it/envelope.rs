//! The error envelope everywhere: the denied surface, unknown routes, wrong
//! methods, unparseable and invalid bodies, a panicking handler, and the request
//! id echo.

use std::io::Write;
use std::sync::{Arc, Mutex};

use api::AppState;
use api::extract::ApiJson;
use axum::Router;
use axum::routing::{get, post};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use storage::api_keys::Scope;
use tests::{Backend, TestApp};

use crate::support::{expect_error, expect_ok};

/// The specification's denied surface, as concrete requests.
const DENIED: [(&str, &str); 16] = [
    ("POST", "/api/v1/tours/T1/share"),
    ("POST", "/api/v1/tours/T1/delivery/trigger"),
    ("POST", "/api/v1/rmd/designs/D1/export"),
    ("POST", "/api/v1/orders/submit"),
    ("PATCH", "/api/v1/appointments/A1"),
    ("POST", "/api/v1/invoices"),
    ("POST", "/api/v1/payments/charge_ccof"),
    ("POST", "/api/v1/credits/purchase"),
    ("POST", "/api/v1/users/invite"),
    ("PATCH", "/api/v1/users/usr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K"),
    ("DELETE", "/api/v1/users/usr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K"),
    ("POST", "/api/v1/email-campaigns"),
    ("POST", "/api/v1/cold-calls/campaigns"),
    ("POST", "/api/v1/cold-calls/campaigns/C1:start"),
    ("POST", "/api/v1/support/tickets"),
    ("POST", "/api/v1/webhooks/incoming/stripe/events"),
];

#[tokio::test]
async fn every_denied_url_is_endpoint_not_in_scope_with_or_without_a_key() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &Scope::ALL).await;
    for (method, path) in DENIED {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let anonymous = app
            .client
            .request(method.clone(), app.url(path))
            .send()
            .await
            .unwrap();
        expect_error(anonymous, StatusCode::NOT_FOUND, "endpoint_not_in_scope").await;
        let with_key = app
            .client
            .request(method, app.url(path))
            .header("X-API-Key", &key)
            .header("X-Idempotency-Key", "denied-probe")
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        expect_error(with_key, StatusCode::NOT_FOUND, "endpoint_not_in_scope").await;
    }
}

#[tokio::test]
async fn unknown_routes_are_endpoint_not_in_scope() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    for path in [
        "/",
        "/api/v1",
        "/api/v1/nothing-here",
        "/api/v2/listings",
        "/admin",
        "/api/v1/users/x/y/z",
    ] {
        let response = app.get(path).send().await.unwrap();
        expect_error(response, StatusCode::NOT_FOUND, "endpoint_not_in_scope").await;
    }
}

#[tokio::test]
async fn a_wrong_method_is_405_in_the_envelope_with_allow() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let response = app
        .client
        .put(app.url("/api/v1/users"))
        .send()
        .await
        .unwrap();
    let allow = response
        .headers()
        .get("allow")
        .map(|v| v.to_str().unwrap().to_owned());
    expect_error(
        response,
        StatusCode::METHOD_NOT_ALLOWED,
        "request.method_not_allowed",
    )
    .await;
    assert!(allow.is_some_and(|a| a.contains("GET")));
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Probe {
    address: String,
    count: u32,
}

async fn echo(ApiJson(probe): ApiJson<Probe>) -> String {
    probe.address
}

async fn explode() -> &'static str {
    panic!("forced panic for the envelope test")
}

async fn probe_app() -> TestApp {
    let routes: Router<AppState> = Router::new()
        .route("/api/v1/probe/echo", post(echo))
        .route("/api/v1/probe/panic", get(explode));
    TestApp::builder(Backend::Sqlite)
        .extra_routes(routes)
        .spawn()
        .await
}

#[tokio::test]
async fn bodies_that_do_not_parse_are_400_and_invalid_ones_422() {
    let app = probe_app().await;
    let post = |body: &'static str| {
        app.client
            .post(app.url("/api/v1/probe/echo"))
            .header("Content-Type", "application/json")
            .body(body)
    };
    for malformed in [
        "{",
        "{\"address\": }",
        "nonsense",
        "",
        "{\"address\":\"a\",\"count\":1} extra",
    ] {
        expect_error(
            post(malformed).send().await.unwrap(),
            StatusCode::BAD_REQUEST,
            "request.malformed",
        )
        .await;
    }

    let missing = post(r#"{"count": 1}"#).send().await.unwrap();
    let body = expect_error(
        missing,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert_eq!(body["error"]["details"]["fields"]["address"], "is required");

    let wrong_type = post(r#"{"address": "a", "count": "many"}"#)
        .send()
        .await
        .unwrap();
    let body = expect_error(
        wrong_type,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert!(body["error"]["details"]["fields"]["count"].is_string());

    let unknown = post(r#"{"address": "a", "count": 1, "colour": "red"}"#)
        .send()
        .await
        .unwrap();
    let body = expect_error(
        unknown,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert_eq!(
        body["error"]["details"]["fields"]["colour"],
        "is not a known field"
    );

    let not_json = app
        .client
        .post(app.url("/api/v1/probe/echo"))
        .header("Content-Type", "text/plain")
        .body(r#"{"address": "a", "count": 1}"#)
        .send()
        .await
        .unwrap();
    expect_error(
        not_json,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "request.unsupported_media_type",
    )
    .await;

    let fine = post(r#"{"address": "12 Elm St", "count": 1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(fine.text().await.unwrap(), "12 Elm St");
}

/// A log sink for one test thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_panicking_handler_is_a_logged_500_and_the_server_keeps_serving() {
    platform::telemetry::install_panic_hook();
    let logs = Captured::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    // This test's runtime is single-threaded, so the server's tasks log here.
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = probe_app().await;
    let response = app
        .get("/api/v1/probe/panic")
        .header("X-Request-Id", "panic-probe-1")
        .send()
        .await
        .unwrap();
    let body = expect_error(
        response,
        StatusCode::INTERNAL_SERVER_ERROR,
        "server.internal",
    )
    .await;
    assert_eq!(body["error"]["request_id"], "panic-probe-1");
    assert!(
        !body.to_string().contains("forced panic"),
        "the cause is not shown: {body}"
    );

    let log = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let panic_line = log
        .lines()
        .find(|l| l.contains("forced panic for the envelope test"))
        .expect("panic logged");
    assert!(
        panic_line.contains("panic-probe-1"),
        "logged with the request id: {panic_line}"
    );

    // Still serving.
    let after = app.get("/api/openapi.json").send().await.unwrap();
    assert_eq!(after.status(), StatusCode::OK);
}

#[tokio::test]
async fn request_ids_are_echoed_when_well_formed_and_minted_otherwise() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &[Scope::UsersRead]).await;

    let kept = app
        .get("/api/v1/users")
        .header("X-API-Key", &key)
        .header("X-Request-Id", "client-trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(kept.headers()["x-request-id"], "client-trace-42");
    expect_ok(kept).await;

    let error = app
        .get("/api/v1/users")
        .header("X-Request-Id", "client-trace-43")
        .send()
        .await
        .unwrap();
    let body = expect_error(error, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    assert_eq!(body["error"]["request_id"], "client-trace-43");

    for bad in ["has spaces in it", "<script>", &"x".repeat(200)] {
        let response = app
            .get("/api/v1/users")
            .header("X-Request-Id", bad)
            .send()
            .await
            .unwrap();
        let minted = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(minted, bad);
        assert!(ulid::Ulid::from_string(&minted).is_ok(), "a ULID: {minted}");
        let body = expect_error(response, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        assert_eq!(body["error"]["request_id"], minted.as_str());
    }

    let no_header = app.get("/api/openapi.json").send().await.unwrap();
    let minted = no_header.headers()["x-request-id"].to_str().unwrap();
    assert!(ulid::Ulid::from_string(minted).is_ok());
}

/// Keys, passwords, session cookies and CSRF tokens never reach the log, even
/// at its most verbose; every line logged for a request carries its id.
#[tokio::test]
async fn credentials_are_never_logged_and_request_lines_carry_the_request_id() {
    const PASSWORD: &str = "Corr3ct-Horse!";
    const NEW_PASSWORD: &str = "An0ther-Secret#";
    let logs = Captured::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    // This test's runtime is single-threaded, so the server's tasks log here.
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app
        .key_acting_for(
            &agency,
            &agency.owner_id,
            &[Scope::UsersRead, Scope::UsersWrite],
        )
        .await;
    let by_header = app
        .get("/api/v1/users")
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    expect_ok(by_header).await;
    let by_bearer = app
        .get("/api/v1/users")
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    expect_ok(by_bearer).await;
    let in_query = app
        .get(&format!("/api/v1/users?api_key={key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(in_query.status(), StatusCode::UNAUTHORIZED);
    let created = app
        .client
        .post(app.url("/api/v1/users"))
        .header("X-API-Key", &key)
        .header("X-Idempotency-Key", tests::idempotency_key())
        .json(&serde_json::json!({
            "email": format!("{}@example.com", ulid::Ulid::generate()).to_lowercase(),
            "name": "Casey Logged",
            "role": "agent",
            "password": NEW_PASSWORD,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);

    let email = crate::sessions::owner_login(&app, &agency).await;
    let refused = app
        .client
        .post(app.url("/api/v1/session"))
        .json(&serde_json::json!({ "email": email, "password": "Wr0ng-Password!" }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let signed = crate::sessions::sign_in(&app, &email).await;
    let session = signed
        .send(app.get("/api/v1/session"))
        .send()
        .await
        .unwrap();
    expect_ok(session).await;

    let log = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let cookie_secret = signed.cookie.split_once('=').map(|(_, v)| v).unwrap();
    for (what, secret) in [
        ("API key", key.as_str()),
        ("password", PASSWORD),
        ("new user's password", NEW_PASSWORD),
        ("session cookie", cookie_secret),
        ("CSRF token", signed.csrf.as_str()),
    ] {
        assert!(!log.contains(secret), "the {what} was logged");
    }
    let request_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("finished processing request"))
        .collect();
    assert!(request_lines.len() >= 7, "the access log: {log}");
    for line in request_lines {
        assert!(line.contains("request_id="), "no request id: {line}");
    }
}
