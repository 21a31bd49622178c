//! The catalog of subscribable webhook event types: every type either of the
//! specification's lists names, under its canonical (variant B) name with
//! variant A's names as aliases, where it is emitted, and the JSON Schema and a
//! sample of its `data`. The schemas of emitted types describe exactly what the
//! repositories write to the outbox; the tests hold them to it.

use serde_json::{Map, Value, json};

use crate::events::EventType;
use crate::listing_status::ListingStatus;
use crate::sections::{MAX_FLOORPLAN_FILES, MAX_LABEL_CHARS};
use crate::users::Role;

/// The JSON Schema dialect of every data schema.
pub const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// One subscribable event type.
#[derive(Clone, Copy, Debug)]
pub struct CatalogEntry {
    /// The canonical name (variant B's where the specification's lists differ).
    pub event_type: &'static str,
    /// The group it is listed under: `billing`, `invoice`, `listing`, `media`,
    /// `scheduling`, `user` or `webhook`.
    pub category: &'static str,
    /// What happened, for people choosing what to subscribe to.
    pub description: &'static str,
    /// Where the service emits it: a route or an operator command; for a type
    /// not emitted yet, what will emit it.
    pub emitted_by: &'static str,
    /// Other names that resolve to this type (variant A's).
    pub aliases: &'static [&'static str],
    /// Whether the service emits it today. False for types the specification
    /// lists that nothing emits yet: they can be subscribed to but never arrive.
    pub emitted: bool,
    /// Delivered only to the endpoint being tested, never fanned out to
    /// subscribers (`webhook.test_fire`).
    pub test_only: bool,
    /// The schema and sample of its data, built together so they cannot drift.
    shape: fn() -> Shape,
}

impl CatalogEntry {
    /// The JSON Schema (2020-12) of the event's `data` object.
    pub fn data_schema(&self) -> Value {
        (self.shape)().schema(self.event_type, self.description)
    }

    /// A realistic `data` object, valid against [`Self::data_schema`].
    pub fn sample(&self) -> Value {
        Value::Object((self.shape)().example)
    }

    const fn data(self, shape: fn() -> Shape) -> Self {
        Self { shape, ..self }
    }

    const fn by(self, emitted_by: &'static str) -> Self {
        Self { emitted_by, ..self }
    }

    const fn about(self, description: &'static str) -> Self {
        Self {
            description,
            ..self
        }
    }

    const fn aliased(self, aliases: &'static [&'static str]) -> Self {
        Self { aliases, ..self }
    }

    const fn only_to_the_tested_endpoint(self) -> Self {
        Self {
            test_only: true,
            ..self
        }
    }
}

/// An entry of a type the service emits; the chained calls fill in the rest
/// (an entry left without `.data` has an empty shape, which the tests reject).
const fn emitted(category: &'static str, event_type: &'static str) -> CatalogEntry {
    CatalogEntry {
        event_type,
        category,
        description: "",
        emitted_by: "",
        aliases: &[],
        emitted: true,
        test_only: false,
        shape: Shape::default,
    }
}

/// An entry of a type the specification lists that nothing emits yet.
const fn planned(category: &'static str, event_type: &'static str) -> CatalogEntry {
    CatalogEntry {
        emitted: false,
        ..emitted(category, event_type)
    }
}

impl EventType {
    /// This type's catalog entry. The match is exhaustive, so a new variant
    /// does not compile until it has an entry.
    pub fn catalog_entry(self) -> &'static CatalogEntry {
        match self {
            Self::ListingCreated => &LISTING_CREATED,
            Self::ListingStatusChanged => &LISTING_STATUS_CHANGED,
            Self::ListingCancelled => &LISTING_CANCELLED,
            Self::ListingSectionUpdated => &LISTING_SECTION_UPDATED,
            Self::InvoiceCreated => &INVOICE_CREATED,
            Self::InvoicePaid => &INVOICE_PAID,
            Self::InvoiceVoided => &INVOICE_VOIDED,
            Self::AppointmentCreated => &APPOINTMENT_CREATED,
            Self::AppointmentRescheduled => &APPOINTMENT_RESCHEDULED,
            Self::AppointmentCancelled => &APPOINTMENT_CANCELLED,
            Self::UserDeactivated => &USER_DEACTIVATED,
            Self::UserHierarchyChanged => &USER_HIERARCHY_CHANGED,
            Self::MediaUploadCompleted => &MEDIA_UPLOAD_COMPLETED,
        }
    }
}

/// Every subscribable type, ordered by category, then name.
pub fn entries() -> &'static [CatalogEntry] {
    &ENTRIES
}

/// The entry named `name` (canonical or alias, exact; surrounding whitespace
/// is ignored).
pub fn resolve(name: &str) -> Option<&'static CatalogEntry> {
    let name = name.trim();
    ENTRIES
        .iter()
        .find(|entry| entry.event_type == name || entry.aliases.contains(&name))
}

