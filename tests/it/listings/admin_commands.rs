//! `api admin record-payment` and `api admin schedule-shoot`, run as the real
//! binary: the events each writes to the outbox, and what a repeat writes.

use serde_json::json;
use storage::background::outbox::StoredEvent;
use storage::ids::AgencyId;
use storage::listings::NewListing;
use storage::rules::events::EventType;
use storage::{Environment, Store, Tenant};
use tests::backend_tests;
use tests::deployment::Deployment;

/// A deployment with one agency and one listing in it, and the test's own
/// store over the same data.
struct Setup {
    deployment: Deployment,
    store: Store,
    agency_id: String,
    tenant: Tenant,
    number: String,
}

impl Setup {
    async fn new(backend: tests::Backend) -> Self {
        let deployment = Deployment::new(backend).await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let owner = agency["owner_user_id"].as_str().unwrap().to_owned();
        let store = deployment.store().await;
        let tenant = Tenant::new(AgencyId::parse(&agency_id).unwrap(), Environment::Live);
        let new = NewListing {
            address: "1 Main St".to_owned(),
            owner_user_id: owner.clone(),
            agent_one_id: owner,
            agent_two_id: None,
            package: None,
            notes: None,
            idempotency_key: None,
        };
        let created = store.listings().create(&tenant, new).await.unwrap();
        let number = created.listing.listing_number;
        Self {
            deployment,
            store,
            agency_id,
            tenant,
            number,
        }
    }

    /// Runs an admin command about this agency's listing.
    fn admin(&self, command: &str, extra: &[&str]) -> serde_json::Value {
        let mut args = vec![
            command,
            "--agency",
            &self.agency_id,
            "--listing",
            &self.number,
        ];
        args.extend_from_slice(extra);
        self.deployment.admin_ok(&args)
    }

    async fn events(&self) -> Vec<StoredEvent> {
        self.store
            .outbox()
            .for_tenant(&self.tenant, 0, 1000)
            .await
            .unwrap()
    }

    async fn events_of(&self, event_type: EventType) -> Vec<StoredEvent> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.event_type == event_type.as_str())
            .collect()
    }
}

backend_tests! {
    async fn record_payment_emits_invoice_paid_once(backend) {
        let setup = Setup::new(backend).await;
        let before = setup.events().await.len();

        let paid = setup.admin("record-payment", &["--reference", "ch_first"]);
        assert_eq!(paid, json!({"listing_number": setup.number, "activated": true}));
        let events = setup.events().await;
        let added: Vec<&str> = events[before..].iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(added, ["invoice.paid"], "one payment, one event");
        assert_eq!(events[before].data["listing_number"], setup.number.as_str());

        // The provider calling back twice pays nothing twice and tells no one.
        let again = setup.admin("record-payment", &["--reference", "ch_second"]);
        assert_eq!(again["activated"], true);
        assert_eq!(setup.events().await.len(), events.len(), "a second payment emits nothing");
        assert_eq!(setup.events_of(EventType::InvoicePaid).await.len(), 1);
    }

    async fn schedule_shoot_creates_then_moves_the_shoot(backend) {
        let setup = Setup::new(backend).await;
        let before = setup.events().await.len();

        let first = setup.admin("schedule-shoot", &["--at", "2031-03-04T15:30:00+02:00"]);
        assert_eq!(first["scheduled_at"], "2031-03-04T13:30:00.000Z");
        let created = setup.events_of(EventType::AppointmentCreated).await;
        assert_eq!(created.len(), 1);
        assert_eq!(created[0].data["listing_number"], setup.number.as_str());
        assert_eq!(created[0].data["scheduled_at"], "2031-03-04T13:30:00.000Z");
        assert_eq!(created[0].data["previous_scheduled_at"], json!(null));
        assert_eq!(setup.events().await.len(), before + 1);

        let second = setup.admin("schedule-shoot", &["--at", "2031-03-06T09:00:00Z"]);
        assert_eq!(second["scheduled_at"], "2031-03-06T09:00:00.000Z");
        let events = setup.events().await;
        let added: Vec<&str> = events[before..].iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(added, ["scheduling.appointment.created", "scheduling.appointment.rescheduled"]);
        let moved = &events[before + 1].data;
        assert_eq!(moved["appointment_id"], created[0].data["appointment_id"], "the same shoot, moved");
        assert_eq!(moved["scheduled_at"], "2031-03-06T09:00:00.000Z");
        assert_eq!(moved["previous_scheduled_at"], "2031-03-04T13:30:00.000Z");

        let detail = setup.store.listings().detail(&setup.tenant, &setup.number).await.unwrap();
        let appointment = detail.appointment.as_ref().expect("a shoot");
        assert_eq!(appointment.scheduled_at.to_rfc3339(), "2031-03-06T09:00:00.000Z");
        assert_eq!(appointment.status, "scheduled");
    }
}
