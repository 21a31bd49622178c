//! Agencies take turns on the fair queues: while one agency's backlog is
//! processing, another agency's single job starts next, not after the
//! backlog, with several worker processes sharing the queue, on both queue
//! backends. A per-agency cap keeps one agency's jobs under N at once.

use std::time::Duration;

use platform::admin::QueueAdmin;
use platform::kinds::Probe;
use platform::{Job, JobQueue, PushOptions, QueueTarget};
use storage::ids::OperationId;
use storage::{Environment, Store, Tenant};
use tests::deployment::{Deployment, eventually};
use tests::{Backend, TestApp};

use super::{Fixture, PATIENCE, progress_of, wait_for_status};

fn probe(tenant: &Tenant, steps: u32, step_ms: u64) -> Probe {
    Probe {
        operation_id: OperationId::generate(),
        agency_id: tenant.agency_id.clone(),
        is_sandbox: false,
        steps,
        step_ms,
        fail: false,
    }
}

async fn status_count(store: &Store, tenant: &Tenant, probes: &[Probe], status: &str) -> usize {
    let mut count = 0;
    for probe in probes {
        if progress_of(store, tenant, probe.operation_id.as_str())
            .await
            .is_some_and(|state| state["status"] == status)
        {
            count += 1;
        }
    }
    count
}