/// The canonical name of `name` (canonical or alias).
pub fn canonical(name: &str) -> Option<&'static str> {
    resolve(name).map(|entry| entry.event_type)
}

/// Every alias with the canonical name it stands for, in catalog order.
pub fn aliases() -> Vec<(&'static str, &'static str)> {
    ENTRIES
        .iter()
        .flat_map(|entry| entry.aliases.iter().map(|alias| (*alias, entry.event_type)))
        .collect()
}

static ENTRIES: [CatalogEntry; 25] = [
    SUBSCRIPTION_CANCELLED,
    SUBSCRIPTION_CREATED,
    INVOICE_CREATED,
    INVOICE_OVERDUE,
    INVOICE_PAID,
    INVOICE_VOIDED,
    LISTING_CANCELLED,
    LISTING_CREATED,
    LISTING_SECTION_UPDATED,
    LISTING_STATUS_CHANGED,
    LISTING_UPDATED,
    MEDIA_DELIVERY_COMPLETED,
    MEDIA_DELIVERY_FAILED,
    MEDIA_DELIVERY_PARTIAL,
    MEDIA_UPLOAD_COMPLETED,
    APPOINTMENT_ORPHAN_DETECTED,
    APPOINTMENT_CANCELLED,
    APPOINTMENT_COMPLETED,
    APPOINTMENT_CREATED,
    APPOINTMENT_RESCHEDULED,
    USER_AGENT_CREATED,
    USER_DEACTIVATED,
    USER_HIERARCHY_CHANGED,
    USER_SIGNED_UP,
    WEBHOOK_TEST_FIRE,
];

const SUBSCRIPTION_CANCELLED: CatalogEntry = planned("billing", "subscription.cancelled")
    .data(subscription_cancelled)
    .by("subscription billing (not emitted yet)")
    .about("An agency's subscription was cancelled (variant A).");
const SUBSCRIPTION_CREATED: CatalogEntry = planned("billing", "subscription.created")
    .data(subscription_created)
    .by("subscription billing (not emitted yet)")
    .about("An agency started a subscription (variant A).");
const INVOICE_CREATED: CatalogEntry = emitted("invoice", "invoice.created")
    .data(invoice_created)
    .by("POST /api/v1/listings (the new listing's order is invoiced)")
    .about("An invoice was raised for a listing's order.");
const INVOICE_OVERDUE: CatalogEntry = planned("invoice", "invoice.overdue")
    .data(invoice_overdue)
    .by("invoice due-date check (not emitted yet)")
    .about("An open invoice passed its due date unpaid.");
const INVOICE_PAID: CatalogEntry = emitted("invoice", "invoice.paid")
    .data(invoice_paid)
    .aliased(&["invoice.payment_made"])
    .by("api admin record-payment (payment recorded)")
    .about("An invoice became paid; its listing is now activated and billed.");
const INVOICE_VOIDED: CatalogEntry = emitted("invoice", "invoice.voided")
    .data(invoice_voided)
    .by("POST /api/v1/listings/{listing_number}/cancel (open invoices voided)")
    .about("An unpaid invoice was voided because its listing was cancelled.");
const LISTING_CANCELLED: CatalogEntry = emitted("listing", "listing.cancelled")
    .data(listing_cancelled)
    .by("POST /api/v1/listings/{listing_number}/cancel")
    .about("A listing was cancelled inside its no-fee window.");
const LISTING_CREATED: CatalogEntry = emitted("listing", "listing.created")
    .data(listing_created)
    .by("POST /api/v1/listings")
    .about("A listing was created, in status Coming Soon.");
const LISTING_SECTION_UPDATED: CatalogEntry = emitted("listing", "listing.section_updated")
    .data(listing_section_updated)
    .aliased(&["listing.section_modified"])
    .by("PATCH /api/v1/listings/{listing_number}/sections/{section}")
    .about("The 3D-tour or floorplan section of a listing changed.");
const LISTING_STATUS_CHANGED: CatalogEntry = emitted("listing", "listing.status_changed")
    .data(listing_status_changed)
    .by("PATCH /api/v1/listings/{listing_number}/status")
    .about("A listing moved to another status of its lifecycle.");
const LISTING_UPDATED: CatalogEntry = planned("listing", "listing.updated")
    .data(listing_updated)
    .by("listing edits (not emitted yet)")
    .about("Fields of a listing other than its status and sections changed (variant A).");
const MEDIA_DELIVERY_COMPLETED: CatalogEntry = planned("media", "media.delivery.completed")
    .data(media_delivery_completed)
    .by("media delivery (not emitted yet)")
    .about("All ordered media of a listing were delivered.");
const MEDIA_DELIVERY_FAILED: CatalogEntry = planned("media", "media.delivery.failed")
    .data(media_delivery_failed)
    .by("media delivery (not emitted yet)")
    .about("Delivering a listing's media failed; `reason` says why.");
