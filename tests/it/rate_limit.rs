//! Rate limits: both budget sets, GCRA refill, the headers in three spellings,
//! 429 in the envelope, separate read and write and sandbox budgets, per-key
//! overrides, and one shared budget across API processes through Redis.

use std::collections::BTreeMap;
use std::time::Instant;

use reqwest::{Response, StatusCode};
use serde_json::Value;
use storage::Environment;
use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use tests::{Backend, TestApp, backend_tests};

use crate::listings::Ctx;
use crate::support::expect_error;
use tests::deployment::{Deployment, serve};

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("header {name}"))
}

fn assert_rate_limit_headers(response: &Response) {
    for prefix in ["x-rate-limit-", "x-ratelimit-"] {
        for suffix in ["limit", "remaining", "reset"] {
            let value = header(response, &format!("{prefix}{suffix}"));
            assert!(value.parse::<u64>().is_ok(), "{prefix}{suffix}: {value}");
        }
    }
    assert!(header(response, "ratelimit-policy").contains(";w=60"));
    assert!(header(response, "ratelimit").contains(";r="));
    let reset: i64 = header(response, "x-rate-limit-reset").parse().unwrap();
    assert!(
        reset >= chrono::Utc::now().timestamp(),
        "reset is a Unix time in the future"
    );
}

async fn create(ctx: &Ctx, key: &str) -> Response {
    ctx.app
        .client
        .post(ctx.app.url("/api/v1/listings"))
        .header("X-API-Key", key)
        .header("X-Idempotency-Key", tests::idempotency_key())
        .json(&ctx.new_listing())
        .send()
        .await
        .unwrap()
}

backend_tests! {
    async fn a_burst_of_creates_stops_at_the_budget_and_reads_carry_on(backend) {
        let ctx = Ctx::new(backend).await;
        let started = Instant::now();
        let mut created = 0u32;
        let mut limited = Vec::new();
        for _ in 0..230 {
            let response = create(&ctx, &ctx.key).await;
            assert_rate_limit_headers(&response);
            match response.status() {
                StatusCode::CREATED => created += 1,
                StatusCode::TOO_MANY_REQUESTS => limited.push(response),
                other => panic!("unexpected {other}"),
            }
        }
        // GCRA gives back one create every 300 ms of the burst, no more.
        let refilled = (started.elapsed().as_secs_f64() / 0.3).ceil() as u32 + 1;
        assert!(created >= 200 && created <= 200 + refilled, "{created} created, {refilled} refilled");
        assert_eq!(created as usize + limited.len(), 230);
        let first_limited = limited.remove(0);
        let retry_after: u64 = header(&first_limited, "retry-after").parse().unwrap();
        assert!((1..=60).contains(&retry_after));
        assert_eq!(header(&first_limited, "x-rate-limit-remaining"), "0");
        assert_eq!(header(&first_limited, "x-rate-limit-limit"), "200");
        let body = expect_error(first_limited, StatusCode::TOO_MANY_REQUESTS, "rate_limit.exceeded").await;
        assert_eq!(body["error"]["retry_after_seconds"], retry_after);

        // Reads spend other budgets.
        let read = ctx.get("/api/v1/listings?limit=1").await;
        assert_eq!(read.status(), StatusCode::OK);
        assert_rate_limit_headers(&read);
        assert_ne!(header(&read, "x-rate-limit-remaining"), "0");
    }

    async fn a_key_override_replaces_its_endpoint_budget(backend) {
        for shared in [false, true] {
            let mut builder = TestApp::builder(backend);
            if shared {
                builder = builder.redis();
            }
            let ctx = Ctx::with_app(builder.spawn().await).await;
            let limited_key = ctx
                .app
                .store
                .api_keys()
                .issue(
                    &ctx.agency.id,
                    NewApiKey {
                        name: "throttled".into(),
                        scopes: vec![Scope::ListingsWrite, Scope::ListingsRead],
                        environment: Environment::Live,
                        format: KeyFormat::Sk,
                        created_by: Some(ctx.agency.owner_id.clone()),
                        rate_limit_overrides: BTreeMap::from([("create_listing".to_owned(), 5)]),
                    },
                )
                .await
                .unwrap()
                .plaintext
                .expose()
                .to_owned();
            for n in 0..5 {
                let response = create(&ctx, &limited_key).await;
                assert_eq!(response.status(), StatusCode::CREATED, "create {n} (shared: {shared})");
                assert_eq!(header(&response, "x-rate-limit-limit"), "5");
                assert_eq!(header(&response, "x-rate-limit-remaining"), (4 - n).to_string());
            }
            let refused = create(&ctx, &limited_key).await;
            assert!(header(&refused, "ratelimit").starts_with("\"create_listing\";r=0;"));
            expect_error(refused, StatusCode::TOO_MANY_REQUESTS, "rate_limit.exceeded").await;
            // Other keys of the agency keep their own budget.
            assert_eq!(create(&ctx, &ctx.key).await.status(), StatusCode::CREATED);
        }
    }
}

