//! The job console in headless Chromium, on both profiles: a search by
//! listing number finds the listing's jobs, and apart from them its runs no
//! queue holds; a bulk retry by filter moves all thirty dead probes, not the
//! first page's twenty-five, after a confirmation
//! that says how many, and lands in the audit log; a job's page shows every
//! attempt; the history charts draw a burst of jobs; auto-refresh keeps the
//! filter; quiet stops a worker process taking jobs; a delivery profile's
//! sweep shows how far it got. Each page is looked at (screenshots at 1280
//! and 375 px, WCAG 2.1 AA by axe-core).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use platform::PushOptions;
use platform::kinds::Probe;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::ids::{AgencyId, OperationId};
use tests::browser::Browser;
use tests::deployment::eventually;
use tests::{Backend, TestAgency, TestApp, idempotency_key};

use super::PATIENCE;

const USER: &str = "ops";
const PASSWORD: &str = "correct-horse-battery";

fn ops(app: &TestApp, path: &str) -> String {
    format!("{}{path}", app.ops_url.as_deref().expect("ops listener"))
}

async fn ops_json(app: &TestApp, path: &str) -> Value {
    let response = app
        .client
        .get(ops(app, path))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.json().await.unwrap()
}

async fn count(app: &TestApp, query: &str) -> u64 {
    ops_json(app, &format!("/ops/api/jobs?{query}&limit=1")).await["count"]
        .as_u64()
        .unwrap()
}

async fn push_probes(app: &TestApp, agency: &str, count: usize, fail: bool) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let probe = Probe {
            operation_id: OperationId::generate(),
            agency_id: AgencyId::parse(agency).unwrap(),
            is_sandbox: false,
            steps: 1,
            step_ms: 1,
            fail,
        };
        let id = app
            .state
            .platform()
            .queue
            .push(probe, PushOptions::default())
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

/// Clicks the element matching `css`.
async fn click(browser: &Browser, css: &str) {
    let element = browser.find(css, PATIENCE).await;
    browser.click(&element).await;
}

/// Opens `url` until the element matching `css` is on it (what the page
/// shows follows the platform within moments).
async fn open_until(browser: &Browser, url: &str, css: &str) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        browser.open(url).await;
        let found = browser
            .run(
                "return document.querySelector(arguments[0]) !== null;",
                json!([css]),
            )
            .await;
        if found == json!(true) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url} never showed {css}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Creates a listing of `agency` with `key`; returns its number.
