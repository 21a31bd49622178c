//! A job's life after its handler gives up, on both queue backends: dead after
//! its kind's last attempt (apalis-redis alone would retry it 25 times), kept
//! with its last error, retried or discarded by an operator, and forgotten
//! with its idempotency key once finished long enough.

use platform::admin::{QueueAdmin, QueueDepth};
use platform::kinds::Probe;
use platform::{Job, PushOptions};
use storage::ids::{AgencyId, OperationId};
use storage::{Environment, Tenant};
use tests::deployment::eventually;
use tests::{Backend, TestApp};

use super::{PATIENCE, wait_for_status};

fn probe(agency_id: &AgencyId, operation_id: &OperationId) -> Probe {
    Probe {
        operation_id: operation_id.clone(),
        agency_id: agency_id.clone(),
        is_sandbox: false,
        steps: 1,
        step_ms: 1,
        fail: false,
    }
}

async fn probe_depth(admin: &QueueAdmin) -> QueueDepth {
    admin
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == Probe::KIND)
        .unwrap()
}

async fn dead_jobs_live_and_go(redis: bool) {
    let mut builder = TestApp::builder(Backend::Sqlite).with_workers();
    if redis {
        builder = builder.redis();
    }
    let app = builder.spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);

    // Two that fail every attempt (no such agency), one that succeeds.
    let nobody = AgencyId::generate();
    let mut doomed = Vec::new();
    for _ in 0..2 {
        let id = queue
            .push(
                probe(&nobody, &OperationId::generate()),
                PushOptions::default(),
            )
            .await
            .unwrap();
        doomed.push(id);
    }
    let fine = OperationId::generate();
    let finished = queue
        .push(probe(&agency.id, &fine), PushOptions::default())
        .await
        .unwrap();
    wait_for_status(&app.store, &tenant, fine.as_str(), "completed").await;
    let dead = eventually(PATIENCE, "both doomed probes dead", || async {
        let dead = admin.dead_jobs(10).await.unwrap();
        (dead.len() == 2).then_some(dead)
    })
    .await;
    // The oldest dead job's age counts from its push (its attempts took
    // milliseconds at least), on either queue.
    let ages = admin.oldest_jobs().await.unwrap();
    let age = |state: &str| {
        ages.iter()
            .find(|oldest| oldest.queue == Probe::KIND && oldest.state == state)
            .map(|oldest| oldest.age_seconds)
            .unwrap()
    };
    assert!(age("dead") > 0.0, "{ages:?}");
    assert_eq!(age("pending"), 0.0, "{ages:?}");
    for job in &dead {
        assert!(doomed.contains(&job.id));
        assert_eq!(job.queue, Probe::KIND);
        assert_eq!(job.attempts, Probe::MAX_ATTEMPTS as u64, "{job:?}");
        assert_eq!(
            job.last_error.as_deref(),
            Some("probe for an unknown agency")
        );
    }
    // The handler records completion before the queue acknowledges the job.
    eventually(PATIENCE, "one probe done and two dead", || async {
        let depth = probe_depth(&admin).await;
        ((depth.done, depth.dead) == (1, 2)).then_some(())
    })
    .await;

    // An operator retries one (it dies again, with fresh attempts) and discards the other.
    assert!(admin.discard(&doomed[1]).await.unwrap());
    assert!(!admin.discard(&doomed[1]).await.unwrap(), "gone already");
    // Only a dead job is retried: not the discarded one, not the finished one,
    // not an id that never was.
    assert!(!admin.retry(&doomed[1]).await.unwrap(), "discarded");
    assert!(!admin.retry(&finished).await.unwrap(), "finished, not dead");
    assert!(!admin.retry("no-such-job").await.unwrap());
    assert!(admin.retry(&doomed[0]).await.unwrap());
    let again = eventually(PATIENCE, "the retried probe dead again", || async {
        let dead = admin.dead_jobs(10).await.unwrap();
        (dead.len() == 1).then_some(dead)
    })
    .await;
    assert_eq!(again[0].id, doomed[0]);
    assert_eq!(again[0].attempts, Probe::MAX_ATTEMPTS as u64);

    // Retention: cutoffs in the past keep everything, in the future forget it.
    let now = chrono::Utc::now().timestamp();
    assert_eq!(
        admin.purge_finished(now - 3600, now - 3600).await.unwrap(),
        0
    );
    assert_eq!(admin.purge_finished(now - 3600, now + 60).await.unwrap(), 1);
    assert_eq!(probe_depth(&admin).await.dead, 0);
    assert_eq!(admin.purge_finished(now + 60, now + 60).await.unwrap(), 1);
    assert_eq!(probe_depth(&admin).await.done, 0);

    // The finished job's dedupe key went with it: the same probe runs again.
    queue
        .push(probe(&agency.id, &fine), PushOptions::default())
        .await
        .unwrap();
    eventually(PATIENCE, "the same probe done again", || async {
        (probe_depth(&admin).await.done == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn dead_jobs_on_the_sqlite_queue() {
    dead_jobs_live_and_go(false).await;
}

#[tokio::test]
async fn dead_jobs_on_the_redis_queue() {
    dead_jobs_live_and_go(true).await;
}

/// `api admin enqueue-probe --fail --count N`: N probes, each dead after its
/// only attempt, made from the command line while a workers process runs.
async fn probes_enqueued_to_fail_go_dead_at_once(deployment: tests::deployment::Deployment) {
    let agency = deployment.admin_ok(&["create-agency", "--name", "Dead on purpose"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let _workers = deployment.spawn_workers(&[]);
    let pushed = deployment.admin_ok(&[
        "enqueue-probe",
        "--agency",
        &agency_id,
        "--fail",
        "--count",
        "3",
        "--steps",
        "1",
        "--step-ms",
        "1",
    ]);
    let ids: Vec<String> = pushed["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|probe| probe["job_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 3, "{pushed}");
    assert_eq!(pushed["job_id"], ids[0].as_str());
    let queue = platform::JobQueue::connect(&deployment.queue_target())
        .await
        .unwrap();
    let admin = QueueAdmin::new(queue);
    let dead = eventually(PATIENCE, "the three probes dead", || async {
        let dead = admin.dead_jobs(10).await.unwrap();
        (dead.len() == 3).then_some(dead)
    })
    .await;
    for job in &dead {
        assert!(ids.contains(&job.id), "{job:?}");
        assert_eq!(job.attempts, 1, "one attempt only: {job:?}");
        assert!(
            job.last_error
                .as_deref()
                .unwrap_or_default()
                .contains("--fail"),
            "{job:?}"
        );
    }
    deployment.admin_err(
        &["enqueue-probe", "--agency", &agency_id, "--count", "0"],
        "validation.failed",
    );
}

#[tokio::test]
async fn probes_enqueued_to_fail_go_dead_at_once_on_the_embedded_queue() {
    probes_enqueued_to_fail_go_dead_at_once(
        tests::deployment::Deployment::new(Backend::Sqlite).await,
    )
    .await;
}

#[tokio::test]
async fn probes_enqueued_to_fail_go_dead_at_once_on_the_redis_queue() {
    probes_enqueued_to_fail_go_dead_at_once(
        tests::deployment::Deployment::with_redis(Backend::Postgres).await,
    )
    .await;
}
