//! The ops console's reads of the Redis queue: done jobs walked in push
//! order through the queue's own indexes (every job, and each agency's),
//! counted to a cap when filtered, and the indexes kept by the purge, by a
//! queue that held jobs before them, and after a push that died half way;
//! dead jobs walked through their own index, caught up when read.

use base64::Engine;
use platform::admin::{FoundJobs, JobFilter, JobWindow, QueueAdmin};
use platform::kinds::{DispatchEvents, Probe};
use platform::queue::redis_dead::{dead_order_key, dead_recent_key};
use platform::queue::redis_index::{agency_key, names_key, order_key};
use platform::queue::{JobQueue, QueueTarget};
use platform::{Job, PushOptions};
use storage::ids::{AgencyId, EventId, OperationId};
use storage::{Environment, Tenant};
use tests::deployment::eventually;
use tests::{Backend, TestApp};

use super::PATIENCE;

/// A probe of `agency` that succeeds (when the agency exists).
fn probe(agency: &AgencyId) -> Probe {
    Probe {
        operation_id: OperationId::generate(),
        agency_id: agency.clone(),
        is_sandbox: false,
        steps: 1,
        step_ms: 1,
        fail: false,
    }
}

/// Done probes (other queues' jobs, such as the events' dispatch, may
/// finish beside them).
fn done(agency: Option<&AgencyId>, search: Option<&str>) -> JobFilter {
    JobFilter {
        state: "done".into(),
        queue: Some(Probe::KIND.into()),
        agency: agency.map(ToString::to_string),
        search: search.map(str::to_owned),
        related: Vec::new(),
    }
}

fn window(offset: u64, limit: u64) -> JobWindow {
    JobWindow {
        offset,
        limit: Some(limit),
    }
}

fn ids(found: &FoundJobs) -> Vec<&str> {
    found.jobs.iter().map(|job| job.id.as_str()).collect()
}

