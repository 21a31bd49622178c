//! Auto-disable: fifty failed deliveries in a row disable the endpoint, tell
//! the owner by notification and e-mail (a sandbox endpoint's notice is
//! recorded, not e-mailed), and the endpoint stays disabled until re-enabled.

use std::time::Duration;

use serde_json::json;
use storage::ids::{DeliveryId, EventId, NotificationId};
use storage::webhooks::{AfterAttempt, Attempt, Delivery, DeliveryKind, WebhookEndpoint};
use tests::backend_tests;

use super::Ctx;
use crate::support::expect_ok;

/// A new delivery of `kind` to `endpoint`, pending, with no attempt yet
/// (nothing pushes it: the test records its attempts by hand).
pub(super) async fn pending_delivery(
    ctx: &Ctx,
    endpoint: &WebhookEndpoint,
    kind: DeliveryKind,
) -> Delivery {
    let now = ctx.app.store.clock().now();
    let template = Delivery {
        id: DeliveryId::generate(),
        endpoint_id: endpoint.id.clone(),
        agency_id: endpoint.agency_id.clone(),
        kind,
        replay_of: None,
        event_id: EventId::generate(),
        event_type: "listing.created".into(),
        api_version: "2026-05-29".into(),
        occurred_at: now,
        is_sandbox: endpoint.pool == storage::Environment::Sandbox,
        data: json!({}),
        status: storage::webhooks::DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
        completed_at: None,
    };
    ctx.app
        .store
        .webhooks()
        .create_manual(endpoint, kind, &template)
        .await
        .unwrap()
}

/// Attempt number `number`, just made, with `status_code` as its answer.
pub(super) fn attempt_answered(ctx: &Ctx, number: i32, status_code: i32) -> Attempt {
    let succeeded = (200..300).contains(&status_code);
    Attempt {
        attempt: number,
        nonce: ulid::Ulid::generate().to_string(),
        started_at: ctx.app.store.clock().now(),
        duration_ms: 1,
        outcome: if succeeded { "succeeded" } else { "http_error" }.into(),
        status_code: Some(status_code),
        response_excerpt: None,
        error: None,
    }
}

/// Records `count` deliveries to `endpoint` whose last attempt failed for
/// good, in its own pool; returns the last notification the failures raised
/// (the warning at forty, the disable at fifty), if any.
pub(super) async fn record_failed_deliveries(
    ctx: &Ctx,
    endpoint: &WebhookEndpoint,
    count: usize,
) -> Option<NotificationId> {
    let webhooks = ctx.app.store.webhooks();
    let mut notification = None;
    for _ in 0..count {
        let delivery = pending_delivery(ctx, endpoint, DeliveryKind::Event).await;
        let recorded = webhooks
            .record_attempt(
                &delivery,
                &attempt_answered(ctx, 5, 500),
                AfterAttempt::Failed,
            )
            .await
            .unwrap();
        notification = recorded.notification_id.or(notification);
    }
    notification
}

