//! Versioning signals: the changelog (session plus CSRF token; limit and
//! change_type), a removed route answering 410 Gone in the envelope, a
//! deprecated route carrying Deprecation, Sunset and Link, and the OpenAPI
//! document's info.version and deprecated flags following the changelog.

use reqwest::StatusCode;
use serde_json::Value;
use tests::{TestApp, backend_tests};

use crate::listings::Ctx;
use crate::sessions::{owner_login, sign_in};
use crate::support::{expect_error, expect_ok};

backend_tests! {
    async fn the_changelog_filters_by_change_type_and_limits_newest_first(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let email = owner_login(&app, &agency).await;
        let signed = sign_in(&app, &email).await;
        let read = |query: &str| signed.send(app.get(&format!("/api/v1/agency/changelog{query}")));

        let all = expect_ok(read("").send().await.unwrap()).await;
        let items = all["items"].as_array().unwrap();
        assert_eq!(all["total"].as_u64().unwrap() as usize, items.len());
        let dates: Vec<&str> = items.iter().map(|e| e["date"].as_str().unwrap()).collect();
        assert!(dates.windows(2).all(|w| w[0] >= w[1]), "newest first: {dates:?}");
        for kind in ["added", "deprecated", "removed", "security", "fixed"] {
            assert!(items.iter().any(|e| e["change_type"] == kind), "no {kind} entry");
        }

        let deprecated = expect_ok(read("?change_type=deprecated").send().await.unwrap()).await;
        let entries = deprecated["items"].as_array().unwrap();
        assert!(!entries.is_empty());
        for entry in entries {
            assert_eq!(entry["change_type"], "deprecated");
            assert!(entry["migration"].is_string() && entry["removal_date"].is_string(), "{entry}");
        }
        let one = expect_ok(read("?limit=1").send().await.unwrap()).await;
        assert_eq!(one["items"].as_array().unwrap().len(), 1);
        assert_eq!(one["items"][0], items[0]);
        assert_eq!(one["total"], all["total"]);
        assert_eq!(all["next_cursor"], "", "the whole changelog fits the default page");
        // Page by page, one entry each, through the cursor: every entry once, in order.
        let mut paged = Vec::new();
        let mut cursor = String::new();
        loop {
            let query = if cursor.is_empty() { "?limit=1".to_owned() } else { format!("?limit=1&cursor={cursor}") };
            let page = expect_ok(read(&query).send().await.unwrap()).await;
            paged.extend(page["items"].as_array().unwrap().iter().cloned());
            cursor = page["next_cursor"].as_str().unwrap().to_owned();
            if cursor.is_empty() {
                break;
            }
        }
        assert_eq!(&paged, items);
        let filtered_cursor = expect_ok(read("?limit=1&change_type=deprecated").send().await.unwrap()).await["next_cursor"].as_str().unwrap().to_owned();
        if !filtered_cursor.is_empty() {
            expect_error(read(&format!("?limit=1&cursor={filtered_cursor}")).send().await.unwrap(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_cursor").await;
        }
        expect_error(read("?cursor=not-a-cursor").send().await.unwrap(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_cursor").await;

        for (query, field) in [("?change_type=breaking", "change_type"), ("?limit=0", "limit"), ("?limit=201", "limit"), ("?since=2026", "since")] {
            let body = expect_error(read(query).send().await.unwrap(), StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(body["error"]["details"]["fields"][field].is_string(), "{query}: {body}");
        }
    }

    async fn a_removed_route_answers_410_in_the_envelope(backend) {
        let ctx = Ctx::new(backend).await;
        for key in [Some(ctx.key.as_str()), None] {
            let mut request = ctx.app.get("/api/v1/tours");
            if let Some(key) = key {
                request = request.header("X-API-Key", key);
            }
            let body = expect_error(request.send().await.unwrap(), StatusCode::GONE, "endpoint_removed").await;
            let details = &body["error"]["details"];
            assert_eq!(details["replacement"], "GET /api/v1/listings");
            assert!(details["changelog_url"].as_str().unwrap().ends_with("/api/v1/agency/changelog#chg_2026_09_01_tours_list_removed"));
        }
    }

    async fn a_deprecated_route_answers_like_its_successor_with_deprecation_headers(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let current: Value = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        let response = ctx.get(&format!("/api/v1/tours/{number}")).await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(headers["deprecation"], "@1780012800");
        assert_eq!(headers["sunset"], "Sat, 29 May 2027 00:00:00 GMT");
        let link = headers["link"].to_str().unwrap();
        assert!(link.contains("/api/v1/agency/changelog#chg_2026_05_29_tour_read_deprecated>"), "{link}");
        assert!(link.contains("rel=\"deprecation\""), "{link}");
        assert!(headers.contains_key("x-rate-limit-limit"), "the route keeps its budget");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body, current);
        // Its errors are the successor's, with the same signals.
        let missing = ctx.get("/api/v1/tours/NOPE234").await;
        assert!(missing.headers().contains_key("deprecation"));
        expect_error(missing, StatusCode::NOT_FOUND, "listing_not_found").await;
        let unauthenticated = ctx.app.get(&format!("/api/v1/tours/{number}")).send().await.unwrap();
        expect_error(unauthenticated, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    }

    async fn the_openapi_version_and_deprecations_follow_the_changelog(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let email = owner_login(&app, &agency).await;
        let signed = sign_in(&app, &email).await;
        let changelog = expect_ok(signed.send(app.get("/api/v1/agency/changelog?limit=200")).send().await.unwrap()).await;
        let doc = expect_ok(app.get("/api/openapi.json").send().await.unwrap()).await;
        let entries = changelog["items"].as_array().unwrap();
        let newest_surface = entries
            .iter()
            .filter(|e| ["added", "changed", "deprecated", "removed"].contains(&e["change_type"].as_str().unwrap()))
            .map(|e| e["date"].as_str().unwrap())
            .max()
            .unwrap();
        assert_eq!(doc["info"]["version"], newest_surface);
        assert_eq!(doc["paths"]["/api/v1/tours/{listing_number}"]["get"]["deprecated"], true);
        assert!(doc["paths"]["/api/v1/listings/{listing_number}"]["get"]["deprecated"].is_null());
        assert!(doc["paths"]["/api/v1/tours"].is_null(), "a removed route is not documented");
        // Every route an entry adds is in the document.
        for entry in entries.iter().filter(|e| e["change_type"] == "added") {
            for route in entry["routes"].as_array().unwrap() {
                let (method, path) = route.as_str().unwrap().split_once(' ').unwrap();
                let operation = &doc["paths"][path][method.to_lowercase()];
                assert!(operation.is_object(), "{route} is not documented");
            }
        }
    }
}

backend_tests! {
    /// The owner of every agency that called a deprecated route is e-mailed
    /// once, at least 30 days before its removal; an agency that never called
    /// it is not.
    async fn callers_of_a_deprecated_route_are_told_before_its_removal(backend) {
        use workers::handlers::maintenance::Maintenance;
        let removal = storage::rules::changelog::unix_seconds("2027-05-29").unwrap();
        // Forty days before the removal: too early for a notice.
        let clock = storage::Clock::manual(storage::Timestamp::from_micros((removal - 40 * 86_400) * 1_000_000));
        let ctx = Ctx::with_app(TestApp::builder(backend).clock(clock.clone()).spawn().await).await;
        let number = ctx.listing().await;
        assert_eq!(ctx.get(&format!("/api/v1/tours/{number}")).await.status(), StatusCode::OK);
        let bystander = ctx.app.agency().await;
        let notices = Maintenance::RemovalNotices;
        assert_eq!(notices.run(ctx.app.state.platform()).await.unwrap(), 0, "not yet");

        clock.advance_seconds(10 * 86_400);
        assert_eq!(notices.run(ctx.app.state.platform()).await.unwrap(), 1, "the caller's owner, once");
        assert_eq!(notices.run(ctx.app.state.platform()).await.unwrap(), 0, "never twice");
        let sent = ctx.app.store.webhooks().notifications(&ctx.agency.id).await.unwrap();
        let notice = sent.iter().find(|n| n.kind == "route_removal").expect("a removal notice");
        assert_eq!(notice.user_id.as_ref(), Some(&ctx.agency.owner_id));
        assert!(notice.subject.contains("2027-05-29"), "{}", notice.subject);
        assert!(notice.body.contains("GET /api/v1/listings/{listing_number}"), "{}", notice.body);
        let bystanders = ctx.app.store.webhooks().notifications(&bystander.id).await.unwrap();
        assert!(bystanders.iter().all(|n| n.kind != "route_removal"), "an agency that never called it");
    }
}