/// A connection to the Redis database the queue lives in.
async fn redis_of(queue: &JobQueue) -> redis::aio::MultiplexedConnection {
    let url = queue.redis_url().expect("the Redis queue");
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn members(redis: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(redis)
        .await
        .unwrap()
}

#[tokio::test]
async fn done_jobs_on_redis_are_walked_in_push_order_through_the_queues_indexes() {
    let app = TestApp::builder(Backend::Sqlite)
        .redis()
        .with_workers()
        .spawn()
        .await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    let first = app.agency().await;
    let second = app.agency().await;
    // Six probes of one agency and four of another, run by the workers and
    // acknowledged as done by apalis-redis's own script.
    let mut pushed = Vec::new();
    for agency in [&first.id; 6].into_iter().chain([&second.id; 4]) {
        let job = probe(agency);
        let operation = job.operation_id.to_string();
        let id = queue.push(job, PushOptions::default()).await.unwrap();
        pushed.push((id, agency.clone(), operation));
    }
    for (_, agency, operation) in &pushed {
        let tenant = Tenant::new(agency.clone(), Environment::Live);
        super::wait_for_status(&app.store, &tenant, operation, "completed").await;
    }
    let all = eventually(PATIENCE, "ten done jobs", || async {
        let found = admin
            .find_jobs_in(&done(None, None), window(0, 50))
            .await
            .unwrap();
        (found.total == 10).then_some(found)
    })
    .await;
    let mut in_order: Vec<&str> = pushed.iter().map(|(id, _, _)| id.as_str()).collect();
    in_order.sort_unstable();
    assert_eq!(ids(&all), in_order, "every done job, in id order");
    assert!(!all.total_capped);

    // A window is a slice of that order, the total unchanged.
    let slice = admin
        .find_jobs_in(&done(None, None), window(3, 4))
        .await
        .unwrap();
    assert_eq!((ids(&slice), slice.total), (in_order[3..7].to_vec(), 10));

    // An agency's done jobs come from its own index.
    let of_second = admin
        .find_jobs_in(&done(Some(&second.id), None), window(0, 50))
        .await
        .unwrap();
    let mut second_ids: Vec<&str> = pushed
        .iter()
        .filter(|(_, agency, _)| *agency == second.id)
        .map(|(id, _, _)| id.as_str())
        .collect();
    second_ids.sort_unstable();
    assert_eq!((ids(&of_second), of_second.total), (second_ids.clone(), 4));
    let mut redis = redis_of(&queue).await;
    let indexed = members(&mut redis, &agency_key(Probe::KIND, second.id.as_str())).await;
    assert_eq!(indexed, second_ids, "the agency's index holds its jobs");

    // A search checks the payloads: one operation id finds its one job.
    let (id, _, operation) = &pushed[7];
    let found = admin
        .find_jobs_in(&done(None, Some(operation)), window(0, 50))
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec![id.as_str()], 1));
    let nothing = admin
        .find_jobs_in(&done(Some(&first.id), Some(operation)), window(0, 50))
        .await
        .unwrap();
    assert_eq!(nothing.total, 0, "the operation is the other agency's");

    // A push that died between apalis's script and the index: the next
    // purge, which visits every finished job, indexes the job again.
    let lost = in_order[0];
    let _: () = redis::cmd("ZREM")
        .arg(order_key(Probe::KIND))
        .arg(lost)
        .query_async(&mut redis)
        .await
        .unwrap();
    let without = admin
        .find_jobs_in(&done(None, None), window(0, 50))
        .await
        .unwrap();
    assert!(!ids(&without).contains(&lost));
    assert_eq!(admin.purge_finished(0, 0).await.unwrap(), 0);
    let again = admin
        .find_jobs_in(&done(None, None), window(0, 50))
        .await
        .unwrap();
    assert_eq!(ids(&again), in_order, "indexed again by the purge");

    // A queue that held jobs before its indexes existed is indexed once,
    // when a process connects.
    for key in [
        order_key(Probe::KIND),
        names_key(Probe::KIND),
        agency_key(Probe::KIND, first.id.as_str()),
        agency_key(Probe::KIND, second.id.as_str()),
        format!("{}:index:built", Probe::KIND),
    ] {
        let _: () = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut redis)
            .await
            .unwrap();
    }
    let url = queue.redis_url().unwrap().to_owned();
    let reconnected = JobQueue::connect(&QueueTarget::Redis(url)).await.unwrap();
    let rebuilt = QueueAdmin::new(reconnected);
    let found = rebuilt
        .find_jobs_in(&done(None, None), window(0, 50))
        .await
        .unwrap();
    assert_eq!(ids(&found), in_order, "rebuilt on connecting");
    let found = rebuilt
        .find_jobs_in(&done(Some(&second.id), None), window(0, 50))
        .await
        .unwrap();
    assert_eq!(ids(&found), second_ids, "agencies rebuilt too");
    let found = rebuilt
        .find_jobs_in(&done(None, Some(operation)), window(0, 50))
        .await
        .unwrap();
    assert_eq!(ids(&found), [id.as_str()], "names rebuilt too");

    // The purge takes finished jobs out of the indexes with their data.
    let far_future = 4_102_444_800;
    let purged = admin.purge_finished(far_future, far_future).await.unwrap();
    assert!(purged >= 10, "{purged}");
    assert!(
        members(&mut redis, &order_key(Probe::KIND))
            .await
            .is_empty()
    );
    assert!(
        members(&mut redis, &agency_key(Probe::KIND, second.id.as_str()))
            .await
            .is_empty()
    );
    assert!(
        members(&mut redis, &names_key(Probe::KIND))
            .await
            .is_empty()
    );
    let gone = admin
        .find_jobs_in(&done(None, None), window(0, 50))
        .await
        .unwrap();
    assert_eq!((gone.jobs.len(), gone.total), (0, 0));
}

