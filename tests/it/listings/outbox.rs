//! Events are written in the transaction of their change: in order, with the
//! envelope's fields, and not at all when the change rolls back. Every state
//! change (creation, status, cancel, both sections, and the `record-payment`
//! and `schedule-shoot` admin commands) is made to fail on its event insert.

use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use storage::background::outbox::StoredEvent;
use storage::ids::AgencyId;
use storage::listings::NewListing;
use storage::rules::events::{API_VERSION, EventType};
use storage::{Environment, Store, Tenant};
use tests::backend_tests;
use tests::deployment::Deployment;

use super::Ctx;
use crate::support::{expect_error, expect_ok, sql};

backend_tests! {
    async fn a_creation_writes_its_events_in_order_with_envelope_fields(backend) {
        let ctx = Ctx::new(backend).await;
        let created = ctx.create().await;
        let events = ctx.events().await;
        let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(types, ["listing.created", "invoice.created"]);
        let event = &events[0];
        assert!(ulid::Ulid::from_string(event.event_id.as_str()).is_ok());
        assert_eq!(event.api_version, API_VERSION);
        assert_eq!(event.agency_id, ctx.agency.id);
        assert!(!event.environment.is_sandbox());
        assert!(event.occurred_at.as_unix_seconds() > 1_700_000_000);
        assert!(event.dispatched_at.is_none());
        assert_eq!(event.data["listing_number"], created["listing_number"]);
        assert_eq!(event.data["status"], "Coming Soon");
        assert_eq!(event.data["address"], created["address"]);
        assert!(events[0].seq < events[1].seq);

        // Sandbox activity is flagged.
        let sandbox = ctx.sandbox_key().await;
        let response = ctx.app.client.post(ctx.app.url("/api/v1/listings")).header("X-API-Key", &sandbox).header("X-Idempotency-Key", tests::idempotency_key()).json(&ctx.new_listing()).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let sandbox_tenant = storage::Tenant::new(ctx.agency.id.clone(), storage::Environment::Sandbox);
        let sandbox_events = ctx.app.store.outbox().for_tenant(&sandbox_tenant, 0, 10).await.unwrap();
        assert_eq!(sandbox_events.len(), 2);
        assert!(sandbox_events.iter().all(|e| e.environment.is_sandbox()));
    }

    async fn a_rolled_back_change_leaves_no_event_and_no_row(backend) {
        let ctx = Ctx::new(backend).await;
        // The second event of a creation fails to insert: the listing, its order
        // and its first event must all disappear with the transaction.
        sql::fail_inserts_of_event(ctx.app.store.db(), "invoice.created").await;
        let response = ctx.post("/api/v1/listings", &ctx.new_listing()).await;
        expect_error(response, StatusCode::INTERNAL_SERVER_ERROR, "server.internal").await;
        let agency = ctx.agency.id.as_str();
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "listings", agency).await, 0);
        assert_eq!(sql::count_for_agency(ctx.app.store.db(), "orders", agency).await, 0);
        assert!(ctx.events().await.is_empty());
    }
}

/// A request sent more than once under one idempotency key: after a
/// `server.internal` the spec allows retrying with the same key.
struct Request {
    method: Method,
    path: String,
    body: Value,
    key: String,
}

impl Request {
    fn new(method: Method, path: String, body: Value) -> Self {
        Self {
            method,
            path,
            body,
            key: tests::idempotency_key(),
        }
    }

    async fn send(&self, ctx: &Ctx) -> Response {
        ctx.app
            .client
            .request(self.method.clone(), ctx.app.url(&self.path))
            .header("X-Idempotency-Key", &self.key)
            .header("X-API-Key", &ctx.key)
            .json(&self.body)
            .send()
            .await
            .unwrap()
    }
}

fn ids(events: &[StoredEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event_id.as_str()).collect()
}

fn types(events: &[StoredEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event_type.as_str()).collect()
}

/// Sends `request` while every insert of `failing` raises inside the
/// transaction, and checks that the change rolled back whole: a 500 envelope,
/// the listing's rows (orders and shoot included) exactly as they were, and
/// not one event more.
async fn assert_rolled_back(ctx: &Ctx, number: &str, failing: EventType, request: &Request) {
    let db = ctx.app.store.db();
    let rows = sql::listing_rows(db, number).await;
    let events = ctx.events().await;
    sql::fail_inserts_of_event(db, failing.as_str()).await;
    let response = request.send(ctx).await;
    expect_error(
        response,
        StatusCode::INTERNAL_SERVER_ERROR,
        "server.internal",
    )
    .await;
    sql::drop_injected_failure(db).await;
    let after = sql::listing_rows(db, number).await;
    assert_eq!(
        after,
        rows,
        "{} failed: nothing may change",
        failing.as_str()
    );
    assert_eq!(
        ids(&ctx.events().await),
        ids(&events),
        "{} failed: no event may stay",
        failing.as_str()
    );
}

