//! The ops listener: the operator credential, the dashboard, dead jobs retried
//! and discarded, queues paused and resumed, Prometheus metrics. None of it
//! is on the public listener. The console's pages in Chromium: `ops_console`.

use std::time::Duration;

use platform::PushOptions;
use platform::admin::QueueAdmin;
use platform::kinds::Probe;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::{KeyFormat, Scope};
use storage::users::{NewUser, Role};
use storage::{Environment, Tenant};
use tests::deployment::eventually;
use tests::{Backend, TestApp};

use super::PATIENCE;
use crate::support::expect_error;

const USER: &str = "ops";
const PASSWORD: &str = "correct-horse-battery";

async fn ops_app() -> TestApp {
    TestApp::builder(Backend::Sqlite)
        .with_workers()
        .with_ops(USER, PASSWORD)
        .spawn()
        .await
}

fn ops(app: &TestApp, path: &str) -> String {
    format!("{}{path}", app.ops_url.as_deref().expect("ops listener"))
}

async fn ops_get(app: &TestApp, path: &str) -> reqwest::Response {
    app.client
        .get(ops(app, path))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap()
}

async fn ops_post(app: &TestApp, path: &str) -> reqwest::Response {
    app.client
        .post(ops(app, path))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap()
}

/// An agency id no agency has.
const NOBODY: &str = "agc_00000000000000000000000000";

/// Pushes probes that fail every attempt (their agency does not exist) and
/// waits until all are dead; returns their job ids.
async fn dead_probes(app: &TestApp, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let probe = Probe {
            operation_id: storage::ids::OperationId::generate(),
            agency_id: storage::ids::AgencyId::parse(NOBODY).unwrap(),
            is_sandbox: false,
            steps: 1,
            step_ms: 1,
            fail: false,
        };
        ids.push(
            app.state
                .platform()
                .queue
                .push(probe, PushOptions::default())
                .await
                .unwrap(),
        );
    }
    eventually(PATIENCE, "probes dead", || async {
        let dead: Vec<Value> = ops_get(app, "/ops/api/jobs/dead")
            .await
            .json()
            .await
            .unwrap();
        let dead_ids: Vec<&str> = dead.iter().filter_map(|j| j["id"].as_str()).collect();
        ids.iter()
            .all(|id| dead_ids.contains(&id.as_str()))
            .then_some(())
    })
    .await;
    ids
}

