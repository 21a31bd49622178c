//! The ops listener's Prometheus metrics (requests, jobs, queue depth and the
//! oldest job's age), the health probes that answer without a credential,
//! and the sample Grafana dashboard's queries.

use platform::PushOptions;
use platform::kinds::Probe;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::{Environment, Tenant};
use tests::deployment::eventually;

use super::PATIENCE;
use super::ops::{dead_probes, ops, ops_app, ops_get};
use crate::support::expect_error;

#[tokio::test]
async fn metrics_show_requests_jobs_and_queue_depth() {
    let app = ops_app().await;
    let agency = app.agency().await;
    let key = app.key(&agency, &[Scope::ListingsRead]).await;
    let read = app
        .get("/api/v1/listings")
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let missing = app
        .get("/api/v1/listings/999999999")
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    let metrics_operation = storage::ids::OperationId::generate();
    let probe = Probe {
        operation_id: metrics_operation.clone(),
        agency_id: agency.id.clone(),
        is_sandbox: false,
        steps: 1,
        step_ms: 1,
        fail: false,
    };
    app.state
        .platform()
        .queue
        .push(probe, PushOptions::default())
        .await
        .unwrap();
    super::wait_for_status(&app.store, &tenant, metrics_operation.as_str(), "completed").await;

    let text = eventually(PATIENCE, "job metrics recorded", || async {
        let text = ops_get(&app, "/metrics").await.text().await.unwrap();
        text.contains("jobs_total{").then_some(text)
    })
    .await;
    let has = |name: &str, labels: &[&str]| {
        text.lines()
            .any(|line| line.starts_with(name) && labels.iter().all(|label| line.contains(label)))
    };
    assert!(
        has(
            "http_requests_total{",
            &[
                "route=\"/api/v1/listings\"",
                "method=\"GET\"",
                "status=\"200\""
            ]
        ),
        "{text}"
    );
    // Latency by route template and status, so a slow error path shows apart.
    assert!(
        has(
            "http_request_duration_seconds_bucket{",
            &[
                "route=\"/api/v1/listings\"",
                "method=\"GET\"",
                "status=\"200\""
            ]
        ),
        "{text}"
    );
    assert!(
        has(
            "http_request_duration_seconds_bucket{",
            &[
                "route=\"/api/v1/listings/{",
                "method=\"GET\"",
                "status=\"404\""
            ]
        ),
        "{text}"
    );
    assert!(
        has("jobs_total{", &["kind=\"probe\"", "outcome=\"succeeded\""]),
        "{text}"
    );
    assert!(
        has(
            "job_duration_seconds_bucket{",
            &["kind=\"probe\"", "outcome=\"succeeded\""]
        ),
        "{text}"
    );
    assert!(
        has("queue_finished_jobs{", &["queue=\"probe\""]),
        "finished jobs are counted apart: {text}"
    );
    assert!(
        !has("queue_depth{", &["state=\"done\""]),
        "finished jobs are not depth: {text}"
    );
    assert!(
        has(
            "queue_depth{",
            &["queue=\"outbox_dispatch\"", "state=\"pending\""]
        ),
        "{text}"
    );
    // Hygiene: every family is described, and the build is named.
    let described: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# HELP "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    for line in text.lines().filter_map(|line| line.strip_prefix("# TYPE ")) {
        let family = line.split_whitespace().next().unwrap();
        assert!(
            described.contains(&family),
            "{family} has no # HELP: {text}"
        );
    }
    for (family, _) in platform::telemetry::METRIC_FAMILIES {
        if text.contains(&format!("{family}{{")) || text.contains(&format!("{family} ")) {
            assert!(described.contains(&family), "{family}");
        }
    }
    assert!(has("listing_api_build_info{", &["version=\""]), "{text}");
    for state in ["pending", "scheduled", "running", "dead"] {
        assert!(
            has(
                "queue_oldest_job_age_seconds{",
                &["queue=\"probe\"", &format!("state=\"{state}\"")]
            ),
            "{state}: {text}"
        );
    }
}