/// Sends `request` again, now that events insert, and returns its body and
/// the events it added.
async fn retry(ctx: &Ctx, number: &str, request: &Request) -> (Value, Vec<StoredEvent>) {
    let rows = sql::listing_rows(ctx.app.store.db(), number).await;
    let before = ctx.events().await;
    let body = expect_ok(request.send(ctx).await).await;
    assert_ne!(
        sql::listing_rows(ctx.app.store.db(), number).await,
        rows,
        "the retry ran"
    );
    let mut after = ctx.events().await;
    assert_eq!(
        ids(&after[..before.len()]),
        ids(&before),
        "earlier events stay as they were"
    );
    (body, after.split_off(before.len()))
}

fn detail_path(number: &str) -> String {
    format!("/api/v1/listings/{number}")
}

backend_tests! {
    async fn a_status_change_whose_event_fails_changes_nothing(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.activated_listing().await;
        let request = Request::new(Method::PATCH, format!("/api/v1/listings/{number}/status"), json!({"new_status": "Active"}));
        assert_rolled_back(&ctx, &number, EventType::ListingStatusChanged, &request).await;
        let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
        assert_eq!(listing["status"], "Coming Soon");

        let (body, added) = retry(&ctx, &number, &request).await;
        assert_eq!(body["status"], "Active");
        assert_eq!(types(&added), ["listing.status_changed"]);
        assert_eq!(added[0].data["previous_status"], "Coming Soon");
        assert_eq!(added[0].data["status"], "Active");
        let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
        assert_eq!(listing["status"], "Active");
    }

    async fn a_cancel_whose_any_event_fails_keeps_listing_shoot_and_invoice(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        ctx.schedule_in(&number, 48 * 3600).await;
        let request = Request::new(Method::POST, format!("/api/v1/listings/{number}/cancel"), Value::Null);
        // A cancel writes three events; whichever fails, the earlier ones and
        // every row change of the transaction go with it.
        for failing in [EventType::AppointmentCancelled, EventType::InvoiceVoided, EventType::ListingCancelled] {
            assert_rolled_back(&ctx, &number, failing, &request).await;
            let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
            assert_eq!(listing["status"], "Coming Soon", "{}", failing.as_str());
            assert_eq!(listing["appointment"]["status"], "scheduled", "{}", failing.as_str());
            assert_eq!(listing["orders"][0]["invoice_state"], "open", "{}", failing.as_str());
        }

        let (body, added) = retry(&ctx, &number, &request).await;
        assert_eq!(body["status"], "Cancelled");
        assert_eq!(types(&added), ["scheduling.appointment.cancelled", "invoice.voided", "listing.cancelled"]);
        let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
        assert_eq!(listing["status"], "Cancelled");
        assert_eq!(listing["appointment"]["status"], "cancelled");
        assert_eq!(listing["orders"][0]["invoice_state"], "void");
    }

    async fn a_tour3d_change_whose_event_fails_keeps_the_old_url(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let path = format!("/api/v1/listings/{number}/sections/tour3d");
        expect_ok(ctx.patch(&path, &json!({"operation": "set", "url": "https://tours.example.com/a"})).await).await;
        for body in [json!({"operation": "set", "url": "https://tours.example.com/b"}), json!({"operation": "remove"})] {
            let request = Request::new(Method::PATCH, path.clone(), body);
            assert_rolled_back(&ctx, &number, EventType::ListingSectionUpdated, &request).await;
            let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
            assert_eq!(listing["sections"]["tour3d"]["url"], "https://tours.example.com/a");
        }

        let request = Request::new(Method::PATCH, path, json!({"operation": "set", "url": "https://tours.example.com/b"}));
        assert_rolled_back(&ctx, &number, EventType::ListingSectionUpdated, &request).await;
        let (body, added) = retry(&ctx, &number, &request).await;
        assert_eq!(body["url"], "https://tours.example.com/b");
        assert_eq!(types(&added), ["listing.section_updated"]);
        assert_eq!(added[0].data["previous_url"], "https://tours.example.com/a");
        assert_eq!(added[0].data["url"], "https://tours.example.com/b");
        let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
        assert_eq!(listing["sections"]["tour3d"]["url"], "https://tours.example.com/b");
    }

    async fn a_floorplan_change_whose_event_fails_keeps_the_old_files(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let path = format!("/api/v1/listings/{number}/sections/floorplan");
        let first = json!({"url": "https://cdn.example.com/1.pdf", "label": "Level 1"});
        let second = json!({"url": "https://cdn.example.com/2.pdf", "label": "Level 2"});
        expect_ok(ctx.patch(&path, &json!({"operation": "set", "files": [first]})).await).await;
        for operation in ["append", "replace", "set"] {
            let request = Request::new(Method::PATCH, path.clone(), json!({"operation": operation, "files": [second]}));
            assert_rolled_back(&ctx, &number, EventType::ListingSectionUpdated, &request).await;
            let listing = expect_ok(ctx.get(&detail_path(&number)).await).await;
            let files = listing["sections"]["floorplan"]["files"].as_array().unwrap();
            let urls: Vec<&Value> = files.iter().map(|f| &f["url"]).collect();
            assert_eq!(urls, [&first["url"]], "{operation}");
        }

        let request = Request::new(Method::PATCH, path, json!({"operation": "append", "files": [second]}));
        assert_rolled_back(&ctx, &number, EventType::ListingSectionUpdated, &request).await;
        let (body, added) = retry(&ctx, &number, &request).await;
        assert_eq!(body["floorplan_size"], 2);
        assert_eq!(types(&added), ["listing.section_updated"]);
        assert_eq!(added[0].data["operation"], "append");
        assert_eq!(added[0].data["files"].as_array().unwrap().len(), 2);
    }
}

