//! The OpenAPI document: generated from the code, served on every host, listing
//! both base URLs, and describing each route with its error envelope; and
//! the document as served, held to the one recorded in `document.json`.

mod recorded;

use reqwest::StatusCode;
use serde_json::{Value, json};
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
        [app.base_url.as_str(), "https://legacy.example.test"],
        "the paths carry /api/v1; a server is the host"
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
                .request(method.clone(), app.url(&concrete))
                .send()
                .await
                .unwrap();
            // Routed (not endpoint_not_in_scope) and behind the authentication
            // its security names: a session, or an API key.
            let security = operation["security"].to_string();
            if method == reqwest::Method::HEAD {
                // A HEAD answer has no body: its status says it all.
                assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "HEAD {path}");
            } else if method == reqwest::Method::OPTIONS {
                // The one OPTIONS route, tus's discovery, is open.
                assert_eq!(path, "/api/v1/uploads");
                assert_eq!(response.status(), StatusCode::NO_CONTENT);
            } else if operation["security"].is_null() {
                // Signing in, and the password links, are the open routes:
                // no body is a body error.
                assert!(
                    [
                        "/api/v1/session",
                        "/api/v1/session/password",
                        "/api/v1/session/password-reset"
                    ]
                    .contains(&path.as_str()),
                    "{path} is open"
                );
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

/// Every route the issues name is in the document, and every key-authenticated
/// operation documents what the shared guard adds: the idempotency header and
/// its outcomes on changes, and the rate limits' 429 everywhere.
#[tokio::test]
async fn every_route_is_documented_with_its_request_guarantees() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc = document(&app, None).await;
    let paths = doc["paths"].as_object().unwrap();
    let routes = [
        ("post", "/listings"),
        ("get", "/listings"),
        ("get", "/listings/{listing_number}"),
        ("get", "/listings/{listing_number}/orders"),
        ("patch", "/listings/{listing_number}/status"),
        ("post", "/listings/{listing_number}/cancel"),
        ("patch", "/listings/{listing_number}/sections/{section}"),
        ("post", "/listings/{listing_number}/media"),
        ("post", "/media/upload"),
        ("post", "/media/archive"),
        ("get", "/media/archive/{operation_id}"),
        ("get", "/progress/{operation_id}"),
        ("get", "/users"),
        ("post", "/users"),
        ("get", "/users/{user_id}"),
        ("get", "/users/{user_id}/preferences"),
        ("patch", "/users/{user_id}/preferences"),
        ("get", "/users/{user_id}/can-edit"),
        ("post", "/users/batch-can-edit"),
        ("put", "/users/{user_id}/status"),
        ("put", "/users/{user_id}/role"),
        ("post", "/users/{user_id}/impersonate"),
        ("delete", "/users/team/{assistant_id}"),
        ("get", "/scheduling/availability"),
        ("post", "/agency/sandbox/seed"),
        ("get", "/agency/changelog"),
        ("get", "/agency/api-keys"),
        ("post", "/agency/api-keys"),
        ("post", "/session"),
        ("delete", "/session"),
        ("get", "/webhooks/events"),
        ("post", "/webhooks/endpoints"),
        ("get", "/webhooks/endpoints"),
        ("get", "/webhooks/endpoints/{endpoint_id}"),
        ("patch", "/webhooks/endpoints/{endpoint_id}"),
        ("delete", "/webhooks/endpoints/{endpoint_id}"),
        ("post", "/webhooks/endpoints/{endpoint_id}/rotate-secret"),
        ("post", "/webhooks/endpoints/{endpoint_id}/test"),
        ("post", "/webhooks/deliveries/{delivery_id}/replay"),
        ("post", "/agency/test-console"),
    ];
    for (method, path) in routes {
        let full = format!("/api/v1{path}");
        assert!(
            paths.get(&full).and_then(|item| item.get(method)).is_some(),
            "{method} {full} is documented"
        );
    }
    // The portal's pages are HTML, not API: none is in the document.
    for page in [
        "/settings",
        "/property",
        "/set-password",
        "/dashboard",
        "/assets",
    ] {
        assert!(
            !paths.keys().any(|path| path.starts_with(page)),
            "{page} pages are not in the document"
        );
    }
    // A session's environment switch is declared where a key or a session may call.
    let switch = paths["/api/v1/webhooks/endpoints"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "X-Environment")
        .cloned()
        .expect("X-Environment on the webhook routes");
    assert_eq!(switch["schema"]["enum"], json!(["live", "sandbox"]));

    let idempotency_header = |operation: &Value| {
        operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "X-Idempotency-Key" && p["in"] == "header")
            .cloned()
    };
    let create = &paths["/api/v1/listings"]["post"];
    let header = idempotency_header(create).expect("the idempotency header");
    assert_eq!(header["required"], true);
    assert!(
        create["responses"]["400"]["description"]
            .as_str()
            .unwrap()
            .contains("idempotency.missing")
    );
    assert!(
        create["responses"]["409"]["description"]
            .as_str()
            .unwrap()
            .contains("idempotency_key_conflict")
    );
    let status = &paths["/api/v1/listings/{listing_number}/status"]["patch"];
    let conflict = status["responses"]["409"]["description"].as_str().unwrap();
    assert!(
        conflict.contains("no_op_transition") && conflict.contains("idempotency_key_in_progress"),
        "the handler's own 409s and the guard's: {conflict}"
    );
    let role = &paths["/api/v1/users/{user_id}/role"]["put"];
    assert_eq!(
        idempotency_header(role).expect("honoured on PUT")["required"],
        false
    );
    let read = &paths["/api/v1/listings/{listing_number}"]["get"];
    assert!(
        idempotency_header(read).is_none(),
        "safe methods never look at it"
    );
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            if operation["security"].to_string().contains("api_key") {
                assert_eq!(
                    operation["responses"]["429"]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorEnvelope",
                    "{method} {path} documents its 429"
                );
            }
        }
    }
}

