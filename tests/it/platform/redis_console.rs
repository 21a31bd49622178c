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

#[tokio::test]
async fn a_redis_search_checks_ids_payloads_last_errors_and_related_ids_where_they_are_kept() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    let agency = AgencyId::generate();
    let probes: Vec<Probe> = (0..3).map(|_| probe(&agency)).collect();
    let operations: Vec<String> = probes
        .iter()
        .map(|probe| probe.operation_id.to_string())
        .collect();
    let ids = queue
        .push_many(
            probes
                .into_iter()
                .map(|probe| (probe, PushOptions::default()))
                .collect(),
        )
        .await
        .unwrap();
    let mut redis = redis_of(&queue).await;
    mark_done(&mut redis, &ids).await;
    // The last one died instead, of an error its payload does not hold.
    let dead = ids[2].clone();
    let _: () = redis::pipe()
        .srem(format!("{}:done", Probe::KIND), &dead)
        .ignore()
        .sadd(format!("{}:dead", Probe::KIND), &dead)
        .ignore()
        .hset(
            format!("{}:meta:{dead}", Probe::KIND),
            "result",
            r#"{"Err":"Receiver answered 410 Gone"}"#,
        )
        .ignore()
        .query_async(&mut redis)
        .await
        .unwrap();
    let search = |state: &str, text: &str, related: &[&str]| JobFilter {
        state: state.into(),
        queue: None,
        agency: None,
        search: Some(text.to_owned()),
        related: related.iter().map(|id| (*id).to_owned()).collect(),
    };
    let found = |filter: JobFilter| {
        let admin = admin.clone();
        async move {
            let found = admin.find_jobs_in(&filter, window(0, 50)).await.unwrap();
            found.jobs.into_iter().map(|job| job.id).collect::<Vec<_>>()
        }
    };
    // The id, in any case, and the payload.
    assert_eq!(
        found(search("done", &ids[0].to_lowercase(), &[])).await,
        [ids[0].clone()]
    );
    assert_eq!(
        found(search("done", &operations[1].to_uppercase(), &[])).await,
        [ids[1].clone()]
    );
    // The last error, in any case; not the result's own wording.
    assert_eq!(found(search("dead", "answered 410", &[])).await, [dead]);
    assert!(found(search("dead", "err", &[])).await.is_empty());
    // A listing number stands for its related ids, each named whole.
    assert_eq!(
        found(search("done", "QX7ABC", &[&operations[0]])).await,
        [ids[0].clone()]
    );
    let cut_short = &operations[0][..operations[0].len() - 1];
    assert!(
        found(search("done", "QX7ABC", &[cut_short]))
            .await
            .is_empty()
    );
    // The agency, with a search.
    let mut with_agency = search("done", &operations[1], &[]);
    with_agency.agency = Some(agency.to_string());
    assert_eq!(found(with_agency.clone()).await, [ids[1].clone()]);
    with_agency.agency = Some(AgencyId::generate().to_string());
    assert!(found(with_agency).await.is_empty());
}