/// A deployment with one agency and one listing, for the admin commands that
/// change state (`record-payment`, `schedule-shoot`), run as the real binary.
struct Deployed {
    deployment: Deployment,
    store: Store,
    tenant: Tenant,
    agency_id: String,
    number: String,
}

impl Deployed {
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
        let number = store
            .listings()
            .create(&tenant, new)
            .await
            .unwrap()
            .listing
            .listing_number;
        Self {
            deployment,
            store,
            tenant,
            agency_id,
            number,
        }
    }

    fn args<'a>(&'a self, command: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            command,
            "--agency",
            &self.agency_id,
            "--listing",
            &self.number,
        ];
        args.extend_from_slice(extra);
        args
    }

    async fn events(&self) -> Vec<StoredEvent> {
        self.store
            .outbox()
            .for_tenant(&self.tenant, 0, 1000)
            .await
            .unwrap()
    }

    async fn rows(&self) -> Vec<String> {
        sql::listing_rows(self.store.db(), &self.number).await
    }

    /// Runs the command while every insert of `failing` raises, and checks
    /// that it failed as `server.internal` and changed and wrote nothing.
    async fn assert_rolled_back(&self, failing: EventType, command: &str, extra: &[&str]) {
        let rows = self.rows().await;
        let events = self.events().await;
        sql::fail_inserts_of_event(self.store.db(), failing.as_str()).await;
        self.deployment
            .admin_err(&self.args(command, extra), "server.internal");
        sql::drop_injected_failure(self.store.db()).await;
        assert_eq!(
            self.rows().await,
            rows,
            "{command} failed: nothing may change"
        );
        assert_eq!(
            ids(&self.events().await),
            ids(&events),
            "{command} failed: no event may stay"
        );
    }

    /// Runs the command, expecting success, and returns its output and the
    /// events it added.
    async fn run(&self, command: &str, extra: &[&str]) -> (Value, Vec<StoredEvent>) {
        let before = self.events().await;
        let output = self.deployment.admin_ok(&self.args(command, extra));
        let mut after = self.events().await;
        assert_eq!(
            ids(&after[..before.len()]),
            ids(&before),
            "earlier events stay as they were"
        );
        (output, after.split_off(before.len()))
    }
}

/// The line of `rows` about `table`'s one row.
fn row<'a>(rows: &'a [String], table: &str) -> &'a str {
    let mut matching = rows.iter().filter(|r| r.starts_with(&format!("{table} ")));
    let found = matching
        .next()
        .unwrap_or_else(|| panic!("a {table} row in {rows:?}"));
    assert!(matching.next().is_none(), "one {table} row in {rows:?}");
    found
}