#[tokio::test]
async fn an_operator_can_set_an_agency_budget() {
    let ctx = Ctx::new(Backend::Sqlite).await;
    let budgets = BTreeMap::from([("agency_listing_creates".to_owned(), 3)]);
    ctx.app
        .store
        .agencies()
        .set_rate_limit_overrides(&ctx.agency.id, &budgets)
        .await
        .unwrap();
    let other_key = ctx.app.key(&ctx.agency, &[Scope::ListingsWrite]).await;
    for key in [&ctx.key, &other_key, &ctx.key] {
        assert_eq!(create(&ctx, key).await.status(), StatusCode::CREATED);
    }
    // The agency budget is shared by its keys.
    let refused = create(&ctx, &other_key).await;
    assert!(header(&refused, "ratelimit").starts_with("\"agency_listing_creates\";r=0;"));
    expect_error(
        refused,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit.exceeded",
    )
    .await;
}

#[tokio::test]
async fn sandbox_traffic_has_its_own_agency_budget() {
    let ctx = Ctx::new(Backend::Sqlite).await;
    let scopes = [Scope::ListingsRead, Scope::UsersRead];
    let mut sandbox_keys = Vec::new();
    for _ in 0..2 {
        let key = ctx
            .app
            .key_with(&ctx.agency, &scopes, Environment::Sandbox, KeyFormat::Ma)
            .await;
        sandbox_keys.push(key);
    }
    let started = Instant::now();
    let mut admitted = 0u32;
    let refused = loop {
        // Two keys, so no per-key budget is what stops us; listing reads
        // first, then user reads: one sandbox budget across both, while each
        // route's own agency budget (500 and 200) has room left.
        let key = &sandbox_keys[(admitted % 2) as usize];
        let path = if admitted < 350 {
            "/api/v1/listings?limit=1"
        } else {
            "/api/v1/users?limit=1"
        };
        let response = ctx
            .app
            .get(path)
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            break response;
        }
        assert_eq!(response.status(), StatusCode::OK);
        admitted += 1;
        assert!(admitted < 600, "the sandbox budget never ran out");
    };
    let refilled = (started.elapsed().as_secs_f64() / 0.12).ceil() as u32 + 1;
    assert!(
        admitted >= 500 && admitted <= 500 + refilled,
        "{admitted} admitted"
    );
    assert!(header(&refused, "ratelimit").starts_with("\"agency_sandbox\";r=0;"));
    expect_error(
        refused,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit.exceeded",
    )
    .await;
    // Live traffic of the same agency is untouched.
    let live = ctx.get("/api/v1/listings?limit=1").await;
    assert_eq!(live.status(), StatusCode::OK);
}

#[tokio::test]
async fn two_api_processes_on_one_redis_share_one_budget() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let agency = deployment.admin_ok(&["create-agency", "--name", "Shared"]);
    let agency_id = agency["agency_id"].as_str().unwrap();
    let key = deployment.admin_ok(&[
        "create-key",
        "--agency",
        agency_id,
        "--name",
        "k",
        "--scopes",
        "listings:read",
        "--rate-limit",
        "read_listings_list=6",
        "--rate-limit",
        "read_listing_single=50",
    ]);
    let key = key["key"].as_str().unwrap().to_owned();
    let redis = tests::services::isolated_redis_url();
    let client = tests::app::base_client().build().unwrap();
    let first = serve(&deployment, &["--redis-url", &redis], &client, "http").await;
    let second = serve(&deployment, &["--redis-url", &redis], &client, "http").await;

    let mut statuses = Vec::new();
    for n in 0..10 {
        let server = if n % 2 == 0 { &first } else { &second };
        let response = client
            .get(format!("{}/api/v1/listings", server.base_url))
            .header("X-API-Key", &key)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    // Six in all (one more if a refill lands mid-run), not six per process.
    assert!((6..=7).contains(&admitted), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );

    let bad = deployment.admin(&[
        "create-key",
        "--agency",
        agency_id,
        "--name",
        "k",
        "--rate-limit",
        "no_such_endpoint=5",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let _: Value = serde_json::from_slice(&bad.stderr).unwrap();
    let budgets = deployment.admin_ok(&[
        "set-agency-budgets",
        "--agency",
        agency_id,
        "--budget",
        "agency_listing_reads=2000",
    ]);
    assert_eq!(budgets["budgets"]["agency_listing_reads"], 2000);
    let bad = deployment.admin(&[
        "set-agency-budgets",
        "--agency",
        agency_id,
        "--budget",
        "agency_everything=1",
    ]);
    assert_eq!(bad.status.code(), Some(1));
}