/// Agency A pushes a backlog of 20 probes; once they run, agency B pushes
/// one. B's probe finishes while A still has most of its backlog to go (first
/// in, first out it would finish last).
async fn a_single_job_overtakes_a_backlog(deployment: Deployment, queue: JobQueue) {
    let store = deployment.store().await;
    let busy = Fixture::new(&deployment);
    let quiet = Fixture::new(&deployment);
    let args = [
        "--queue",
        "probe=1",
        "--poll-millis",
        "50",
        "--no-schedules",
    ];
    let backlog: Vec<Probe> = (0..20).map(|_| probe(&busy.tenant, 2, 150)).collect();
    queue
        .push_many(
            backlog
                .iter()
                .map(|job| (job.clone(), PushOptions::default()))
                .collect(),
        )
        .await
        .unwrap();
    // Waiting, as the operators' depth counts it, whichever way it waits.
    let depth = QueueAdmin::new(queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == Probe::KIND)
        .unwrap();
    assert_eq!((depth.pending, depth.scheduled), (20, 0), "{depth:?}");
    // Two worker processes share the queue, one probe at a time each.
    let _workers = [
        deployment.spawn_workers(&args),
        deployment.spawn_workers(&args),
    ];
    eventually(PATIENCE, "the backlog processing", || async {
        (status_count(&store, &busy.tenant, &backlog, "processing").await > 0).then_some(())
    })
    .await;
    let single = probe(&quiet.tenant, 1, 1);
    queue
        .push(single.clone(), PushOptions::default())
        .await
        .unwrap();
    wait_for_status(
        &store,
        &quiet.tenant,
        single.operation_id.as_str(),
        "completed",
    )
    .await;
    let done = status_count(&store, &busy.tenant, &backlog, "completed").await;
    assert!(
        done <= 6,
        "B's job waited for {done} of A's 20 jobs; it should start next"
    );
    // Nothing of A's is lost on the way.
    eventually(
        Duration::from_secs(60),
        "the whole backlog done",
        || async {
            (status_count(&store, &busy.tenant, &backlog, "completed").await == backlog.len())
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn agencies_take_turns_on_the_sqlite_queue_across_processes() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let file = deployment.db.data_dir().join(platform::config::QUEUE_FILE);
    let queue = JobQueue::connect(&QueueTarget::SqliteFile(file))
        .await
        .unwrap();
    a_single_job_overtakes_a_backlog(deployment, queue).await;
}

#[tokio::test]
async fn agencies_take_turns_on_the_redis_queue_across_processes() {
    let deployment = Deployment::with_redis(Backend::Sqlite).await;
    let url = deployment.redis_url.clone().unwrap();
    let queue = JobQueue::connect(&QueueTarget::Redis(url)).await.unwrap();
    a_single_job_overtakes_a_backlog(deployment, queue).await;
}

/// With `probe=1` per agency and two slots, A's three probes run one at a
/// time while B's takes the other slot.
async fn an_agency_runs_at_most_its_cap(redis: bool) {
    let mut builder = TestApp::builder(Backend::Sqlite)
        .with_workers()
        .tune_workers(|settings| {
            settings.queues = [(Probe::KIND, 2)].into_iter().collect();
            settings.agency_caps = [(Probe::KIND, 1)].into_iter().collect();
            settings.schedules = false;
        });
    if redis {
        builder = builder.redis();
    }
    let app = builder.spawn().await;
    let queue = app.state.platform().queue.clone();
    let a = Tenant::new(app.agency().await.id, Environment::Live);
    let b = Tenant::new(app.agency().await.id, Environment::Live);
    let backlog: Vec<Probe> = (0..3).map(|_| probe(&a, 4, 150)).collect();
    for job in &backlog {
        queue
            .push(job.clone(), PushOptions::default())
            .await
            .unwrap();
    }
    let single = probe(&b, 4, 150);
    queue
        .push(single.clone(), PushOptions::default())
        .await
        .unwrap();
    let mut most_of_a = 0;
    let mut side_by_side = false;
    loop {
        let running_a = status_count(&app.store, &a, &backlog, "processing").await;
        let running_b =
            status_count(&app.store, &b, std::slice::from_ref(&single), "processing").await;
        most_of_a = most_of_a.max(running_a);
        side_by_side |= running_a == 1 && running_b == 1;
        if status_count(&app.store, &a, &backlog, "completed").await == backlog.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(most_of_a, 1, "A never ran two probes at once");
    assert!(side_by_side, "B's probe took the slot A could not");
    wait_for_status(&app.store, &b, single.operation_id.as_str(), "completed").await;
}

#[tokio::test]
async fn the_agency_cap_holds_on_the_sqlite_queue() {
    an_agency_runs_at_most_its_cap(false).await;
}

#[tokio::test]
async fn the_agency_cap_holds_on_the_redis_queue() {
    an_agency_runs_at_most_its_cap(true).await;
}

/// The Redis fair set's jobs of `queue`, lowest tag first, with their tags.
async fn fair_set(connection: &mut apalis_redis::ConnectionManager) -> Vec<(String, u64)> {
    redis::cmd("ZRANGE")
        .arg(format!("{}:fair", Probe::KIND))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(connection)
        .await
        .unwrap()
}

async fn ready_list(connection: &mut apalis_redis::ConnectionManager) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(format!("{}:active", Probe::KIND))
        .arg(0)
        .arg(-1)
        .query_async(connection)
        .await
        .unwrap()
}

/// On Redis a process feeds only its own free worker slots: a pusher without
/// workers leaves its jobs tagged in the fair set, one with a free slot moves
/// the lowest tag into the ready list. A job left parked (its pusher stopped
/// between parking it and entering it) keeps the tag it was given.
#[tokio::test]
async fn redis_feeds_only_free_slots_and_parked_jobs_keep_their_tags() {
    let url = tests::services::isolated_redis_url();
    let queue = JobQueue::connect(&QueueTarget::Redis(url)).await.unwrap();
    let platform::queue::QueueBackend::Redis(connection) = queue.backend() else {
        unreachable!("a Redis queue")
    };
    let mut connection = connection.clone();
    let a = Tenant::new(storage::ids::AgencyId::generate(), Environment::Live);
    let b = Tenant::new(storage::ids::AgencyId::generate(), Environment::Live);
    let ids = queue
        .push_many(
            (0..3)
                .map(|_| (probe(&a, 1, 1), PushOptions::default()))
                .collect(),
        )
        .await
        .unwrap();

    // No workers here: nothing fed, all three waiting under tags 1, 2, 3.
    assert!(ready_list(&mut connection).await.is_empty());
    let tagged: Vec<(String, u64)> = ids.iter().cloned().zip(1..).collect();
    assert_eq!(fair_set(&mut connection).await, tagged);

    // The second job's pusher stopped before entering it: parked, it still
    // counts as waiting, and the next feed enters it under its own tag.
    let (parked, tag) = tagged[1].clone();
    let _: () = redis::pipe()
        .atomic()
        .zrem(format!("{}:fair", Probe::KIND), &parked)
        .zadd(
            format!("{}:scheduled", Probe::KIND),
            &parked,
            platform::queue::PARKED_AT + tag,
        )
        .query_async(&mut connection)
        .await
        .unwrap();
    let depth = QueueAdmin::new(queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == Probe::KIND)
        .unwrap();
    assert_eq!((depth.pending, depth.scheduled), (3, 0), "{depth:?}");

    // One worker slot, free: the lowest tag is fed, and only it.
    queue.set_worker_slots(Probe::KIND, 1);
    assert_eq!(queue.feed_fair(Probe::KIND).await.unwrap(), 1);
    assert_eq!(ready_list(&mut connection).await, vec![ids[0].clone()]);
    assert_eq!(fair_set(&mut connection).await, tagged[1..].to_vec());

    // The fed job is claimed and running: no slot free, nothing more fed,
    // even when B pushes; B's job lines up before A's next.
    let _: Option<String> = redis::cmd("LPOP")
        .arg(format!("{}:active", Probe::KIND))
        .query_async(&mut connection)
        .await
        .unwrap();
    let running = queue.start_fair_job(Probe::KIND).unwrap();
    let single = queue
        .push(probe(&b, 1, 1), PushOptions::default())
        .await
        .unwrap();
    assert!(ready_list(&mut connection).await.is_empty());
    let waiting = fair_set(&mut connection).await;
    assert_eq!(
        waiting.first().map(|(id, _)| id),
        Some(&single),
        "{waiting:?}"
    );

    // The slot frees: B's job is the one fed.
    drop(running);
    assert_eq!(queue.feed_fair(Probe::KIND).await.unwrap(), 1);
    assert_eq!(ready_list(&mut connection).await, vec![single]);

    // B's job is claimed and done. B's next, again with nothing of B's
    // waiting, goes before A's next too, although B's last tag is the one
    // last fed (one past it would tie with A's next, and the older wins).
    let _: Option<String> = redis::cmd("LPOP")
        .arg(format!("{}:active", Probe::KIND))
        .query_async(&mut connection)
        .await
        .unwrap();
    let again = queue
        .push(probe(&b, 1, 1), PushOptions::default())
        .await
        .unwrap();
    assert_eq!(ready_list(&mut connection).await, vec![again]);
}

/// On SQLite an agency whose earlier jobs are all done lines up before the
/// head of another agency's backlog, even when its last tag would have tied
/// with the head's (both were tagged from the same clock).
#[tokio::test]
async fn sqlite_an_agency_with_nothing_waiting_goes_before_the_head() {
    let dir = tempfile::tempdir().unwrap();
    let queue = JobQueue::connect(&QueueTarget::SqliteFile(dir.path().join("queue.sqlite3")))
        .await
        .unwrap();
    let platform::queue::QueueBackend::Sqlite(pool) = queue.backend() else {
        unreachable!("a SQLite queue")
    };
    let a = Tenant::new(storage::ids::AgencyId::generate(), Environment::Live);
    let b = Tenant::new(storage::ids::AgencyId::generate(), Environment::Live);
    let settle = |status: &'static str, id: String| async move {
        sqlx::query("update Jobs set status = ?1 where id = ?2")
            .bind(status)
            .bind(id)
            .execute(pool)
            .await
            .unwrap();
    };
    // B's earlier photo, done; then A's upload of three, its first running.
    let earlier = queue
        .push(probe(&b, 1, 1), PushOptions::default())
        .await
        .unwrap();
    settle("Done", earlier).await;
    let backlog = queue
        .push_many(
            (0..3)
                .map(|_| (probe(&a, 1, 1), PushOptions::default()))
                .collect(),
        )
        .await
        .unwrap();
    settle("Running", backlog[0].clone()).await;
    let single = queue
        .push(probe(&b, 1, 1), PushOptions::default())
        .await
        .unwrap();
    let next: String = sqlx::query_scalar(
        "select id from Jobs where status = 'Pending' and lock_by is null \
         order by priority desc, run_at asc, id asc limit 1",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        next, single,
        "B's photo goes before A's second ({})",
        backlog[1]
    );
}
