//! Webhooks end to end with a real HTTPS receiver on loopback: the catalog,
//! endpoint management, signed deliveries, the retry schedule, auto-disable,
//! replay, test fire, the environment filter, tenancy, the address policy and
//! receivers written from the README snippets.

mod attempts;
mod audience;
mod auto_disable;
mod catalog;
mod endpoints;
mod fair_endpoints;
mod first_attempts;
mod health;
mod hourly_budget;
mod listen;
mod ordering;
mod overdue_sweep;
mod pacing;
mod receivers;
mod replay;
mod retry_schedule;
mod retry_timing;
mod rotation;
mod signing;
mod ssrf;
mod standard_webhooks;

use std::time::Duration;

use platform::webhooks::WebhookDelivery;
use reqwest::Response;
use serde_json::{Value, json};
use storage::api_keys::{KeyFormat, Scope};
use storage::ids::UserId;
use storage::people::users::Role;
use storage::{Environment, Tenant};
use tests::receiver::WebhookReceiver;
use tests::{Backend, TestAgency, TestApp};

use crate::listings::add_user;

/// Scopes of the test keys.
pub const SCOPES: [Scope; 4] = [
    Scope::ListingsRead,
    Scope::ListingsWrite,
    Scope::WebhooksRead,
    Scope::WebhooksWrite,
];

/// Retry waits divided by this in delivery tests (30 s → 15 ms, 2 h → 3.6 s).
pub const SPEEDUP: u32 = 2000;

/// An app with in-process workers delivering to a receiver, an agency with
/// an agent, and a live key.
pub struct Ctx {
    pub app: TestApp,
    pub receiver: WebhookReceiver,
    pub agency: TestAgency,
    pub agent: UserId,
    pub key: String,
}

/// How a [`Ctx`] is built.
#[derive(Default)]
pub struct CtxOptions {
    /// Jobs on Redis (the distributed profile's queue).
    pub redis: bool,
    /// Owners' e-mail to the SMTP relay at this URL.
    pub mail_relay: Option<String>,
    /// Retry waits divided by this (`None`: [`SPEEDUP`]).
    pub speedup: Option<u32>,
    /// The store's clock (`None`: the system clock).
    pub clock: Option<storage::Clock>,
    /// Delivery settings made from the receiver (`None`: loopback allowed,
    /// its certificate trusted, the system resolver).
    pub delivery: Option<DeliveryFor>,
    /// Deliveries one worker makes at once (`None`: the default).
    pub delivery_concurrency: Option<usize>,
    /// Worker runtimes consuming the queue (`None`: one).
    pub worker_runtimes: Option<usize>,
    /// How writes are paced by their agency's backlog (`None`: the default).
    pub write_pacing: Option<api::pacing::PacingSettings>,
    /// Queues paused from the start (resumed through the store).
    pub paused_queues: Vec<&'static str>,
    /// The routes' deadlines (`None`: the specification's).
    pub request_deadlines: Option<api::middleware::deadline::RequestDeadlines>,
    /// The ops listener, with this user and password.
    pub ops: Option<(&'static str, &'static str)>,
}

/// Delivery settings for a receiver and a speedup.
pub type DeliveryFor = Box<dyn FnOnce(&WebhookReceiver, u32) -> WebhookDelivery>;

impl Ctx {
    pub async fn new(backend: Backend) -> Self {
        Self::with(backend, CtxOptions::default()).await
    }

    /// The distributed profile's queue: jobs on Redis.
    pub async fn with_redis(backend: Backend) -> Self {
        Self::with(
            backend,
            CtxOptions {
                redis: true,
                ..CtxOptions::default()
            },
        )
        .await
    }

    /// With owners' e-mail going to the SMTP relay at `mail_relay`.
    pub async fn with_mail_relay(backend: Backend, mail_relay: &str) -> Self {
        Self::with(
            backend,
            CtxOptions {
                mail_relay: Some(mail_relay.to_owned()),
                ..CtxOptions::default()
            },
        )
        .await
    }

    /// With retry waits divided by `speedup` (1: the real schedule, so the
    /// state between two attempts holds still long enough to be read).
    pub async fn with_speedup(backend: Backend, speedup: u32) -> Self {
        Self::with(
            backend,
            CtxOptions {
                speedup: Some(speedup),
                ..CtxOptions::default()
            },
        )
        .await
    }

