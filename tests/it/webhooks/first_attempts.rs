//! Work done where it is committed: a process whose workers consume the
//! dispatch queue fans its own events out without a dispatch job, and makes
//! a delivery's first attempt without a delivery job while it has a free
//! slot; the console still counts both as runs of their queues, and its
//! search by listing number finds them. Pausing either queue sends that
//! work through the queue again.

use std::time::Duration;

use platform::Job;
use platform::admin::QueueAdmin;
use platform::kinds::{DeliverWebhook, DispatchEvents};
use serde_json::{Value, json};
use tests::Backend;
use tests::deployment::eventually;

use super::{Ctx, CtxOptions};
use crate::support::sql;

/// Guards against a hang; never what a test passes by.
const PATIENCE: Duration = Duration::from_secs(30);

/// Every job the delivery queue holds or held, whatever its state.
async fn delivery_jobs(ctx: &Ctx) -> u64 {
    jobs_of(ctx, DeliverWebhook::KIND).await
}

/// Every job `queue` holds or held, whatever its state.
async fn jobs_of(ctx: &Ctx, queue: &str) -> u64 {
    QueueAdmin::new(ctx.app.state.platform().queue.clone())
        .depths()
        .await
        .unwrap()
        .into_iter()
        .find(|depth| depth.queue == queue)
        .map_or(0, |depth| {
            depth.pending
                + depth.scheduled
                + depth.retrying
                + depth.running
                + depth.done
                + depth.dead
        })
}

async fn dispatch_and_first_attempts_skip_the_queue(backend: Backend, redis: bool) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            ops: Some(OPS_LOGIN),
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    // The test's workers start beside it: once their process is registered,
    // its runtime has taken over this process's dispatch and first attempts.
    eventually(PATIENCE, "the workers running", || async {
        let processes = ctx.app.store.worker_processes().list().await.unwrap();
        (!processes.is_empty()).then_some(())
    })
    .await;
    let listing_number = ctx.create_listing().await;
    ctx.receiver.wait_for_arrivals(1, PATIENCE).await;
    let deliveries = ctx.deliveries(&endpoint_id).await;
    let [delivery] = deliveries.as_slice() else {
        panic!("one delivery expected: {deliveries:?}");
    };
    let delivery_id = delivery["id"].as_str().unwrap().to_owned();
    let delivered = ctx
        .delivery_until(&delivery_id, |d| d["status"] == "succeeded")
        .await;
    assert_eq!(delivered["attempts"], 1, "{delivered}");
    assert_eq!(delivery_jobs(&ctx).await, 0, "the queue never held it");

    // The console counts it as a run of the delivery queue, under the
    // delivery's id.
    let run = eventually(PATIENCE, "the run recorded for the console", || async {
        let runs = ctx
            .app
            .store
            .job_attempts()
            .of_job(&delivery_id)
            .await
            .unwrap();
        runs.into_iter()
            .find(|run| run.outcome.as_deref() == Some("succeeded"))
    })
    .await;
    assert_eq!(run.queue, DeliverWebhook::KIND);
    assert_eq!(run.attempt, 1);
    assert_eq!(run.endpoint_id.as_deref(), Some(endpoint_id.as_str()));
    // The listing's events were dispatched here, not by a job (events the
    // setup committed before the workers started were pushed as jobs): a
    // dispatch done here is a run under the first event of its batch, which
    // no job's id is.
    let events: Vec<_> = ctx
        .app
        .store
        .outbox()
        .for_tenant(&ctx.live(), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|event| ["listing.created", "invoice.created"].contains(&event.event_type.as_str()))
        .collect();
    assert!(!events.is_empty(), "the listing's events");
    let dispatched_under = eventually(
        PATIENCE,
        "the dispatch recorded for the console",
        || async {
            for event in &events {
                let runs = ctx
                    .app
                    .store
                    .job_attempts()
                    .of_job(event.event_id.as_str())
                    .await
                    .unwrap();
                if runs.iter().any(|run| run.queue == DispatchEvents::KIND) {
                    return Some(event.event_id.to_string());
                }
            }
            None
        },
    )
    .await;

    // The console's search by listing number finds both runs, though no
    // queue holds a job for either, in whatever state it is asked for.
    let search = ops_json(
        &ctx,
        &format!("/ops/api/jobs?state=dead&search={listing_number}"),
    )
    .await;
    assert_eq!(search["count"], 0, "no dead job: {search}");
    assert_eq!(search["more_runs_in_process"], false, "{search}");
    let runs = search["runs_in_process"].as_array().unwrap();
    let delivery_run = runs
        .iter()
        .find(|run| run["job_id"] == delivery_id.as_str())
        .unwrap_or_else(|| panic!("the first attempt: {search}"));
    assert_eq!(delivery_run["queue"], DeliverWebhook::KIND);
    assert_eq!(delivery_run["attempt"], 1);
    assert_eq!(delivery_run["outcome"], "succeeded");
    assert_eq!(delivery_run["endpoint_id"], endpoint_id.as_str());
    assert!(
        runs.iter()
            .any(|run| run["job_id"] == dispatched_under.as_str()
                && run["queue"] == DispatchEvents::KIND),
        "the dispatch: {search}"
    );
    // A queue narrows them, the listing's agency keeps them; another agency,
    // or another number, finds none.
    let own_agency = ops_json(
        &ctx,
        &format!(
            "/ops/api/jobs?state=done&agency={}&search={listing_number}",
            ctx.agency.id
        ),
    )
    .await;
    assert!(
        own_agency["runs_in_process"]
            .as_array()
            .unwrap()
            .iter()
            .any(|run| run["job_id"] == delivery_id.as_str()),
        "{own_agency}"
    );
    let deliveries_only = ops_json(
        &ctx,
        &format!(
            "/ops/api/jobs?state=done&queue={}&search={listing_number}",
            DeliverWebhook::KIND
        ),
    )
    .await;
    let queues: Vec<&Value> = deliveries_only["runs_in_process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| &run["queue"])
        .collect();
    assert_eq!(queues, [DeliverWebhook::KIND], "{deliveries_only}");
    let other = ctx.app.agency().await;
    for query in [
        format!("state=done&agency={}&search={listing_number}", other.id),
        "state=done&search=ZZ99ZZ99".to_owned(),
    ] {
        let found = ops_json(&ctx, &format!("/ops/api/jobs?{query}")).await;
        assert_eq!(found["runs_in_process"], json!([]), "{query}: {found}");
    }

    // The jobs page lists them under their own heading.
    let page = ctx
        .app
        .client
        .get(ops_url(
            &ctx,
            &format!("/ops/?state=done&search={listing_number}"),
        ))
        .basic_auth(OPS_LOGIN.0, Some(OPS_LOGIN.1))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("id=\"runs-in-process\""), "{page}");
    assert!(page.contains(&delivery_id), "{page}");
}