#[tokio::test]
async fn a_redis_search_for_an_id_reads_the_range_of_the_jobs_naming_it() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    // Three dispatches: the first names two events, the second one of them,
    // the third another; ids inside an array are names too.
    let events: Vec<EventId> = (0..3).map(|_| EventId::generate()).collect();
    let jobs = [
        vec![events[0].clone(), events[1].clone()],
        vec![events[1].clone()],
        vec![events[2].clone()],
    ];
    let mut pushed = Vec::new();
    for event_ids in jobs {
        let id = queue
            .push(DispatchEvents { event_ids }, PushOptions::default())
            .await
            .unwrap();
        pushed.push(id);
    }
    let mut redis = redis_of(&queue).await;
    // Every name with its job, in lower case; in the index before the jobs
    // are done, read only once they are.
    let mut expected: Vec<String> = [(0, 0), (1, 0), (1, 1), (2, 2)]
        .iter()
        .map(|&(event, job)| format!("{} {}", events[event].as_str().to_lowercase(), pushed[job]))
        .collect();
    expected.sort_unstable();
    assert_eq!(
        members(&mut redis, &names_key(DispatchEvents::KIND)).await,
        expected
    );
    let search = |text: &str, related: &[&EventId]| JobFilter {
        state: "done".into(),
        queue: None,
        agency: None,
        search: Some(text.to_owned()),
        related: related.iter().map(ToString::to_string).collect(),
    };
    let found = |filter: JobFilter| {
        let admin = admin.clone();
        async move {
            let found = admin.find_jobs_in(&filter, window(0, 50)).await.unwrap();
            let ids: Vec<String> = found.jobs.into_iter().map(|job| job.id).collect();
            (ids, found.total)
        }
    };
    assert_eq!(found(search(events[1].as_str(), &[])).await, (vec![], 0));
    mark_done_in(&mut redis, DispatchEvents::KIND, &pushed).await;
    // An id, in any case: the jobs naming it, in push order.
    let naming_second = (vec![pushed[0].clone(), pushed[1].clone()], 2);
    assert_eq!(found(search(events[1].as_str(), &[])).await, naming_second);
    assert_eq!(
        found(search(&events[1].as_str().to_lowercase(), &[])).await,
        naming_second
    );
    // A listing number's related ids: a job naming two of them is found
    // once.
    assert_eq!(
        found(search("QX7ABC", &[&events[0], &events[1]])).await,
        naming_second
    );
    assert_eq!(
        found(search("QX7ABC", &[&events[2]])).await,
        (vec![pushed[2].clone()], 1)
    );
    // Text that is not an id is looked for in the payloads, newest first:
    // part of an id finds the jobs naming it.
    let part = &events[1].as_str()[..12];
    assert_eq!(
        found(search(part, &[])).await,
        (vec![pushed[1].clone(), pushed[0].clone()], 2)
    );
    // Gone with the jobs.
    let far_future = 4_102_444_800;
    admin.purge_finished(far_future, far_future).await.unwrap();
    assert!(
        members(&mut redis, &names_key(DispatchEvents::KIND))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn free_text_on_redis_reads_the_newest_done_jobs_up_to_a_budget_and_says_so() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let agency = AgencyId::generate();
    let jobs: Vec<(Probe, PushOptions)> = (0..30)
        .map(|_| (probe(&agency), PushOptions::default()))
        .collect();
    let mut pushed = queue.push_many(jobs).await.unwrap();
    let mut redis = redis_of(&queue).await;
    mark_done(&mut redis, &pushed).await;
    pushed.sort_unstable();
    let newest_first: Vec<&str> = pushed.iter().rev().map(String::as_str).collect();
    // Text every probe holds, and that is not an id.
    let text = done(None, Some("step_ms"));
    // A budget of ten: the ten newest read, five shown, and how far it read.
    let budgeted = QueueAdmin::new(queue.clone()).with_search_budget(10);
    let found = budgeted.find_jobs_in(&text, window(0, 5)).await.unwrap();
    assert_eq!(ids(&found), newest_first[..5].to_vec());
    assert_eq!(
        (found.total, found.total_capped, found.searched),
        (10, false, Some(10))
    );
    let next = budgeted.find_jobs_in(&text, window(5, 5)).await.unwrap();
    assert_eq!(ids(&next), newest_first[5..10].to_vec());
    // Text that finds nothing reads the same ten and stops.
    let nothing = budgeted
        .find_jobs_in(&done(None, Some("no such text")), window(0, 5))
        .await
        .unwrap();
    assert_eq!((nothing.total, nothing.searched), (0, Some(10)));
    // A budget that reaches every job says nothing of it.
    let whole = QueueAdmin::new(queue.clone()).with_search_budget(30);
    let found = whole.find_jobs_in(&text, window(0, 5)).await.unwrap();
    assert_eq!((found.total, found.searched), (30, None));
    // An id is read from the names, whatever the budget.
    let operation: String = redis::cmd("HGET")
        .arg(format!("{}:data", Probe::KIND))
        .arg(&pushed[0])
        .query_async::<String>(&mut redis)
        .await
        .map(|data| {
            let job: serde_json::Value = serde_json::from_str(&data).unwrap();
            job["operation_id"].as_str().unwrap().to_owned()
        })
        .unwrap();
    let found = budgeted
        .find_jobs_in(&done(None, Some(&operation)), window(0, 5))
        .await
        .unwrap();
    assert_eq!(
        (ids(&found), found.total, found.searched),
        (vec![pushed[0].as_str()], 1, None)
    );
    // A bulk action reads every job, oldest first, with no budget.
    let every = budgeted.find_jobs_in(&text, JobWindow::ALL).await.unwrap();
    assert_eq!(
        (every.jobs.len(), every.total, every.searched),
        (30, 30, None)
    );
    assert_eq!(every.jobs[0].id, pushed[0]);
}

