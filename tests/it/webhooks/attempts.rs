//! What an attempt records and does: at most a KiB of the receiver's answer,
//! cut on a character boundary, and a redirect is not followed but fails the
//! attempt.

use std::time::Duration;

use serde_json::{Value, json};
use tests::backend_tests;

use storage::webhooks::{AfterAttempt, AttemptToRecord, Delivery, DeliveryKind, WebhookEndpoint};

use super::Ctx;
use super::auto_disable::{attempt_answered, pending_delivery, record_failed_deliveries};

/// The first delivery of `endpoint_id` once it has made `attempts` attempts.
async fn first_delivery_after(ctx: &Ctx, endpoint_id: &str, attempts: i64) -> Value {
    let deliveries = ctx.deliveries(endpoint_id).await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let id = deliveries[0]["id"].as_str().unwrap();
    ctx.delivery_until(id, |d| d["attempts"].as_i64() >= Some(attempts))
        .await
}

backend_tests! {
    async fn an_attempt_keeps_at_most_a_kib_of_the_receivers_answer(backend) {
        let ctx = Ctx::new(backend).await;
        // Over 1 KiB, with a two-byte character across the 1024th byte: the
        // excerpt must stop before it rather than split it.
        let body = format!("{}é{}", "e".repeat(1023), "z".repeat(2000));
        ctx.receiver.answer_with_body(500, body.clone());
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        ctx.create_listing().await;
        ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
        let delivery = first_delivery_after(&ctx, &endpoint_id, 1).await;
        for attempt in delivery["attempt_log"].as_array().unwrap() {
            assert_eq!(attempt["outcome"], "http_error", "{attempt}");
            assert_eq!(attempt["status_code"], 500);
            assert!(attempt["duration_ms"].as_u64().is_some(), "{attempt}");
            let excerpt = attempt["response_excerpt"].as_str().unwrap();
            assert!(excerpt.len() <= 1024, "{} bytes", excerpt.len());
            assert!(body.starts_with(excerpt), "a prefix of the answer: {excerpt:?}");
            assert_eq!(excerpt, "e".repeat(1023), "all that fits, whole characters only");
        }
    }

    async fn redirects_are_not_followed_and_the_attempt_fails(backend) {
        // The real schedule: the second attempt is 30 seconds away, so the
        // delivery rests in its retrying state while the test reads it.
        let ctx = Ctx::with_speedup(backend, 1).await;
        // The target shares the receiver's certificate: were the redirect
        // followed, the request would reach it.
        let target = ctx.receiver.beside().await;
        ctx.receiver.redirect_to(302, &target.url);
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        ctx.create_listing().await;
        ctx.receiver.wait_for(1, Duration::from_secs(20)).await;
        let delivery = first_delivery_after(&ctx, &endpoint_id, 1).await;
        assert_eq!(delivery["status"], "retrying", "{delivery}");
        assert_eq!(delivery["attempts"], 1);
        assert!(delivery["completed_at"].is_null());
        let attempt = &delivery["attempt_log"][0];
        assert_eq!(attempt["outcome"], "http_error", "{attempt}");
        assert_eq!(attempt["status_code"], 302);
        let started = chrono::DateTime::parse_from_rfc3339(attempt["started_at"].as_str().unwrap()).unwrap();
        let next = chrono::DateTime::parse_from_rfc3339(delivery["next_attempt_at"].as_str().unwrap()).unwrap();
        let wait = (next - started).num_milliseconds();
        assert!((29_000..=31_000).contains(&wait), "the second attempt 30 s later, not {wait} ms");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(target.received().is_empty(), "the redirect target heard nothing");
        assert_eq!(ctx.receiver.received().len(), 1);
    }
}

