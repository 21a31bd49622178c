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

const OPS_USER: &str = "ops";
const OPS_PASSWORD: &str = "correct-horse-battery";

/// The ops listener carries credentials and job data: it is served over the
/// same certificate and refuses plain HTTP on a reachable address like the
/// public listener; only the health probes answer over any transport.
#[tokio::test]
async fn the_ops_listener_follows_the_transport_rule() {
    let app = TestApp::builder(Backend::Sqlite)
        .tls()
        .with_ops(OPS_USER, OPS_PASSWORD)
        .spawn()
        .await;
    let ops_url = app.ops_url.clone().expect("ops listener");
    assert!(ops_url.starts_with("https://"));
    let queues = app
        .client
        .get(format!("{ops_url}/ops/api/queues"))
        .basic_auth(OPS_USER, Some(OPS_PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(queues.status(), StatusCode::OK);

    let app = TestApp::builder(Backend::Sqlite)
        .transport(TransportPolicy::ForwardedHttpsOnly {
            trusted_proxies: vec![],
        })
        .with_ops(OPS_USER, OPS_PASSWORD)
        .spawn()
        .await;
    let ops_url = app.ops_url.clone().expect("ops listener");
    for path in ["/ops/api/queues", "/metrics", "/ops/"] {
        let response = app
            .client
            .get(format!("{ops_url}{path}"))
            .basic_auth(OPS_USER, Some(OPS_PASSWORD))
            .send()
            .await
            .unwrap();
        expect_error(response, StatusCode::FORBIDDEN, "transport.tls_required").await;
    }
    let health = app
        .client
        .get(format!("{ops_url}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}

/// A browser resends remembered basic credentials with a form posted from any
/// page: ops actions from another site are refused, the ops page's own are not.
#[tokio::test]
async fn ops_actions_from_another_site_are_refused() {
    let app = TestApp::builder(Backend::Sqlite)
        .with_ops(OPS_USER, OPS_PASSWORD)
        .spawn()
        .await;
    let ops_url = app.ops_url.clone().expect("ops listener");
    let pause = format!(
        "{ops_url}/ops/api/queues/{}/pause",
        <jobs::kinds::Probe as jobs::Job>::KIND
    );
    let post = |headers: &[(&'static str, String)]| {
        let mut request = app
            .client
            .post(&pause)
            .basic_auth(OPS_USER, Some(OPS_PASSWORD));
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.send()
    };
    let forged = post(&[("Origin", "https://elsewhere.example".to_owned())])
        .await
        .unwrap();
    expect_error(forged, StatusCode::FORBIDDEN, "permission_denied").await;
    let forged = post(&[("Sec-Fetch-Site", "cross-site".to_owned())])
        .await
        .unwrap();
    expect_error(forged, StatusCode::FORBIDDEN, "permission_denied").await;
    let queues = app
        .client
        .get(format!("{ops_url}/ops/api/queues"))
        .basic_auth(OPS_USER, Some(OPS_PASSWORD))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert!(
        !queues.to_string().contains("\"paused\":true"),
        "nothing was paused: {queues}"
    );

    let own_page = post(&[
        ("Origin", ops_url.clone()),
        ("Sec-Fetch-Site", "same-origin".to_owned()),
    ])
    .await
    .unwrap();
    assert!(own_page.status().is_success(), "{}", own_page.status());
    assert!(post(&[]).await.unwrap().status().is_success());
}