#[tokio::test]
async fn the_console_says_how_far_a_free_text_search_of_redis_read() {
    let app = TestApp::builder(Backend::Sqlite)
        .redis()
        .with_ops(super::ops::USER, super::ops::PASSWORD)
        .spawn()
        .await;
    let queue = app.state.platform().queue.clone();
    // More done jobs than a page of free text reads.
    let agency = AgencyId::generate();
    let total = platform::admin::SEARCH_BUDGET + 10;
    let mut pushed = Vec::new();
    let mut redis = redis_of(&queue).await;
    while (pushed.len() as u64) < total {
        let chunk = (total - pushed.len() as u64).min(5_000);
        let jobs: Vec<(Probe, PushOptions)> = (0..chunk)
            .map(|_| (probe(&agency), PushOptions::default()))
            .collect();
        let ids = queue.push_many(jobs).await.unwrap();
        mark_done(&mut redis, &ids).await;
        pushed.extend(ids);
    }
    pushed.sort_unstable();
    // Text every job holds: counted to the cap long before the budget,
    // newest first.
    let page = super::ops::ops_get(&app, "/ops/?state=done&search=step_ms")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(
            "More than <strong>1000</strong> done jobs match; showing 1–25, newest first."
        ),
        "{page}"
    );
    assert!(!page.contains(r#"id="search-reach""#), "{page}");
    assert!(
        page.contains(pushed.last().unwrap().as_str()),
        "newest first"
    );
    // Text no job holds: the budget read, and the page says how far.
    let budget = platform::admin::SEARCH_BUDGET;
    let page = super::ops::ops_get(&app, "/ops/?state=done&search=no%20such%20text")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!(
            "<strong>0</strong> done jobs match among the <strong>{budget}</strong> most recently pushed."
        )),
        "{page}"
    );
    assert!(page.contains(r#"id="search-reach""#), "{page}");
    // Looked at in Chromium, at desktop and phone width.
    let browser = tests::browser::Browser::start().await;
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        super::ops::USER,
        super::ops::PASSWORD
    ));
    browser
        .set_header("Authorization", &format!("Basic {credentials}"))
        .await;
    browser
        .open(&super::ops::ops(
            &app,
            "/ops/?state=done&search=no%20such%20text",
        ))
        .await;
    browser.find("#search-reach", super::PATIENCE).await;
    browser.look_at("ops-search-reach").await;
    let found: serde_json::Value = super::ops::ops_get(
        &app,
        "/ops/api/jobs?state=done&search=no%20such%20text&limit=50",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        (
            found["count"].as_u64(),
            found["searched"].as_u64(),
            found["newest_first"].as_bool()
        ),
        (Some(0), Some(budget), Some(true)),
        "{found}"
    );
    // A whole id is indexed: the page says nothing of a budget.
    let page = super::ops::ops_get(&app, &format!("/ops/?state=done&search={}", pushed[0]))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<strong>1</strong> done job matches; showing 1–1."),
        "{page}"
    );
    assert!(!page.contains(r#"id="search-reach""#), "{page}");
}

#[tokio::test]
async fn dead_jobs_on_redis_are_walked_through_a_dead_index_caught_up_when_read() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    let (order, recent) = (dead_order_key(Probe::KIND), dead_recent_key(Probe::KIND));
    // Sixty probes of one agency and five of another die, the last three of
    // the sixty an hour after the rest.
    let many = AgencyId::generate();
    let few = AgencyId::generate();
    let jobs: Vec<(Probe, PushOptions)> = (0..60)
        .map(|_| (probe(&many), PushOptions::default()))
        .chain((0..5).map(|_| (probe(&few), PushOptions::default())))
        .collect();
    let pushed = queue.push_many(jobs).await.unwrap();
    let mut redis = redis_of(&queue).await;
    mark_dead(&mut redis, &pushed[..57], 1_800_000_000).await;
    mark_dead(&mut redis, &pushed[60..], 1_800_000_000).await;
    mark_dead(&mut redis, &pushed[57..60], 1_800_003_600).await;
    assert!(members(&mut redis, &order).await.is_empty(), "not yet read");
    let dead = |agency: Option<&AgencyId>, search: Option<&str>| JobFilter {
        state: "dead".into(),
        ..done(agency, search)
    };

    // A page of them, in id order, counted by the dead set's size; the read
    // indexed every one, with the time it died.
    let mut in_order = pushed.clone();
    in_order.sort_unstable();
    let page = admin
        .find_jobs_in(&dead(None, None), window(10, 20))
        .await
        .unwrap();
    assert_eq!((page.total, page.total_capped), (65, false));
    assert_eq!(ids(&page), in_order[10..30].to_vec());
    assert!(page.jobs.iter().all(|job| job.state == "dead"));
    assert_eq!(members(&mut redis, &order).await, in_order);
    let died: f64 = redis::cmd("ZSCORE")
        .arg(&recent)
        .arg(&pushed[58])
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(died, 1_800_003_600.0);

    // An agency's, checked job by job; a search of their error.
    let mut of_few = pushed[60..].to_vec();
    of_few.sort_unstable();
    let few_found = admin
        .find_jobs_in(&dead(Some(&few), None), window(0, 50))
        .await
        .unwrap();
    assert_eq!(
        (few_found.total, ids(&few_found)),
        (5, of_few.iter().map(String::as_str).collect())
    );
    let errors = admin
        .find_jobs_in(&dead(None, Some("answered 503")), window(0, 10))
        .await
        .unwrap();
    assert_eq!(
        (errors.total, ids(&errors)),
        (65, in_order[..10].iter().map(String::as_str).collect())
    );
    assert!(
        admin
            .find_jobs_in(&dead(Some(&few), Some("answered 410")), window(0, 10))
            .await
            .unwrap()
            .jobs
            .is_empty()
    );

    // The ops API's most recent: by the time they died.
    let latest: Vec<String> = admin
        .dead_jobs(3)
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.id)
        .collect();
    let mut later = pushed[57..60].to_vec();
    later.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(latest, later);
    assert_eq!(admin.dead_jobs(100).await.unwrap().len(), 65);

    // A retry and a discard leave the index in the same step.
    assert!(admin.retry(&pushed[0]).await.unwrap());
    assert!(admin.discard(&pushed[1]).await.unwrap());
    let indexed = members(&mut redis, &order).await;
    assert_eq!(indexed.len(), 63);
    assert!(!indexed.contains(&pushed[0]) && !indexed.contains(&pushed[1]));

    // A job taken out of the dead set behind the index's back while another
    // dies leaves the sizes equal: pages never show the one gone, and the
    // purge compares the sets whole.
    let fresh = queue
        .push(probe(&few), PushOptions::default())
        .await
        .unwrap();
    let _: () = redis::cmd("SREM")
        .arg(format!("{}:dead", Probe::KIND))
        .arg(&pushed[2])
        .query_async(&mut redis)
        .await
        .unwrap();
    mark_dead(&mut redis, std::slice::from_ref(&fresh), 1_800_000_000).await;
    let every = admin
        .find_jobs_in(&dead(None, None), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!(every.total, 63);
    assert!(every.jobs.iter().all(|job| job.id != pushed[2]));
    let now = chrono::Utc::now().timestamp();
    assert_eq!(
        admin.purge_finished(now - 3600, now - 3600).await.unwrap(),
        0
    );
    let indexed = members(&mut redis, &order).await;
    assert!(indexed.contains(&fresh) && !indexed.contains(&pushed[2]));
    assert_eq!(indexed.len(), 63);

    // The purge of the dead takes them out of both sets.
    assert_eq!(
        admin
            .purge_finished(now - 3600, 1_900_000_000)
            .await
            .unwrap(),
        63
    );
    assert!(members(&mut redis, &order).await.is_empty());
    assert!(members(&mut redis, &recent).await.is_empty());
}