const MEDIA_DELIVERY_PARTIAL: CatalogEntry = planned("media", "media.delivery.partial")
    .data(media_delivery_partial)
    .by("media delivery (not emitted yet)")
    .about("Some of a listing's ordered media were delivered; more are pending.");
const MEDIA_UPLOAD_COMPLETED: CatalogEntry = emitted("media", "media.upload.completed")
    .data(media_upload_completed)
    .by("POST /api/v1/media/upload and POST /api/v1/listings/{listing_number}/media (every file processed)")
    .about("An upload's files are stored and processed; each file says whether its variants are ready.");
const APPOINTMENT_ORPHAN_DETECTED: CatalogEntry =
    planned("scheduling", "appointment.orphan.detected")
        .data(appointment_orphan_detected)
        .by("appointment consistency check (not emitted yet)")
        .about("A shoot appointment was found without a live listing (variant A).");
const APPOINTMENT_CANCELLED: CatalogEntry =
    emitted("scheduling", "scheduling.appointment.cancelled")
        .data(appointment_cancelled)
        .aliased(&["appointment.cancelled"])
        .by("POST /api/v1/listings/{listing_number}/cancel (scheduled shoot cancelled)")
        .about("A shoot was cancelled; today only with its listing (`reason` listing_cancelled).");
const APPOINTMENT_COMPLETED: CatalogEntry =
    planned("scheduling", "scheduling.appointment.completed")
        .data(appointment_completed)
        .by("shoot completion (not emitted yet)")
        .about("A shoot took place.");
const APPOINTMENT_CREATED: CatalogEntry = emitted("scheduling", "scheduling.appointment.created")
    .data(appointment_created)
    .aliased(&["appointment.scheduled"])
    .by("api admin schedule-shoot (no shoot scheduled yet)")
    .about("A shoot was scheduled for a listing that had none scheduled.");
const APPOINTMENT_RESCHEDULED: CatalogEntry =
    emitted("scheduling", "scheduling.appointment.rescheduled")
        .data(appointment_rescheduled)
        .aliased(&["appointment.rescheduled"])
        .by("api admin schedule-shoot (scheduled shoot moved)")
        .about("A scheduled shoot was moved to another time.");
const USER_AGENT_CREATED: CatalogEntry = planned("user", "user.agent_created")
    .data(user_agent_created)
    .by("user creation (not emitted yet)")
    .about("An agent was added to the agency's hierarchy.");
const USER_DEACTIVATED: CatalogEntry = emitted("user", "user.deactivated")
    .data(user_deactivated)
    .by("PUT /api/v1/users/{user_id}/status (suspended), DELETE /api/v1/users/team/{assistant_id}")
    .about("A user was suspended (deactivated).");
const USER_HIERARCHY_CHANGED: CatalogEntry = emitted("user", "user.hierarchy_changed")
    .data(user_hierarchy_changed)
    .by("DELETE /api/v1/users/team/{assistant_id}")
    .about("A user's manager changed: an assistant removed from a team has none.");
const USER_SIGNED_UP: CatalogEntry = planned("user", "user.signed_up")
    .data(user_signed_up)
    .by("user creation (not emitted yet)")
    .about("A user joined the agency (variant A).");
const WEBHOOK_TEST_FIRE: CatalogEntry = emitted("webhook", "webhook.test_fire")
    .data(webhook_test_fire)
    .only_to_the_tested_endpoint()
    .by("POST /api/v1/webhooks/endpoints/{endpoint_id}/test")
    .about("A signed test delivery, sent only to the endpoint being tested.");

// ---- Schema building blocks ----

/// A `data` object's schema and sample, built property by property.
#[derive(Default)]
struct Shape {
    properties: Map<String, Value>,
    required: Vec<&'static str>,
    keywords: Map<String, Value>,
    example: Map<String, Value>,
}

impl Shape {
    /// A property present in every event of the type (possibly null).
    fn required(mut self, name: &'static str, schema: Value, example: impl Into<Value>) -> Self {
        self.required.push(name);
        self.optional(name, schema, example)
    }

    /// A property that may be absent.
    fn optional(mut self, name: &'static str, schema: Value, example: impl Into<Value>) -> Self {
        self.example.insert(name.to_owned(), example.into());
        self.unsampled(name, schema)
    }

    /// A property that may be absent and is absent from the sample.
    fn unsampled(mut self, name: &'static str, schema: Value) -> Self {
        self.properties.insert(name.to_owned(), schema);
        self
    }

    /// Another keyword of the object schema.
    fn keyword(mut self, name: &str, value: Value) -> Self {
        self.keywords.insert(name.to_owned(), value);
        self
    }

    fn schema(self, title: &str, description: &str) -> Value {
        let mut schema = Map::new();
        schema.insert("$schema".to_owned(), SCHEMA_DIALECT.into());
        schema.insert("title".to_owned(), format!("{title} data").into());
        schema.insert("description".to_owned(), description.into());
        schema.insert("type".to_owned(), "object".into());
        schema.insert("properties".to_owned(), self.properties.into());
        schema.insert("required".to_owned(), self.required.into());
        // Receivers must tolerate new keys: a data shape may grow within an api_version.
        schema.insert("additionalProperties".to_owned(), true.into());
        schema.extend(self.keywords);
        Value::Object(schema)
    }
}

