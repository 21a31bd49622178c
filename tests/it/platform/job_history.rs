//! The job console's history on both databases, on a manual clock: runs
//! counted per minute and hour, the same before and after the rollup, late
//! runs counted when they land, a delivery's agency found from its
//! endpoint, the breakdowns, what is kept, and the runs of named ids a
//! search finds.

use storage::background::job_console::{AttemptRecord, Resolution};
use storage::people::agencies::AgencyKind;
use storage::webhooks::{EndpointEnvironment, NewEndpoint};
use storage::{Clock, Environment, Store, Tenant, Timestamp};
use tests::{TestDatabase, backend_tests};

/// 2026-09-22 12:00:00 UTC, on a minute.
const NOON: i64 = 1_790_078_400;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_micros(seconds * 1_000_000)
}

fn a_run(job: &str, queue: &str, started: i64, took_ms: i64, failed: bool) -> AttemptRecord {
    let started_at = at(started);
    AttemptRecord {
        job_id: job.to_owned(),
        attempt: 1,
        queue: queue.to_owned(),
        worker_id: "wrk_01M8TESTWORKER00000000000".to_owned(),
        host: "test".to_owned(),
        agency_id: None,
        endpoint_id: None,
        due_at: Some(started_at.plus_seconds(-2)),
        started_at,
        finished_at: Some(Timestamp::from_micros(
            started_at.as_micros() + took_ms * 1_000,
        )),
        outcome: Some(if failed { "failed" } else { "succeeded" }.to_owned()),
        error: failed.then(|| "boom".to_owned()),
    }
}

/// Moves the manual clock on to `seconds`.
fn move_to(clock: &Clock, seconds: i64) {
    clock.advance_seconds(seconds - clock.now().as_unix_seconds());
}

async fn store(backend: tests::Backend, clock: Clock) -> (Store, TestDatabase) {
    let db = TestDatabase::create(backend).await;
    let store = db.store(clock).await;
    (store, db)
}

backend_tests! {
    async fn runs_roll_up_per_minute_and_hour_and_read_the_same(backend) {
        let clock = Clock::manual(at(NOON + 10 * 60));
        let (store, _db) = store(backend, clock.clone()).await;
        let (agency, owner) = store.agencies().create("History", AgencyKind::Broker).await.unwrap();
        let tenant = Tenant::new(agency.id.clone(), Environment::Live);
        let (endpoint, _) = store
            .webhooks()
            .create(&tenant, NewEndpoint {
                name: None,
                url: "https://hooks.example.com/in".to_owned(),
                event_types: None,
                environment: EndpointEnvironment::Live,
                created_by: Some(owner.id.clone()),
                ..Default::default()
            })
            .await
            .unwrap();

        // 12:01: two probes of the agency (one failed), one delivery to its
        // endpoint; and one still running (not counted).
        let mut probe = a_run("01M8A", "probe", NOON + 61, 100, false);
        probe.agency_id = Some(agency.id.to_string());
        let mut failed = a_run("01M8B", "probe", NOON + 62, 300, true);
        failed.agency_id = Some(agency.id.to_string());
        let mut delivery = a_run("01M8C", "webhook_delivery", NOON + 63, 50, false);
        delivery.endpoint_id = Some(endpoint.id.to_string());
        let mut running = a_run("01M8E", "probe", NOON + 120, 10, false);
        running.finished_at = None;
        running.outcome = None;
        store.job_attempts().record(&[probe, failed, delivery, running]).await.unwrap();

        // At 12:10 the minute is in the live stretch, counted from the runs.
        let since = at(NOON);
        let series = |resolution, queue: Option<&'static str>| {
            let store = store.clone();
            let now = clock.now();
            async move { store.job_history().series(resolution, since, now, queue).await.unwrap() }
        };
        let before = series(Resolution::Minute, None).await;
        let minute = before.get(&(NOON + 60, "probe".to_owned())).copied().unwrap();
        assert_eq!((minute.succeeded, minute.failed), (1, 1));
        assert_eq!(minute.run_ms_sum, 400);
        assert_eq!(minute.run_ms_max, 300);
        assert_eq!((minute.wait_count, minute.wait_ms_sum, minute.wait_ms_max), (2, 4_000, 2_000));
        assert_eq!(before.get(&(NOON + 60, "webhook_delivery".to_owned())).unwrap().succeeded, 1);
        assert!(!before.keys().any(|(bucket, _)| *bucket == NOON + 120), "a run still going is not counted");
        assert!(store.job_history().roll_up(clock.now()).await.unwrap() >= 2);

        // At 12:30 it is past the live stretch: the rolled-up rows say the same.
        move_to(&clock, NOON + 30 * 60);
        store.job_history().roll_up(clock.now()).await.unwrap();
        let after = series(Resolution::Minute, None).await;
        for queue in ["probe", "webhook_delivery"] {
            let key = (NOON + 60, queue.to_owned());
            assert_eq!(after.get(&key), before.get(&key), "{queue}");
        }

        // A run of 12:20 that lands after that rollup is counted now, from
        // the runs, and by the next rollup, which catches up from the last
        // minute it wrote.
        store.job_attempts().record(&[a_run("01M8D", "probe", NOON + 20 * 60, 10, false)]).await.unwrap();
        assert_eq!(series(Resolution::Minute, None).await.get(&(NOON + 20 * 60, "probe".to_owned())).unwrap().succeeded, 1);
        move_to(&clock, NOON + 50 * 60);
        store.job_history().roll_up(clock.now()).await.unwrap();
        let later = series(Resolution::Minute, Some("probe")).await;
        assert_eq!(later.get(&(NOON + 20 * 60, "probe".to_owned())).unwrap().succeeded, 1);
        assert!(later.keys().all(|(_, queue)| queue == "probe"), "only the queue asked for");
        let hours = series(Resolution::Hour, None).await;
        let hour = hours.get(&(NOON, "probe".to_owned())).copied().unwrap();
        assert_eq!((hour.succeeded, hour.failed), (2, 1));

        // The breakdowns: the delivery counts for its endpoint and, through it, its agency.
        let agencies = store.job_history().breakdown(false, Resolution::Minute, since, clock.now(), None).await.unwrap();
        assert_eq!(agencies.len(), 1, "{agencies:?}");
        assert_eq!(agencies[0].key, agency.id.to_string());
        assert_eq!((agencies[0].totals.succeeded, agencies[0].totals.failed), (2, 1));
        let endpoints = store.job_history().breakdown(true, Resolution::Hour, since, clock.now(), None).await.unwrap();
        assert_eq!(endpoints.len(), 1);
        assert_eq!(endpoints[0].key, endpoint.id.to_string());
        assert_eq!(endpoints[0].totals.succeeded, 1);

        // A day and a half on, the minutes are gone and the hours stay; after 31 days, those too.
        move_to(&clock, NOON + 36 * 3_600);
        store.job_history().roll_up(clock.now()).await.unwrap();
        let minutes = store.job_history().series(Resolution::Minute, since, clock.now(), None).await.unwrap();
        assert!(minutes.is_empty(), "{minutes:?}");
        let hours = store.job_history().series(Resolution::Hour, since, clock.now(), None).await.unwrap();
        assert_eq!(hours.get(&(NOON, "probe".to_owned())).unwrap().finished(), 3);
        move_to(&clock, NOON + 32 * 86_400);
        store.job_history().roll_up(clock.now()).await.unwrap();
        assert!(store.job_history().series(Resolution::Hour, since, clock.now(), None).await.unwrap().is_empty());
        assert_eq!(store.job_attempts().purge(clock.now(), 1_000).await.unwrap().rows, 5);
    }
}

