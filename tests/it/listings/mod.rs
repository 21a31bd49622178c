//! The listing routes, on SQLite and PostgreSQL: creation, reads, orders, the
//! status lifecycle, cancellation, sections, tenancy, and the outbox.

mod admin_commands;
mod cancel;
mod create;
mod outbox;
mod paging;
mod read;
mod sections;
mod status;
mod status_race;
mod tenancy;
mod totals;

use reqwest::Response;
use serde_json::{Value, json};
use storage::api_keys::{KeyFormat, Scope};
use storage::background::outbox::StoredEvent;
use storage::ids::UserId;
use storage::people::users::{NewUser, Role};
use storage::rules::events::EventType;
use storage::{Environment, Tenant, Timestamp};
use tests::{Backend, TestAgency, TestApp};

use crate::support::expect_ok;

/// An app, an agency with an agent, and a read-write key.
pub struct Ctx {
    pub app: TestApp,
    pub agency: TestAgency,
    pub agent: UserId,
    pub key: String,
    /// The last event of the setup (the agent joining): [`Ctx::events`] are
    /// the test's own, after it.
    setup_seq: i64,
}

impl Ctx {
    pub async fn new(backend: Backend) -> Self {
        Self::with_app(TestApp::spawn(backend).await).await
    }

    pub async fn with_app(app: TestApp) -> Self {
        let agency = app.agency().await;
        let agent = add_user(&app, &agency, Role::Agent).await;
        let key = app
            .key(&agency, &[Scope::ListingsRead, Scope::ListingsWrite])
            .await;
        let tenant = Tenant::new(agency.id.clone(), Environment::Live);
        let setup = app
            .store
            .outbox()
            .for_tenant(&tenant, 0, 1000)
            .await
            .unwrap();
        let setup_seq = setup.last().map_or(0, |event| event.seq);
        Self {
            app,
            agency,
            agent,
            key,
            setup_seq,
        }
    }

    /// A sandbox key of the same agency.
    pub async fn sandbox_key(&self) -> String {
        self.app
            .key_with(
                &self.agency,
                &[Scope::ListingsRead, Scope::ListingsWrite],
                Environment::Sandbox,
                KeyFormat::Ma,
            )
            .await
    }

    pub fn live(&self) -> Tenant {
        Tenant::new(self.agency.id.clone(), Environment::Live)
    }

    /// The body of a valid create request.
    pub fn new_listing(&self) -> Value {
        json!({
            "address": "12 Elm Street, Springfield",
            "owner_user_id": self.agency.owner_id,
            "agent_one_id": self.agent,
        })
    }

    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.app
            .client
            .post(self.app.url(path))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &self.key)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Response {
        self.app
            .client
            .patch(self.app.url(path))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &self.key)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> Response {
        self.app
            .get(path)
            .header("X-API-Key", &self.key)
            .send()
            .await
            .unwrap()
    }

    /// Creates a listing and returns its wire form.
    pub async fn create(&self) -> Value {
        let response = self.post("/api/v1/listings", &self.new_listing()).await;
        assert_eq!(response.status(), 201);
        response.json().await.unwrap()
    }

    /// Creates a listing and returns its number.
    pub async fn listing(&self) -> String {
        self.create().await["listing_number"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Creates a listing and pays its invoice, so status changes are allowed.
    pub async fn activated_listing(&self) -> String {
        let number = self.listing().await;
        self.app
            .store
            .orders()
            .record_payment(&self.live(), &number, None)
            .await
            .unwrap();
        number
    }

    /// Moves a listing's status through the API and expects success.
    pub async fn set_status(&self, number: &str, status: &str) -> Value {
        expect_ok(
            self.patch(
                &format!("/api/v1/listings/{number}/status"),
                &json!({"new_status": status}),
            )
            .await,
        )
        .await
    }

    /// Schedules the listing's shoot `seconds` from now.
    pub async fn schedule_in(&self, number: &str, seconds: i64) -> Timestamp {
        let at = self.app.store.clock().now().plus_seconds(seconds);
        self.app
            .store
            .appointments()
            .schedule(&self.live(), number, at)
            .await
            .unwrap();
        at
    }

    /// The agency's live events.
    /// The agency's live events since the setup.
    pub async fn events(&self) -> Vec<StoredEvent> {
        self.app
            .store
            .outbox()
            .for_tenant(&self.live(), self.setup_seq, 1000)
            .await
            .unwrap()
    }

    /// The agency's live events of one type.
    pub async fn events_of(&self, event_type: EventType) -> Vec<StoredEvent> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.event_type == event_type.as_str())
            .collect()
    }
}

/// Adds an active user with `role` to `agency`.
pub async fn add_user(app: &TestApp, agency: &TestAgency, role: Role) -> UserId {
    app.store
        .users()
        .create(
            &agency.id,
            NewUser {
                role,
                email: Some(format!("{}@example.com", ulid::Ulid::generate()).to_lowercase()),
                name: Some(format!("{} person", role.as_str())),
                manager_id: Some(agency.owner_id.clone()),
            },
        )
        .await
        .unwrap()
        .id
}