    pub async fn with(backend: Backend, options: CtxOptions) -> Self {
        let receiver = WebhookReceiver::start().await;
        let speedup = options.speedup.unwrap_or(SPEEDUP);
        let delivery = match options.delivery {
            Some(make) => make(&receiver, speedup),
            None => receiver.delivery(speedup),
        };
        let mut builder = TestApp::builder(backend).with_workers().webhooks(delivery);
        if let Some(url) = &options.mail_relay {
            builder = builder.mail_relay(url);
        }
        if options.redis {
            builder = builder.redis();
        }
        if let Some(clock) = options.clock {
            builder = builder.clock(clock);
        }
        if let Some(concurrency) = options.delivery_concurrency {
            builder = builder.tune_workers(|settings| {
                settings.queues.insert(
                    <platform::kinds::DeliverWebhook as platform::Job>::KIND,
                    concurrency,
                );
            });
        }
        if let Some(count) = options.worker_runtimes {
            builder = builder.worker_runtimes(count);
        }
        if let Some(settings) = options.write_pacing {
            builder = builder.write_pacing(settings);
        }
        for queue in options.paused_queues {
            builder = builder.paused(queue);
        }
        if let Some(deadlines) = options.request_deadlines {
            builder = builder.request_deadlines(deadlines);
        }
        if let Some((user, password)) = options.ops {
            builder = builder.with_ops(user, password);
        }
        let app = builder.spawn().await;
        let agency = app.agency().await;
        let agent = add_user(&app, &agency, Role::Agent).await;
        let key = app.key(&agency, &SCOPES).await;
        Self {
            app,
            receiver,
            agency,
            agent,
            key,
        }
    }

    pub fn live(&self) -> Tenant {
        Tenant::new(self.agency.id.clone(), Environment::Live)
    }

    /// A sandbox key of the same agency.
    pub async fn sandbox_key(&self) -> String {
        self.app
            .key_with(&self.agency, &SCOPES, Environment::Sandbox, KeyFormat::Ma)
            .await
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<&Value>,
    ) -> Response {
        let mut request = self
            .app
            .client
            .request(method, self.app.url(path))
            .header("X-API-Key", key)
            .header("X-Idempotency-Key", tests::idempotency_key());
        if let Some(body) = body {
            request = request.json(body);
        }
        request.send().await.unwrap()
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.send(reqwest::Method::POST, path, &self.key, Some(body))
            .await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Response {
        self.send(reqwest::Method::PATCH, path, &self.key, Some(body))
            .await
    }

    pub async fn get(&self, path: &str) -> Response {
        self.send(reqwest::Method::GET, path, &self.key, None).await
    }

    /// Registers an endpoint at the receiver with `extra` fields; returns
    /// (endpoint id, secret).
    pub async fn register_with(&self, key: &str, extra: Value) -> (String, String) {
        let mut body = json!({ "url": self.receiver.url });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let response = self
            .send(
                reqwest::Method::POST,
                "/api/v1/webhooks/endpoints",
                key,
                Some(&body),
            )
            .await;
        let status = response.status();
        let created: Value = response.json().await.unwrap();
        assert_eq!(status, 201, "{created}");
        (
            created["id"].as_str().unwrap().to_owned(),
            created["secret"].as_str().unwrap().to_owned(),
        )
    }

    pub async fn register(&self) -> (String, String) {
        self.register_with(&self.key, json!({})).await
    }

    /// Creates a listing with `key` (emits listing.created and invoice.created).
    pub async fn create_listing_with(&self, key: &str) -> String {
        let body = json!({
            "address": "12 Elm Street, Springfield",
            "owner_user_id": self.agency.owner_id,
            "agent_one_id": self.agent,
        });
        let response = self
            .send(reqwest::Method::POST, "/api/v1/listings", key, Some(&body))
            .await;
        assert_eq!(response.status(), 201);
        let listing: Value = response.json().await.unwrap();
        listing["listing_number"].as_str().unwrap().to_owned()
    }

    pub async fn create_listing(&self) -> String {
        self.create_listing_with(&self.key).await
    }

    /// Polls a delivery until `done` holds for it.
    pub async fn delivery_until(&self, delivery_id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let delivery: Value = self
                .get(&format!("/api/v1/webhooks/deliveries/{delivery_id}"))
                .await
                .json()
                .await
                .unwrap();
            if done(&delivery) {
                return delivery;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "delivery never got there: {delivery}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The endpoint's deliveries, newest first.
    pub async fn deliveries(&self, endpoint_id: &str) -> Vec<Value> {
        let page: Value = self
            .get(&format!(
                "/api/v1/webhooks/endpoints/{endpoint_id}/deliveries"
            ))
            .await
            .json()
            .await
            .unwrap();
        page["items"].as_array().unwrap().clone()
    }
}