/// A fan-out whose commit is lost. On SQLite its first attempt goes out
/// before the commit, with what the fan-out read, so the receiver hears the
/// event while no delivery is recorded; on PostgreSQL the fan-out commits
/// before any attempt, so its failure sends nothing. Either way the event
/// stays undispatched and is fanned out again: it is delivered, every
/// request under its one event id, and one delivery is recorded.
async fn a_lost_fan_out_commit_is_fanned_out_again(backend: Backend, redis: bool) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            // The listing's answer and its key's completion commit before
            // the fault is set: the fan-out runs when dispatch resumes.
            paused_queues: vec![DispatchEvents::KIND],
            ..CtxOptions::default()
        },
    )
    .await;
    let (endpoint_id, _) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    eventually(PATIENCE, "the dispatch queued", || async {
        (jobs_of(&ctx, DispatchEvents::KIND).await >= 1).then_some(())
    })
    .await;
    let db = ctx.app.store.db();
    sql::fail_commits_of_deliveries(db).await;
    ctx.app
        .store
        .schedules()
        .set_paused(DispatchEvents::KIND, false)
        .await
        .expect("resume dispatch");
    if backend == Backend::Sqlite {
        // Every commit of a delivery fails while the fault stands, so this
        // request went out before its fan-out's commit. The fault ends at
        // once, in one statement: SQLite retries a failed dispatch job
        // without a pause, and one that died would hold the sweep's re-push.
        ctx.receiver.wait_for_arrivals(1, PATIENCE).await;
        sql::end_commit_fault(db).await;
    }
    let delivered = eventually(
        PATIENCE,
        "the event fanned out again and delivered",
        || async {
            match ctx.deliveries(&endpoint_id).await.as_slice() {
                [delivery] if delivery["status"] == "succeeded" => Some(delivery.clone()),
                _ => None,
            }
        },
    )
    .await;
    if backend != Backend::Sqlite {
        assert!(sql::commit_fault_fired(db).await, "the fault never fired");
    }
    sql::drop_commit_fault(db).await;
    let received = ctx.receiver.received();
    let event_ids: std::collections::BTreeSet<Option<&str>> = received
        .iter()
        .map(|request| request.header("X-Event-Id"))
        .collect();
    let event_id = delivered["event_id"].as_str();
    assert!(event_id.is_some(), "{delivered}");
    assert_eq!(
        event_ids,
        [event_id].into(),
        "every request carries the event's one id"
    );
    if backend == Backend::Sqlite {
        // One delivery is recorded, so the earlier requests were made for
        // fan-outs whose commit was lost.
        assert!(
            received.len() >= 2,
            "heard before the lost commit and again after: {} requests",
            received.len()
        );
    } else {
        assert_eq!(received.len(), 1, "nothing went out before the commit");
    }
    assert_eq!(ctx.deliveries(&endpoint_id).await.len(), 1);
}

