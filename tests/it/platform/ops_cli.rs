//! `api ops …` from the terminal, with no API process running at all: queues,
//! jobs by state, queue, agency and text, retry and discard of every dead job
//! a filter finds (not one page), pause and resume; on both queues.

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
    let job = &page["items"][0];
    assert_eq!(job["id"], first.as_str(), "oldest first");
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
    let waiting = count(&deployment, &["--state", "queued", "--queue", "probe"])
        + count(&deployment, &["--state", "running", "--queue", "probe"]);
    assert_eq!(waiting, 30);
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
