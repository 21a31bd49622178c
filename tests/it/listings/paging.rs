//! `GET /listings` paged while listings are created between the pages: the
//! keyset cursor returns every listing that existed before the first page
//! exactly once and in the same order, whatever is inserted meanwhile.
//!
//! Orders are not paged across pages here: a listing has exactly one order
//! (creation raises it; a sandbox re-seed replaces it), so no listing has a
//! second page of orders.

use std::collections::HashSet;

use serde_json::Value;
use storage::{Clock, Timestamp};
use tests::{TestApp, backend_tests};

use super::Ctx;
use crate::support::expect_ok;

/// Listings that exist before paging starts.
const EXISTING: usize = 11;
/// Page size: several pages, the last one short.
const PAGE: usize = 3;
/// Listings created after each page is read.
const CREATED_PER_PAGE: usize = 2;

fn numbers(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["listing_number"].as_str().unwrap().to_owned())
        .collect()
}

/// Pages through `GET /listings`, creating listings after every page
/// (`before_creating(n)` runs before the `n`th); returns what the pages held,
/// in order, and what was created meanwhile.
async fn page_while_creating(
    ctx: &Ctx,
    mut before_creating: impl FnMut(usize),
) -> (Vec<String>, Vec<String>) {
    let mut seen = Vec::new();
    let mut created = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = if cursor.is_empty() {
            format!("/api/v1/listings?limit={PAGE}")
        } else {
            format!("/api/v1/listings?limit={PAGE}&cursor={cursor}")
        };
        let page = expect_ok(ctx.get(&path).await).await;
        let items = numbers(&page);
        assert!(items.len() <= PAGE);
        seen.extend(items);
        cursor = page["next_cursor"].as_str().unwrap().to_owned();
        if cursor.is_empty() {
            return (seen, created);
        }
        for _ in 0..CREATED_PER_PAGE {
            before_creating(created.len());
            created.push(ctx.listing().await);
        }
    }
}

/// Asserts that paging saw each of `before` once, in its order, and nothing twice.
fn assert_stable(before: &[String], seen: &[String], created: &[String]) {
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a listing came twice: {seen:?}");
    let old: Vec<&String> = seen.iter().filter(|n| before.contains(n)).collect();
    let expected: Vec<&String> = before.iter().collect();
    assert_eq!(
        old, expected,
        "every earlier listing once, in the first order"
    );
    assert!(
        seen.iter()
            .all(|n| before.contains(n) || created.contains(n)),
        "only real listings"
    );
}

backend_tests! {
    async fn listings_created_between_pages_neither_repeat_nor_hide_earlier_ones(backend) {
        let ctx = Ctx::new(backend).await;
        for _ in 0..EXISTING {
            ctx.listing().await;
        }
        let before = numbers(&expect_ok(ctx.get("/api/v1/listings?limit=200").await).await);
        assert_eq!(before.len(), EXISTING);

        let (seen, created) = page_while_creating(&ctx, |_| {}).await;
        assert_stable(&before, &seen, &created);
        // Newer listings sort after all earlier ones, so the pages reach them too.
        assert_eq!(&seen[EXISTING..], created.as_slice());
        let after = numbers(&expect_ok(ctx.get("/api/v1/listings?limit=200").await).await);
        assert_eq!(after[..EXISTING], before[..], "the order did not change");
    }

    async fn listings_created_behind_the_cursor_leave_the_earlier_ones_in_place(backend) {
        // A manual clock: the earlier listings are ten seconds apart, and each
        // one created while paging is dated between two of them or before the
        // first, so it sorts behind the cursor as often as ahead of it.
        let start = Timestamp::from_micros(1_800_000_000_000_000);
        let clock = Clock::manual(start);
        let ctx = Ctx::with_app(TestApp::builder(backend).clock(clock.clone()).spawn().await).await;
        for _ in 0..EXISTING {
            ctx.listing().await;
            clock.advance_seconds(10);
        }
        let before = numbers(&expect_ok(ctx.get("/api/v1/listings?limit=200").await).await);
        assert_eq!(before.len(), EXISTING);

        let slots = i64::try_from(EXISTING).unwrap() + 1;
        let (seen, created) = page_while_creating(&ctx, |n| {
            // Slot -1 is before the first listing; slot k between the kth and the
            // next (counting from 0).
            let slot = (i64::try_from(n).unwrap() * 5) % slots - 1;
            let target = start.as_micros() + slot * 10_000_000 + 5_000_000;
            clock.advance_seconds((target - clock.now().as_micros()) / 1_000_000);
        })
        .await;
        assert_stable(&before, &seen, &created);
        let after = numbers(&expect_ok(ctx.get("/api/v1/listings?limit=200").await).await);
        assert_eq!(after.len(), EXISTING + created.len());
        let old: Vec<&String> = after.iter().filter(|n| before.contains(n)).collect();
        assert_eq!(old, before.iter().collect::<Vec<_>>(), "the earlier listings kept their order");
        assert!(seen.len() < after.len(), "some new listings sorted behind the cursor and were not seen");
    }
}
