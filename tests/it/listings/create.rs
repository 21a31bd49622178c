//! `POST /listings`.

use std::collections::HashSet;

use reqwest::StatusCode;
use serde_json::json;
use storage::api_keys::Scope;
use storage::people::users::Role;
use tests::backend_tests;

use super::{Ctx, add_user};
use crate::support::{expect_error, sql};

const ALPHABET: &str = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";

backend_tests! {
    async fn a_listing_is_created_coming_soon_with_its_canonical_url(backend) {
        let ctx = Ctx::new(backend).await;
        let agent_two = add_user(&ctx.app, &ctx.agency, Role::Agent).await;
        let mut body = ctx.new_listing();
        body["agent_two_id"] = json!(agent_two);
        body["package"] = json!("premium");
        body["notes"] = json!("Lockbox 4411");
        let response = ctx.post("/api/v1/listings", &body).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        let listing: serde_json::Value = response.json().await.unwrap();

        let number = listing["listing_number"].as_str().unwrap();
        assert!((6..=8).contains(&number.len()), "{number}");
        assert!(number.chars().all(|c| ALPHABET.contains(c)), "{number}");
        assert_eq!(listing["status"], "Coming Soon");
        assert_eq!(listing["canonical_url"], format!("{}/property/{number}", ctx.app.base_url));
        assert_eq!(listing["address"], "12 Elm Street, Springfield");
        assert_eq!(listing["owner_user_id"], ctx.agency.owner_id.as_str());
        assert_eq!(listing["agent_one_id"], ctx.agent.as_str());
        assert_eq!(listing["agent_two_id"], agent_two.as_str());
        assert_eq!(listing["package"], "premium");
        assert_eq!(listing["notes"], "Lockbox 4411");
        assert_eq!(listing["is_sandbox"], false);
        assert_eq!(listing["activated"], false);
        assert!(listing["created_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(listing["created_at"], listing["updated_at"]);
        assert!(listing["id"].as_str().unwrap().starts_with("lst_"));

        // Without a package, the default one is ordered.
        let plain = ctx.create().await;
        assert_eq!(plain["package"], "standard");
        assert_eq!(plain["agent_two_id"], serde_json::Value::Null);
    }

    async fn sandbox_listings_are_prefixed_and_flagged(backend) {
        let ctx = Ctx::new(backend).await;
        let sandbox = ctx.sandbox_key().await;
        let response = ctx
            .app
            .client
            .post(ctx.app.url("/api/v1/listings"))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .bearer_auth(&sandbox)
            .json(&ctx.new_listing())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let listing: serde_json::Value = response.json().await.unwrap();
        assert!(listing["listing_number"].as_str().unwrap().starts_with("snd_"));
        assert_eq!(listing["is_sandbox"], true);
    }

    async fn listing_numbers_are_unique(backend) {
        let ctx = Ctx::new(backend).await;
        let mut seen = HashSet::new();
        for _ in 0..40 {
            assert!(seen.insert(ctx.listing().await));
        }
    }

    async fn people_must_be_active_members_of_the_agency(backend) {
        let ctx = Ctx::new(backend).await;
        let other = ctx.app.agency().await;
        let stranger = add_user(&ctx.app, &other, Role::Agent).await;
        let retired = add_user(&ctx.app, &ctx.agency, Role::Agent).await;
        sql::deactivate_user(ctx.app.store.db(), retired.as_str()).await;
        let platform = add_user(&ctx.app, &ctx.agency, Role::Admin).await;

        let cases = [
            ("owner_user_id", json!(other.owner_id), "is not a user of this agency"),
            ("agent_one_id", json!(stranger), "is not a user of this agency"),
            ("agent_one_id", json!(retired), "is deactivated"),
            ("agent_one_id", json!(platform), "is not a user of this agency"),
            ("agent_two_id", json!(stranger), "is not a user of this agency"),
            ("agent_two_id", json!(ctx.agent), "must differ from agent_one_id"),
            ("owner_user_id", json!("usr_garbage"), "is not a user of this agency"),
            ("package", json!("gold"), "must be one of essentials, standard, premium"),
            ("address", json!("   "), "is required"),
            ("address", json!("x".repeat(501)), "must be at most 500 characters"),
            ("notes", json!("x".repeat(5001)), "must be at most 5000 characters"),
        ];
        for (field, value, reason) in cases {
            let mut body = ctx.new_listing();
            body[field] = value;
            let response = ctx.post("/api/v1/listings", &body).await;
            let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert_eq!(error["error"]["details"]["fields"][field], reason, "{field}: {error}");
        }

        // Several problems are reported together.
        let body = json!({"address": "", "owner_user_id": stranger, "agent_one_id": retired, "package": "gold"});
        let response = ctx.post("/api/v1/listings", &body).await;
        let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let fields = error["error"]["details"]["fields"].as_object().unwrap();
        let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["address", "agent_one_id", "owner_user_id", "package"]);

        // Nothing was written by any refused request.
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "listings", ctx.agency.id.as_str()).await, 0);
        let written: Vec<String> = ctx.events().await.into_iter().map(|e| e.event_type).filter(|t| !t.starts_with("user.")).collect();
        assert!(written.is_empty(), "only the test's people joined: {written:?}");
    }

    async fn schema_and_scope_errors(backend) {
        let ctx = Ctx::new(backend).await;
        let missing = ctx.post("/api/v1/listings", &json!({"address": "1 Main St", "agent_one_id": ctx.agent})).await;
        let error = expect_error(missing, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert_eq!(error["error"]["details"]["fields"]["owner_user_id"], "is required");

        let mut unknown = ctx.new_listing();
        unknown["colour"] = json!("blue");
        let error = expect_error(ctx.post("/api/v1/listings", &unknown).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert_eq!(error["error"]["details"]["fields"]["colour"], "is not a known field");

        let malformed = ctx
            .app
            .client
            .post(ctx.app.url("/api/v1/listings"))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &ctx.key)
            .header("Content-Type", "application/json")
            .body("{\"address\": ")
            .send()
            .await
            .unwrap();
        expect_error(malformed, StatusCode::BAD_REQUEST, "request.malformed").await;

        let reader = ctx.app.key(&ctx.agency, &[Scope::ListingsRead]).await;
        let denied = ctx
            .app
            .client
            .post(ctx.app.url("/api/v1/listings"))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &reader)
            .json(&ctx.new_listing())
            .send()
            .await
            .unwrap();
        let error = expect_error(denied, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        assert_eq!(error["error"]["details"]["required_scope"], "listings:write");
    }
}