/// Takes the jobs named in ARGV[6..] out of a queue's waiting places and
/// leaves them finished, as apalis-redis's acknowledgement leaves a job that
/// succeeded or one out of attempts (it knows nothing of the dead index).
/// KEYS: active list, fair set, scheduled set, the done or dead set. ARGV:
/// meta prefix, done_at, status, attempts, result, ids.
const MARK_FINISHED: &str = r#"
for i = 6, #ARGV do
    local id = ARGV[i]
    redis.call('LREM', KEYS[1], 0, id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('SADD', KEYS[4], id)
    redis.call('HSET', ARGV[1] .. ':' .. id, 'status', ARGV[3], 'attempts', ARGV[4], 'done_at', ARGV[2], 'result', ARGV[5])
end
return #ARGV - 5
"#;

/// Leaves the jobs `ids` of `queue` finished at `done_at` ([`MARK_FINISHED`],
/// 500 a call): done on their first attempt, or (`set` "dead") killed on
/// their third by a receiver's 503. Returns how many.
async fn mark_finished(
    redis: &mut redis::aio::MultiplexedConnection,
    queue: &str,
    ids: &[String],
    set: &str,
    done_at: i64,
) -> u64 {
    let (status, attempts, result) = match set {
        "dead" => ("Killed", 3, r#"{"Err":"Receiver answered 503"}"#),
        _ => ("Done", 1, r#"{"Ok":null}"#),
    };
    let mut marked = 0;
    for chunk in ids.chunks(500) {
        let count: u64 = redis::Script::new(MARK_FINISHED)
            .key(format!("{queue}:active"))
            .key(format!("{queue}:fair"))
            .key(format!("{queue}:scheduled"))
            .key(format!("{queue}:{set}"))
            .arg(format!("{queue}:meta"))
            .arg(done_at)
            .arg(status)
            .arg(attempts)
            .arg(result)
            .arg(chunk)
            .invoke_async(redis)
            .await
            .unwrap();
        marked += count;
    }
    marked
}

/// Leaves the probes `ids` done; returns how many.
async fn mark_done(redis: &mut redis::aio::MultiplexedConnection, ids: &[String]) -> u64 {
    mark_done_in(redis, Probe::KIND, ids).await
}

/// Leaves the jobs `ids` of `queue` done, as [`mark_done`] the probes.
async fn mark_done_in(
    redis: &mut redis::aio::MultiplexedConnection,
    queue: &str,
    ids: &[String],
) -> u64 {
    mark_finished(redis, queue, ids, "done", 1_800_000_000).await
}

/// Leaves the probes `ids` dead at `done_at`.
async fn mark_dead(redis: &mut redis::aio::MultiplexedConnection, ids: &[String], done_at: i64) {
    mark_finished(redis, Probe::KIND, ids, "dead", done_at).await;
}

#[tokio::test]
async fn an_agencys_many_done_jobs_on_redis_are_counted_to_a_cap_and_paged_on() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    // 1,030 probes of one agency and 20 of another, pushed and left done.
    let many = AgencyId::generate();
    let few = AgencyId::generate();
    let jobs: Vec<(Probe, PushOptions)> = (0..1_030)
        .map(|_| (probe(&many), PushOptions::default()))
        .chain((0..20).map(|_| (probe(&few), PushOptions::default())))
        .collect();
    let mut pushed = queue.push_many(jobs).await.unwrap();
    let mut redis = redis_of(&queue).await;
    let marked = mark_done(&mut redis, &pushed).await;
    assert_eq!(marked, 1_050);
    let mut of_many = pushed[..1_030].to_vec();
    of_many.sort_unstable();
    pushed.sort_unstable();

    // Unfiltered: the done set's size, exactly, and any window of the order.
    let deep = admin
        .find_jobs_in(&done(None, None), window(1_000, 25))
        .await
        .unwrap();
    assert_eq!(deep.total, 1_050);
    assert!(!deep.total_capped);
    assert_eq!(ids(&deep), pushed[1_000..1_025].to_vec());

    // An agency with more than the cap: counted past the window and a
    // thousand, then "more than".
    let first = admin
        .find_jobs_in(&done(Some(&many), None), window(0, 25))
        .await
        .unwrap();
    assert_eq!((first.total, first.total_capped), (1_000, true));
    assert_eq!(ids(&first), of_many[..25].to_vec());
    // A window reaching the end counts exactly.
    let last = admin
        .find_jobs_in(&done(Some(&many), None), window(1_025, 25))
        .await
        .unwrap();
    assert_eq!((last.total, last.total_capped), (1_030, false));
    assert_eq!(ids(&last), of_many[1_025..].to_vec());
    // A bulk action's read has no window and counts every match.
    let every = admin
        .find_jobs_in(&done(Some(&many), None), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((every.jobs.len(), every.total), (1_030, 1_030));

    // A search over done jobs, capped the same way.
    let searched = admin
        .find_jobs_in(&done(None, Some(many.as_str())), window(0, 25))
        .await
        .unwrap();
    assert_eq!((searched.total, searched.total_capped), (1_000, true));
    assert_eq!(ids(&searched), of_many[..25].to_vec());
    let small = admin
        .find_jobs_in(&done(None, Some(few.as_str())), window(0, 25))
        .await
        .unwrap();
    assert_eq!((small.total, small.total_capped), (20, false));
}

mod dead;
mod search;