/// The oldest dead job's age counts from its push (so it is no more than
/// the time since the test pushed it); an empty state reads 0.
#[tokio::test]
async fn the_oldest_job_age_counts_from_the_push() {
    let app = ops_app().await;
    let before_push = std::time::Instant::now();
    let ids = dead_probes(&app, 2).await;
    let text = ops_get(&app, "/metrics").await.text().await.unwrap();
    let age = |state: &str| -> f64 {
        text.lines()
            .find(|line| {
                line.starts_with("queue_oldest_job_age_seconds{")
                    && line.contains("queue=\"probe\"")
                    && line.contains(&format!("state=\"{state}\""))
            })
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {state} age: {text}"))
    };
    let dead = age("dead");
    assert!(dead > 0.0, "{text}");
    // The push's millisecond is in the id; allow that millisecond's rounding.
    assert!(
        dead <= before_push.elapsed().as_secs_f64() + 0.002,
        "{dead} s, pushed {:?} ago",
        before_push.elapsed()
    );
    assert_eq!(age("pending"), 0.0, "{text}");
    assert_eq!(ids.len(), 2);
}

#[tokio::test]
async fn health_probes_answer_without_a_credential() {
    let app = ops_app().await;
    let health = app.client.get(ops(&app, "/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );
    let ready = app.client.get(ops(&app, "/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        json!({"status": "ready"})
    );

    // The workers binary's status listener answers the same probes.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let listener = platform::telemetry::bind_status("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let status = format!("http://{}", listener.local_addr().unwrap());
    let router = platform::telemetry::status_router(
        app.state.platform().clone(),
        platform::telemetry::install_metrics(),
    );
    let serving = tokio::spawn(platform::telemetry::serve_status(listener, router, stopped));
    let ready = app
        .client
        .get(format!("{status}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::OK);

    // A database that stops answering makes the process unready, not dead.
    app.store.db().close().await;
    let unready = app
        .client
        .get(format!("{status}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(unready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = unready.json().await.unwrap();
    assert_eq!(body["error"]["code"], "server.not_ready", "{body}");
    assert_eq!(body["error"]["details"]["component"], "database", "{body}");
    stop.send(true).unwrap();
    serving.await.unwrap().unwrap();

    let unready = app.client.get(ops(&app, "/readyz")).send().await.unwrap();
    let body = expect_error(unready, StatusCode::SERVICE_UNAVAILABLE, "server.not_ready").await;
    assert_eq!(body["error"]["details"]["component"], "database", "{body}");
    let still_alive = app.client.get(ops(&app, "/healthz")).send().await.unwrap();
    assert_eq!(still_alive.status(), StatusCode::OK);
}

/// The sample Grafana dashboard (docs/grafana-dashboard.json) queries only
/// metric families the platform serves, and every family it names is
/// described.
#[test]
fn the_sample_dashboard_uses_only_served_metrics() {
    let path = tests::services::workspace_root().join("docs/grafana-dashboard.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let families: Vec<&str> = platform::telemetry::METRIC_FAMILIES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    let mut used = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            // Grouping labels (`by (…)`) and functions (`name(`) are not metrics.
            let mut metrics_only = String::new();
            let mut rest = expr;
            while let Some(at) = rest.find("by (") {
                metrics_only.push_str(&rest[..at]);
                rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
            }
            metrics_only.push_str(rest);
            let mut words = Vec::new();
            let chars: Vec<char> = metrics_only.chars().collect();
            let mut index = 0;
            while index < chars.len() {
                if chars[index].is_ascii_alphabetic() || chars[index] == '_' {
                    let start = index;
                    while index < chars.len()
                        && (chars[index].is_ascii_alphanumeric() || chars[index] == '_')
                    {
                        index += 1;
                    }
                    let word: String = chars[start..index].iter().collect();
                    let next = chars[index..].iter().find(|c| !c.is_whitespace());
                    if next != Some(&'(') {
                        words.push(word);
                    }
                } else {
                    index += 1;
                }
            }
            for word in words.iter().filter(|word| word.contains('_')) {
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| word.strip_suffix(suffix))
                    .unwrap_or(word);
                assert!(
                    families.contains(&family),
                    "{word} in {expr:?} is not a served metric"
                );
                used.insert(family.to_owned());
            }
        }
    }
    assert!(
        used.len() >= 10,
        "the dashboard shows most families: {used:?}"
    );
}
