//! The address policy: without `--webhook-allow-private-networks`, internal
//! addresses are refused at registration and at delivery.

use std::sync::Arc;
use std::time::Duration;

use platform::webhooks::AddressPolicy;
use reqwest::StatusCode;
use serde_json::json;
use storage::webhooks::{Delivery, DeliveryKind, DeliveryStatus, EndpointEnvironment, NewEndpoint};
use storage::{Environment, Tenant};
use tests::receiver::WebhookReceiver;
use tests::{Backend, TestApp};

use super::{Ctx, CtxOptions, SCOPES};
use crate::support::expect_error;

#[tokio::test]
async fn internal_addresses_are_refused_at_registration() {
    // The production policy: no private networks.
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let key = app.key(&agency, &SCOPES).await;
    for url in [
        "https://127.0.0.1/hooks",
        "https://localhost:8443/hooks",
        "https://10.1.2.3/hooks",
        "https://192.168.0.10/hooks",
        "https://169.254.169.254/latest/meta-data",
        "https://100.64.0.1/hooks",
        "https://[::1]/hooks",
        "https://[fd00:ec2::254]/hooks",
        "https://[::ffff:127.0.0.1]/hooks",
        "https://0.0.0.0/hooks",
    ] {
        let response = app
            .client
            .post(app.url("/api/v1/webhooks/endpoints"))
            .header("X-API-Key", &key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({ "url": url }))
            .send()
            .await
            .unwrap();
        let error = expect_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
        let reason = error["error"]["details"]["fields"]["url"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(reason.contains("address"), "{url}: {reason}");
    }
}

#[tokio::test]
async fn a_delivery_to_an_address_that_became_internal_is_refused_at_connect_time() {
    // An endpoint whose host now resolves to loopback (as after DNS rebinding):
    // written directly, since registration would refuse it.
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let tenant = Tenant::new(agency.id.clone(), Environment::Live);
    let (endpoint, secret) = app
        .store
        .webhooks()
        .create(
            &tenant,
            NewEndpoint {
                name: None,
                url: "https://localhost:9/hooks".into(),
                event_types: None,
                environment: EndpointEnvironment::Live,
                created_by: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let now = app.store.clock().now();
    let template = Delivery {
        id: storage::ids::DeliveryId::generate(),
        endpoint_id: endpoint.id.clone(),
        agency_id: agency.id.clone(),
        kind: DeliveryKind::TestFire,
        replay_of: None,
        event_id: storage::ids::EventId::generate(),
        event_type: "webhook.test_fire".into(),
        api_version: "2026-05-29".into(),
        occurred_at: now,
        is_sandbox: false,
        data: json!({}),
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
        completed_at: None,
    };
    let delivery = app
        .store
        .webhooks()
        .create_manual(&endpoint, DeliveryKind::TestFire, &template)
        .await
        .unwrap();
    let (attempt, report) = platform::webhooks::attempt(
        &app.store,
        &app.state.platform().webhooks.client,
        &delivery,
        &endpoint.url,
        &secret,
        1,
    )
    .await;
    assert_eq!(report.outcome, storage::webhooks::AttemptOutcome::Refused);
    assert!(attempt.error.unwrap().contains("loopback"));
    // A literal address is judged too (the resolver never sees it).
    let (_, report) = platform::webhooks::attempt(
        &app.store,
        &app.state.platform().webhooks.client,
        &delivery,
        "https://169.254.169.254/latest",
        &secret,
        1,
    )
    .await;
    assert_eq!(report.outcome, storage::webhooks::AttemptOutcome::Refused);
}

/// A resolver playing DNS rebinding: its first answer for a name is a
/// public address, every later one loopback. Counts the questions.
#[derive(Debug, Default)]
struct Rebinding {
    asked: std::sync::atomic::AtomicUsize,
}

impl Rebinding {
    fn asked(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl platform::webhooks::Lookup for Rebinding {
    fn lookup(&self, _host: String, port: u16) -> platform::webhooks::address_policy::Lookedup<'_> {
        let first = self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        let ip: std::net::IpAddr = if first {
            // example.com's: public.
            [93, 184, 215, 14].into()
        } else {
            std::net::Ipv4Addr::LOCALHOST.into()
        };
        Box::pin(async move { Ok(vec![std::net::SocketAddr::new(ip, port)]) })
    }
}

#[tokio::test]
async fn a_name_rebound_to_loopback_after_registration_is_refused_at_delivery() {
    // The production policy, with a resolver the test answers for. The
    // endpoint's URL is the receiver's (`localhost`, its certificate
    // trusted): were the loopback answer let through, the delivery would
    // land there.
    let lookup = Arc::new(Rebinding::default());
    let resolver = Arc::clone(&lookup);
    let ctx = Ctx::with(
        Backend::Sqlite,
        CtxOptions {
            delivery: Some(Box::new(move |receiver: &WebhookReceiver, speedup| {
                receiver.delivery_with(
                    AddressPolicy {
                        allow_private_networks: false,
                    },
                    resolver,
                    speedup,
                )
            })),
            ..CtxOptions::default()
        },
    )
    .await;
    let client = &ctx.app.state.platform().webhooks.client;
    let url = reqwest::Url::parse(&ctx.receiver.url).unwrap();
    // At registration the name resolves to a public address and passes the
    // policy (the check registration makes, through the delivery client's
    // resolver; the API's own registration asks the system resolver, so the
    // endpoint is written directly).
    let registered = client
        .resolve(url.host_str().unwrap(), url.port().unwrap())
        .await
        .expect("a public address at registration");
    assert!(
        registered.iter().all(|a| !a.ip().is_loopback()),
        "{registered:?}"
    );
    let (endpoint, _) = ctx
        .app
        .store
        .webhooks()
        .create(
            &ctx.live(),
            NewEndpoint {
                name: None,
                url: ctx.receiver.url.clone(),
                event_types: Some(vec!["listing.created".into()]),
                environment: EndpointEnvironment::Live,
                created_by: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(lookup.asked(), 1);

    // An event goes through dispatch and the delivery job; by then the name
    // resolves to loopback. Every attempt of the schedule is refused.
    ctx.create_listing().await;
    let delivery_id =
        tests::deployment::eventually(Duration::from_secs(20), "the delivery", || async {
            let deliveries = ctx.deliveries(endpoint.id.as_str()).await;
            deliveries
                .first()
                .map(|d| d["id"].as_str().unwrap().to_owned())
        })
        .await;
    let webhooks = ctx.app.store.webhooks();
    tests::deployment::eventually(Duration::from_secs(60), "the delivery failed", || async {
        assert_eq!(
            ctx.receiver.arrivals(),
            0,
            "a rebound name reached the receiver"
        );
        let delivery = webhooks
            .delivery(&ctx.live(), &delivery_id.parse().unwrap())
            .await
            .unwrap()
            .unwrap();
        (delivery.status == DeliveryStatus::Failed).then_some(())
    })
    .await;
    let failed = ctx.delivery_until(&delivery_id, |_| true).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["attempts"], 5, "{failed}");
    for attempt in failed["attempt_log"].as_array().unwrap() {
        assert_eq!(attempt["outcome"], "refused", "{attempt}");
        assert!(attempt["status_code"].is_null(), "{attempt}");
        let error = attempt["error"].as_str().unwrap();
        assert!(error.contains("loopback"), "{error}");
        assert!(
            !error.contains("127.0.0.1"),
            "the address is not named: {error}"
        );
    }
    // The name was looked up again at each connection attempt...
    assert!(lookup.asked() >= 6, "asked {} times", lookup.asked());
    // ... and nothing reached the receiver.
    assert_eq!(ctx.receiver.arrivals(), 0);

    // The rebinding target is the receiver: under the development policy
    // the same answer is let through and the delivery lands there.
    let open = ctx.receiver.delivery_with(
        AddressPolicy {
            allow_private_networks: true,
        },
        lookup.clone(),
        1,
    );
    let delivery = ctx
        .app
        .store
        .webhooks()
        .delivery(&ctx.live(), &delivery_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let (_, report) = platform::webhooks::attempt(
        &ctx.app.store,
        &open.client,
        &delivery,
        &ctx.receiver.url,
        "whsec_control",
        6,
    )
    .await;
    assert_eq!(
        report.outcome,
        storage::webhooks::AttemptOutcome::Succeeded,
        "{report:?}"
    );
    assert_eq!(ctx.receiver.arrivals(), 1);
}
