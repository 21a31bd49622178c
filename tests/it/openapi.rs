//! The OpenAPI document: generated from the code, served on every host, listing
//! both base URLs, and describing each route with its error envelope.

use reqwest::StatusCode;
use serde_json::Value;
use tests::{Backend, TestApp};

use crate::support::expect_error;

async fn document(app: &TestApp, host: Option<&str>) -> Value {
    let mut request = app.get("/api/openapi.json");
    if let Some(host) = host {
        request = request.header("Host", host);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_document_describes_routes_servers_security_and_errors() {
    let app = TestApp::builder(Backend::Sqlite)
        .legacy_base_url("https://legacy.example.test")
        .spawn()
        .await;
    let doc = document(&app, None).await;
    assert_eq!(doc["openapi"], "3.1.0");

    let servers: Vec<&str> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        servers,
        [
            format!("{}/api/v1", app.base_url).as_str(),
            "https://legacy.example.test/api/v1"
        ]
    );

    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["api_key"]["name"], "X-API-Key");
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert!(doc["components"]["schemas"]["ErrorEnvelope"].is_object());

    let paths = doc["paths"].as_object().unwrap();
    for path in ["/api/v1/users", "/api/v1/users/{user_id}"] {
        let get = &paths[path]["get"];
        assert!(get.is_object(), "{path} documented");
        for status in ["401", "403"] {
            let schema = &get["responses"][status]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(
                schema, "#/components/schemas/ErrorEnvelope",
                "{path} {status}"
            );
        }
    }
}

#[tokio::test]
async fn every_documented_route_is_served_and_guarded() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc = document(&app, None).await;
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let concrete = path.replace("{user_id}", "usr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K");
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let response = app
                .client
                .request(method, app.url(&concrete))
                .send()
                .await
                .unwrap();
            // Routed (not endpoint_not_in_scope) and behind the authentication
            // its security names: a session, or an API key.
            let security = operation["security"].to_string();
            if operation["security"].is_null() {
                // Signing in is the one open route: no body is a body error.
                assert_eq!(path, "/api/v1/session");
                expect_error(
                    response,
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "request.unsupported_media_type",
                )
                .await;
            } else if security.contains("api_key") {
                // Key routes, and the uploads that take a key or a session.
                expect_error(response, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
            } else {
                expect_error(response, StatusCode::UNAUTHORIZED, "auth.session_required").await;
            }
        }
    }
}

#[tokio::test]
async fn the_legacy_host_gets_the_same_api() {
    let app = TestApp::builder(Backend::Sqlite)
        .legacy_base_url("https://legacy.example.test")
        .spawn()
        .await;
    let primary = document(&app, None).await;
    let legacy = document(&app, Some("legacy.example.test")).await;
    assert_eq!(primary, legacy);
    let response = app
        .get("/api/v1/users")
        .header("Host", "legacy.example.test")
        .send()
        .await
        .unwrap();
    expect_error(response, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
}