backend_tests! {
    async fn runs_of_named_ids_come_newest_first_in_their_queue_up_to_the_limit(backend) {
        let clock = Clock::manual(at(NOON));
        let (store, _db) = store(backend, clock).await;
        // Three dispatch runs under event ids, two first attempts under
        // delivery ids, and a run of an id nobody asks for.
        let runs = [
            a_run("evt_1", "outbox_dispatch", NOON + 1, 5, false),
            a_run("whd_1", "webhook_delivery", NOON + 2, 5, false),
            a_run("evt_2", "outbox_dispatch", NOON + 3, 5, false),
            a_run("whd_2", "webhook_delivery", NOON + 4, 5, true),
            a_run("evt_3", "outbox_dispatch", NOON + 5, 5, false),
            a_run("evt_9", "outbox_dispatch", NOON + 6, 5, false),
        ];
        store.job_attempts().record(&runs).await.unwrap();
        let named: Vec<String> = ["evt_1", "evt_2", "evt_3", "whd_1", "whd_2", "lst_1"]
            .map(str::to_owned)
            .to_vec();
        let ids = |runs: Vec<AttemptRecord>| runs.into_iter().map(|run| run.job_id).collect::<Vec<_>>();

        let all = store.job_attempts().of_jobs(&named, None, 10).await.unwrap();
        assert_eq!(ids(all), ["evt_3", "whd_2", "evt_2", "whd_1", "evt_1"]);
        // The queue is applied before the limit: the two latest dispatches,
        // though the latest runs overall are mixed.
        let dispatches = store.job_attempts().of_jobs(&named, Some("outbox_dispatch"), 2).await.unwrap();
        assert_eq!(ids(dispatches), ["evt_3", "evt_2"]);
        let deliveries = store.job_attempts().of_jobs(&named, Some("webhook_delivery"), 10).await.unwrap();
        assert_eq!(ids(deliveries), ["whd_2", "whd_1"]);
        assert!(store.job_attempts().of_jobs(&[], None, 10).await.unwrap().is_empty());
        assert!(store.job_attempts().of_jobs(&named, None, 0).await.unwrap().is_empty());
    }
}
