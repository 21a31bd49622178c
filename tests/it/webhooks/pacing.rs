//! Writes paced by their agency's webhook backlog: while an agency has the
//! limit's worth of deliveries waiting (the delivery queue starts paused
//! here, so nothing is attempted until the test resumes it), its next write
//! waits; another agency's write, the agency's own reads and its management
//! of endpoints go ahead meanwhile; the write goes ahead once deliveries are
//! made, or after the longest wait. An agency without an enabled endpoint
//! has no backlog.

use std::time::Duration;

use api::middleware::deadline::RequestDeadlines;
use api::pacing::PacingSettings;
use platform::Job;
use platform::kinds::{DeliverWebhook, DispatchEvents};
use serde_json::{Value, json};
use storage::people::users::Role;
use tests::Backend;
use tests::deployment::eventually;

use super::{Ctx, CtxOptions, SCOPES};
use crate::listings::add_user;

/// Guards against a hang; never what a test passes by.
const PATIENCE: Duration = Duration::from_secs(30);

async fn paced_ctx(backend: Backend, redis: bool, settings: PacingSettings) -> Ctx {
    Ctx::with(
        backend,
        CtxOptions {
            redis,
            write_pacing: Some(settings),
            paused_queues: vec![DeliverWebhook::KIND],
            // A write waiting on its backlog is stopped at its route's
            // deadline like any other; here none comes before the patience.
            request_deadlines: Some(RequestDeadlines {
                default: PATIENCE * 4,
                ..RequestDeadlines::default()
            }),
            ..CtxOptions::default()
        },
    )
    .await
}

/// Fails with what the paced write answered, if it answered already.
async fn still_waiting(write: &mut tokio::task::JoinHandle<reqwest::Response>) {
    if write.is_finished() {
        let response = write.await.expect("the paced write's task");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        panic!("the paced write went ahead: {status} {body}");
    }
}

/// Lets the workers deliver (they follow the paused set every second).
async fn resume_deliveries(ctx: &Ctx) {
    ctx.app
        .store
        .schedules()
        .set_paused(DeliverWebhook::KIND, false)
        .await
        .expect("resume deliveries");
}

/// The agency's backlog as the store counts it (up to 100).
async fn backlog(ctx: &Ctx) -> u32 {
    ctx.app
        .store
        .webhooks()
        .delivery_backlog(&ctx.live(), 100)
        .await
        .expect("the backlog")
}

/// Creates listings while the backlog is under `limit` (each write still
/// goes ahead at once), until it reaches it. Events of the setup, committed
/// before the endpoint was registered, are fanned out to nobody first.
async fn fill_backlog(ctx: &Ctx, limit: u32) {
    eventually(PATIENCE, "the setup's events to be fanned out", || async {
        (backlog(ctx).await == 0).then_some(())
    })
    .await;
    let mut created = 0;
    while backlog(ctx).await < limit {
        ctx.create_listing().await;
        created += 1;
        assert!(
            created <= limit,
            "{created} listings made no backlog of {limit}"
        );
    }
}

async fn a_write_waits_for_its_agencys_backlog_and_others_go_ahead(backend: Backend, redis: bool) {
    let limit = 3;
    let ctx = paced_ctx(
        backend,
        redis,
        PacingSettings {
            backlog_limit: limit,
            // Longer than the test: only delivering lets the write through.
            max_wait: Duration::from_secs(300),
        },
    )
    .await;
    let pacing = ctx.app.state.write_pacing().clone();
    let (endpoint_id, _) = ctx.register().await;
    fill_backlog(&ctx, limit).await;
    // Writes before (adding the agent, registering) may have waited for
    // their own events to be fanned out; count from here.
    let before = (pacing.paced(), pacing.waited_out());

    // The write, sent from its own task so the test watches it wait.
    let client = ctx.app.client.clone();
    let url = ctx.app.url("/api/v1/listings");
    let key = ctx.key.clone();
    let body = json!({
        "address": "10 Waiting Lane",
        "owner_user_id": ctx.agency.owner_id,
        "agent_one_id": ctx.agent,
    });
    let mut waiting_write = tokio::spawn(async move {
        client
            .post(url)
            .header("X-API-Key", key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&body)
            .send()
            .await
            .expect("the paced write")
    });
    eventually(PATIENCE, "the write to wait for its backlog", || async {
        (pacing.waiting() == 1).then_some(())
    })
    .await;

    // Another agency, whose receiver waits too, writes meanwhile, unpaced.
    let other = ctx.app.agency().await;
    let other_key = ctx.app.key(&other, &SCOPES).await;
    let other_agent = add_user(&ctx.app, &other, Role::Agent).await;
    ctx.register_with(&other_key, json!({})).await;
    let response = tokio::time::timeout(
        PATIENCE,
        ctx.send(
            reqwest::Method::POST,
            "/api/v1/listings",
            &other_key,
            Some(&json!({
                "address": "1 Other Street",
                "owner_user_id": other.owner_id,
                "agent_one_id": other_agent,
            })),
        ),
    )
    .await
    .expect("another agency's write is not held up");
    assert_eq!(response.status(), 201);
    // The agency manages its endpoints meanwhile: that is how it deals
    // with a backlog.
    let response = tokio::time::timeout(
        PATIENCE,
        ctx.patch(
            &format!("/api/v1/webhooks/endpoints/{endpoint_id}"),
            &json!({ "name": "behind" }),
        ),
    )
    .await
    .expect("managing an endpoint is not held up");
    assert_eq!(response.status(), 200);
    // And the agency reads its own listings.
    let response = tokio::time::timeout(PATIENCE, ctx.get("/api/v1/listings"))
        .await
        .expect("a read is not held up");
    assert_eq!(response.status(), 200);
    still_waiting(&mut waiting_write).await;
    assert_eq!(pacing.waiting(), 1);
    assert_eq!((pacing.paced(), pacing.waited_out()), before);

    // Delivering shrinks the backlog and lets the write through.
    resume_deliveries(&ctx).await;
    let response = tokio::time::timeout(PATIENCE, waiting_write)
        .await
        .expect("the paced write goes ahead once delivered")
        .expect("the paced write's task");
    assert_eq!(response.status(), 201);
    let listing: Value = response.json().await.unwrap();
    assert_eq!(listing["address"], "10 Waiting Lane");
    assert_eq!(
        (pacing.paced(), pacing.waited_out()),
        (before.0 + 1, before.1)
    );
    assert_eq!(pacing.waiting(), 0);
}

