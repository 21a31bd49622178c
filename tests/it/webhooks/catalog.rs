//! `GET /webhooks/events`.

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::{Backend, TestApp};

use crate::support::{expect_error, expect_ok};

#[tokio::test]
async fn the_catalog_lists_every_type_with_a_schema_its_sample_satisfies() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &[Scope::WebhooksRead]).await;
    let response = app
        .get("/api/v1/webhooks/events")
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    let cache = response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(cache.contains("max-age=300"), "{cache}");
    let catalog = expect_ok(response).await;
    let items = catalog["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|i| i["event_type"].as_str().unwrap())
        .collect();
    for expected in [
        "listing.created",
        "listing.status_changed",
        "listing.cancelled",
        "listing.section_updated",
        "invoice.paid",
        "scheduling.appointment.created",
        "media.upload.completed",
        "webhook.test_fire",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for item in items {
        let schema = &item["data_schema"];
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        let validator = jsonschema::draft202012::new(schema)
            .unwrap_or_else(|e| panic!("{}: schema does not compile: {e}", item["event_type"]));
        assert!(
            validator.is_valid(&item["sample"]),
            "{}: its sample does not satisfy its schema",
            item["event_type"]
        );
        let status = if item["active"] == true {
            "available"
        } else {
            "planned"
        };
        assert_eq!(item["status"], status, "{item}");
        for field in ["category", "description", "emitted_by"] {
            assert!(
                item[field].as_str().is_some_and(|s| !s.is_empty()),
                "{item}"
            );
        }
    }
    let aliases = |name: &str| -> Vec<Value> {
        items.iter().find(|i| i["event_type"] == name).unwrap()["aliases"]
            .as_array()
            .unwrap()
            .clone()
    };
    assert!(aliases("listing.section_updated").contains(&"listing.section_modified".into()));
    assert!(aliases("invoice.paid").contains(&"invoice.payment_made".into()));
    assert!(aliases("scheduling.appointment.created").contains(&"appointment.scheduled".into()));
}

#[tokio::test]
async fn the_catalog_needs_webhooks_read() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &[Scope::ListingsRead]).await;
    let response = app
        .get("/api/v1/webhooks/events")
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
}

async fn read_catalog(app: &TestApp, key: &str) -> reqwest::Response {
    app.get("/api/v1/webhooks/events")
        .header("X-API-Key", key)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_catalog_allows_60_reads_a_minute_per_agency() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &[Scope::WebhooksRead]).await;
    let started = std::time::Instant::now();
    for n in 1..=60 {
        let response = read_catalog(&app, &key).await;
        assert_eq!(response.status(), StatusCode::OK, "read {n}");
    }
    // The budget refills one read a second: a slow burst may earn a few more.
    let mut extra = 0;
    let limited = loop {
        let response = read_catalog(&app, &key).await;
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            break response;
        }
        assert_eq!(response.status(), StatusCode::OK);
        extra += 1;
        let refilled = started.elapsed().as_secs() + 1;
        assert!(
            extra <= refilled,
            "{extra} reads over 60 in {:?}",
            started.elapsed()
        );
    };
    let header = |name: &str| {
        limited
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{name} header"))
            .to_owned()
    };
    let retry_after: u64 = header("retry-after").parse().unwrap();
    assert!(
        (1..=60).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    assert_eq!(header("x-rate-limit-limit"), "60");
    assert_eq!(header("x-rate-limit-remaining"), "0");
    let body = expect_error(
        limited,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit.exceeded",
    )
    .await;
    assert_eq!(body["error"]["retry_after_seconds"], retry_after);

    // The budget is the agency's: its other keys share it, other agencies do not.
    let second = app.key(&agency, &[Scope::WebhooksRead]).await;
    let mut shared_ok = 0;
    for _ in 0..5 {
        if read_catalog(&app, &second).await.status() == StatusCode::OK {
            shared_ok += 1;
        }
    }
    let refilled = started.elapsed().as_secs() + 1;
    assert!(
        shared_ok <= refilled,
        "{shared_ok} of 5 reads passed with a spent agency budget"
    );
    let other = app.agency().await;
    let other_key = app.key(&other, &[Scope::WebhooksRead]).await;
    assert_eq!(
        read_catalog(&app, &other_key).await.status(),
        StatusCode::OK
    );
}