fn text() -> Value {
    json!({"type": "string", "minLength": 1})
}

fn nullable_text() -> Value {
    json!({"type": ["string", "null"]})
}

fn date_time() -> Value {
    json!({"type": "string", "format": "date-time"})
}

fn nullable_date_time() -> Value {
    json!({"type": ["string", "null"], "format": "date-time"})
}

fn nullable_url() -> Value {
    json!({"type": ["string", "null"], "format": "uri"})
}

/// A typed id: its prefix and a ULID (see `ids.rs`).
fn id(prefix: &str) -> Value {
    json!({"type": "string", "pattern": format!("^{prefix}[0-9A-HJKMNP-TV-Z]{{26}}$")})
}

fn nullable_id(prefix: &str) -> Value {
    json!({"type": ["string", "null"], "pattern": format!("^{prefix}[0-9A-HJKMNP-TV-Z]{{26}}$")})
}

fn count(minimum: u64) -> Value {
    json!({"type": "integer", "minimum": minimum})
}

fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

fn currency() -> Value {
    json!({"type": "string", "pattern": "^[A-Z]{3}$"})
}

fn listing_status() -> Value {
    one_of(&ListingStatus::ALL.map(ListingStatus::display))
}

fn role() -> Value {
    one_of(&Role::ALL.map(Role::as_str))
}

const SAMPLE_LISTING: &str = "K7M3QX9";
const SAMPLE_OWNER: &str = "usr_01JZ3K8Q4W5T7YB2N6CDEFGH9M";
const SAMPLE_AGENT: &str = "usr_01JZ3K9A2B3C4D5E6F7G8H9JKM";
const SAMPLE_PHOTOGRAPHER: &str = "usr_01JZ3KB7R8S9T0V1W2X3Y4Z5AB";
const SAMPLE_ORDER: &str = "ord_01JZ3K8Q5N2P7R4S6T8V9W0XYZ";
const SAMPLE_APPOINTMENT: &str = "apt_01JZ3KC2D3E4F5G6H7J8K9M0NP";
const SAMPLE_TOUR: &str = "https://my.matterport.com/show/?m=SxQL3iGyoDo";

// ---- Listing events: `listings::listing_event_data` and what its callers add ----

fn listing(status: &str) -> Shape {
    Shape::default()
        .required("listing_number", text(), SAMPLE_LISTING)
        .required("status", listing_status(), status)
        .required("address", text(), "1418 Alder Street, Portland, OR 97205")
        .required("owner_user_id", id("usr_"), SAMPLE_OWNER)
        .required("agent_one_id", id("usr_"), SAMPLE_AGENT)
        .required("agent_two_id", nullable_id("usr_"), Value::Null)
        .required("package", text(), "standard")
}

fn listing_created() -> Shape {
    listing("Coming Soon")
}

fn listing_status_changed() -> Shape {
    listing("Active").required("previous_status", listing_status(), "Coming Soon")
}

fn listing_cancelled() -> Shape {
    let fee = json!({
        "type": "object",
        "properties": {"amount": count(0), "currency": currency()},
        "required": ["amount", "currency"],
    });
    listing("Cancelled")
        .required("previous_status", listing_status(), "Coming Soon")
        .required("cancelled_at", date_time(), "2026-06-02T17:45:12.345Z")
        .required("fee_applied", fee, json!({"amount": 0, "currency": "USD"}))
}

fn listing_updated() -> Shape {
    let fields = json!({"type": "array", "items": text(), "minItems": 1, "uniqueItems": true});
    listing("Active").required("changed_fields", fields, json!(["address"]))
}

/// Two shapes told apart by `section`: tour3d carries the URL before and
/// after, floorplan the whole floorplan after the patch. A tour3d patch that
/// changes nothing emits nothing.
fn listing_section_updated() -> Shape {
    let file = json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri"},
            "label": {"type": "string", "minLength": 1, "maxLength": MAX_LABEL_CHARS},
        },
        "required": ["url", "label"],
    });
    let files =
        json!({"type": "array", "items": file, "minItems": 1, "maxItems": MAX_FLOORPLAN_FILES});
    let tour3d = json!({
        "properties": {"section": {"const": "tour3d"}, "operation": {"enum": ["set", "remove"]}},
        "required": ["previous_url", "url"],
    });
    let floorplan = json!({
        "properties": {
            "section": {"const": "floorplan"},
            "operation": {"enum": ["set", "replace", "append"]},
        },
        "required": ["files"],
    });
    Shape::default()
        .required("listing_number", text(), SAMPLE_LISTING)
        .required("section", one_of(&["tour3d", "floorplan"]), "tour3d")
        .required(
            "operation",
            one_of(&["set", "remove", "replace", "append"]),
            "set",
        )
        .optional("previous_url", nullable_url(), Value::Null)
        .optional("url", nullable_url(), SAMPLE_TOUR)
        .unsampled("files", files)
        .keyword("oneOf", json!([tour3d, floorplan]))
}

