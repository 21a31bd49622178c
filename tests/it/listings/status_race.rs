//! Two status changes racing from the same status: the one overtaken between
//! its read and its write never re-applies against the winner's status.
//!
//! PostgreSQL can overtake a writer, and a test makes it happen every time: it
//! holds the listing's row lock until both requests have read the old status
//! and wait in their `UPDATE`. SQLite's single writer runs each change whole,
//! one after the other, so there the requests are judged in turn; the test of
//! free races checks what holds on both backends.

use std::time::Duration;

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::Database;
use storage::background::outbox::StoredEvent;
use storage::rules::events::EventType;
use tests::{Backend, backend_tests};

use super::Ctx;
use crate::support::{expect_error, expect_ok};

/// How often the lock-holding test looks for the two waiting writers.
const POLL: Duration = Duration::from_millis(5);
/// A guard against a hang, not a timing assertion.
const GIVE_UP_AFTER_POLLS: u32 = 12_000;

/// An activated listing whose status is Active.
async fn active_listing(ctx: &Ctx) -> String {
    let number = ctx.activated_listing().await;
    ctx.set_status(&number, "Active").await;
    number
}

/// The status-change events of one listing.
async fn changes_of(ctx: &Ctx, number: &str) -> Vec<StoredEvent> {
    ctx.events_of(EventType::ListingStatusChanged)
        .await
        .into_iter()
        .filter(|e| e.data["listing_number"] == number)
        .collect()
}

/// Status code and body of a response.
async fn outcome(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    (status, response.json().await.unwrap())
}

/// PATCHes `number` to `first` and to `second` while a transaction of the test
/// holds the listing's row: both requests read the old status, then queue in
/// their `UPDATE`; the lock is released only once both wait there.
async fn overtaken_race(
    ctx: &Ctx,
    number: &str,
    first: &str,
    second: &str,
) -> [reqwest::Response; 2] {
    let Database::Postgres(pool) = ctx.app.store.db() else {
        panic!("PostgreSQL only")
    };
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("select id from listings where listing_number = $1 for update")
        .bind(number)
        .fetch_one(&mut *lock)
        .await
        .unwrap();
    let path = format!("/api/v1/listings/{number}/status");
    let release = async {
        let mut polls = 0;
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from pg_stat_activity
                 where datname = current_database() and wait_event_type = 'Lock'
                   and query like 'update listings set status%'",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            if waiting == 2 {
                break;
            }
            polls += 1;
            assert!(
                polls < GIVE_UP_AFTER_POLLS,
                "the two writers never queued behind the row lock"
            );
            tokio::time::sleep(POLL).await;
        }
        lock.commit().await.unwrap();
    };
    let (first, second) = (json!({"new_status": first}), json!({"new_status": second}));
    let (a, b, ()) = tokio::join!(ctx.patch(&path, &first), ctx.patch(&path, &second), release);
    [a, b]
}

#[tokio::test]
async fn an_overtaken_status_change_gets_a_conflict_and_writes_nothing() {
    let ctx = Ctx::new(Backend::Postgres).await;
    for round in 0..4 {
        let number = active_listing(&ctx).await;
        let responses = overtaken_race(&ctx, &number, "Pending", "Sold").await;
        let mut outcomes = Vec::new();
        for response in responses {
            outcomes.push(outcome(response).await);
        }
        let winners: Vec<&Value> = outcomes
            .iter()
            .filter(|(s, _)| *s == StatusCode::OK)
            .map(|(_, b)| b)
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one 200 in {outcomes:?}"
        );
        let winner = winners[0]["status"].as_str().unwrap();
        assert_eq!(winners[0]["previous_status"], "Active");
        let (status, loser) = outcomes.iter().find(|(s, _)| *s != StatusCode::OK).unwrap();
        assert_eq!(*status, StatusCode::CONFLICT, "round {round}: {loser}");
        assert_eq!(
            loser["error"]["code"], "listing_status_conflict",
            "round {round}"
        );
        assert_eq!(
            loser["error"]["details"],
            json!({"expected_status": "Active", "current_status": winner})
        );

        let events = changes_of(&ctx, &number).await;
        let previous: Vec<&Value> = events.iter().map(|e| &e.data["previous_status"]).collect();
        assert_eq!(
            previous,
            ["Coming Soon", "Active"],
            "round {round}: one event for the one winner"
        );
        assert_eq!(events[1].data["status"], winner);
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        assert_eq!(
            listing["status"], winner,
            "round {round}: the loser changed nothing"
        );
    }
}

