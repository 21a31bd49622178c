//! The hourly budget, an endpoint's own setting: a raised budget lets a
//! large import through at once; the default (the specification's 1000 an
//! hour) delivers a burst of 1000 and holds the rest back, visible on the
//! endpoint and reserved one slot every 3.6 s, so the backlog drains
//! smoothly rather than all at once an hour later. Changing the budget
//! releases the backlog; bad budgets are refused.

use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::listings::NewListing;
use storage::webhooks::DeliveryStatus;
use tests::Backend;

use super::{Ctx, CtxOptions};
use crate::support::{expect_error, expect_ok};

/// How large a test: events committed, and the two endpoints' budgets.
struct Scale {
    events: usize,
    default_budget: i64,
    raised_budget: i64,
}

/// Commits `count` listings straight through the store, as the API would,
/// each emitting one `listing.created`.
async fn commit_listings(ctx: &Ctx, count: usize) {
    let tenant = ctx.live();
    let commits = (0..count).map(|_| {
        let store = ctx.app.store.clone();
        let tenant = tenant.clone();
        let owner = ctx.agency.owner_id.to_string();
        let agent = ctx.agent.to_string();
        async move {
            store
                .listings()
                .create(
                    &tenant,
                    NewListing {
                        address: "3 Import Road".into(),
                        owner_user_id: owner,
                        agent_one_id: agent,
                        ..Default::default()
                    },
                )
                .await
                .expect("a listing");
        }
    });
    // A few at a time: the import of a large agency.
    let mut commits = futures::stream::iter(commits).buffer_unordered(16);
    while commits.next().await.is_some() {}
}