/// Query parameters are treated alike on every documented operation: one
/// the document does not declare is 422 `validation.failed` naming it, once
/// the caller is authenticated (key routes, session routes, and the open
/// session routes alike).
#[tokio::test]
async fn every_operation_refuses_a_query_parameter_it_does_not_declare() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app
        .key_acting_for(&agency, &agency.owner_id, &storage::api_keys::Scope::ALL)
        .await;
    let email = crate::sessions::owner_login(&app, &agency).await;
    let session = crate::sessions::sign_in(&app, &email).await;
    let doc = document(&app, None).await;
    let mut checked = 0;
    for (path, operations) in doc["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            let concrete = path
                .replace("{user_id}", agency.owner_id.as_str())
                .replace("{listing_number}", "MA-0000000")
                .replace("{operation_id}", "op_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{endpoint_id}", "whe_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{delivery_id}", "whd_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{recovery_id}", "whr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{key_id}", "key_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{assistant_id}", "usr_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{section}", "tour3d")
                .replace("{media_id}", "med_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{upload_id}", "upl_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{profile_id}", "dpf_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")
                .replace("{name}", "thumbnail");
            assert!(
                !concrete.contains('{'),
                "a value for every parameter of {path}"
            );
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let security = operation["security"].to_string();
            let mut request = app
                .client
                .request(
                    method.clone(),
                    app.url(&format!("{concrete}?not_a_parameter=1")),
                )
                .header("X-Idempotency-Key", tests::idempotency_key());
            if security.contains("api_key") {
                request = request.header("X-API-Key", &key);
            } else if !operation["security"].is_null() {
                request = request
                    .header("Cookie", &session.cookie)
                    .header("X-CSRF-Token", &session.csrf);
            }
            let response = request.send().await.unwrap();
            if method == reqwest::Method::HEAD {
                // No body to name the parameter in: the status tells.
                assert_eq!(
                    response.status(),
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "HEAD {path}"
                );
                checked += 1;
                continue;
            }
            let body = expect_error(
                response,
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation.failed",
            )
            .await;
            assert_eq!(
                body["error"]["details"]["fields"]["not_a_parameter"], "is not a known parameter",
                "{method} {path}: {body}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked} operations");
}
