//! Worker processes: jobs pushed by the API run in `workers run`; SIGTERM lets
//! the running job finish; a job of a SIGKILLed worker runs again elsewhere;
//! events committed without a dispatch push (a crash right after the commit)
//! are swept; two schedulers run each tick once.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use storage::listings::NewListing;
use tests::deployment::{Deployment, eventually, free_port, serve};
use tests::{Backend, backend_tests};

use super::{Fixture, PATIENCE, progress_of, wait_for_status};

const FAST: [&str; 4] = ["--heartbeat-seconds", "1", "--poll-millis", "50"];

backend_tests! {
    async fn a_job_pushed_by_the_api_process_runs_in_a_workers_process(backend) {
        // Embedded profile on SQLite; distributed (PostgreSQL and a Redis queue) on PostgreSQL.
        let deployment = match backend {
            Backend::Sqlite => Deployment::new(backend).await,
            Backend::Postgres => Deployment::with_redis(backend).await,
        };
        let fixture = Fixture::new(&deployment);
        let key = deployment.admin_ok(&["create-key", "--agency", &fixture.agency_id, "--name", "w", "--scopes", "listings:write,listings:read"]);
        let owner = deployment.store().await.agencies().owner(&fixture.tenant.agency_id).await.unwrap().id;
        let client = tests::app::base_client().build().unwrap();
        let server = serve(&deployment, &["--no-workers"], &client, "http").await;
        let created = client
            .post(format!("{}/api/v1/listings", server.base_url))
            .header("X-API-Key", key["key"].as_str().unwrap())
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({"address": "9 Queue Lane", "owner_user_id": owner, "agent_one_id": owner}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);

        let store = deployment.store().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let events = store.outbox().for_tenant(&fixture.tenant, 0, 10).await.unwrap();
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|e| e.dispatched_at.is_none()), "the API runs no workers");

        // Schedules off: only the API's own push can bring these events to the workers.
        let status_listen = format!("127.0.0.1:{}", free_port());
        let mut args = FAST.to_vec();
        args.extend(["--no-schedules", "--status-listen", &status_listen]);
        let _workers = deployment.spawn_workers(&args);
        let status = format!("http://{status_listen}");
        eventually(PATIENCE, "workers ready", || async {
            let ready = client.get(format!("{status}/readyz")).send().await.ok()?;
            (ready.status() == 200).then_some(())
        })
        .await;
        let health = client.get(format!("{status}/healthz")).send().await.unwrap();
        // The status listener's answers carry what the API's do.
        assert_eq!(health.headers()["x-content-type-options"], "nosniff");
        assert_eq!(health.headers()["cache-control"], "no-store");
        assert_eq!(health.json::<serde_json::Value>().await.unwrap(), json!({"status": "ok"}));
        eventually(PATIENCE, "events dispatched by the workers process", || async {
            let events = store.outbox().for_tenant(&fixture.tenant, 0, 10).await.unwrap();
            events.iter().all(|e| e.dispatched_at.is_some()).then_some(())
        })
        .await;
        let operation = fixture.probe(&deployment, 2, 50);
        let done = wait_for_status(&store, &fixture.tenant, &operation, "completed").await;
        assert_eq!(done["attempt"], 1);

        // The workers process reports its own jobs, and the queues' depth, to Prometheus.
        let metrics = client.get(format!("{status}/metrics")).send().await.unwrap();
        assert_eq!(metrics.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
        let text = metrics.text().await.unwrap();
        let has = |prefix: &str, labels: &[&str]| {
            text.lines().any(|line| line.starts_with(prefix) && labels.iter().all(|l| line.contains(l)))
        };
        assert!(has("jobs_total{", &["kind=\"probe\"", "outcome=\"succeeded\""]), "{text}");
        assert!(has("jobs_total{", &["kind=\"outbox_dispatch\"", "outcome=\"succeeded\""]), "{text}");
        assert!(has("queue_finished_jobs{", &["queue=\"probe\""]), "{text}");
        assert!(has("queue_depth{", &["queue=\"probe\"", "state=\"pending\""]), "{text}");
        assert!(text.contains("# HELP queue_depth "), "{text}");
    }
}

#[tokio::test]
async fn sigterm_lets_the_running_job_finish() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let fixture = Fixture::new(&deployment);
    let store = deployment.store().await;
    let mut workers = deployment.spawn_workers(&FAST);
    let operation = fixture.probe(&deployment, 8, 250);
    wait_for_status(&store, &fixture.tenant, &operation, "processing").await;
    let status = workers.terminate(PATIENCE);
    assert!(
        status.success(),
        "clean exit: {status}\n{}",
        workers.log_text()
    );
    let latest = progress_of(&store, &fixture.tenant, &operation)
        .await
        .unwrap();
    assert_eq!(
        latest["status"], "completed",
        "the running probe finished before exit"
    );
    assert_eq!(latest["attempt"], 1);
}