#[tokio::test]
async fn the_ops_listener_needs_the_operator_account_or_a_platform_key() {
    let app = ops_app().await;
    let anonymous = app
        .client
        .get(ops(&app, "/ops/api/queues"))
        .send()
        .await
        .unwrap();
    assert!(
        anonymous.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    expect_error(anonymous, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    // Every page, board call, action and the metrics ask for the credential;
    // only the probes answer anyone.
    let guarded = [
        ("GET", "/ops/"),
        ("GET", "/ops/api/queues"),
        ("GET", "/ops/api/jobs/dead"),
        ("POST", "/ops/api/queues/probe/pause"),
        ("POST", "/ops/api/queues/probe/resume"),
        ("POST", "/ops/api/jobs/1/retry"),
        ("POST", "/ops/api/jobs/1/discard"),
        ("GET", "/metrics"),
        ("GET", "/"),
        ("GET", "/api/v1/queues"),
    ];
    for (method, path) in guarded {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = app
            .client
            .request(method.clone(), ops(&app, path))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
    }
    for probe in ["/healthz", "/readyz"] {
        let response = app.client.get(ops(&app, probe)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{probe}");
    }
    let wrong = app
        .client
        .get(ops(&app, "/ops/api/queues"))
        .basic_auth(USER, Some("nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        ops_get(&app, "/ops/api/queues").await.status(),
        StatusCode::OK
    );

    let agency = app.agency().await;
    let agency_key = app.key(&agency, &Scope::ALL).await;
    let refused = app
        .client
        .get(ops(&app, "/ops/api/queues"))
        .bearer_auth(&agency_key)
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::UNAUTHORIZED,
        "an agency's key is not an operator's"
    );
    let admin = app
        .store
        .users()
        .create(
            &agency.id,
            NewUser {
                role: Role::Admin,
                email: Some("root@platform.example".into()),
                name: None,
                manager_id: None,
            },
        )
        .await
        .unwrap();
    let platform_agency = tests::TestAgency {
        id: agency.id.clone(),
        owner_id: admin.id,
    };
    let platform_key = app
        .key_with(&platform_agency, &[], Environment::Live, KeyFormat::Ma)
        .await;
    let allowed = app
        .client
        .get(ops(&app, "/ops/api/queues"))
        .header("X-API-Key", &platform_key)
        .send()
        .await
        .unwrap();
    assert_eq!(
        allowed.status(),
        StatusCode::OK,
        "a platform administrator's key is"
    );

    // The dashboard itself: apalis-board's UI at the root, its API at /api/v1.
    let board = ops_get(&app, "/").await;
    assert_eq!(board.status(), StatusCode::OK);
    assert!(board.text().await.unwrap().to_lowercase().contains("<html"));
    let board_queues = ops_get(&app, "/api/v1/queues").await;
    assert_eq!(board_queues.status(), StatusCode::OK);
    let page = ops_get(&app, "/ops/").await;
    assert!(page.text().await.unwrap().contains("Find jobs"));

    // The public listener shows none of it.
    for path in ["/ops/", "/ops/api/queues", "/metrics", "/api/v1/queues"] {
        let response = app.get(path).send().await.unwrap();
        expect_error(response, StatusCode::NOT_FOUND, "endpoint_not_in_scope").await;
    }
}

#[tokio::test]
async fn dead_jobs_are_retried_or_discarded_and_queues_paused() {
    let app = ops_app().await;
    let ids = dead_probes(&app, 2).await;
    let dead: Vec<Value> = ops_get(&app, "/ops/api/jobs/dead")
        .await
        .json()
        .await
        .unwrap();
    let first = dead.iter().find(|j| j["id"] == ids[0].as_str()).unwrap();
    assert_eq!(first["queue"], "probe");
    assert_eq!(first["attempts"], 3);
    assert_eq!(first["last_error"], "probe for an unknown agency");
    assert_eq!(first["payload"]["agency_id"], NOBODY);

    assert_eq!(
        ops_post(&app, "/ops/api/queues/probe/pause").await.status(),
        StatusCode::OK
    );
    // Worker processes follow the paused set within a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let queues: Vec<Value> = ops_get(&app, "/ops/api/queues").await.json().await.unwrap();
    let probe = queues.iter().find(|q| q["queue"] == "probe").unwrap();
    assert_eq!(probe["paused"], true);
    assert_eq!(probe["dead"], 2);

    let retried = ops_post(&app, &format!("/ops/api/jobs/{}/retry", ids[0])).await;
    assert_eq!(retried.status(), StatusCode::OK);
    let discarded = ops_post(&app, &format!("/ops/api/jobs/{}/discard", ids[1])).await;
    assert_eq!(discarded.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let queues: Vec<Value> = ops_get(&app, "/ops/api/queues").await.json().await.unwrap();
    let probe = queues.iter().find(|q| q["queue"] == "probe").unwrap();
    assert_eq!(probe["dead"], 0);
    // It waits while the queue is paused: still queued, or claimed by a
    // paused worker that holds it without running it until the resume.
    let waiting = probe["pending"].as_u64().unwrap() + probe["running"].as_u64().unwrap();
    assert_eq!(
        waiting, 1,
        "the retried job waits while the queue is paused: {probe}"
    );
    assert_eq!(probe["done"], 0, "{probe}");

    for (path, code) in [
        (format!("/ops/api/jobs/{}/retry", ids[1]), "job_not_found"),
        (
            "/ops/api/jobs/01JD3Q8W5T7X2Z9Y4V6R1N0M8K/discard".to_owned(),
            "job_not_found",
        ),
    ] {
        expect_error(ops_post(&app, &path).await, StatusCode::NOT_FOUND, code).await;
    }
    expect_error(
        ops_post(&app, "/ops/api/queues/nope/pause").await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;

    // Resumed, the retried job runs again (and, its agency still missing, dies again).
    assert_eq!(
        ops_post(&app, "/ops/api/queues/probe/resume")
            .await
            .status(),
        StatusCode::OK
    );
    eventually(PATIENCE, "the retried job ran again", || async {
        let dead: Vec<Value> = ops_get(&app, "/ops/api/jobs/dead")
            .await
            .json()
            .await
            .unwrap();
        dead.iter()
            .any(|j| j["id"] == ids[0].as_str())
            .then_some(())
    })
    .await;
}

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

/// apalis-board is read-only on the ops listener: it pushes no job (the
/// console does, audited), and its unfed Logs page is hidden.
#[tokio::test]
async fn the_board_reads_and_never_writes() {
    let app = ops_app().await;
    let before = QueueAdmin::new(app.state.platform().queue.clone())
        .depths()
        .await
        .unwrap();
    let push = app
        .client
        .put(ops(&app, "/api/v1/queues/probe/tasks"))
        .basic_auth(USER, Some(PASSWORD))
        .json(&json!({"operation_id": "op_x", "agency_id": "agc_x", "is_sandbox": false, "steps": 1, "step_ms": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(push.headers()["allow"], "GET, HEAD");
    expect_error(
        push,
        StatusCode::METHOD_NOT_ALLOWED,
        "request.method_not_allowed",
    )
    .await;
    let after = QueueAdmin::new(app.state.platform().queue.clone())
        .depths()
        .await
        .unwrap();
    assert_eq!(before, after, "nothing was pushed");
    let queues = ops_get(&app, "/api/v1/queues").await;
    assert_eq!(queues.status(), StatusCode::OK, "reads still work");
    let page = ops_get(&app, "/").await.text().await.unwrap();
    assert!(
        page.contains(r#"a[href="/logs"]"#),
        "the Logs link is hidden: {page}"
    );
    let logs = app
        .client
        .get(ops(&app, "/logs"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert!(
        logs.url().path() == "/" || logs.status().is_redirection(),
        "{}",
        logs.url()
    );
}

async fn ops_send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = app
        .client
        .request(method, ops(app, path))
        .basic_auth(USER, Some(PASSWORD));
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn the_console_routes_act_by_filter_and_refuse_what_makes_no_sense() {
    let app = ops_app().await;
    let ids = dead_probes(&app, 2).await;
    use reqwest::Method;

    // A bulk retry by filter takes both dead probes, and is on record.
    let retried = ops_send(
        &app,
        Method::POST,
        "/ops/api/jobs/bulk",
        Some(json!({"action": "retry", "state": "dead", "queue": "probe"})),
    )
    .await;
    assert_eq!(retried.status(), StatusCode::OK);
    let retried: Value = retried.json().await.unwrap();
    assert_eq!(retried["count"], 2, "{retried}");
    let audit: Value = ops_get(&app, "/ops/api/audit").await.json().await.unwrap();
    assert_eq!(audit["items"][0]["action"], "retry", "{audit}");
    assert_eq!(audit["items"][0]["count"], 2, "{audit}");
    assert_eq!(audit["items"][0]["actor"], "ops:ops", "{audit}");
    assert_eq!(audit["items"][0]["target"]["state"], "dead", "{audit}");
    eventually(PATIENCE, "dead again", || async {
        let dead: Value = ops_get(&app, "/ops/api/jobs?state=dead&queue=probe")
            .await
            .json()
            .await
            .unwrap();
        (dead["count"] == 2).then_some(())
    })
    .await;
    let job: Value = ops_get(&app, &format!("/ops/api/jobs/{}", ids[0]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(job["state"], "dead", "{job}");

    for (method, path, body, status, code) in [
        (
            Method::GET,
            "/ops/api/jobs",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::GET,
            "/ops/api/jobs?state=sleeping",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::GET,
            "/ops/api/jobs?state=dead&limit=0",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::GET,
            "/ops/api/jobs?state=dead&queue=nope",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::GET,
            "/ops/api/jobs/01M8NOSUCHJOB0000000000000",
            None,
            StatusCode::NOT_FOUND,
            "job_not_found",
        ),
        (
            Method::POST,
            "/ops/api/jobs/01M8NOSUCHJOB0000000000000/explode",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::POST,
            "/ops/api/jobs/01M8NOSUCHJOB0000000000000/run-now",
            None,
            StatusCode::NOT_FOUND,
            "job_not_found",
        ),
        (
            Method::POST,
            "/ops/api/jobs/bulk",
            Some(json!({"action": "retry", "state": "queued"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::POST,
            "/ops/api/jobs/bulk",
            Some(json!({"state": "dead"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::POST,
            "/ops/api/jobs/bulk",
            Some(json!({"action": "cancel"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::POST,
            "/ops/api/workers/wrk_01M8NOSUCHWORKER000000000/quiet",
            None,
            StatusCode::NOT_FOUND,
            "worker_not_found",
        ),
        (
            Method::POST,
            "/ops/api/workers/wrk_01M8NOSUCHWORKER000000000/explode",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::POST,
            "/ops/api/queues/probe/explode",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::GET,
            "/ops/api/history?range=year",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
        (
            Method::GET,
            "/ops/api/history?queue=nope",
            None,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        ),
    ] {
        let response = ops_send(&app, method.clone(), path, body).await;
        expect_error(response, status, code).await;
    }
    // Runs reach the history once their worker's writer has written its
    // batch (a fraction of a second after they end).
    let history = eventually(PATIENCE, "the runs in the history", || async {
        let history: Value = ops_get(&app, "/ops/api/history?range=day&queue=probe")
            .await
            .json()
            .await
            .unwrap();
        (history["totals"]["failed"].as_u64().unwrap_or(0) >= 4).then_some(history)
    })
    .await;
    assert_eq!(history["buckets"].as_array().unwrap().len(), 1_440);
    assert_eq!(history["range"], "day");
    assert_eq!(
        history["agencies"][0]["key"], NOBODY,
        "{}",
        history["agencies"]
    );

    // The pages: a bad filter says so and shows dead jobs; an unknown job is a
    // 404 page saying where to look; a bad bulk action goes back with the problem.
    let page = ops_get(&app, "/ops/?state=sleeping").await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("id=\"filter-error\""));
    let missing = ops_get(&app, "/ops/jobs/01M8NOSUCHJOB0000000000000").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(missing.text().await.unwrap().contains("Jobs page"));
    let no_redirects = tests::app::base_client()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let bogus = no_redirects
        .post(ops(&app, "/ops/jobs/bulk"))
        .basic_auth(USER, Some(PASSWORD))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("action=explode&state=dead")
        .send()
        .await
        .unwrap();
    assert_eq!(bogus.status(), StatusCode::SEE_OTHER);
    assert!(
        bogus.headers()["location"]
            .to_str()
            .unwrap()
            .contains("problem=")
    );
    let wrong_state = no_redirects
        .post(ops(&app, "/ops/jobs/bulk"))
        .basic_auth(USER, Some(PASSWORD))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("action=retry&state=queued")
        .send()
        .await
        .unwrap();
    assert!(
        wrong_state.headers()["location"]
            .to_str()
            .unwrap()
            .contains("problem=")
    );
    let cross_site = no_redirects
        .post(ops(&app, "/ops/jobs/bulk"))
        .basic_auth(USER, Some(PASSWORD))
        .header("Sec-Fetch-Site", "cross-site")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("action=discard&state=dead")
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    let still: Value = ops_get(&app, "/ops/api/jobs?state=dead&queue=probe")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(still["count"], 2, "nothing was discarded from another site");
    let back = no_redirects
        .post(ops(&app, "/ops/queues/probe/pause"))
        .basic_auth(USER, Some(PASSWORD))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("back=https%3A%2F%2Fevil.example%2F")
        .send()
        .await
        .unwrap();
    let location = back.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/ops/?notice="), "{location}");
    // A line break in a job id never reaches a header.
    let broken = no_redirects
        .post(ops(&app, "/ops/jobs/01J%0D%0ASet-Cookie:%20x/retry"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(broken.status(), StatusCode::SEE_OTHER);
    assert!(broken.headers().get("set-cookie").is_none());
    let location = broken.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        location.starts_with("/ops/jobs/01J%0D%0ASet-Cookie"),
        "{location}"
    );
}