// ---- Invoice events: `orders::Order::event_data` ----

fn invoice(state: &str, payment_reference: Option<&str>) -> Shape {
    Shape::default()
        .required("order_id", id("ord_"), SAMPLE_ORDER)
        .required("listing_number", text(), SAMPLE_LISTING)
        .required(
            "invoice_number",
            json!({"type": "string", "pattern": "^INV-[0-9A-Z]+$"}),
            "INV-7KQ2M9XW4P",
        )
        .required(
            "invoice_state",
            one_of(&["draft", "open", "paid", "void"]),
            state,
        )
        .required("package", text(), "standard")
        .required("amount", count(0), 29_900)
        .required("currency", currency(), "USD")
        .required("payment_reference", nullable_text(), payment_reference)
}

fn invoice_created() -> Shape {
    invoice("open", None)
}

fn invoice_paid() -> Shape {
    invoice("paid", Some("ch_3PqR8sT2uV4wX6yZ"))
}

fn invoice_voided() -> Shape {
    invoice("void", None)
}

fn invoice_overdue() -> Shape {
    invoice("open", None)
        .required("due_at", date_time(), "2026-06-15T00:00:00.000Z")
        .required("days_overdue", count(1), 3)
}

// ---- Scheduling events: `appointments::Appointments::schedule`, listing cancellation ----

fn appointment() -> Shape {
    Shape::default()
        .required("appointment_id", id("apt_"), SAMPLE_APPOINTMENT)
        .required("listing_number", text(), SAMPLE_LISTING)
        .required("scheduled_at", date_time(), "2026-06-04T16:00:00.000Z")
}

fn appointment_created() -> Shape {
    appointment()
        // Always null here; the key is shared with the rescheduled event.
        .required(
            "previous_scheduled_at",
            json!({"type": "null"}),
            Value::Null,
        )
        .required("photographer_id", nullable_id("usr_"), Value::Null)
}

fn appointment_rescheduled() -> Shape {
    appointment()
        .required(
            "previous_scheduled_at",
            date_time(),
            "2026-06-03T15:30:00.000Z",
        )
        .required("photographer_id", nullable_id("usr_"), SAMPLE_PHOTOGRAPHER)
}

fn appointment_cancelled() -> Shape {
    let reason = json!({"type": "string", "minLength": 1, "examples": ["listing_cancelled"]});
    appointment().required("reason", reason, "listing_cancelled")
}

fn appointment_completed() -> Shape {
    appointment()
        .required("completed_at", date_time(), "2026-06-04T17:42:10.000Z")
        .required("photographer_id", nullable_id("usr_"), SAMPLE_PHOTOGRAPHER)
}

fn appointment_orphan_detected() -> Shape {
    Shape::default()
        .required("appointment_id", id("apt_"), SAMPLE_APPOINTMENT)
        .optional("listing_number", nullable_text(), SAMPLE_LISTING)
        .optional("scheduled_at", date_time(), "2026-06-04T16:00:00.000Z")
        .required("reason", text(), "listing_cancelled")
        .required("detected_at", date_time(), "2026-06-03T02:00:00.000Z")
}

// ---- Media events (not emitted yet: shapes from the specification's triggers) ----

fn media_delivery(delivered: u64) -> Shape {
    Shape::default()
        .required("listing_number", text(), SAMPLE_LISTING)
        .optional("order_id", id("ord_"), SAMPLE_ORDER)
        .required("delivered_count", count(0), delivered)
}

fn media_delivery_completed() -> Shape {
    media_delivery(36).required("delivered_at", date_time(), "2026-06-05T21:10:00.000Z")
}

fn media_delivery_partial() -> Shape {
    media_delivery(30).required("pending_count", count(1), 6)
}

fn media_delivery_failed() -> Shape {
    media_delivery(0)
        .required("reason", text(), "processing_error")
        .required("failed_at", date_time(), "2026-06-05T21:10:00.000Z")
}

