//! SIGTERM on a `workers run` process returns what it holds to the queue as
//! it exits: jobs fetched in a batch and never started keep their attempts
//! and run elsewhere at once; a job still running when the grace period ends
//! runs again elsewhere. Both well before heartbeat-based orphan recovery,
//! which these workers would need a minute for. And the heartbeat goes on
//! through the grace period, so no other worker re-runs a job meanwhile.

use std::time::{Duration, Instant};

use platform::admin::{QueueAdmin, QueueDepth};
use platform::kinds::Probe;
use platform::{Job, JobQueue, PushOptions, QueueTarget};
use tests::deployment::{Deployment, eventually};
use tests::{Backend, backend_tests};

use super::{Fixture, PATIENCE, progress_of, wait_for_status};

/// Heartbeats every 20 seconds: orphan recovery (three missed) takes a
/// minute, so a job back within seconds was released, not recovered.
const SLOW_HEARTBEAT: [&str; 5] = [
    "--heartbeat-seconds",
    "20",
    "--poll-millis",
    "50",
    "--no-schedules",
];

/// Well under orphan recovery's minute (and the 20 seconds more until a
/// heartbeat of another worker notices).
const PROMPTLY: Duration = Duration::from_secs(40);

/// A deployment whose probe queue nobody else consumes: the SQLite queue in
/// its data directory, or (PostgreSQL) a Redis database of its own, since the
/// test Redis is shared and its queues are named by job kind only.
async fn deployment(backend: Backend) -> (Deployment, JobQueue) {
    match backend {
        Backend::Sqlite => {
            let deployment = Deployment::new(backend).await;
            let file = deployment.db.data_dir().join(platform::config::QUEUE_FILE);
            let queue = JobQueue::connect(&QueueTarget::SqliteFile(file))
                .await
                .unwrap();
            (deployment, queue)
        }
        Backend::Postgres => {
            // A Redis database of its own: an empty queue only these workers read.
            let deployment = Deployment::with_redis(backend).await;
            let url = deployment.redis_url.clone().expect("a Redis deployment");
            let queue = JobQueue::connect(&QueueTarget::Redis(url)).await.unwrap();
            (deployment, queue)
        }
    }
}

/// Workers of the probe queue only, `extra` added.
fn spawn_probe_workers(deployment: &Deployment, extra: &[&str]) -> tests::deployment::Process {
    let mut args = SLOW_HEARTBEAT.to_vec();
    args.extend_from_slice(extra);
    deployment.spawn_workers(&args)
}

