//! TLS-only transport: HTTPS with rustls, and the plain-HTTP policy of a
//! reachable listener (only a trusted proxy forwarding HTTPS gets data).

use api::TransportPolicy;
use reqwest::StatusCode;
use tests::{Backend, TestApp};

use crate::support::expect_error;

#[tokio::test]
async fn https_is_served_with_the_configured_certificate() {
    let app = TestApp::builder(Backend::Sqlite).tls().spawn().await;
    assert!(app.base_url.starts_with("https://"));
    let response = app.get("/api/openapi.json").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    // Plain HTTP to the TLS port gets no data.
    let plain = format!("http://{}/api/openapi.json", app.addr);
    let attempt = tests::app::base_client()
        .build()
        .unwrap()
        .get(plain)
        .send()
        .await;
    assert!(
        attempt
            .map(|r| r.status() != StatusCode::OK)
            .unwrap_or(true)
    );
}

#[tokio::test]
async fn plain_http_on_a_reachable_listener_is_refused_without_a_trusted_proxy() {
    let policy = TransportPolicy::ForwardedHttpsOnly {
        trusted_proxies: vec![],
    };
    let app = TestApp::builder(Backend::Sqlite)
        .transport(policy)
        .spawn()
        .await;
    for proto in [None, Some("https"), Some("http")] {
        let mut request = app.get("/api/openapi.json");
        if let Some(proto) = proto {
            request = request.header("X-Forwarded-Proto", proto);
        }
        let response = request.send().await.unwrap();
        expect_error(response, StatusCode::FORBIDDEN, "transport.tls_required").await;
    }
    // Unknown routes get the same refusal, not a hint of what exists.
    let response = app.get("/api/v1/users").send().await.unwrap();
    expect_error(response, StatusCode::FORBIDDEN, "transport.tls_required").await;
}

#[tokio::test]
async fn a_trusted_proxy_forwarding_https_is_served() {
    let policy = TransportPolicy::ForwardedHttpsOnly {
        trusted_proxies: vec!["127.0.0.0/8".parse().unwrap()],
    };
    let app = TestApp::builder(Backend::Sqlite)
        .transport(policy)
        .spawn()
        .await;
    let forwarded = app
        .get("/api/openapi.json")
        .header("X-Forwarded-Proto", "https")
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status(), StatusCode::OK);
    let downgraded = app
        .get("/api/openapi.json")
        .header("X-Forwarded-Proto", "http")
        .send()
        .await
        .unwrap();
    expect_error(downgraded, StatusCode::FORBIDDEN, "transport.tls_required").await;
    let bare = app.get("/api/openapi.json").send().await.unwrap();
    expect_error(bare, StatusCode::FORBIDDEN, "transport.tls_required").await;
}
