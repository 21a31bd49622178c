//! Waking idle workers: a job pushed to a queue idle for any length of time
//! is taken at once, because the push wakes the workers (in process through
//! the queue's bell; across processes through Redis, or the SQLite file's
//! commit counter read at the poll interval), not because a poll came by.
//!
//! The workers here poll once an hour and heartbeat once an hour, so only a
//! wake-up can get the job taken within the test's patience (apalis's own
//! interval strategy used to leave an idle worker to its next heartbeat).

use std::time::Duration;

use platform::kinds::Probe;
use platform::{JobQueue, PushOptions, QueueTarget};
use storage::ids::OperationId;
use storage::{Environment, Tenant};
use tests::deployment::Deployment;
use tests::{Backend, TestApp};

use super::{Fixture, wait_for_status};

const AN_HOUR: Duration = Duration::from_secs(3600);

fn probe(tenant: &Tenant) -> Probe {
    Probe {
        operation_id: OperationId::generate(),
        agency_id: tenant.agency_id.clone(),
        is_sandbox: false,
        steps: 1,
        step_ms: 1,
        fail: false,
    }
}

/// Pushes a probe after each idle gap (milliseconds) and waits until the
/// workers completed it.
async fn push_after_gaps(
    queue: &JobQueue,
    store: &storage::Store,
    tenant: &Tenant,
    gaps_ms: &[u64],
) {
    for gap_ms in gaps_ms {
        // Idle: every worker has fetched nothing and waits.
        tokio::time::sleep(Duration::from_millis(*gap_ms)).await;
        let job = probe(tenant);
        queue
            .push(job.clone(), PushOptions::default())
            .await
            .unwrap();
        wait_for_status(store, tenant, job.operation_id.as_str(), "completed").await;
    }
}

/// An app whose in-process workers poll and heartbeat once an hour (the
/// queue on Redis when `redis`), with an agency's live tenant and the queue.
async fn app_polling_hourly(redis: bool) -> (TestApp, Tenant, JobQueue) {
    let mut builder = TestApp::builder(Backend::Sqlite)
        .with_workers()
        .tune_workers(|settings| {
            settings.poll = AN_HOUR;
            settings.heartbeat = AN_HOUR;
            settings.schedules = false;
        });
    if redis {
        builder = builder.redis();
    }
    let app = builder.spawn().await;
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    let queue = app.state.platform().queue.clone();
    (app, tenant, queue)
}

/// Pushes probes after idle gaps to workers of `app` and waits for each.
async fn pushes_after_idle_gaps_are_taken(redis: bool) {
    let (app, tenant, queue) = app_polling_hourly(redis).await;
    push_after_gaps(&queue, &app.store, &tenant, &[300, 1200]).await;
}

#[tokio::test]
async fn a_push_wakes_the_idle_workers_of_its_process_on_sqlite() {
    pushes_after_idle_gaps_are_taken(false).await;
}

#[tokio::test]
async fn a_push_wakes_the_idle_workers_of_its_process_on_redis() {
    pushes_after_idle_gaps_are_taken(true).await;
}

/// Pushes a probe due two seconds from now to workers polling once an hour
/// and waits until they completed it: only the alarm its push set on the
/// queue's bell gets it taken within the test's patience.
async fn a_scheduled_job_is_taken_when_due(redis: bool) {
    let (app, tenant, queue) = app_polling_hourly(redis).await;
    // Idle first, so the workers wait on their bell.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job = probe(&tenant);
    let options = PushOptions {
        run_at: Some(storage::Timestamp::from(chrono::Utc::now()).plus_seconds(2)),
        ..PushOptions::default()
    };
    queue.push(job.clone(), options).await.unwrap();
    wait_for_status(&app.store, &tenant, job.operation_id.as_str(), "completed").await;
}

#[tokio::test]
async fn a_scheduled_job_wakes_the_idle_workers_of_its_process_when_due_on_sqlite() {
    a_scheduled_job_is_taken_when_due(false).await;
}

#[tokio::test]
async fn a_scheduled_job_wakes_the_idle_workers_of_its_process_when_due_on_redis() {
    a_scheduled_job_is_taken_when_due(true).await;
}

/// A worker process polling once an hour takes a job pushed by another
/// process: Redis announces the push.
#[tokio::test]
async fn a_push_on_redis_wakes_a_worker_process_on_another_host() {
    let deployment = Deployment::with_redis(Backend::Sqlite).await;
    let fixture = Fixture::new(&deployment);
    let store = deployment.store().await;
    let url = deployment.redis_url.clone().unwrap();
    let queue = JobQueue::connect(&QueueTarget::Redis(url)).await.unwrap();
    let workers = deployment.spawn_workers(&[
        "--queue",
        "probe=1",
        "--poll-millis",
        "3600000",
        "--heartbeat-seconds",
        "3600",
        "--no-schedules",
    ]);
    // The first push may come before the workers listen; they catch up on
    // connecting (a missed announcement is made good by a ring on start).
    // Then a dozen: the probe queue is fair, so each push reaches the worker
    // as an announcement, a feed, and only then a ring (a ring before the
    // feed used to be spent on an empty fetch now and then, and the job
    // waited for the hourly poll).
    let mut gaps = vec![0, 700];
    gaps.extend([150; 12]);
    push_after_gaps(&queue, &store, &fixture.tenant, &gaps).await;
    drop(workers);
}

/// A worker process heartbeating once an hour takes a job another process
/// pushed to the SQLite file, at the poll interval.
#[tokio::test]
async fn a_push_to_the_sqlite_file_wakes_a_worker_process() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let fixture = Fixture::new(&deployment);
    let store = deployment.store().await;
    let file = deployment.db.data_dir().join(platform::config::QUEUE_FILE);
    let queue = JobQueue::connect(&QueueTarget::SqliteFile(file))
        .await
        .unwrap();
    let workers = deployment.spawn_workers(&[
        "--queue",
        "probe=1",
        "--poll-millis",
        "50",
        "--heartbeat-seconds",
        "3600",
        "--no-schedules",
    ]);
    push_after_gaps(&queue, &store, &fixture.tenant, &[700, 700, 700]).await;
    drop(workers);
}