backend_tests! {
    async fn fifty_failed_deliveries_in_a_row_disable_the_endpoint_until_reenabled(backend) {
        let relay = tests::smtp::SmtpSink::start().await;
        let ctx = Ctx::with_mail_relay(backend, &relay.url).await;
        crate::support::sql::set_user_email(ctx.app.store.db(), ctx.agency.owner_id.as_str(), "owner@agency.example").await;
        let (endpoint_id, _) = ctx.register_with(&ctx.key, json!({ "event_types": ["listing.created"] })).await;
        let endpoint: WebhookEndpoint = ctx.app.store.webhooks().get(&ctx.live(), &endpoint_id.parse().unwrap()).await.unwrap().unwrap();
        // Forty-nine deliveries that already failed for good.
        let webhooks = ctx.app.store.webhooks();
        record_failed_deliveries(&ctx, &endpoint, 49).await;
        let before = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
        assert_eq!(before["consecutive_failures"], 49);
        assert_eq!(before["status"], "enabled");

        // The fiftieth fails through the whole schedule.
        ctx.receiver.answer(503);
        ctx.create_listing().await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let disabled = loop {
            let endpoint = expect_ok(ctx.get(&format!("/api/v1/webhooks/endpoints/{endpoint_id}")).await).await;
            if endpoint["status"] == "disabled" {
                break endpoint;
            }
            assert!(std::time::Instant::now() < deadline, "{endpoint}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(disabled["disabled_reason"], "auto_disabled_consecutive_failures");
        assert_eq!(disabled["consecutive_failures"], 50);
        let notifications = webhooks.notifications(&ctx.agency.id).await.unwrap();
        // The warning at forty, then the disable, newest first.
        assert_eq!(notifications.len(), 2);
        assert_eq!(notifications[1].kind, "webhook_endpoint_failing");
        assert_eq!(notifications[0].kind, "webhook_endpoint_disabled");
        assert_eq!(notifications[0].user_id.as_ref(), Some(&ctx.agency.owner_id));
        assert!(notifications[0].body.contains(&endpoint_id));
        // And e-mailed to the owner through the relay.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mail = loop {
            if let Some(mail) = relay
                .received()
                .into_iter()
                .find(|mail| mail.data.contains("auto_disabled_consecutive_failures"))
            {
                break mail;
            }
            assert!(std::time::Instant::now() < deadline, "no e-mail reached the relay");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(mail.to, ["owner@agency.example"]);
        assert_eq!(mail.from, "no-reply@example.com");
        assert!(mail.data.contains(&endpoint_id), "{}", mail.data);
        assert!(mail.data.contains("auto_disabled_consecutive_failures"), "{}", mail.data);

        // Disabled: new events are not attempted.
        let attempts_so_far = ctx.receiver.received().len();
        ctx.create_listing().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(ctx.receiver.received().len(), attempts_so_far);
        // ... but recorded as failed without an attempt, to replay later.
        let missed = ctx.deliveries(&endpoint_id).await.remove(0);
        assert_eq!(missed["status"], "failed", "{missed}");
        assert_eq!(missed["attempts"], 0, "{missed}");

        // The owner re-enables it; deliveries resume and the count is reset.
        ctx.receiver.answer(200);
        let enabled = expect_ok(ctx.post(&format!("/api/v1/webhooks/endpoints/{endpoint_id}/enable"), &json!({})).await).await;
        assert_eq!(enabled["status"], "enabled");
        assert_eq!(enabled["consecutive_failures"], 0);
        ctx.create_listing().await;
        ctx.receiver.wait_for(attempts_so_far + 1, Duration::from_secs(20)).await;
    }
}

backend_tests! {
    async fn a_sandbox_endpoints_disable_notice_is_recorded_not_emailed(backend) {
        let relay = tests::smtp::SmtpSink::start().await;
        let ctx = Ctx::with_mail_relay(backend, &relay.url).await;
        crate::support::sql::set_user_email(ctx.app.store.db(), ctx.agency.owner_id.as_str(), "owner@agency.example").await;
        let sandbox = ctx.sandbox_key().await;
        let (endpoint_id, _) = ctx.register_with(&sandbox, json!({ "event_types": ["listing.created"] })).await;
        let tenant = storage::Tenant::new(ctx.agency.id.clone(), storage::Environment::Sandbox);
        let endpoint: WebhookEndpoint = ctx.app.store.webhooks().get(&tenant, &endpoint_id.parse().unwrap()).await.unwrap().unwrap();
        let webhooks = ctx.app.store.webhooks();
        let notification = record_failed_deliveries(&ctx, &endpoint, 50).await;
        let notification_id = notification.expect("the fiftieth failure raises a notification");
        ctx.app
            .state
            .platform()
            .queue
            .push(platform::kinds::SendNotification { notification_id: notification_id.clone() }, platform::PushOptions::default())
            .await
            .unwrap();
        let effects = tests::deployment::eventually(Duration::from_secs(20), "the recorded e-mail", || async {
            let effects = ctx.app.store.sandbox().side_effects(&ctx.agency.id).await.unwrap();
            (!effects.is_empty()).then_some(effects)
        })
        .await;
        assert_eq!(effects.len(), 1);
        assert_eq!(effects[0].kind, "email");
        assert_eq!(effects[0].subject, "owner@agency.example");
        assert!(effects[0].detail.contains(notification_id.as_str()));
        let (_, _, sent_at) = webhooks.notification_to_send(&notification_id).await.unwrap().unwrap();
        assert!(sent_at.is_some(), "settled, so no sweep sends it later");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(relay.received().is_empty(), "the sandbox e-mails nobody");
    }
}
