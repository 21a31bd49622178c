//! `PATCH /listings/{listing_number}/sections/{section}`.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::rules::events::EventType;
use tests::backend_tests;

use super::Ctx;
use crate::support::{expect_error, expect_ok};

fn file(n: usize) -> Value {
    json!({"url": format!("https://cdn.example.com/floorplans/{n}.pdf"), "label": format!("Level {n}")})
}

backend_tests! {
    async fn tour3d_is_set_moved_and_removed(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let path = format!("/api/v1/listings/{number}/sections/tour3d");
        let first = expect_ok(ctx.patch(&path, &json!({"operation": "set", "url": "https://tours.example.com/a"})).await).await;
        assert_eq!(first, json!({"listing_number": number, "section": "tour3d", "operation": "set", "previous_url": null, "url": "https://tours.example.com/a"}));
        let second = expect_ok(ctx.patch(&path, &json!({"operation": "set", "url": "https://tours.example.com/b"})).await).await;
        assert_eq!(second["previous_url"], "https://tours.example.com/a");
        assert_eq!(second["url"], "https://tours.example.com/b");
        let removed = expect_ok(ctx.patch(&path, &json!({"operation": "remove"})).await).await;
        assert_eq!(removed["previous_url"], "https://tours.example.com/b");
        assert_eq!(removed["url"], Value::Null);

        let events = ctx.events_of(EventType::ListingSectionUpdated).await;
        assert_eq!(events.len(), 3);
        assert_eq!(events[1].data["previous_url"], "https://tours.example.com/a");
        assert_eq!(events[2].data["operation"], "remove");
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        assert_eq!(listing["sections"]["tour3d"]["url"], Value::Null);
    }

    async fn floorplan_labels_are_sanitized_but_echoed(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let path = format!("/api/v1/listings/{number}/sections/floorplan");
        let body = json!({"operation": "set", "files": [{"url": "https://cdn.example.com/g.pdf", "label": "Floor 1: Kitchen/Dining"}]});
        let set = expect_ok(ctx.patch(&path, &body).await).await;
        assert_eq!(set["files"][0]["label"], "Floor 1: Kitchen/Dining");
        assert_eq!(set["files"][0]["stored_label"], "Floor 1 KitchenDining");
        assert_eq!(set["floorplan_size"], 1);

        let appended = expect_ok(ctx.patch(&path, &json!({"operation": "append", "files": [file(2), file(3)]})).await).await;
        assert_eq!(appended["floorplan_size"], 3);
        let listing = expect_ok(ctx.get(&format!("/api/v1/listings/{number}")).await).await;
        let labels: Vec<&str> = listing["sections"]["floorplan"]["files"].as_array().unwrap().iter().map(|f| f["label"].as_str().unwrap()).collect();
        assert_eq!(labels, ["Floor 1 KitchenDining", "Level 2", "Level 3"]);

        let replaced = expect_ok(ctx.patch(&path, &json!({"operation": "replace", "files": [file(9)]})).await).await;
        assert_eq!(replaced["floorplan_size"], 1);
        assert_eq!(ctx.events_of(EventType::ListingSectionUpdated).await.len(), 3);
    }

    async fn semantic_errors_name_the_field_and_reason(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let tour = format!("/api/v1/listings/{number}/sections/tour3d");
        let floor = format!("/api/v1/listings/{number}/sections/floorplan");
        let twenty: Vec<Value> = (0..20).map(file).collect();
        let twenty_one: Vec<Value> = (0..21).map(file).collect();
        let cases = [
            (&tour, json!({"operation": "set"}), "url"),
            (&tour, json!({"operation": "set", "url": "not a url"}), "url"),
            (&tour, json!({"operation": "set", "url": "javascript:alert(1)"}), "url"),
            (&tour, json!({"operation": "remove", "url": "https://tours.example.com/a"}), "url"),
            (&tour, json!({"operation": "erase"}), "operation"),
            (&tour, json!({"url": "https://tours.example.com/a"}), "operation"),
            (&tour, json!({"operation": "set", "url": "https://t.example.com", "files": []}), "files"),
            (&floor, json!({"operation": "set", "files": twenty_one}), "files"),
            (&floor, json!({"operation": "set", "files": []}), "files"),
            (&floor, json!({"operation": "set"}), "files"),
            (&floor, json!({"operation": "set", "files": [{"url": "https://cdn.example.com/a.pdf", "label": "L".repeat(65)}]}), "files[0].label"),
            (&floor, json!({"operation": "set", "files": [{"url": "https://cdn.example.com/a.pdf", "label": ""}]}), "files[0].label"),
            (&floor, json!({"operation": "set", "files": [file(0), {"url": "ftp://cdn.example.com/a.pdf", "label": "A"}]}), "files[1].url"),
            (&floor, json!({"operation": "set", "files": [{"label": "A"}]}), "files[0].url"),
            (&floor, json!({"operation": "merge", "files": [file(0)]}), "operation"),
            (&floor, json!({"operation": "set", "url": "https://x.example.com", "files": [file(0)]}), "url"),
        ];
        for (path, body, field) in cases {
            let error = expect_error(ctx.patch(path, &body).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid_section_payload").await;
            assert_eq!(error["error"]["details"]["field"], field, "{body}");
            assert!(error["error"]["details"]["reason"].as_str().is_some_and(|r| !r.is_empty()));
        }
        // Twenty files fit; one more appended does not.
        expect_ok(ctx.patch(&floor, &json!({"operation": "set", "files": twenty})).await).await;
        let error = expect_error(ctx.patch(&floor, &json!({"operation": "append", "files": [file(99)]})).await, StatusCode::UNPROCESSABLE_ENTITY, "invalid_section_payload").await;
        assert_eq!(error["error"]["details"]["field"], "files");
        // Wrong JSON types are schema failures, not semantic ones.
        expect_error(ctx.patch(&floor, &json!({"operation": "set", "files": "all"})).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert_eq!(ctx.events_of(EventType::ListingSectionUpdated).await.len(), 1, "only the valid patch emitted");
    }

    async fn other_sections_are_not_exposed(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        for section in ["photos", "video", "TOUR3D", "floorplans"] {
            let response = ctx.patch(&format!("/api/v1/listings/{number}/sections/{section}"), &json!({"operation": "set"})).await;
            expect_error(response, StatusCode::NOT_FOUND, "section_not_exposed").await;
        }
        // Even with a body that would not parse.
        let response = ctx
            .app
            .client
            .patch(ctx.app.url(&format!("/api/v1/listings/{number}/sections/photos")))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &ctx.key)
            .header("Content-Type", "application/json")
            .body("{")
            .send()
            .await
            .unwrap();
        expect_error(response, StatusCode::NOT_FOUND, "section_not_exposed").await;
        let response = ctx.patch("/api/v1/listings/ZZZZZZZ/sections/tour3d", &json!({"operation": "remove"})).await;
        expect_error(response, StatusCode::NOT_FOUND, "listing_not_found").await;
    }
}