#[tokio::test]
async fn a_lost_fan_out_commit_on_sqlite_is_fanned_out_again() {
    a_lost_fan_out_commit_is_fanned_out_again(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn a_lost_fan_out_commit_on_postgres_is_fanned_out_again() {
    a_lost_fan_out_commit_is_fanned_out_again(Backend::Postgres, true).await;
}

/// The ops listener's login in these tests.
const OPS_LOGIN: (&str, &str) = ("ops", "correct-horse-battery");

fn ops_url(ctx: &Ctx, path: &str) -> String {
    format!(
        "{}{path}",
        ctx.app.ops_url.as_deref().expect("ops listener")
    )
}

/// The ops listener's JSON at `path`.
async fn ops_json(ctx: &Ctx, path: &str) -> Value {
    let response = ctx
        .app
        .client
        .get(ops_url(ctx, path))
        .basic_auth(OPS_LOGIN.0, Some(OPS_LOGIN.1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

/// With `queue` paused, the work it names waits in it as a job rather than
/// being done where it was committed, and resuming it delivers.
async fn a_paused_queue_takes_its_work_back(backend: Backend, redis: bool, queue: &'static str) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            paused_queues: vec![queue],
            ..CtxOptions::default()
        },
    )
    .await;
    ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    eventually(PATIENCE, "the work queued", || async {
        (jobs_of(&ctx, queue).await >= 1).then_some(())
    })
    .await;
    assert_eq!(
        ctx.receiver.arrivals(),
        0,
        "a paused queue delivers nothing"
    );
    ctx.app
        .store
        .schedules()
        .set_paused(queue, false)
        .await
        .expect("resume the queue");
    ctx.receiver.wait_for_arrivals(1, PATIENCE).await;
}

#[tokio::test]
async fn dispatch_and_first_attempts_skip_the_sqlite_queue() {
    dispatch_and_first_attempts_skip_the_queue(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn dispatch_and_first_attempts_skip_the_redis_queue() {
    dispatch_and_first_attempts_skip_the_queue(Backend::Postgres, true).await;
}

#[tokio::test]
async fn a_paused_sqlite_delivery_queue_holds_first_attempts() {
    a_paused_queue_takes_its_work_back(Backend::Sqlite, false, DeliverWebhook::KIND).await;
}

#[tokio::test]
async fn a_paused_redis_delivery_queue_holds_first_attempts() {
    a_paused_queue_takes_its_work_back(Backend::Postgres, true, DeliverWebhook::KIND).await;
}

#[tokio::test]
async fn a_paused_sqlite_dispatch_queue_holds_dispatch() {
    a_paused_queue_takes_its_work_back(Backend::Sqlite, false, DispatchEvents::KIND).await;
}

#[tokio::test]
async fn a_paused_redis_dispatch_queue_holds_dispatch() {
    a_paused_queue_takes_its_work_back(Backend::Postgres, true, DispatchEvents::KIND).await;
}