async fn create_listing(app: &TestApp, agency: &TestAgency, key: &str) -> String {
    let created = app
        .client
        .post(app.url("/api/v1/listings"))
        .header("X-API-Key", key)
        .header("X-Idempotency-Key", idempotency_key())
        .json(&json!({
            "address": "7 Quay Lane, Falmouth",
            "owner_user_id": agency.owner_id.as_str(),
            "agent_one_id": agency.owner_id.as_str(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let listing: Value = created.json().await.unwrap();
    listing["data"]["listing_number"]
        .as_str()
        .or_else(|| listing["listing_number"].as_str())
        .unwrap_or_else(|| panic!("a listing number: {listing}"))
        .to_owned()
}

/// The queue of the listing's job the console finds.
const DISPATCH: &str = "outbox_dispatch";

async fn the_job_console_works_in_the_browser(app: TestApp) {
    let agency = app.agency().await;
    let agency_id = agency.id.to_string();

    // A listing: its events are dispatched by an outbox_dispatch job. (A
    // process whose workers run fans its own events out without a job, so
    // the queue starts paused: the fast path pushes the job instead.)
    let writer = app
        .key(&agency, &[Scope::ListingsWrite, Scope::ListingsRead])
        .await;
    let number = create_listing(&app, &agency, &writer).await;

    app.store
        .schedules()
        .set_paused(DISPATCH, false)
        .await
        .expect("resume dispatch");

    // Thirty probes that fail, and a burst of ten that succeed.
    let dead_ids = push_probes(&app, &agency_id, 30, true).await;
    push_probes(&app, &agency_id, 10, false).await;
    eventually(
        PATIENCE,
        "thirty dead probes and the dispatch done",
        || async {
            let dead = count(&app, "state=dead&queue=probe").await;
            let dispatched = count(&app, &format!("state=done&search={number}")).await;
            (dead == 30 && dispatched >= 1).then_some(())
        },
    )
    .await;

    let browser = Browser::start().await;
    let credentials = STANDARD.encode(format!("{USER}:{PASSWORD}"));
    browser
        .set_header("Authorization", &format!("Basic {credentials}"))
        .await;

    // Auto-refresh off while the test clicks (it is checked below); the
    // switch is in the header, which a refresh leaves alone.
    browser.open(&ops(&app, "/ops/?state=done")).await;
    click(&browser, "#auto-refresh").await;

    // Search by listing number: the listing's dispatch job, and nothing for another number.
    browser.open(&ops(&app, "/ops/?state=done")).await;
    let search = browser.find("#search", PATIENCE).await;
    browser.type_into(&search, &number).await;
    click(&browser, "#apply-filters").await;
    eventually(PATIENCE, "the search's page", || async {
        browser.url().await.contains(&number).then_some(())
    })
    .await;
    let found = browser
        .wait_for_text("#jobs tbody", "outbox_dispatch", PATIENCE)
        .await;
    assert!(!found.contains("No done jobs match"), "{found}");
    assert!(!found.contains("probe"), "only the listing's jobs: {found}");
    browser
        .open(&ops(&app, "/ops/?state=done&search=ZZ99ZZ99"))
        .await;
    browser.find("#no-jobs", PATIENCE).await;

    // With dispatch running, a new listing's events are fanned out where
    // they were committed, with no job: the search shows that run apart.
    let in_process = create_listing(&app, &agency, &writer).await;
    open_until(
        &browser,
        &ops(&app, &format!("/ops/?state=done&search={in_process}")),
        "#runs-in-process",
    )
    .await;
    browser
        .wait_for_text("#runs-in-process tbody", "outbox_dispatch", PATIENCE)
        .await;
    browser.find("#no-jobs", PATIENCE).await;
    browser.look_at("ops-runs-in-process").await;

    // Auto-refresh keeps the filter: the page refreshes itself and the
    // search box and URL still hold the listing number.
    let filtered = ops(&app, &format!("/ops/?state=done&search={number}"));
    browser.open(&filtered).await;
    click(&browser, "#auto-refresh").await;
    browser.find("body[data-refreshed]", PATIENCE).await;
    let kept = browser
        .run("return document.getElementById('search').value;", json!([]))
        .await;
    assert_eq!(kept, json!(number));
    assert!(browser.url().await.contains(&number));
    // Off for the rest, so the page holds still while the test clicks.
    click(&browser, "#auto-refresh").await;

    // Paused, so the retried probes wait in the queue.
    browser
        .open(&ops(&app, "/ops/?state=dead&queue=probe"))
        .await;
    click(&browser, "#pause-probe").await;
    browser
        .wait_for_text("#status", "Paused probe", PATIENCE)
        .await;
    browser.find("#resume-probe", PATIENCE).await;

    // Thirty dead, twenty-five to a page; the bulk retry takes all thirty.
    browser
        .open(&ops(&app, "/ops/?state=dead&queue=probe"))
        .await;
    browser
        .wait_for_text("#match-count", "30 dead jobs match; showing 1–25", PATIENCE)
        .await;
    browser.find("#next-page", PATIENCE).await;
    browser.look_at("ops-jobs").await;
    click(&browser, "#bulk-retry").await;
    browser
        .wait_for_text("#confirm-count", "30", PATIENCE)
        .await;
    browser.look_at("ops-confirm").await;
    click(&browser, "#confirm-action").await;
    browser
        .wait_for_text("#status", "Retry: 30 jobs.", PATIENCE)
        .await;
    assert_eq!(count(&app, "state=dead&queue=probe").await, 0);
    let mut waiting = std::collections::BTreeSet::new();
    for state in ["queued", "running"] {
        let found = ops_json(
            &app,
            &format!("/ops/api/jobs?state={state}&queue=probe&limit=1000"),
        )
        .await;
        for job in found["items"].as_array().unwrap() {
            waiting.insert(job["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(
        waiting.len(),
        30,
        "every retried job is back in its queue: {waiting:?}"
    );
    let audit = ops_json(&app, "/ops/api/audit").await;
    let retry = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["action"] == "retry")
        .unwrap_or_else(|| panic!("the retry on record: {audit}"));
    assert_eq!(retry["count"], 30, "{retry}");
    assert_eq!(retry["actor"], "ops:ops", "{retry}");
    assert_eq!(retry["target"]["queue"], "probe", "{retry}");
    browser.open(&ops(&app, "/ops/audit")).await;
    browser.wait_for_text("#audit", "retry", PATIENCE).await;
    browser.look_at("ops-audit").await;

    // Resumed, they run (and fail) again: the job page shows both attempts.
    browser
        .open(&ops(&app, "/ops/?state=dead&queue=probe"))
        .await;
    click(&browser, "#resume-probe").await;
    browser
        .wait_for_text("#status", "Resumed probe", PATIENCE)
        .await;
    let job_page = ops(&app, &format!("/ops/jobs/{}", dead_ids[0]));
    open_until(&browser, &job_page, "#attempt-2").await;
    let attempts = browser.wait_for_text("#attempts", "failed", PATIENCE).await;
    assert!(
        attempts.contains("wrk_"),
        "each attempt names its worker: {attempts}"
    );
    browser.find("#attempt-1", PATIENCE).await;
    browser.wait_for_text("#job-state", "dead", PATIENCE).await;
    browser.find("#job-retry", PATIENCE).await;
    browser.look_at("ops-job").await;

    // History: the burst is in the charts and the agency's breakdown (runs
    // arrive with their worker's next batch, a fraction of a second on).
    let finished = eventually(PATIENCE, "30 + 30 failed and 10 succeeded probe runs", || async {
        browser.open(&ops(&app, "/ops/history")).await;
        let finished = browser
            .run(
                "const e = document.getElementById('total-finished'); return e ? e.textContent : '';",
                json!([]),
            )
            .await;
        let finished: u64 = finished.as_str().unwrap_or("").parse().unwrap_or(0);
        (finished >= 70).then_some(finished)
    })
    .await;
    assert!(finished >= 70);
    let bars = browser
        .run(
            "return document.querySelectorAll('#throughput-chart rect').length;",
            json!([]),
        )
        .await;
    assert!(bars.as_u64().unwrap() >= 1, "bars drawn: {bars}");
    browser
        .wait_for_text("#by-agency", &agency_id, PATIENCE)
        .await;
    browser.look_at("ops-history").await;

    // Quiet: the worker process finishes what it holds and takes no more.
    browser.open(&ops(&app, "/ops/workers")).await;
    let worker = ops_json(&app, "/ops/api/workers").await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    browser.look_at("ops-workers").await;
    click(&browser, &format!("#quiet-{worker}")).await;
    browser.wait_for_text("#status", "Asked", PATIENCE).await;
    open_until(
        &browser,
        &ops(&app, "/ops/workers"),
        &format!("#state-{worker}.warn"),
    )
    .await;
    browser
        .wait_for_text(&format!("#state-{worker}"), "quiet", PATIENCE)
        .await;
    let quiet_at = ops_json(&app, "/ops/api/workers").await["items"][0]["heartbeat_at"].clone();
    let waiting = push_probes(&app, &agency_id, 1, false).await;
    // Two heartbeats later (the worker would have taken it within one
    // poll), the job still waits.
    let beats = std::sync::Mutex::new(vec![quiet_at]);
    let (beats_ref, app_ref) = (&beats, &app);
    eventually(PATIENCE, "two more heartbeats", move || async move {
        let beat = ops_json(app_ref, "/ops/api/workers").await["items"][0]["heartbeat_at"].clone();
        let mut beats = beats_ref.lock().unwrap();
        if beats.last() != Some(&beat) {
            beats.push(beat);
        }
        (beats.len() >= 3).then_some(())
    })
    .await;
    let job = ops_json(&app, &format!("/ops/api/jobs/{}", waiting[0])).await;
    assert_eq!(job["state"], "queued", "a quiet worker took it: {job}");
    assert_eq!(job["attempt_history"], json!([]), "{job}");
}

#[tokio::test]
async fn the_job_console_works_in_the_browser_on_the_embedded_queue() {
    let app = TestApp::builder(Backend::Sqlite)
        .with_workers()
        .with_ops(USER, PASSWORD)
        .paused(DISPATCH)
        .spawn()
        .await;
    the_job_console_works_in_the_browser(app).await;
}

#[tokio::test]
async fn the_job_console_works_in_the_browser_on_the_redis_queue() {
    let app = TestApp::builder(Backend::Postgres)
        .redis()
        .with_workers()
        .with_ops(USER, PASSWORD)
        .paused(DISPATCH)
        .spawn()
        .await;
    the_job_console_works_in_the_browser(app).await;
}

/// A delivery profile's sweep waiting in its queue (no workers run): the
/// jobs list and the job's page show how far it got, as a bar and in words.
#[tokio::test]
async fn a_profile_sweep_shows_its_progress_in_the_console() {
    use platform::kinds::{RenderOutputs, RenderScope};
    use storage::ids::{DeliveryProfileId, MediaId};

    let app = TestApp::builder(Backend::Sqlite)
        .with_ops(USER, PASSWORD)
        .spawn()
        .await;
    let agency = app.agency().await;
    let tenant = storage::Tenant::new(agency.id.clone(), storage::Environment::Live);
    let sweep = RenderOutputs::new(
        &tenant,
        RenderScope::Profile {
            profile_id: DeliveryProfileId::generate(),
            revision: 2,
            round: 3,
            after: Some(MediaId::generate()),
            rendered: 1_200,
            total: Some(10_000),
        },
    );
    let id = app
        .state
        .platform()
        .queue
        .push(sweep, PushOptions::default())
        .await
        .unwrap();

    let browser = Browser::start().await;
    let credentials = STANDARD.encode(format!("{USER}:{PASSWORD}"));
    browser
        .set_header("Authorization", &format!("Basic {credentials}"))
        .await;
    open_until(
        &browser,
        &ops(&app, "/ops/?state=queued&queue=delivery_outputs"),
        &format!("#job-{id}"),
    )
    .await;
    let row = browser
        .wait_for_text(
            &format!("#job-{id}"),
            "1,200 of 10,000 photos rendered (12 %)",
            PATIENCE,
        )
        .await;
    assert!(row.contains(agency.id.as_str()), "{row}");
    browser.look_at("ops-sweep").await;
    browser.open(&ops(&app, &format!("/ops/jobs/{id}"))).await;
    browser
        .wait_for_text("#sweep", "1,200 of 10,000 photos rendered (12 %)", PATIENCE)
        .await;
    browser.look_at("ops-sweep-job").await;
}