async fn a_write_goes_ahead_after_the_longest_wait(backend: Backend) {
    let ctx = paced_ctx(
        backend,
        false,
        PacingSettings {
            backlog_limit: 1,
            max_wait: Duration::from_millis(200),
        },
    )
    .await;
    let pacing = ctx.app.state.write_pacing().clone();
    ctx.register().await;
    fill_backlog(&ctx, 1).await;
    let before = (pacing.paced(), pacing.waited_out());
    // Nothing is delivered: the write waits its longest and goes ahead.
    ctx.create_listing().await;
    assert_eq!(
        (pacing.paced(), pacing.waited_out()),
        (before.0, before.1 + 1)
    );
    assert_eq!(pacing.waiting(), 0);
    assert!(backlog(&ctx).await >= 1);
}

async fn a_limit_of_zero_turns_pacing_off(backend: Backend) {
    let ctx = paced_ctx(
        backend,
        false,
        PacingSettings {
            backlog_limit: 0,
            max_wait: Duration::from_secs(300),
        },
    )
    .await;
    let pacing = ctx.app.state.write_pacing().clone();
    ctx.register().await;
    assert_eq!(pacing.settings().backlog_limit, 0);
    for _ in 0..3 {
        tokio::time::timeout(PATIENCE, ctx.create_listing())
            .await
            .expect("no write waits");
    }
    assert!(backlog(&ctx).await >= 3);
    assert_eq!((pacing.paced(), pacing.waited_out()), (0, 0));
}

async fn an_agency_without_endpoints_has_no_backlog(backend: Backend) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            write_pacing: Some(PacingSettings {
                backlog_limit: 1,
                max_wait: Duration::from_secs(300),
            }),
            // Nothing is fanned out either: every event stays waiting.
            paused_queues: vec![DispatchEvents::KIND, DeliverWebhook::KIND],
            ..CtxOptions::default()
        },
    )
    .await;
    let pacing = ctx.app.state.write_pacing().clone();
    for _ in 0..3 {
        tokio::time::timeout(PATIENCE, ctx.create_listing())
            .await
            .expect("no write waits without endpoints");
    }
    assert_eq!(backlog(&ctx).await, 0);
    assert_eq!((pacing.paced(), pacing.waited_out()), (0, 0));
    // With an endpoint, the same events wait for a receiver.
    ctx.register().await;
    assert!(backlog(&ctx).await >= 3);
}

#[tokio::test]
async fn an_agency_without_endpoints_has_no_backlog_on_sqlite() {
    an_agency_without_endpoints_has_no_backlog(Backend::Sqlite).await;
}

#[tokio::test]
async fn an_agency_without_endpoints_has_no_backlog_on_postgres() {
    an_agency_without_endpoints_has_no_backlog(Backend::Postgres).await;
}

#[tokio::test]
async fn a_write_waits_for_its_agencys_backlog_on_sqlite() {
    a_write_waits_for_its_agencys_backlog_and_others_go_ahead(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn a_write_waits_for_its_agencys_backlog_on_postgres_with_redis() {
    a_write_waits_for_its_agencys_backlog_and_others_go_ahead(Backend::Postgres, true).await;
}

#[tokio::test]
async fn a_write_goes_ahead_after_the_longest_wait_on_sqlite() {
    a_write_goes_ahead_after_the_longest_wait(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_write_goes_ahead_after_the_longest_wait_on_postgres() {
    a_write_goes_ahead_after_the_longest_wait(Backend::Postgres).await;
}

#[tokio::test]
async fn a_limit_of_zero_turns_pacing_off_on_sqlite() {
    a_limit_of_zero_turns_pacing_off(Backend::Sqlite).await;
}