fn media_upload_completed() -> Shape {
    let variants = ["thumbnail", "web", "mls", "print", "webp_web", "webp_thumb"];
    let file = json!({
        "type": "object",
        "properties": {
            "file_id": text(),
            "filename": text(),
            "content_type": text(),
            "size_bytes": count(0),
            "status": one_of(&["ready", "failed"]),
            "failure_reason": nullable_text(),
            "variants": {"type": "array", "items": one_of(&variants)},
        },
        "required": ["file_id", "filename", "content_type", "size_bytes"],
    });
    let example = json!([{
        "file_id": "fil_01JZ3KD4E5F6G7H8J9K0M1N2P4",
        "filename": "living-room.jpg",
        "content_type": "image/jpeg",
        "size_bytes": 8_412_337,
        "status": "ready",
        "failure_reason": null,
        "variants": variants,
    }]);
    Shape::default()
        .required("operation_id", text(), "op_01JZ3KD4E5F6G7H8J9K0M1N2P3")
        .optional("listing_number", nullable_text(), SAMPLE_LISTING)
        .optional("related_entity_type", nullable_text(), Value::Null)
        .optional("related_entity_id", nullable_text(), Value::Null)
        .optional(
            "storage_strategy",
            one_of(&["cloud", "local", "hybrid"]),
            "cloud",
        )
        .required(
            "files",
            json!({"type": "array", "items": file, "minItems": 1}),
            example,
        )
}

// ---- Billing and user events (not emitted yet) ----

fn subscription() -> Shape {
    Shape::default()
        .required("subscription_id", text(), "sub_1PqR8sT2uV4wX6yZ")
        .required("plan", text(), "agency_pro_monthly")
}

fn subscription_created() -> Shape {
    subscription()
        .optional("status", one_of(&["active", "trialing"]), "active")
        .required("started_at", date_time(), "2026-06-01T00:00:00.000Z")
}

fn subscription_cancelled() -> Shape {
    subscription()
        .required("cancelled_at", date_time(), "2026-06-20T09:12:00.000Z")
        .optional("ends_at", nullable_date_time(), "2026-06-30T23:59:59.000Z")
}

fn user() -> Shape {
    Shape::default().required("user_id", id("usr_"), SAMPLE_AGENT)
}

fn user_signed_up() -> Shape {
    user()
        .required("role", role(), "agent")
        .optional("manager_id", nullable_id("usr_"), SAMPLE_OWNER)
        .required("created_at", date_time(), "2026-06-01T08:30:00.000Z")
}

fn user_agent_created() -> Shape {
    user()
        .required("role", json!({"const": "agent"}), "agent")
        .required("manager_id", nullable_id("usr_"), SAMPLE_OWNER)
        .required("created_at", date_time(), "2026-06-01T08:30:00.000Z")
}

fn user_hierarchy_changed() -> Shape {
    user()
        .required("manager_id", nullable_id("usr_"), SAMPLE_OWNER)
        .required("previous_manager_id", nullable_id("usr_"), Value::Null)
        .optional("changed_at", date_time(), "2026-06-02T10:00:00.000Z")
}

fn user_deactivated() -> Shape {
    user().optional("role", role(), "agent").required(
        "deactivated_at",
        date_time(),
        "2026-06-10T12:00:00.000Z",
    )
}

// ---- Webhook events ----

