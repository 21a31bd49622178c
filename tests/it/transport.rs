//! TLS-only transport: HTTPS with rustls, and the plain-HTTP policy of a
//! reachable listener (only a trusted proxy forwarding HTTPS gets data).

use api::TransportPolicy;
use reqwest::StatusCode;
use storage::api_keys::Scope;
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
    let policy = TransportPolicy::forwarded_https_only(vec![]);
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
    let policy = TransportPolicy::forwarded_https_only(vec!["127.0.0.0/8".parse().unwrap()]);
    let app = TestApp::builder(Backend::Sqlite)
        .transport(policy)
        .spawn()
        .await;
    let served = forwarded(&app, &[("X-Forwarded-Proto", "https")]).await;
    assert_eq!(served.status(), StatusCode::OK);
    // The client used HTTPS (to the proxy), so HSTS applies.
    assert!(served.headers().contains_key("strict-transport-security"));
    let downgraded = forwarded(&app, &[("X-Forwarded-Proto", "http")]).await;
    expect_error(downgraded, StatusCode::FORBIDDEN, "transport.tls_required").await;
    let bare = forwarded(&app, &[]).await;
    // Refusals carry the headers every answer does, but no HSTS over HTTP.
    assert_eq!(bare.headers()["x-content-type-options"], "nosniff");
    assert_eq!(bare.headers()["cache-control"], "no-store");
    assert!(!bare.headers().contains_key("strict-transport-security"));
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
    // An action from the console's own page, over HTTP/2 (no `Host`).
    let paused = app
        .client
        .post(format!("{ops_url}/ops/api/queues/probe/pause"))
        .basic_auth(OPS_USER, Some(OPS_PASSWORD))
        .header("Origin", ops_url.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(paused.version(), reqwest::Version::HTTP_2);
    assert!(paused.status().is_success(), "{}", paused.status());

    let app = TestApp::builder(Backend::Sqlite)
        .transport(TransportPolicy::forwarded_https_only(vec![]))
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
        <platform::kinds::Probe as platform::Job>::KIND
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

/// The security headers every answer carries, checked on each kind of
/// answer: `nosniff` everywhere, HSTS over TLS, and `no-store` on JSON that
/// holds an agency's data (what is meant to be cached says so itself).
#[tokio::test]
async fn every_kind_of_answer_carries_the_security_headers() {
    let app = TestApp::builder(Backend::Sqlite)
        .tls()
        .with_workers()
        .with_ops(OPS_USER, OPS_PASSWORD)
        .spawn()
        .await;
    let ops_url = app.ops_url.clone().expect("ops listener");
    let media = crate::media::Media::on(app).await;
    let number = media.ctx.listing().await;
    crate::media::upload_and_wait(
        &media,
        &number,
        &[crate::media::Part::File(
            "files",
            "front.jpg",
            crate::media::jpeg(600, 400),
        )],
    )
    .await;
    let items = crate::media::listing_media(&media, &number).await;
    let variant_url = items[0]["variants"][0]["url"].as_str().unwrap().to_owned();
    let app = &media.ctx.app;
    let users_key = app.key(&media.ctx.agency, &[Scope::UsersRead]).await;

    let answers = [
        (
            "a JSON list of people",
            app.get("/api/v1/users").header("X-API-Key", &users_key),
            Some("no-store"),
        ),
        (
            "a JSON listing",
            app.get(&format!("/api/v1/listings/{number}"))
                .header("X-API-Key", &media.key),
            Some("no-store"),
        ),
        (
            "a JSON error",
            app.get("/api/v1/users").header("X-API-Key", "sk_live_nope"),
            Some("no-store"),
        ),
        ("a media variant", app.client.get(&variant_url), None),
        (
            "the property page",
            app.client.get(app.url(&format!("/property/{number}"))),
            None,
        ),
        (
            "a portal page",
            app.client.get(app.url("/settings/sign-in")),
            Some("no-store"),
        ),
        (
            "an ops page",
            app.client
                .get(format!("{ops_url}/ops/"))
                .basic_auth(OPS_USER, Some(OPS_PASSWORD)),
            None,
        ),
        (
            "an ops probe",
            app.client.get(format!("{ops_url}/healthz")),
            Some("no-store"),
        ),
    ];
    for (what, request, cache_control) in answers {
        let response = request.send().await.unwrap();
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
        let hsts = headers["strict-transport-security"].to_str().unwrap();
        let max_age: u64 = hsts
            .split(';')
            .find_map(|part| part.trim().strip_prefix("max-age="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(max_age >= 365 * 86_400, "{what}: {hsts}");
        let cache = headers
            .get("cache-control")
            .unwrap_or_else(|| panic!("{what} names its caching"))
            .to_str()
            .unwrap();
        if let Some(expected) = cache_control {
            assert_eq!(cache, expected, "{what}");
        }
        assert!(
            response.status().is_success() || what == "a JSON error",
            "{what}: {}",
            response.status()
        );
    }
}

/// HSTS goes only where the client used HTTPS (through a trusted proxy:
/// `a_trusted_proxy_forwarding_https_is_served`); a plain loopback listener
/// (local development) gets `nosniff` and no HSTS.
#[tokio::test]
async fn plain_loopback_development_gets_no_hsts() {
    let local = TestApp::spawn(Backend::Sqlite).await;
    let response = local.get("/api/openapi.json").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    assert!(!response.headers().contains_key("strict-transport-security"));
}

/// A proxy appends to what the client sent: only its own, last entry is
/// believed, in `X-Forwarded-Proto` and in `Forwarded` alike, and every
/// such header present must say HTTPS.
#[tokio::test]
async fn only_the_proxys_own_entry_says_https() {
    let app = TestApp::builder(Backend::Sqlite)
        .transport(TransportPolicy::forwarded_https_only(vec![
            "127.0.0.0/8".parse().unwrap(),
        ]))
        .spawn()
        .await;
    let refused: &[&[(&str, &str)]] = &[
        &[("X-Forwarded-Proto", "https, http")],
        &[
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Proto", "http"),
        ],
        &[("Forwarded", "proto=https, for=192.0.2.1;proto=http")],
        &[
            ("X-Forwarded-Proto", "https"),
            ("Forwarded", "for=192.0.2.1;proto=http"),
        ],
    ];
    for headers in refused {
        let response = forwarded(&app, headers).await;
        expect_error(response, StatusCode::FORBIDDEN, "transport.tls_required").await;
    }
    let served: &[&[(&str, &str)]] = &[
        &[("X-Forwarded-Proto", "http, https")],
        &[("Forwarded", "for=192.0.2.1;proto=https")],
        &[
            ("X-Forwarded-Proto", "https"),
            ("Forwarded", "for=192.0.2.1;proto=https"),
        ],
    ];
    for headers in served {
        let response = forwarded(&app, headers).await;
        assert_eq!(response.status(), StatusCode::OK, "{headers:?}");
    }
}

/// The document, fetched with these forwarding headers (repeated names are
/// sent as separate lines).
async fn forwarded(app: &TestApp, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = app.get("/api/openapi.json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}
