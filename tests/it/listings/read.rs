//! `GET /listings`, `GET /listings/{listing_number}` and its orders.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::people::users::Role;
use tests::backend_tests;

use super::{Ctx, add_user};
use crate::support::{expect_error, expect_ok};

fn numbers(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["listing_number"].as_str().unwrap().to_owned())
        .collect()
}

backend_tests! {
    async fn the_single_read_shows_people_sections_orders_and_the_shoot(backend) {
        let ctx = Ctx::new(backend).await;
        let agent_two = add_user(&ctx.app, &ctx.agency, Role::Agent).await;
        let mut body = ctx.new_listing();
        body["agent_two_id"] = json!(agent_two);
        let created: Value = ctx.post("/api/v1/listings", &body).await.json().await.unwrap();
        let number = created["listing_number"].as_str().unwrap();

        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        assert_eq!(listing["listing_number"], number);
        assert_eq!(listing["status"], "Coming Soon");
        assert_eq!(listing["canonical_url"], created["canonical_url"]);
        let assigned: Vec<(&str, &str)> = listing["assigned_users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| (u["assignment"].as_str().unwrap(), u["user_id"].as_str().unwrap()))
            .collect();
        assert_eq!(
            assigned,
            [("owner", ctx.agency.owner_id.as_str()), ("agent_one", ctx.agent.as_str()), ("agent_two", agent_two.as_str())]
        );
        assert_eq!(listing["sections"], json!({"tour3d": {"url": null}, "floorplan": {"files": []}}));
        let orders = listing["orders"].as_array().unwrap();
        assert_eq!(orders.len(), 1);
        assert_eq!(orders[0]["invoice_state"], "open");
        assert_eq!(orders[0]["amount"], 29_900);
        assert_eq!(orders[0]["currency"], "USD");
        assert_eq!(listing["appointment"], Value::Null);
        assert_eq!(listing["cancellation"]["no_fee_cutoff"], Value::Null);

        let shoot = ctx.schedule_in(number, 3 * 86_400).await;
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{}", number.to_lowercase())).await).await;
        assert_eq!(listing["appointment"]["scheduled_at"], shoot.to_rfc3339());
        assert_eq!(listing["appointment"]["status"], "scheduled");
        assert_eq!(listing["cancellation"]["no_fee_cutoff"], shoot.plus_seconds(-86_400).to_rfc3339());

        let missing = ctx.get("/api/v1/listings/ZZZZZZZ").await;
        expect_error(missing, StatusCode::NOT_FOUND, "listing_not_found").await;
    }

    async fn the_list_filters_by_status_and_agent_and_pages(backend) {
        let ctx = Ctx::new(backend).await;
        let other_agent = add_user(&ctx.app, &ctx.agency, Role::Agent).await;
        let first = ctx.activated_listing().await;
        let second = ctx.listing().await;
        let mut body = ctx.new_listing();
        body["agent_one_id"] = json!(other_agent);
        body["agent_two_id"] = json!(ctx.agent);
        let third: Value = ctx.post("/api/v1/listings", &body).await.json().await.unwrap();
        let third = third["listing_number"].as_str().unwrap().to_owned();
        let mut body = ctx.new_listing();
        body["agent_one_id"] = json!(other_agent);
        let fourth: Value = ctx.post("/api/v1/listings", &body).await.json().await.unwrap();
        let fourth = fourth["listing_number"].as_str().unwrap().to_owned();
        ctx.set_status(&first, "Active").await;

        let all = expect_ok(ctx.get("/api/v1/listings").await).await;
        assert_eq!(numbers(&all), [first.as_str(), &second, &third, &fourth]);
        assert_eq!(all["total"], 4);
        assert_eq!(all["next_cursor"], "");

        for query in ["status=active", "status=Active", "status=ACTIVE"] {
            assert_eq!(numbers(&expect_ok(ctx.get(&format!("/api/v1/listings?{query}")).await).await), [first.as_str()]);
        }
        let coming = expect_ok(ctx.get("/api/v1/listings?status=coming%20soon").await).await;
        assert_eq!(coming["total"], 3);
        let by_agent = expect_ok(ctx.get(&format!("/api/v1/listings?agent_id={}", ctx.agent)).await).await;
        assert_eq!(numbers(&by_agent), [first.as_str(), &second, &third], "agent one or agent two");
        let both = expect_ok(ctx.get(&format!("/api/v1/listings?agent_id={other_agent}&status=coming_soon")).await).await;
        assert_eq!(numbers(&both), [third.as_str(), &fourth]);

        let page_one = expect_ok(ctx.get("/api/v1/listings?limit=3").await).await;
        assert_eq!(numbers(&page_one).len(), 3);
        let cursor = page_one["next_cursor"].as_str().unwrap();
        let page_two = expect_ok(ctx.get(&format!("/api/v1/listings?limit=3&cursor={cursor}")).await).await;
        assert_eq!(numbers(&page_two), [fourth.as_str()]);
        assert_eq!(page_two["next_cursor"], "");

        for (query, field) in [("status=open", "status"), ("agent_id=bob", "agent_id"), ("limit=0", "limit"), ("limit=500", "limit"), ("sort=asc", "sort")] {
            let response = ctx.get(&format!("/api/v1/listings?{query}")).await;
            let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"][field].is_string(), "{query}");
        }
        let with_other_filter = ctx.get(&format!("/api/v1/listings?limit=3&status=active&cursor={cursor}")).await;
        expect_error(with_other_filter, StatusCode::UNPROCESSABLE_ENTITY, "invalid_cursor").await;
        let garbage = ctx.get("/api/v1/listings?cursor=eyJub3QiOiJzaWduZWQifQ").await;
        expect_error(garbage, StatusCode::UNPROCESSABLE_ENTITY, "invalid_cursor").await;
    }

    async fn orders_show_invoice_and_payment_state(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let page = expect_ok(ctx.get(&format!("/api/v1/listings/{number}/orders")).await).await;
        assert_eq!(page["total"], 1);
        assert_eq!(page["next_cursor"], "");
        let order = &page["items"][0];
        assert!(order["order_id"].as_str().unwrap().starts_with("ord_"));
        assert_eq!(order["listing_number"], number.as_str());
        assert_eq!(order["package"], "standard");
        assert_eq!(order["invoice_state"], "open");
        assert!(order["invoice_number"].as_str().unwrap().starts_with("INV-"));
        assert_eq!(order["payment_reference"], Value::Null);

        ctx.app.store.orders().record_payment(&ctx.live(), &number, Some("ch_test_42".into())).await.unwrap();
        let page = expect_ok(ctx.get(&format!("/api/v1/listings/{number}/orders?limit=1")).await).await;
        assert_eq!(page["items"][0]["invoice_state"], "paid");
        assert_eq!(page["items"][0]["payment_reference"], "ch_test_42");
        assert!(page["items"][0]["paid_at"].is_string());

        expect_error(ctx.get("/api/v1/listings/ZZZZZZZ/orders").await, StatusCode::NOT_FOUND, "listing_not_found").await;
        expect_error(ctx.get(&format!("/api/v1/listings/{number}/orders?limit=0")).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        expect_error(ctx.get(&format!("/api/v1/listings/{number}/orders?cursor=AAAAAAAAAAAAAAAAAAAAAAAA")).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid_cursor").await;
    }
}

/// The single read is cached briefly: this process's writes show at once,
/// another process's within the cache's TTL.
#[tokio::test]
async fn the_single_read_sees_its_own_writes_at_once_and_others_within_the_ttl() {
    let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
    let ctx = Ctx::with_app(
        tests::TestApp::builder(tests::Backend::Sqlite)
            .clock(clock.clone())
            .spawn()
            .await,
    )
    .await;
    let number = ctx.activated_listing().await;
    let path = format!("/api/v1/listings/{number}");
    assert_eq!(
        expect_ok(ctx.get(&path).await).await["status"],
        "Coming Soon"
    );
    // A write through this process.
    ctx.set_status(&number, "Active").await;
    assert_eq!(expect_ok(ctx.get(&path).await).await["status"], "Active");
    // A write by another process (an operator's SQL here).
    crate::support::sql::set_listing_address(ctx.app.store.db(), &number, "3 Elsewhere Lane").await;
    assert_eq!(
        expect_ok(ctx.get(&path).await).await["address"],
        "12 Elm Street, Springfield"
    );
    clock.advance_seconds(storage::listings::cache::TTL_SECONDS);
    assert_eq!(
        expect_ok(ctx.get(&path).await).await["address"],
        "3 Elsewhere Lane"
    );
}