async fn a_raised_budget_lets_an_import_through_and_the_default_holds_the_rest_back(
    redis: bool,
    backend: Backend,
    scale: Scale,
) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            ..CtxOptions::default()
        },
    )
    .await;
    let raised_receiver = ctx.receiver.beside().await;
    let types = json!(["listing.created"]);
    let (held_id, _) = ctx
        .register_with(
            &ctx.key,
            json!({ "event_types": types, "hourly_budget": scale.default_budget }),
        )
        .await;
    let (raised_id, _) = ctx
        .register_with(
            &ctx.key,
            json!({ "url": raised_receiver.url, "event_types": types, "hourly_budget": scale.raised_budget }),
        )
        .await;
    let held_path = format!("/api/v1/webhooks/endpoints/{held_id}");
    let raised_path = format!("/api/v1/webhooks/endpoints/{raised_id}");
    let created = expect_ok(ctx.get(&held_path).await).await;
    assert_eq!(created["hourly_budget"], scale.default_budget);
    assert_eq!(
        created["held_back"],
        json!({ "count": 0, "next_release_at": null })
    );

    commit_listings(&ctx, scale.events).await;

    // The raised budget: every event arrives, nothing is held back.
    raised_receiver
        .wait_for_arrivals(scale.events, Duration::from_secs(600))
        .await;
    let raised = expect_ok(ctx.get(&raised_path).await).await;
    assert_eq!(raised["held_back"]["count"], 0, "{raised}");

    // The default: its burst arrives, the rest is held back, visibly.
    let burst = usize::try_from(scale.default_budget).unwrap();
    let expected_held = i64::try_from(scale.events - burst).unwrap();
    ctx.receiver
        .wait_for_arrivals(burst, Duration::from_secs(600))
        .await;
    tests::deployment::eventually(
        Duration::from_secs(600),
        "every delivery over the budget held back",
        || async {
            let endpoint: Value = ctx.get(&held_path).await.json().await.unwrap();
            let held = endpoint["held_back"]["count"].as_i64().unwrap();
            // Released ones have arrived since: held + arrived past the burst
            // is everything over the budget.
            let released = i64::try_from(ctx.receiver.arrivals() - burst).unwrap();
            (held > 0 && held + released == expected_held).then_some(())
        },
    )
    .await;

    // Each held delivery has its own slot, one every 3600 s / budget: the
    // backlog drains evenly, never all at once. The endpoint's next release
    // is read before and after the slots, and the three are compared only
    // when no release came in between (a slot may come due meanwhile).
    let spacing = 3_600_000_000 / scale.default_budget;
    let read_next_release = || async {
        let endpoint: Value = ctx.get(&held_path).await.json().await.unwrap();
        endpoint["held_back"]["next_release_at"]
            .as_str()
            .expect("a next release time")
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
            .timestamp_millis()
    };
    let (next_release, slots) = tests::deployment::eventually(
        Duration::from_secs(60),
        "the held slots read between two unchanged next releases",
        || async {
            let first = read_next_release().await;
            let slots = held_slots(&ctx, &held_id).await;
            let second = read_next_release().await;
            (first == second).then_some((second, slots))
        },
    )
    .await;
    assert!(slots.len() > 1, "held deliveries wait for their slots");
    assert_eq!(
        slots[0] / 1000,
        next_release,
        "the endpoint shows the first slot (to the millisecond)"
    );
    for pair in slots.windows(2) {
        assert_eq!(pair[1] - pair[0], spacing, "one slot every 3600 s / budget");
    }
    if spacing <= 5_000_000 {
        // Short enough to watch: the next slot comes and its delivery
        // arrives by itself.
        ctx.receiver
            .wait_for_arrivals(burst + 1, Duration::from_secs(60))
            .await;
    }

    // Bad budgets are refused, and nothing changes.
    for bad in [
        json!(0),
        json!(-5),
        json!(2.5),
        json!("lots"),
        json!(1_000_001),
    ] {
        let refused = ctx
            .patch(&held_path, &json!({ "hourly_budget": bad }))
            .await;
        let body = expect_error(
            refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
        assert!(body.to_string().contains("hourly_budget"), "{body}");
    }
    let refused = ctx
        .post(
            "/api/v1/webhooks/endpoints",
            &json!({ "url": ctx.receiver.url, "hourly_budget": 0 }),
        )
        .await;
    expect_error(
        refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;

    // Raising the budget releases the backlog now: everything arrives.
    let raised = expect_ok(
        ctx.patch(&held_path, &json!({ "hourly_budget": scale.raised_budget }))
            .await,
    )
    .await;
    assert_eq!(raised["hourly_budget"], scale.raised_budget);
    assert_eq!(raised["held_back"]["count"], 0, "{raised}");
    ctx.receiver
        .wait_for_arrivals(scale.events, Duration::from_secs(600))
        .await;
    let after = expect_ok(ctx.get(&held_path).await).await;
    assert_eq!(after["held_back"]["count"], 0);

    // No budget at all.
    let off = expect_ok(
        ctx.patch(&held_path, &json!({ "hourly_budget": null }))
            .await,
    )
    .await;
    assert_eq!(off["hourly_budget"], Value::Null);
    let ctx = &ctx;
    let registered = |body: Value| async move {
        let response = ctx.post("/api/v1/webhooks/endpoints", &body).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json::<Value>().await.unwrap()
    };
    let unbudgeted = registered(json!({ "url": ctx.receiver.url, "hourly_budget": null })).await;
    assert_eq!(unbudgeted["hourly_budget"], Value::Null);
    let defaulted = registered(json!({ "url": ctx.receiver.url })).await;
    assert_eq!(defaulted["hourly_budget"], 1000);
}

/// When each delivery to `endpoint_id` still waiting for its first attempt
/// is due (microseconds), earliest first.
async fn held_slots(ctx: &Ctx, endpoint_id: &str) -> Vec<i64> {
    let mut slots = Vec::new();
    let mut before = None;
    loop {
        let page = ctx
            .app
            .store
            .webhooks()
            .deliveries(&endpoint_id.parse().unwrap(), before.as_ref(), 200)
            .await
            .unwrap();
        slots.extend(
            page.items
                .iter()
                .filter(|d| d.status == DeliveryStatus::Pending && d.attempts == 0)
                .filter_map(|d| d.next_attempt_at.map(|at| at.as_micros())),
        );
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    slots.sort_unstable();
    slots
}

#[tokio::test]
async fn three_thousand_events_pass_a_raised_budget_and_the_default_holds_two_thousand_back() {
    a_raised_budget_lets_an_import_through_and_the_default_holds_the_rest_back(
        false,
        Backend::Sqlite,
        Scale {
            events: 3000,
            default_budget: 1000,
            raised_budget: 5000,
        },
    )
    .await;
}

#[tokio::test]
async fn a_raised_budget_and_a_held_backlog_on_the_redis_queue() {
    a_raised_budget_lets_an_import_through_and_the_default_holds_the_rest_back(
        true,
        Backend::Postgres,
        Scale {
            events: 60,
            default_budget: 20,
            raised_budget: 100,
        },
    )
    .await;
}