/// Pushes a probe of `steps` × `step_ms` and returns its operation id. Pushes
/// a few milliseconds apart, so the queue's order is the push order.
async fn push_probe(queue: &JobQueue, fixture: &Fixture, steps: u32, step_ms: u64) -> String {
    let operation_id = format!("op_{}", ulid::Ulid::generate());
    let probe = Probe {
        operation_id: storage::ids::OperationId::parse(&operation_id).unwrap(),
        agency_id: fixture.tenant.agency_id.clone(),
        is_sandbox: false,
        steps,
        step_ms,
        fail: false,
    };
    queue.push(probe, PushOptions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    operation_id
}

async fn probe_depth(queue: &JobQueue) -> QueueDepth {
    QueueAdmin::new(queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == Probe::KIND)
        .unwrap()
}

/// How many times job `job_id` started: apalis-sqlite's attempts of the
/// finished job (a run another worker took over would still be running, and
/// the first run's acknowledgement refused), or the starts the workers count
/// on Redis.
async fn starts(deployment: &Deployment, queue: &JobQueue, job_id: &str) -> u64 {
    match queue.backend() {
        platform::queue::QueueBackend::Sqlite(pool) => {
            let (status, attempts): (String, i64) =
                sqlx::query_as("select status, attempts from Jobs where id = ?1")
                    .bind(job_id)
                    .fetch_one(pool)
                    .await
                    .unwrap();
            assert_eq!(status, "Done", "acknowledged by the worker that ran it");
            u64::try_from(attempts).unwrap()
        }
        platform::queue::QueueBackend::Redis(_) => {
            let url = deployment.redis_url.as_deref().unwrap();
            let meta = format!("{}:meta:{job_id}", Probe::KIND);
            let output = std::process::Command::new("redis-cli")
                .args(["-u", url, "hget", &meta, platform::queue::STARTS_FIELD])
                .output()
                .expect("redis-cli");
            String::from_utf8_lossy(&output.stdout)
                .trim()
                .parse()
                .unwrap()
        }
    }
}

/// Waits for `operation_id` to complete and returns its attempt.
async fn completed_attempt(deployment: &Deployment, fixture: &Fixture, operation_id: &str) -> u64 {
    let store = deployment.store().await;
    let done = wait_for_status(&store, &fixture.tenant, operation_id, "completed").await;
    done["attempt"].as_u64().unwrap()
}

backend_tests! {
    async fn sigterm_returns_fetched_unstarted_jobs_to_the_queue(backend) {
        let (deployment, queue) = deployment(backend).await;
        let fixture = Fixture::new(&deployment);
        let store = deployment.store().await;
        // One job at a time, three claimed per fetch: the long probe runs, the
        // two behind it wait in the worker.
        let long = push_probe(&queue, &fixture, 60, 250).await;
        let waiting = [
            push_probe(&queue, &fixture, 1, 10).await,
            push_probe(&queue, &fixture, 1, 10).await,
        ];
        let mut victim = spawn_probe_workers(
            &deployment,
            &["--queue", "probe=1", "--fetch-batch", "3", "--shutdown-seconds", "1"],
        );
        wait_for_status(&store, &fixture.tenant, &long, "processing").await;
        let depth = probe_depth(&queue).await;
        assert_eq!((depth.pending, depth.running), (0, 3), "all three claimed: {depth:?}");
        for operation in &waiting {
            assert!(progress_of(&store, &fixture.tenant, operation).await.is_none());
        }

        let stopped = Instant::now();
        let status = victim.terminate(PATIENCE);
        assert!(status.success(), "clean exit: {status}\n{}", victim.log_text());
        // Back in the queue as the process exits, not when its heartbeat lapses.
        let depth = probe_depth(&queue).await;
        assert_eq!((depth.pending, depth.running), (3, 0), "{depth:?}\n{}", victim.log_text());

        let _rescuer = spawn_probe_workers(&deployment, &["--queue", "probe=2"]);
        for operation in &waiting {
            assert_eq!(
                completed_attempt(&deployment, &fixture, operation).await,
                1,
                "never started, so no attempt spent"
            );
        }
        assert!(stopped.elapsed() < PROMPTLY, "taken up again promptly: {:?}", stopped.elapsed());
    }

    async fn a_job_running_past_the_grace_period_runs_again_elsewhere(backend) {
        let (deployment, queue) = deployment(backend).await;
        let fixture = Fixture::new(&deployment);
        let store = deployment.store().await;
        // Six seconds: well past the one-second grace period however late the
        // test sees it start.
        let long = push_probe(&queue, &fixture, 40, 150).await;
        let mut victim =
            spawn_probe_workers(&deployment, &["--queue", "probe=1", "--shutdown-seconds", "1"]);
        wait_for_status(&store, &fixture.tenant, &long, "processing").await;
        let stopped = Instant::now();
        let status = victim.terminate(PATIENCE);
        assert!(status.success(), "clean exit: {status}\n{}", victim.log_text());
        let cut_short = progress_of(&store, &fixture.tenant, &long).await.unwrap();
        assert_eq!(cut_short["status"], "processing", "abandoned mid-run: {cut_short}");

        let _rescuer = spawn_probe_workers(&deployment, &["--queue", "probe=1"]);
        let done = eventually(PROMPTLY, "the abandoned probe re-run", || async {
            progress_of(&store, &fixture.tenant, &long)
                .await
                .filter(|state| state["status"] == "completed")
        })
        .await;
        assert_eq!(done["attempt"], 2, "the cut-short run counts: {done}");
        assert!(stopped.elapsed() < PROMPTLY, "{:?}", stopped.elapsed());
    }

    async fn jobs_unstarted_when_the_grace_period_suffices_keep_their_attempts(backend) {
        let (deployment, queue) = deployment(backend).await;
        let fixture = Fixture::new(&deployment);
        let store = deployment.store().await;
        let running = push_probe(&queue, &fixture, 6, 250).await;
        let waiting = [
            push_probe(&queue, &fixture, 1, 10).await,
            push_probe(&queue, &fixture, 1, 10).await,
        ];
        let mut victim = spawn_probe_workers(
            &deployment,
            &["--queue", "probe=1", "--fetch-batch", "3", "--shutdown-seconds", "20"],
        );
        wait_for_status(&store, &fixture.tenant, &running, "processing").await;
        let status = victim.terminate(PATIENCE);
        assert!(status.success(), "clean exit: {status}\n{}", victim.log_text());
        let finished = progress_of(&store, &fixture.tenant, &running).await.unwrap();
        assert_eq!(finished["status"], "completed", "finished within the grace period");
        assert_eq!(finished["attempt"], 1);
        let depth = probe_depth(&queue).await;
        assert_eq!((depth.pending, depth.running), (2, 0), "{depth:?}");

        let _rescuer = spawn_probe_workers(&deployment, &["--queue", "probe=2"]);
        for operation in &waiting {
            assert_eq!(
                completed_attempt(&deployment, &fixture, operation).await,
                1,
                "never started, so no attempt spent"
            );
        }
    }

    async fn a_worker_in_its_grace_period_is_not_taken_for_dead(backend) {
        let (deployment, queue) = deployment(backend).await;
        let fixture = Fixture::new(&deployment);
        let store = deployment.store().await;
        let operation_id = format!("op_{}", ulid::Ulid::generate());
        let probe = Probe {
            operation_id: storage::ids::OperationId::parse(&operation_id).unwrap(),
            agency_id: fixture.tenant.agency_id.clone(),
            is_sandbox: false,
            steps: 24,
            step_ms: 250,
            fail: false,
        };
        let job_id = queue.push(probe, PushOptions::default()).await.unwrap();
        // Heartbeats every second: three missed make a worker dead, far less
        // than the grace period the running probe needs.
        let fast = ["--heartbeat-seconds", "1", "--poll-millis", "50", "--no-schedules", "--queue", "probe=1"];
        let mut args = fast.to_vec();
        args.extend(["--shutdown-seconds", "20"]);
        let mut victim = deployment.spawn_workers(&args);
        wait_for_status(&store, &fixture.tenant, &operation_id, "processing").await;
        let _other = deployment.spawn_workers(&fast);
        let status = victim.terminate(PATIENCE);
        assert!(status.success(), "clean exit: {status}\n{}", victim.log_text());
        let done = progress_of(&store, &fixture.tenant, &operation_id).await.unwrap();
        assert_eq!(done["status"], "completed", "finished within the grace period: {done}");
        // The other worker saw the heartbeats go on and left the job alone.
        assert_eq!(starts(&deployment, &queue, &job_id).await, 1, "ran once");
    }
}