backend_tests! {
    async fn a_payment_whose_event_fails_leaves_the_invoice_open(backend) {
        let setup = Deployed::new(backend).await;
        setup.assert_rolled_back(EventType::InvoicePaid, "record-payment", &["--reference", "ch_first"]).await;
        let rows = setup.rows().await;
        assert!(row(&rows, "listing").contains(" activated_at=- billed_at=- "), "{rows:?}");
        assert!(row(&rows, "order").contains(" invoice_state=open payment_reference=- "), "{rows:?}");

        let (paid, added) = setup.run("record-payment", &["--reference", "ch_first"]).await;
        assert_eq!(paid["activated"], true);
        assert_eq!(types(&added), ["invoice.paid"]);
        assert_eq!(added[0].data["listing_number"], setup.number.as_str());
        let rows = setup.rows().await;
        assert!(!row(&rows, "listing").contains("activated_at=-"), "{rows:?}");
        assert!(row(&rows, "order").contains(" invoice_state=paid payment_reference=ch_first "), "{rows:?}");
    }

    async fn a_shoot_whose_event_fails_is_neither_created_nor_moved(backend) {
        let setup = Deployed::new(backend).await;
        let first = ["--at", "2031-03-04T15:30:00+02:00"];
        setup.assert_rolled_back(EventType::AppointmentCreated, "schedule-shoot", &first).await;
        assert!(!setup.rows().await.iter().any(|r| r.starts_with("appointment ")), "no shoot");
        let (created, added) = setup.run("schedule-shoot", &first).await;
        assert_eq!(created["scheduled_at"], "2031-03-04T13:30:00.000Z");
        assert_eq!(types(&added), ["scheduling.appointment.created"]);

        let second = ["--at", "2031-03-06T09:00:00Z"];
        setup.assert_rolled_back(EventType::AppointmentRescheduled, "schedule-shoot", &second).await;
        let detail = setup.store.listings().detail(&setup.tenant, &setup.number).await.unwrap();
        let shoot = detail.appointment.as_ref().expect("the shoot");
        assert_eq!(shoot.scheduled_at.to_rfc3339(), "2031-03-04T13:30:00.000Z", "not moved");
        assert_eq!(shoot.status, "scheduled");
        let (moved, added) = setup.run("schedule-shoot", &second).await;
        assert_eq!(moved["scheduled_at"], "2031-03-06T09:00:00.000Z");
        assert_eq!(types(&added), ["scheduling.appointment.rescheduled"]);
        assert_eq!(added[0].data["previous_scheduled_at"], "2031-03-04T13:30:00.000Z");
    }

    async fn a_listings_events_are_stored_in_the_order_of_its_changes(backend) {
        let ctx = Ctx::new(backend).await;
        let first = ctx.listing().await;
        let second = ctx.listing().await;
        // The two listings' changes interleave; each keeps its own order.
        ctx.app.store.orders().record_payment(&ctx.live(), &first, None).await.unwrap();
        ctx.schedule_in(&first, 48 * 3600).await;
        ctx.app.store.orders().record_payment(&ctx.live(), &second, None).await.unwrap();
        ctx.set_status(&first, "Active").await;
        let tour = json!({"operation": "set", "url": "https://tours.example.com/a"});
        expect_ok(ctx.patch(&format!("/api/v1/listings/{first}/sections/tour3d"), &tour).await).await;
        ctx.set_status(&second, "Active").await;
        let floorplan = json!({"operation": "set", "files": [{"url": "https://cdn.example.com/1.pdf", "label": "Level 1"}]});
        expect_ok(ctx.patch(&format!("/api/v1/listings/{first}/sections/floorplan"), &floorplan).await).await;
        ctx.set_status(&first, "Pending").await;
        expect_ok(ctx.post(&format!("/api/v1/listings/{second}/cancel"), &Value::Null).await).await;
        expect_ok(ctx.post(&format!("/api/v1/listings/{first}/cancel"), &Value::Null).await).await;

        let events = ctx.events().await;
        assert!(events.windows(2).all(|w| w[0].seq < w[1].seq), "stored in increasing seq");
        assert!(events.windows(2).all(|w| w[0].occurred_at <= w[1].occurred_at), "and in time order");
        let of = |number: &str| -> Vec<&StoredEvent> { events.iter().filter(|e| e.data["listing_number"] == number).collect() };
        let of_first = of(&first);
        let first_types: Vec<&str> = of_first.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(first_types, [
            "listing.created", "invoice.created", "invoice.paid", "scheduling.appointment.created",
            "listing.status_changed", "listing.section_updated", "listing.section_updated",
            "listing.status_changed", "scheduling.appointment.cancelled", "listing.cancelled",
        ]);
        let moves: Vec<(&Value, &Value)> = of_first.iter().filter(|e| e.event_type == "listing.status_changed").map(|e| (&e.data["previous_status"], &e.data["status"])).collect();
        assert_eq!(moves, [(&json!("Coming Soon"), &json!("Active")), (&json!("Active"), &json!("Pending"))]);
        assert_eq!(of_first.last().unwrap().data["previous_status"], "Pending");
        let second_types: Vec<&str> = of(&second).iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(second_types, ["listing.created", "invoice.created", "invoice.paid", "listing.status_changed", "listing.cancelled"]);
        assert_eq!(events.len(), of_first.len() + second_types.len(), "every event is about one of the two");
    }
}
