//! `api ops …` from the terminal, with no API process running at all: queues,
//! jobs by state, queue, agency and text, retry and discard of every dead job
//! a filter finds (not one page), pause and resume, cancel and run-now of
//! waiting jobs, one job with its attempts, worker processes quieted and
//! stopped, and the audit log; on both queues.

use std::time::Duration;

use serde_json::Value;
use tests::Backend;
use tests::deployment::{Deployment, eventually};

use super::PATIENCE;

/// Runs `api ops <args>`; its one JSON object, or the JSON error and status 1.
fn ops(deployment: &Deployment, args: &[&str]) -> Result<Value, Value> {
    let mut full = vec!["ops"];
    full.extend_from_slice(args);
    let output = deployment.command(&full).output().expect("run api ops");
    if output.status.success() {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout.trim().lines().count(), 1, "one line: {stdout}");
        Ok(serde_json::from_str(stdout.trim()).expect("one JSON object"))
    } else {
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(stderr
            .lines()
            .find_map(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(|| panic!("a JSON error: {stderr}")))
    }
}

fn ok(deployment: &Deployment, args: &[&str]) -> Value {
    ops(deployment, args).unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

fn refused(deployment: &Deployment, args: &[&str], code: &str) {
    let err = ops(deployment, args).expect_err("refused");
    assert_eq!(err["error"]["code"], code, "{args:?}: {err}");
}

fn count(deployment: &Deployment, args: &[&str]) -> u64 {
    let mut full = vec!["jobs"];
    full.extend_from_slice(args);
    ok(deployment, &full)["count"].as_u64().unwrap()
}

async fn the_console_works_from_the_terminal(deployment: Deployment) {
    let agency = deployment.admin_ok(&["create-agency", "--name", "Console check"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let _workers = deployment.spawn_workers(&[]);
    let pushed = deployment.admin_ok(&[
        "enqueue-probe",
        "--agency",
        &agency_id,
        "--fail",
        "--count",
        "30",
        "--steps",
        "1",
        "--step-ms",
        "1",
    ]);
    let first = pushed["job_id"].as_str().unwrap().to_owned();
    eventually(PATIENCE, "thirty dead probes", || async {
        (count(&deployment, &["--state", "dead", "--queue", "probe"]) == 30).then_some(())
    })
    .await;

    let queues = ok(&deployment, &["queues"]);
    let probe = queues["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|queue| queue["queue"] == "probe")
        .unwrap();
    assert_eq!(probe["dead"], 30, "{queues}");
    assert_eq!(probe["paused"], false);

    let page = ok(&deployment, &["jobs", "--state", "dead", "--limit", "5"]);
    assert_eq!(page["items"].as_array().unwrap().len(), 5);
    assert_eq!(page["count"], 30, "count is every match: {page}");
    let ids: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|job| job["id"].as_str())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first: {ids:?}");
    let job = &page["items"][0];
    assert_eq!(job["attempts"], 1);
    assert!(
        job["last_error"].as_str().unwrap().contains("--fail"),
        "{job}"
    );
    assert_eq!(job["payload"]["agency_id"], agency_id.as_str());
    assert_eq!(
        count(&deployment, &["--state", "dead", "--search", &first]),
        1
    );
    assert_eq!(
        count(
            &deployment,
            &["--state", "dead", "--search", "ENQUEUED TO FAIL"]
        ),
        30
    );
    assert_eq!(
        count(&deployment, &["--state", "dead", "--agency", &agency_id]),
        30
    );
    assert_eq!(
        count(
            &deployment,
            &[
                "--state",
                "dead",
                "--agency",
                "agc_01M8NOBODY00000000000000"
            ]
        ),
        0
    );
    assert_eq!(
        count(&deployment, &["--state", "pending", "--queue", "probe"]),
        0
    );

    // Paused, so retried jobs wait in the queue; the retry by filter moves all thirty.
    assert_eq!(ok(&deployment, &["pause", "probe"])["paused"], true);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let retried = ok(
        &deployment,
        &["retry", "--state", "dead", "--queue", "probe"],
    );
    assert_eq!(retried["retried"], 30, "{retried}");
    assert_eq!(count(&deployment, &["--state", "dead"]), 0);
    // Back in the queue (a paused worker may hold one it fetched before the pause).
    let mut waiting = std::collections::BTreeSet::new();
    for state in ["queued", "running"] {
        let found = ok(
            &deployment,
            &[
                "jobs", "--state", state, "--queue", "probe", "--limit", "1000",
            ],
        );
        for job in found["items"].as_array().unwrap() {
            waiting.insert(job["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(waiting.len(), 30, "{waiting:?}");
    refused(&deployment, &["discard", "--job", &first], "not_found");

    // Resumed, they fail again; one is thrown away by id, the rest by filter.
    assert_eq!(ok(&deployment, &["resume", "probe"])["paused"], false);
    eventually(PATIENCE, "dead again", || async {
        (count(&deployment, &["--state", "dead", "--queue", "probe"]) == 30).then_some(())
    })
    .await;
    assert_eq!(
        ok(&deployment, &["discard", "--job", &first])["discarded"],
        1
    );
    let rest = ok(
        &deployment,
        &["discard", "--state", "dead", "--agency", &agency_id],
    );
    assert_eq!(rest["discarded"], 29, "{rest}");
    assert_eq!(count(&deployment, &["--state", "dead"]), 0);

    refused(&deployment, &["jobs"], "validation.failed");
    refused(
        &deployment,
        &["jobs", "--state", "sleeping"],
        "validation.failed",
    );
    refused(
        &deployment,
        &["jobs", "--state", "dead", "--limit", "0"],
        "validation.failed",
    );
    refused(
        &deployment,
        &["retry", "--state", "queued"],
        "validation.failed",
    );
    refused(&deployment, &["pause", "nosuch"], "validation.failed");
    refused(
        &deployment,
        &["jobs", "--state", "dead", "--queue", "nosuch"],
        "validation.failed",
    );
}

#[tokio::test]
async fn the_console_works_from_the_terminal_on_the_embedded_queue() {
    the_console_works_from_the_terminal(Deployment::new(Backend::Sqlite).await).await;
}

#[tokio::test]
async fn the_console_works_from_the_terminal_on_the_redis_queue() {
    the_console_works_from_the_terminal(Deployment::with_redis(Backend::Postgres).await).await;
}

/// The one worker process `ops workers` lists.
fn the_worker(deployment: &Deployment) -> Value {
    let workers = ok(deployment, &["workers"]);
    let items = workers["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{workers}");
    items[0].clone()
}

async fn waiting_jobs_and_worker_processes_from_the_terminal(deployment: Deployment) {
    let agency = deployment.admin_ok(&["create-agency", "--name", "Console waits"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let probes = |count: &str| {
        deployment.admin_ok(&[
            "enqueue-probe",
            "--agency",
            &agency_id,
            "--count",
            count,
            "--steps",
            "1",
            "--step-ms",
            "1",
        ])
    };

    // No worker runs yet: probes wait, queued. Cancelled, they go dead, on record.
    let pushed = probes("3");
    let ids: Vec<String> = pushed["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|probe| probe["job_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        count(&deployment, &["--state", "queued", "--queue", "probe"]),
        3
    );
    assert_eq!(
        ok(&deployment, &["cancel", "--job", &ids[0]])["cancelled"],
        1
    );
    let cancelled = ok(&deployment, &["job", "--job", &ids[0]]);
    assert_eq!(cancelled["state"], "dead", "{cancelled}");
    assert_eq!(cancelled["last_error"], "cancelled by an operator");
    let rest = ok(
        &deployment,
        &["cancel", "--state", "queued", "--queue", "probe"],
    );
    assert_eq!(rest["cancelled"], 2, "{rest}");
    refused(&deployment, &["cancel", "--job", &ids[0]], "not_found");
    refused(
        &deployment,
        &["cancel", "--state", "dead"],
        "validation.failed",
    );
    refused(
        &deployment,
        &["run-now", "--state", "queued"],
        "validation.failed",
    );
    refused(
        &deployment,
        &["job", "--job", "01M8NOSUCHJOB0000000000000"],
        "not_found",
    );

    // A probe due in an hour is scheduled; run-now makes it due.
    let queue = platform::JobQueue::connect(&deployment.queue_target())
        .await
        .unwrap();
    let store = deployment.store().await;
    let options = platform::PushOptions {
        run_at: Some(store.clock().now().plus_seconds(3_600)),
        ..Default::default()
    };
    let scheduled = queue
        .push(
            platform::kinds::Probe {
                operation_id: storage::ids::OperationId::generate(),
                agency_id: storage::ids::AgencyId::parse(&agency_id).unwrap(),
                is_sandbox: false,
                steps: 1,
                step_ms: 1,
                fail: false,
            },
            options,
        )
        .await
        .unwrap();
    assert_eq!(
        count(&deployment, &["--state", "scheduled", "--queue", "probe"]),
        1
    );
    assert_eq!(
        ok(&deployment, &["run-now", "--job", &scheduled])["run_now"],
        1
    );
    refused(&deployment, &["run-now", "--job", &scheduled], "not_found");

    // A worker process with a one-second heartbeat runs it, and is listed.
    let mut workers = deployment.spawn_workers(&["--heartbeat-seconds", "1"]);
    let ran = eventually(PATIENCE, "the scheduled probe run now", || async {
        let job = ok(&deployment, &["job", "--job", &scheduled]);
        (job["state"] == "done").then_some(job)
    })
    .await;
    let worker = the_worker(&deployment);
    let worker_id = worker["id"].as_str().unwrap().to_owned();
    assert!(worker_id.starts_with("wrk_"), "{worker}");
    assert_eq!(worker["state"], "running", "{worker}");
    assert_eq!(worker["pid"], workers.id(), "{worker}");
    assert!(worker["queues"]["probe"].as_u64().unwrap() >= 1, "{worker}");
    let history = eventually(PATIENCE, "the run on record", || async {
        let job = ok(&deployment, &["job", "--job", &scheduled]);
        let runs = job["attempt_history"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        runs.iter()
            .any(|run| run["outcome"] == "succeeded")
            .then_some(runs)
    })
    .await;
    assert_eq!(history.len(), 1, "{ran}");
    assert_eq!(history[0]["worker_id"], worker_id.as_str());

    // Quiet: it takes no more jobs, within a heartbeat.
    assert_eq!(
        ok(&deployment, &["quiet", &worker_id])["requested"],
        "quiet"
    );
    eventually(PATIENCE, "the worker quiet", || async {
        (the_worker(&deployment)["state"] == "quiet").then_some(())
    })
    .await;
    let waiting = probes("1")["job_id"].as_str().unwrap().to_owned();
    let first_beat = the_worker(&deployment)["heartbeat_at"].clone();
    let second_beat = eventually(PATIENCE, "another heartbeat", || async {
        let beat = the_worker(&deployment)["heartbeat_at"].clone();
        (beat != first_beat).then_some(beat)
    })
    .await;
    eventually(PATIENCE, "a third heartbeat", || async {
        (the_worker(&deployment)["heartbeat_at"] != second_beat).then_some(())
    })
    .await;
    let untouched = ok(&deployment, &["job", "--job", &waiting]);
    assert_eq!(
        untouched["state"], "queued",
        "a quiet worker took it: {untouched}"
    );

    // Stop: the process exits by itself; the job it never took still waits.
    assert_eq!(ok(&deployment, &["stop", &worker_id])["requested"], "stop");
    let status = eventually(PATIENCE, "the worker process exited", || {
        let status = workers.try_wait();
        async move { status }
    })
    .await;
    assert!(status.success(), "{status:?}\n{}", workers.log_text());
    assert_eq!(the_worker(&deployment)["state"], "stopped");
    assert_eq!(
        ok(&deployment, &["job", "--job", &waiting])["state"],
        "queued"
    );
    refused(&deployment, &["quiet", &worker_id], "not_found");
    refused(
        &deployment,
        &["stop", "wrk_01M8NOSUCHWORKER000000000"],
        "not_found",
    );

    // Every action is on record, as the terminal's user.
    let audit = ok(&deployment, &["audit"]);
    let entries = audit["items"].as_array().unwrap();
    for (action, touched) in [
        ("cancel", 2),
        ("cancel", 1),
        ("run_now", 1),
        ("quiet", 1),
        ("stop", 1),
    ] {
        assert!(
            entries
                .iter()
                .any(|entry| entry["action"] == action && entry["count"] == touched),
            "{action} × {touched}: {audit}"
        );
    }
    assert!(
        entries
            .iter()
            .all(|entry| entry["actor"].as_str().unwrap().starts_with("cli:")),
        "{audit}"
    );
}

#[tokio::test]
async fn waiting_jobs_and_worker_processes_from_the_terminal_on_the_embedded_queue() {
    waiting_jobs_and_worker_processes_from_the_terminal(Deployment::new(Backend::Sqlite).await)
        .await;
}

#[tokio::test]
async fn waiting_jobs_and_worker_processes_from_the_terminal_on_the_redis_queue() {
    waiting_jobs_and_worker_processes_from_the_terminal(
        Deployment::with_redis(Backend::Postgres).await,
    )
    .await;
}