fn webhook_test_fire() -> Shape {
    Shape::default()
        .required("endpoint_id", text(), "whe_01JZ3KE6F7G8H9J0K1M2N3P4Q5")
        .required(
            "message",
            text(),
            "A test delivery from the Media Agency Listing API.",
        )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::ids::{AgencyId, ListingId, OrderId, UserId};
    use crate::listings::{Listing, generate_listing_number, listing_event_data};
    use crate::orders::{InvoiceState, Order};
    use crate::records::numbers::invoice_number;
    use crate::{Environment, Timestamp};

    const VARIANT_A: &str = "listing.created listing.updated listing.status_changed \
        listing.cancelled listing.section_modified appointment.scheduled appointment.rescheduled \
        appointment.cancelled appointment.orphan.detected media.delivery.completed \
        media.delivery.failed invoice.payment_made subscription.created subscription.cancelled \
        user.signed_up user.hierarchy_changed user.deactivated";

    const VARIANT_B: &str = "listing.created listing.status_changed listing.cancelled \
        listing.section_updated media.delivery.completed media.delivery.partial \
        media.delivery.failed media.upload.completed scheduling.appointment.created \
        scheduling.appointment.rescheduled scheduling.appointment.cancelled \
        scheduling.appointment.completed invoice.created invoice.paid invoice.overdue \
        invoice.voided user.agent_created webhook.test_fire";

    /// Every variant. A new one does not compile until `catalog_entry` maps
    /// it, and its emitted entry then fails the test below until it is listed.
    fn all_event_types() -> [EventType; 13] {
        use EventType::*;
        [
            MediaUploadCompleted,
            UserDeactivated,
            UserHierarchyChanged,
            ListingCreated,
            ListingStatusChanged,
            ListingCancelled,
            ListingSectionUpdated,
            InvoiceCreated,
            InvoicePaid,
            InvoiceVoided,
            AppointmentCreated,
            AppointmentRescheduled,
            AppointmentCancelled,
        ]
    }

    /// A validator that also checks formats (date-time, uri), which 2020-12
    /// treats as annotations by default.
    fn validator(entry: &CatalogEntry) -> jsonschema::Validator {
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&entry.data_schema())
            .unwrap_or_else(|err| panic!("{}: schema does not compile: {err}", entry.event_type))
    }

    #[track_caller]
    fn assert_valid(entry: &CatalogEntry, data: &Value) {
        let errors: Vec<String> = validator(entry)
            .iter_errors(data)
            .map(|err| format!("{}: {err}", err.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{}: {data}: {errors:?}",
            entry.event_type
        );
    }

    fn entry(name: &str) -> &'static CatalogEntry {
        resolve(name).unwrap_or_else(|| panic!("{name} is not in the catalog"))
    }

    #[test]
    fn every_schema_is_a_valid_2020_12_object_schema() {
        for entry in entries() {
            let (event, schema) = (entry.event_type, entry.data_schema());
            jsonschema::draft202012::meta::validate(&schema)
                .unwrap_or_else(|err| panic!("{event}: {err}"));
            assert_eq!(schema["$schema"], SCHEMA_DIALECT);
            assert_eq!(schema["type"], "object");
            let properties = schema["properties"].as_object().expect("properties");
            let required = schema["required"].as_array().expect("required");
            assert!(!required.is_empty(), "{event}");
            for name in required {
                let name = name.as_str().expect("required names are strings");
                assert!(properties.contains_key(name), "{event}: {name}");
            }
            assert!(!entry.description.is_empty() && !entry.emitted_by.is_empty());
        }
    }

    #[test]
    fn every_sample_is_valid_and_needs_each_required_key() {
        for entry in entries() {
            assert_valid(entry, &entry.sample());
            let validator = validator(entry);
            let schema = entry.data_schema();
            for name in schema["required"].as_array().expect("required") {
                let mut data = entry.sample();
                let name = name.as_str().expect("a name");
                data.as_object_mut().expect("an object").remove(name);
                assert!(!validator.is_valid(&data), "{}: {name}", entry.event_type);
            }
        }
    }

    #[test]
    fn the_catalog_is_the_union_of_both_specification_lists() {
        for name in VARIANT_A
            .split_whitespace()
            .chain(VARIANT_B.split_whitespace())
        {
            assert!(resolve(name).is_some(), "{name}");
        }
        for name in VARIANT_B.split_whitespace() {
            assert_eq!(canonical(name), Some(name), "variant B names are canonical");
        }
        let union: HashSet<&str> = VARIANT_A
            .split_whitespace()
            .chain(VARIANT_B.split_whitespace())
            .filter_map(canonical)
            .collect();
        assert_eq!(union.len(), entries().len(), "nothing beyond the lists");
    }

    #[test]
    fn names_are_unique_and_aliases_collide_with_nothing() {
        let mut seen = HashSet::new();
        for entry in entries() {
            for name in std::iter::once(&entry.event_type).chain(entry.aliases) {
                assert!(seen.insert(*name), "{name} appears twice");
                assert_eq!(name.trim(), *name);
            }
        }
        assert_eq!(
            aliases(),
            [
                ("invoice.payment_made", "invoice.paid"),
                ("listing.section_modified", "listing.section_updated"),
                ("appointment.cancelled", "scheduling.appointment.cancelled"),
                ("appointment.scheduled", "scheduling.appointment.created"),
                (
                    "appointment.rescheduled",
                    "scheduling.appointment.rescheduled"
                ),
            ]
        );
    }

    #[test]
    fn the_order_is_by_category_then_name() {
        let keys: Vec<(&str, &str)> = entries()
            .iter()
            .map(|entry| (entry.category, entry.event_type))
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "{keys:#?}");
        let mut categories: Vec<&str> = keys.iter().map(|(category, _)| *category).collect();
        categories.dedup();
        let known = "billing invoice listing media scheduling user webhook";
        assert_eq!(categories.join(" "), known);
    }

    #[test]
    fn emitted_entries_are_the_event_types_and_the_test_fire() {
        for event_type in all_event_types() {
            let entry = event_type.catalog_entry();
            assert_eq!(entry.event_type, event_type.as_str());
            assert!(entry.emitted && !entry.test_only, "{}", entry.event_type);
        }
        let emitted: HashSet<&str> = entries()
            .iter()
            .filter(|entry| entry.emitted && !entry.test_only)
            .map(|entry| entry.event_type)
            .collect();
        let variants: HashSet<&str> = all_event_types().map(EventType::as_str).into();
        assert_eq!(emitted, variants);
        let test_only: Vec<&str> = entries()
            .iter()
            .filter(|entry| entry.test_only)
            .map(|entry| entry.event_type)
            .collect();
        assert_eq!(test_only, ["webhook.test_fire"]);
        assert!(entry("webhook.test_fire").emitted);
        assert!(entry("media.upload.completed").emitted);
        assert!(!entry("media.delivery.completed").emitted);
    }

    #[test]
    fn resolve_takes_canonical_names_and_aliases() {
        assert_eq!(canonical("invoice.payment_made"), Some("invoice.paid"));
        assert_eq!(
            canonical(" appointment.scheduled\n"),
            Some("scheduling.appointment.created")
        );
        assert_eq!(
            canonical("listing.section_modified"),
            Some("listing.section_updated")
        );
        assert_eq!(canonical("listing.created"), Some("listing.created"));
        assert_eq!(canonical("Listing.Created"), None, "names are exact");
        assert_eq!(canonical("payment.completed"), None, "not an event");
        assert_eq!(canonical(""), None);
        let resolved = resolve("appointment.rescheduled").expect("an alias");
        assert_eq!(resolved.event_type, "scheduling.appointment.rescheduled");
    }

    const NOW: Timestamp = Timestamp::from_micros(1_780_000_000_000_000);

    fn listing(status: ListingStatus, agent_two_id: Option<UserId>) -> Listing {
        Listing {
            id: ListingId::generate(),
            agency_id: AgencyId::generate(),
            environment: Environment::Sandbox,
            listing_number: generate_listing_number(Environment::Sandbox),
            status,
            address: "1418 Alder Street, Portland, OR 97205".to_owned(),
            owner_user_id: UserId::generate(),
            agent_one_id: UserId::generate(),
            agent_two_id,
            package: "premium".to_owned(),
            notes: Some("Gate code 4411".to_owned()),
            activated_at: None,
            billed_at: None,
            tour3d_url: None,
            floorplan: Vec::new(),
            created_at: NOW,
            updated_at: NOW,
        }
    }

    #[test]
    fn listing_data_the_code_writes_matches_the_schemas() {
        for agent_two_id in [None, Some(UserId::generate())] {
            let data = listing_event_data(&listing(ListingStatus::ComingSoon, agent_two_id));
            assert_valid(entry("listing.created"), &data);
        }
        // What `change_status` and `cancel` add to the same data.
        let mut data = listing_event_data(&listing(ListingStatus::OffMarket, None));
        data["previous_status"] = ListingStatus::Active.display().into();
        assert_valid(entry("listing.status_changed"), &data);
        let mut data = listing_event_data(&listing(ListingStatus::Cancelled, None));
        data["previous_status"] = ListingStatus::ComingSoon.display().into();
        data["cancelled_at"] = NOW.to_rfc3339().into();
        data["fee_applied"] = json!({"amount": 0, "currency": "USD"});
        assert_valid(entry("listing.cancelled"), &data);
    }

    #[test]
    fn invoice_data_the_code_writes_matches_the_schemas() {
        let order = |invoice_state, payment_reference: Option<&str>| Order {
            id: OrderId::generate(),
            listing_id: ListingId::generate(),
            listing_number: "snd_K7M3QX9".to_owned(),
            package: "essentials".to_owned(),
            amount: 19_900,
            currency: "USD".to_owned(),
            invoice_number: invoice_number(),
            invoice_state,
            payment_reference: payment_reference.map(str::to_owned),
            paid_at: None,
            voided_at: None,
            created_at: NOW,
        };
        let cases = [
            ("invoice.created", order(InvoiceState::Open, None)),
            (
                "invoice.paid",
                order(InvoiceState::Paid, Some("pay_01JZ3K8Q4W5T7YB2N6CDEFGH9M")),
            ),
            ("invoice.voided", order(InvoiceState::Void, None)),
        ];
        for (name, order) in cases {
            assert_valid(entry(name), &order.event_data());
        }
        for state in ["draft", "open", "paid", "void"] {
            assert!(InvoiceState::parse(state).is_some(), "{state}");
        }
    }

    #[test]
    fn section_data_has_one_shape_per_section() {
        let section = entry("listing.section_updated");
        let floorplan = json!({
            "listing_number": SAMPLE_LISTING,
            "section": "floorplan",
            "operation": "append",
            "files": [{"url": "https://cdn.example.com/plans/ground.pdf", "label": "Ground floor"}],
        });
        assert_valid(section, &floorplan);
        let removed = json!({
            "listing_number": SAMPLE_LISTING,
            "section": "tour3d",
            "operation": "remove",
            "previous_url": SAMPLE_TOUR,
            "url": null,
        });
        assert_valid(section, &removed);
        let validator = validator(section);
        let mut no_files = floorplan;
        no_files.as_object_mut().expect("an object").remove("files");
        assert!(!validator.is_valid(&no_files));
        let mut wrong_operation = removed;
        wrong_operation["operation"] = "append".into();
        assert!(!validator.is_valid(&wrong_operation));
    }

    #[test]
    fn appointment_data_tells_created_from_rescheduled() {
        let created = entry("scheduling.appointment.created");
        let rescheduled = entry("scheduling.appointment.rescheduled");
        assert!(!validator(created).is_valid(&rescheduled.sample()));
        assert!(!validator(rescheduled).is_valid(&created.sample()));
        let mut bad_time = created.sample();
        bad_time["scheduled_at"] = "tomorrow at four".into();
        assert!(!validator(created).is_valid(&bad_time), "a format");
    }
}