#[tokio::test]
async fn an_overtaken_change_to_the_winners_status_is_a_no_op() {
    let ctx = Ctx::new(Backend::Postgres).await;
    let number = active_listing(&ctx).await;
    let [a, b] = overtaken_race(&ctx, &number, "Sold", "Sold").await;
    let mut statuses = [a.status().as_u16(), b.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409]);
    let loser = if a.status() == StatusCode::OK { b } else { a };
    let error = expect_error(loser, StatusCode::CONFLICT, "no_op_transition").await;
    assert_eq!(error["error"]["details"]["status"], "Sold");
    assert_eq!(
        changes_of(&ctx, &number).await.len(),
        2,
        "Coming Soon → Active, Active → Sold"
    );
}

backend_tests! {
    async fn racing_pending_and_sold_leave_active_once(backend) {
        let ctx = &Ctx::new(backend).await;
        let mut numbers = Vec::new();
        for _ in 0..12 {
            numbers.push(active_listing(ctx).await);
        }
        // Every listing's race at once.
        let races = numbers.iter().map(|number| async move {
            let path = format!("/api/v1/listings/{number}/status");
            let (pending, sold) = (json!({"new_status": "Pending"}), json!({"new_status": "Sold"}));
            let (pending, sold) = tokio::join!(ctx.patch(&path, &pending), ctx.patch(&path, &sold));
            (outcome(pending).await, outcome(sold).await)
        });
        let results = join_all(races).await;
        for (number, ((pending_status, pending), (sold_status, sold))) in numbers.iter().zip(results) {
            let events = changes_of(ctx, number).await;
            let moves: Vec<(&str, &str)> = events.iter().skip(1).map(|e| (e.data["previous_status"].as_str().unwrap(), e.data["status"].as_str().unwrap())).collect();
            let codes = (pending_status.as_u16(), pending["error"]["code"].as_str(), sold_status.as_u16(), sold["error"]["code"].as_str());
            match codes {
                // Judged in turn, Pending first: Pending → Sold is a move of its own.
                (200, None, 200, None) => {
                    assert_eq!(pending["previous_status"], "Active");
                    assert_eq!(sold["previous_status"], "Pending");
                    assert_eq!(moves, [("Active", "Pending"), ("Pending", "Sold")]);
                }
                // Judged in turn, Sold first: Sold → Pending is not allowed.
                (422, Some("lifecycle_violation"), 200, None) => assert_eq!(moves, [("Active", "Sold")]),
                // Overtaken (PostgreSQL only): the loser writes nothing.
                (409, Some("listing_status_conflict"), 200, None) => assert_eq!(moves, [("Active", "Sold")]),
                (200, None, 409, Some("listing_status_conflict")) => assert_eq!(moves, [("Active", "Pending")]),
                other => panic!("{number}: unexpected outcome {other:?}"),
            }
            // Whatever the order, exactly one request left Active, and every
            // 200 has its one event.
            assert_eq!(moves.iter().filter(|(from, _)| *from == "Active").count(), 1, "{number}");
            if backend == Backend::Sqlite {
                assert_ne!(pending_status, StatusCode::CONFLICT, "SQLite never overtakes a writer");
                assert_ne!(sold_status, StatusCode::CONFLICT, "SQLite never overtakes a writer");
            }
        }
    }
}