backend_tests! {
    async fn a_sigkilled_workers_job_runs_again_on_another_worker(backend) {
    // The embedded queue on SQLite; the Redis queue on PostgreSQL.
    let deployment = match backend {
        Backend::Sqlite => Deployment::new(backend).await,
        Backend::Postgres => Deployment::with_redis(backend).await,
    };
    let fixture = Fixture::new(&deployment);
    let store = deployment.store().await;
    let victim = deployment.spawn_workers(&FAST);
    let operation = fixture.probe(&deployment, 20, 250);
    wait_for_status(&store, &fixture.tenant, &operation, "processing").await;
    // The queue counts the job in the worker's hands (on Redis from the
    // registered workers' in-flight sets, never by scanning the keyspace).
    let queue = platform::JobQueue::connect(&deployment.queue_target()).await.unwrap();
    let depths = platform::admin::QueueAdmin::new(queue).depths().await.unwrap();
    let probe = depths.iter().find(|depth| depth.queue == "probe").unwrap();
    assert_eq!((probe.running, probe.pending), (1, 0), "{probe:?}");
    victim.signal("KILL");
    drop(victim);
    // Another host's worker notices the missed heartbeats and runs the job again.
    let _rescuer = deployment.spawn_workers(&FAST);
    let done = eventually(
        Duration::from_secs(60),
        "the probe re-run to completion",
        || async {
            progress_of(&store, &fixture.tenant, &operation)
                .await
                .filter(|state| state["status"] == "completed")
        },
    )
    .await;
    assert!(
        done["attempt"].as_u64().unwrap() >= 2,
        "a second attempt: {done}"
    );
    }
}

backend_tests! {
    async fn events_committed_without_a_dispatch_push_are_swept(backend) {
        let deployment = Deployment::new(backend).await;
        let fixture = Fixture::new(&deployment);
        // This store announces to nobody: exactly the state a crash between
        // the commit and the push leaves behind.
        let store = deployment.store().await;
        let owner = store.agencies().owner(&fixture.tenant.agency_id).await.unwrap().id;
        store
            .listings()
            .create(&fixture.tenant, NewListing {
                address: "1 Crash Street".into(),
                owner_user_id: owner.to_string(),
                agent_one_id: owner.to_string(),
                ..Default::default()
            })
            .await
            .unwrap();
        let events = store.outbox().for_tenant(&fixture.tenant, 0, 10).await.unwrap();
        assert!(events.iter().all(|e| e.dispatched_at.is_none()));
        // The restarted fleet's sweep finds and dispatches them.
        let _workers = deployment.spawn_workers(&FAST);
        eventually(PATIENCE, "swept events dispatched", || async {
            let events = store.outbox().for_tenant(&fixture.tenant, 0, 10).await.unwrap();
            events.iter().all(|e| e.dispatched_at.is_some()).then_some(())
        })
        .await;
    }
}

/// Two schedulers (two hosts) fire every tick; each tick runs once.
#[tokio::test]
async fn two_schedulers_run_each_tick_once() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let mut first = deployment.spawn_workers(&FAST);
    let mut second = deployment.spawn_workers(&FAST);
    // Two outbox sweep ticks at least (every five seconds).
    tokio::time::sleep(Duration::from_secs(11)).await;
    first.terminate(PATIENCE);
    second.terminate(PATIENCE);
    let mut claims: BTreeMap<String, Vec<bool>> = BTreeMap::new();
    let logs = [first.log_text(), second.log_text()];
    for log in &logs {
        for line in log
            .lines()
            .filter(|l| l.contains("maintenance tick") && l.contains("task=\"outbox_sweep\""))
        {
            let tick = line
                .split("tick=")
                .nth(1)
                .and_then(|t| t.split_whitespace().next())
                .unwrap()
                .to_owned();
            claims
                .entry(tick)
                .or_default()
                .push(line.contains("claimed=true"));
        }
    }
    let both_fired: Vec<&Vec<bool>> = claims.values().filter(|c| c.len() == 2).collect();
    assert!(
        both_fired.len() >= 2,
        "both schedulers fired the same ticks: {claims:?}"
    );
    for outcomes in claims.values() {
        assert_eq!(
            outcomes.iter().filter(|claimed| **claimed).count(),
            1,
            "one run per tick: {claims:?}"
        );
    }
}