backend_tests! {
    async fn attempts_recorded_together_move_each_delivery_and_the_endpoint_as_one_at_a_time_would(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        let endpoint: WebhookEndpoint = ctx.app.store.webhooks().get(&ctx.live(), &endpoint_id.parse().unwrap()).await.unwrap().unwrap();
        // A streak of six failures for the batch's first success to end.
        record_failed_deliveries(&ctx, &endpoint, 6).await;
        let db = ctx.app.store.db();
        let agency = ctx.agency.id.as_str();
        let events_before = crate::support::sql::count_for_agency(db, "events", agency).await;

        let ended = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        let retried = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        let replay = pending_delivery(&ctx, &endpoint, DeliveryKind::Replay).await;
        let gave_up = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        let after_it = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        // A second endpoint, without a streak, whose give-up and success
        // come in the same batch.
        let (clean_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        let clean: WebhookEndpoint = ctx.app.store.webhooks().get(&ctx.live(), &clean_id.parse().unwrap()).await.unwrap().unwrap();
        let clean_gave_up = pending_delivery(&ctx, &clean, DeliveryKind::Event).await;
        let clean_after_it = pending_delivery(&ctx, &clean, DeliveryKind::Event).await;
        let retry_at = ctx.app.store.clock().now().plus_seconds(30);
        let one = |delivery: &Delivery, number: i32, status: i32, after: AfterAttempt| AttemptToRecord {
            delivery: delivery.clone(),
            attempt: attempt_answered(&ctx, number, status),
            after,
        };
        let batch = [
            one(&ended, 1, 200, AfterAttempt::Succeeded),
            one(&retried, 1, 500, AfterAttempt::RetryAt(retry_at)),
            one(&replay, 1, 500, AfterAttempt::Failed),
            // The same attempt again (a job that ran twice): nothing changes.
            one(&ended, 1, 200, AfterAttempt::Succeeded),
            one(&gave_up, 5, 500, AfterAttempt::Failed),
            one(&clean_gave_up, 5, 500, AfterAttempt::Failed),
            one(&after_it, 1, 200, AfterAttempt::Succeeded),
            one(&clean_after_it, 1, 200, AfterAttempt::Succeeded),
        ];
        let recorded = ctx.app.store.webhooks().record_attempts(&batch).await.unwrap();
        let flags: Vec<bool> = recorded.iter().map(|r| r.recorded).collect();
        assert_eq!(flags, [true, true, true, false, true, true, true, true]);
        // The give-up counts one failure (the streak ended before it); the
        // replay, an owner's probe, counts none.
        assert_eq!(recorded[4].consecutive_failures, 1);
        assert_eq!(recorded[2].consecutive_failures, 0);

        let status = |delivery: Value| (delivery["status"].clone(), delivery["attempts"].clone());
        for (delivery, expected) in [
            (&ended, ("succeeded", 1)),
            (&retried, ("retrying", 1)),
            (&replay, ("failed", 1)),
            (&gave_up, ("failed", 5)),
            (&after_it, ("succeeded", 1)),
        ] {
            let read = ctx.delivery_until(delivery.id.as_str(), |_| true).await;
            assert_eq!(status(read.clone()), (json!(expected.0), json!(expected.1)), "{read}");
            assert_eq!(read["attempt_log"].as_array().unwrap().len(), 1, "{read}");
        }
        let retrying = ctx.delivery_until(retried.id.as_str(), |_| true).await;
        assert!(retrying["next_attempt_at"].is_string(), "{retrying}");

        // The success after the give-up ended its streak of one; only the
        // first success reported a recovery (after six).
        let endpoint_now = crate::support::expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
        assert_eq!(endpoint_now["consecutive_failures"], 0, "{endpoint_now}");
        let clean_now = crate::support::expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{clean_id}")).await).await;
        assert_eq!(clean_now["consecutive_failures"], 0, "{clean_now}");
        let events_after = crate::support::sql::count_for_agency(db, "events", agency).await;
        assert_eq!(events_after - events_before, 1, "one webhook.endpoint.recovered");
    }
}

backend_tests! {
    async fn a_page_of_deliveries_reads_its_attempts_in_one_statement_as_each_delivery_would(backend) {
        let ctx = Ctx::new(backend).await;
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        let endpoint: WebhookEndpoint = ctx.app.store.webhooks().get(&ctx.live(), &endpoint_id.parse().unwrap()).await.unwrap().unwrap();
        let webhooks = ctx.app.store.webhooks();
        // Two attempts, one, and none.
        let twice = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        let retry = ctx.app.store.clock().now().plus_seconds(30);
        webhooks.record_attempt(&twice, &attempt_answered(&ctx, 1, 500), AfterAttempt::RetryAt(retry)).await.unwrap();
        let twice: Delivery = webhooks.delivery(&ctx.live(), &twice.id).await.unwrap().unwrap();
        webhooks.record_attempt(&twice, &attempt_answered(&ctx, 2, 200), AfterAttempt::Succeeded).await.unwrap();
        let once = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        webhooks.record_attempt(&once, &attempt_answered(&ctx, 1, 410), AfterAttempt::Failed).await.unwrap();
        let never = pending_delivery(&ctx, &endpoint, DeliveryKind::Event).await;
        let page = [twice.id.clone(), once.id.clone(), never.id.clone()];
        let read = webhooks.attempts_of(&page).await.unwrap();
        for id in &page {
            let one_by_one = webhooks.attempts(id).await.unwrap();
            assert_eq!(read.get(id).cloned().unwrap_or_default(), one_by_one, "{id}");
        }
        let numbers: Vec<i32> = read[&twice.id].iter().map(|attempt| attempt.attempt).collect();
        assert_eq!(numbers, [1, 2]);
        assert!(!read.contains_key(&never.id));
        assert!(webhooks.attempts_of(&[]).await.unwrap().is_empty());
    }
}
