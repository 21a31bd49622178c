//! Every filter of the listings list pages through exactly the listings it
//! names, and its `total` (kept, not counted) is how many there are, after
//! every kind of change: creations with one and two agents, status changes,
//! a cancellation, and the sandbox's fixtures seeded and reseeded.

use serde_json::{Value, json};
use storage::people::users::Role;
use tests::backend_tests;

use super::{Ctx, add_user};
use crate::support::{expect_created, expect_ok};

/// Pages through the list with `query` two at a time; returns the listing
/// numbers in order and the total every page reported.
async fn page_through(ctx: &Ctx, key: &str, query: &str) -> (Vec<String>, Vec<i64>) {
    let mut numbers = Vec::new();
    let mut totals = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut path = format!("/api/v1/listings?limit=2{query}");
        if !cursor.is_empty() {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page = ctx
            .app
            .get(&path)
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap();
        let page: Value = expect_ok(page).await;
        totals.push(page["total"].as_i64().unwrap());
        for item in page["items"].as_array().unwrap() {
            numbers.push(item["listing_number"].as_str().unwrap().to_owned());
        }
        cursor = page["next_cursor"].as_str().unwrap().to_owned();
        if cursor.is_empty() {
            return (numbers, totals);
        }
    }
}

/// Every filter the list takes over `statuses` and `agents`, with the
/// listings (number, status, agents) each should find.
async fn assert_every_filter(
    ctx: &Ctx,
    key: &str,
    listings: &[(String, String, Vec<String>)],
    statuses: &[&str],
    agents: &[String],
) {
    let mut filters: Vec<(String, Option<&str>, Option<&String>)> =
        vec![(String::new(), None, None)];
    for status in statuses {
        filters.push((format!("&status={status}"), Some(status), None));
    }
    for agent in agents {
        filters.push((format!("&agent_id={agent}"), None, Some(agent)));
        for status in statuses {
            filters.push((
                format!("&status={status}&agent_id={agent}"),
                Some(status),
                Some(agent),
            ));
        }
    }
    for (query, status, agent) in filters {
        let expected: Vec<&String> = listings
            .iter()
            .filter(|(_, s, _)| status.is_none_or(|status| s == status))
            .filter(|(_, _, a)| agent.is_none_or(|agent| a.contains(agent)))
            .map(|(number, _, _)| number)
            .collect();
        let (numbers, totals) = page_through(ctx, key, &query).await;
        assert_eq!(
            numbers.iter().collect::<Vec<_>>(),
            expected,
            "{query}: the pages are the filter's listings, oldest first"
        );
        assert!(
            totals.iter().all(|total| *total == expected.len() as i64),
            "{query}: totals {totals:?}, {} listings",
            expected.len()
        );
    }
}

backend_tests! {
    async fn every_filter_pages_its_listings_and_totals_them(backend) {
        let ctx = Ctx::new(backend).await;
        let second = add_user(&ctx.app, &ctx.agency, Role::Agent).await;
        let third = add_user(&ctx.app, &ctx.agency, Role::Agent).await;
        let agents = [ctx.agent.to_string(), second.to_string(), third.to_string()];
        let pairs = [
            (&agents[0], None),
            (&agents[1], Some(&agents[0])),
            (&agents[2], Some(&agents[1])),
            (&agents[0], Some(&agents[2])),
            (&agents[1], None),
        ];
        let mut listings: Vec<(String, String, Vec<String>)> = Vec::new();
        for (one, two) in pairs {
            let mut body = ctx.new_listing();
            body["agent_one_id"] = json!(one);
            if let Some(two) = two {
                body["agent_two_id"] = json!(two);
            }
            let created = ctx.post("/api/v1/listings", &body).await;
            let created: Value = expect_created(created).await;
            let number = created["listing_number"].as_str().unwrap().to_owned();
            let named = std::iter::once(one.clone()).chain(two.cloned()).collect();
            listings.push((number, "Coming Soon".to_owned(), named));
        }
        // Paid, then moved: two Active, one of them on to Sold; one cancelled.
        for index in [0, 2, 3] {
            ctx.app.store.orders().record_payment(&ctx.live(), &listings[index].0, None).await.unwrap();
        }
        ctx.set_status(&listings[0].0, "Active").await;
        ctx.set_status(&listings[2].0, "Active").await;
        ctx.set_status(&listings[2].0, "Sold").await;
        listings[0].1 = "Active".to_owned();
        listings[2].1 = "Sold".to_owned();
        let cancelled = ctx.post(&format!("/api/v1/listings/{}/cancel", listings[4].0), &json!({})).await;
        expect_ok(cancelled).await;
        listings[4].1 = "Cancelled".to_owned();
        let statuses = ["Coming Soon", "Active", "Sold", "Cancelled", "Pending"];
        assert_every_filter(&ctx, &ctx.key, &listings, &statuses, &agents).await;

        // The sandbox's fixtures, seeded and then reseeded in place, are
        // counted in the sandbox alone.
        let sandbox_key = ctx.sandbox_key().await;
        for _ in 0..2 {
            ctx.app.store.sandbox().seed(&ctx.agency.id).await.unwrap();
        }
        let (fixtures, totals) = page_through(&ctx, &sandbox_key, "").await;
        assert_eq!(fixtures.len(), 3);
        assert!(totals.iter().all(|total| *total == 3), "{totals:?}");
        let owner = ctx.agency.owner_id.to_string();
        let (owned, totals) = page_through(&ctx, &sandbox_key, &format!("&agent_id={owner}")).await;
        assert_eq!((owned.len(), totals[0]), (3, 3));
        assert_every_filter(&ctx, &ctx.key, &listings, &statuses, &agents).await;
    }
}
