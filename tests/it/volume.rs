//! The volume seeder (`storage::volume`, used by `bench scale`) leaves the
//! database as the product keeps it: every kept total equals the rows it
//! counts, every foreign key holds, and the API pages the seeded listings
//! and deliveries with those totals.

use serde_json::Value;
use storage::Database;
use storage::volume::VolumePlan;
use tests::{TestApp, backend_tests};

use crate::support::expect_ok;

/// Totals that disagree with the rows they count (listing totals, then
/// delivery totals).
async fn disagreeing_totals(db: &Database) -> (i64, i64) {
    const LISTINGS: &str = "select count(*) from listing_counts c where c.count != (
        select count(*) from listings l
        where l.agency_id = c.agency_id and l.is_sandbox = c.is_sandbox
          and (c.status = '' or l.status = c.status)
          and (c.agent_id = '' or l.agent_one_id = c.agent_id or l.agent_two_id = c.agent_id))";
    const DELIVERIES: &str = "select count(*) from webhook_delivery_counts c where c.count != (
        select count(*) from webhook_deliveries d where d.endpoint_id = c.endpoint_id)";
    match db {
        Database::Sqlite(sqlite) => (
            sqlx::query_scalar(LISTINGS)
                .fetch_one(sqlite.pool())
                .await
                .unwrap(),
            sqlx::query_scalar(DELIVERIES)
                .fetch_one(sqlite.pool())
                .await
                .unwrap(),
        ),
        Database::Postgres(pool) => (
            sqlx::query_scalar(LISTINGS).fetch_one(pool).await.unwrap(),
            sqlx::query_scalar(DELIVERIES)
                .fetch_one(pool)
                .await
                .unwrap(),
        ),
    }
}

/// Media operations, items and variants.
async fn media_rows(db: &Database) -> (i64, i64, i64) {
    const ROWS: &str = "select (select count(*) from media_operations),
        (select count(*) from media_items), (select count(*) from media_variants)";
    match db {
        Database::Sqlite(sqlite) => sqlx::query_as(ROWS).fetch_one(sqlite.pool()).await.unwrap(),
        Database::Postgres(pool) => sqlx::query_as(ROWS).fetch_one(pool).await.unwrap(),
    }
}

backend_tests! {
    async fn a_seeded_database_keeps_every_invariant(backend) {
        let app = TestApp::spawn(backend).await;
        let plan = VolumePlan {
            listings: 6_200,
            agents: 7,
            photos_per_listing: 2,
            small_agencies: 3,
            listings_per_small_agency: 40,
            deliveries: 5_300,
            job_runs: 700,
            progress_events: 230,
            days: 30,
        };
        let mut reported = Vec::new();
        let seeded = app
            .store
            .volume()
            .seed(&plan, &mut |part, rows| reported.push((part.to_owned(), rows)))
            .await
            .unwrap();
        assert_eq!(seeded.listings, 6_200 + 3 * 40);
        assert_eq!(seeded.deliveries, 5_300);
        assert!(reported.contains(&("listings".to_owned(), 6_200)), "{reported:?}");
        assert_eq!(disagreeing_totals(app.store.db()).await, (0, 0));
        assert_eq!(
            media_rows(app.store.db()).await,
            (6_320, 12_640, 75_840),
            "an upload a listing, two photos each, six variants a photo"
        );
        if let Database::Sqlite(sqlite) = app.store.db() {
            let broken: Vec<(String, i64, String, i64)> = sqlx::query_as("pragma foreign_key_check")
                .fetch_all(sqlite.pool())
                .await
                .unwrap();
            assert!(broken.is_empty(), "{broken:?}");
        }

        // The API sees the large agency's listings and deliveries, totalled.
        let agency = tests::TestAgency {
            id: seeded.agency_id.clone(),
            owner_id: seeded.owner_id.clone(),
        };
        let key = app
            .key(&agency, &[
                storage::api_keys::Scope::ListingsRead,
                storage::api_keys::Scope::WebhooksRead,
            ])
            .await;
        let get = |path: String| {
            let request = app.get(&path).header("X-API-Key", &key);
            async move { expect_ok(request.send().await.unwrap()).await }
        };
        let page: Value = get("/api/v1/listings?limit=5".into()).await;
        assert_eq!(page["total"], 6_200);
        // Each listing has its two photos, ready with the six variants.
        let number = page["items"][0]["listing_number"].as_str().unwrap();
        let listing: Value = get(format!("/api/v1/listings/{number}")).await;
        let media = listing["media"].as_array().unwrap();
        assert_eq!(media.len(), 2, "{listing}");
        for item in media {
            assert_eq!(item["status"], "ready", "{item}");
            assert_eq!(item["variants"].as_array().unwrap().len(), 6, "{item}");
        }
        let agent = &seeded.agent_ids[0];
        let by_agent: Value = get(format!("/api/v1/listings?limit=5&agent_id={agent}")).await;
        // Agent 0 is agent one of every seventh listing and agent two of
        // every third listing whose agent one is agent 6.
        let expected = (0..6_200u64).filter(|i| i % 7 == 0 || (i % 3 == 0 && i % 7 == 6)).count();
        assert_eq!(by_agent["total"], expected);
        let deliveries: Value = get(format!(
            "/api/v1/webhooks/endpoints/{}/deliveries?limit=5",
            seeded.endpoint_id
        ))
        .await;
        assert_eq!(deliveries["total"], 5_300);
    }
}
