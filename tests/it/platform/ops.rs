//! The ops listener: the operator credential, the dashboard, dead jobs retried
//! and discarded, queues paused and resumed, the console's routes acting by
//! filter. None of it is on the public listener. Its metrics and probes:
//! `ops_metrics`; the console's pages in Chromium: `ops_console`.

use std::time::Duration;

use platform::PushOptions;
use platform::admin::QueueAdmin;
use platform::kinds::Probe;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::Environment;
use storage::api_keys::{KeyFormat, Scope};
use storage::people::users::{NewUser, Role};
use tests::deployment::eventually;
use tests::{Backend, TestApp};

use super::PATIENCE;
use crate::support::expect_error;

pub(super) const USER: &str = "ops";
pub(super) const PASSWORD: &str = "correct-horse-battery";

pub(super) async fn ops_app() -> TestApp {
    TestApp::builder(Backend::Sqlite)
        .with_workers()
        .with_ops(USER, PASSWORD)
        .spawn()
        .await
}

pub(super) fn ops(app: &TestApp, path: &str) -> String {
    format!("{}{path}", app.ops_url.as_deref().expect("ops listener"))
}

pub(super) async fn ops_get(app: &TestApp, path: &str) -> reqwest::Response {
    app.client
        .get(ops(app, path))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap()
}

/// An ops page's HTML.
async fn ops_page(app: &TestApp, path: &str) -> String {
    ops_get(app, path).await.text().await.unwrap()
}

/// An ops JSON route's answer.
async fn ops_json(app: &TestApp, path: &str) -> Value {
    ops_get(app, path).await.json().await.unwrap()
}

pub(super) async fn ops_post(app: &TestApp, path: &str) -> reqwest::Response {
    app.client
        .post(ops(app, path))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap()
}

/// An agency id no agency has.
pub(super) const NOBODY: &str = "agc_00000000000000000000000000";

/// Pushes probes that fail every attempt (their agency does not exist) and
/// waits until all are dead; returns their job ids.
pub(super) async fn dead_probes(app: &TestApp, count: usize) -> Vec<String> {
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

#[tokio::test]
async fn an_agency_with_many_done_jobs_is_counted_to_a_cap_and_paged_on() {
    let app = ops_app().await;
    let platform::queue::QueueBackend::Sqlite(pool) = app.state.platform().queue.backend() else {
        unreachable!("the embedded queue")
    };
    // 1,030 done probes of one agency, written as a worker leaves them.
    let agency = storage::ids::AgencyId::generate();
    let jobs = 1_030;
    sqlx::query(
        r#"with recursive n(i) as (select 1 union all select i + 1 from n where i < $1)
           insert into Jobs (job, id, job_type, status, attempts, max_attempts, run_at, done_at)
           select cast('{"agency_id":"' || $2 || '","n":' || i || '}' as blob),
                  printf('01JDONE%019d', i), $3, 'Done', 1, 3, i, i from n"#,
    )
    .bind(jobs)
    .bind(agency.as_str())
    .bind(<Probe as platform::kinds::Job>::KIND)
    .execute(pool)
    .await
    .unwrap();
    let filter = format!("state=done&agency={agency}");
    // The first page: "more than" the cap, and a next page.
    let page = ops_get(&app, &format!("/ops/?{filter}")).await;
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("More than <strong>1000</strong> done jobs match; showing 1–25"),
        "{page}"
    );
    assert!(page.contains(r#"id="next-page""#), "{page}");
    assert!(
        page.contains("01JDONE0000000000000000001"),
        "pushed first, shown first"
    );
    // The last page reaches the end: counted exactly, no next page.
    let last = ops_page(&app, &format!("/ops/?{filter}&page=42")).await;
    assert!(
        last.contains("<strong>1030</strong> done jobs match; showing 1026–1030"),
        "{last}"
    );
    assert!(!last.contains(r#"id="next-page""#), "{last}");
    // The JSON route says the same.
    let found: Value = ops_json(&app, &format!("/ops/api/jobs?{filter}&limit=50")).await;
    assert_eq!(
        (found["count"].as_u64(), found["count_capped"].as_bool()),
        (Some(1000), Some(true)),
        "{found}"
    );
    assert_eq!(found["items"].as_array().map(Vec::len), Some(50));
    let found: Value = ops_json(&app, &format!("/ops/api/jobs?{filter}&limit=1000")).await;
    assert_eq!(
        (found["count"].as_u64(), found["count_capped"].as_bool()),
        (Some(1000), Some(true)),
        "{found}"
    );
}

#[tokio::test]
async fn dead_jobs_found_by_their_error_are_paged_from_the_index_and_confirmed_exactly() {
    let app = ops_app().await;
    let platform::queue::QueueBackend::Sqlite(pool) = app.state.platform().queue.backend() else {
        unreachable!("the embedded queue")
    };
    // 1,030 probes that died of the same error, moved there as a worker
    // moves them (the dead jobs' index is kept by the move), and one that
    // died of another; due in 2100, so no worker takes them first.
    let jobs = 1_030;
    sqlx::query(
        r#"with recursive n(i) as (select 0 union all select i + 1 from n where i < $1)
           insert into Jobs (job, id, job_type, status, attempts, max_attempts, run_at)
           select cast('{"n":' || i || '}' as blob), printf('01JDEAD%019d', i), $2,
                  'Pending', 0, 3, 4102444800 + i from n"#,
    )
    .bind(jobs)
    .bind(<Probe as platform::kinds::Job>::KIND)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        r#"update Jobs set status = 'Failed', attempts = 3,
               last_result = case when id = '01JDEAD0000000000000000000'
                   then '{"Err":"the listing is gone"}'
                   else '{"Err":"receiver answered 410 Gone"}' end
           where id like '01JDEAD%'"#,
    )
    .execute(pool)
    .await
    .unwrap();
    let filter = "state=dead&search=answered%20410";
    let page = ops_page(&app, &format!("/ops/?{filter}")).await;
    assert!(
        page.contains("More than <strong>1000</strong> dead jobs match; showing 1–25"),
        "{page}"
    );
    // The bulk button names no count it does not know...
    assert!(
        page.contains(r#"id="bulk-retry">Retry all</button>"#),
        "{page}"
    );
    assert!(
        page.contains("01JDEAD0000000000000000001"),
        "pushed first, shown first"
    );
    assert!(
        !page.contains("01JDEAD0000000000000000000"),
        "another error"
    );
    // ... and its confirmation counts every match.
    let confirm = ops_page(&app, &format!("/ops/jobs/confirm?action=retry&{filter}")).await;
    assert!(
        confirm.contains(r#"<strong id="confirm-count">1030</strong>"#),
        "{confirm}"
    );
    // Retried, they leave the dead jobs' index.
    let retried: Value = ops_send(
        &app,
        reqwest::Method::POST,
        "/ops/api/jobs/bulk",
        Some(json!({"action": "retry", "state": "dead", "search": "answered 410"})),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(retried["count"], 1_030, "{retried}");
    let found: Value = ops_json(&app, &format!("/ops/api/jobs?{filter}")).await;
    assert_eq!(
        (found["count"].as_u64(), found["count_capped"].as_bool()),
        (Some(0), Some(false)),
        "{found}"
    );
}
