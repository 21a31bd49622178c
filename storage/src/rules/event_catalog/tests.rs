//! The catalog's data held to the code: every schema compiles, every sample
//! is valid, the catalog is the union of the specification's two lists, and
//! the data the repositories write for each emitted type matches its schema.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::*;
use crate::ids::{AgencyId, ListingId, OrderId, UserId};
use crate::records::listing::{Listing, listing_event_data};
use crate::records::numbers::{generate_listing_number, invoice_number};
use crate::records::order::{InvoiceState, Order};
use crate::records::user::Role;
use crate::rules::listing_status::ListingStatus;
use crate::rules::sections::{MAX_FLOORPLAN_FILES, MAX_LABEL_CHARS};
use crate::{Environment, Timestamp};

const SAMPLE_LISTING: &str = "K7M3QX9";
const SAMPLE_TOUR: &str = "https://my.matterport.com/show/?m=SxQL3iGyoDo";

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
    // Beyond the lists: the endpoint health events of this service.
    let ours: HashSet<&str> = ["webhook.endpoint.disabled", "webhook.endpoint.recovered"]
        .into_iter()
        .collect();
    assert!(union.is_disjoint(&ours));
    assert_eq!(
        union.len() + ours.len(),
        entries().len(),
        "nothing beyond the lists and ours"
    );
}

#[test]
fn names_are_unique_and_aliases_collide_with_nothing() {
    let mut seen = HashSet::new();
    for entry in entries() {
        for name in std::iter::once(&entry.event_type).chain(entry.aliases.iter()) {
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
    for &event_type in EventType::ALL {
        let entry = event_type.catalog_entry();
        assert_eq!(entry.event_type, event_type.as_str());
        assert!(entry.emitted && !entry.test_only, "{}", entry.event_type);
    }
    let emitted: HashSet<&str> = entries()
        .iter()
        .filter(|entry| entry.emitted && !entry.test_only)
        .map(|entry| entry.event_type)
        .collect();
    let variants: HashSet<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
    assert_eq!(emitted, variants);
    let test_only: Vec<&str> = entries()
        .iter()
        .filter(|entry| entry.test_only)
        .map(|entry| entry.event_type)
        .collect();
    assert_eq!(test_only, ["webhook.test_fire"]);
    assert!(entry("webhook.test_fire").emitted);
    assert!(entry("media.upload.completed").emitted);
    assert!(entry("media.delivery.completed").emitted);
    let planned: Vec<&str> = entries()
        .iter()
        .filter(|entry| !entry.emitted)
        .map(|entry| entry.event_type)
        .collect();
    assert_eq!(
        planned,
        [
            "subscription.cancelled",
            "subscription.created",
            "invoice.overdue",
            "listing.updated",
            "appointment.orphan.detected",
            "scheduling.appointment.completed",
        ]
    );
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
fn endpoint_health_data_the_code_writes_matches_the_schemas() {
    let endpoint_id = crate::ids::WebhookEndpointId::generate();
    let at = crate::Timestamp::from_micros(1_780_000_000_000_000);
    let url = "https://crm.agency.example/hooks";
    for name in [Some("CRM"), None] {
        assert_valid(
            entry("webhook.endpoint.disabled"),
            &crate::webhooks::health::disabled_data(&endpoint_id, url, name, 50, at),
        );
        assert_valid(
            entry("webhook.endpoint.recovered"),
            &crate::webhooks::health::recovered_data(&endpoint_id, url, name, 7, at),
        );
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

/// The `enum` of `properties.<name>` in `event_type`'s schema.
fn enum_of(event_type: &str, name: &str) -> Vec<String> {
    let schema = entry(event_type).data_schema();
    schema["properties"][name]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("{event_type}: {name} has an enum"))
        .iter()
        .map(|value| value.as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_enums_and_limits_of_the_data_agree_with_the_code() {
    let statuses: Vec<String> = ListingStatus::ALL
        .map(|status| status.display().to_owned())
        .into();
    for event_type in [
        "listing.created",
        "listing.status_changed",
        "listing.cancelled",
    ] {
        assert_eq!(enum_of(event_type, "status"), statuses, "{event_type}");
    }
    for event_type in ["listing.status_changed", "listing.cancelled"] {
        assert_eq!(
            enum_of(event_type, "previous_status"),
            statuses,
            "{event_type}"
        );
    }
    let roles: Vec<String> = Role::ALL.map(|role| role.as_str().to_owned()).into();
    for event_type in ["user.signed_up", "user.deactivated"] {
        assert_eq!(enum_of(event_type, "role"), roles, "{event_type}");
    }
    let states: Vec<String> = ["draft", "open", "paid", "void"]
        .iter()
        .filter_map(|state| InvoiceState::parse(state))
        .map(|state| state.as_str().to_owned())
        .collect();
    assert_eq!(enum_of("invoice.created", "invoice_state"), states);
    let files = &entry("listing.section_updated").data_schema()["properties"]["files"];
    assert_eq!(files["maxItems"], json!(MAX_FLOORPLAN_FILES));
    assert_eq!(
        files["items"]["properties"]["label"]["maxLength"],
        json!(MAX_LABEL_CHARS)
    );
}

#[test]
fn the_loader_wraps_every_schema_in_the_shared_envelope() {
    for entry in entries() {
        let schema = entry.data_schema();
        assert_eq!(schema["title"], format!("{} data", entry.event_type));
        assert_eq!(schema["description"], entry.description);
        assert_eq!(schema["additionalProperties"], true);
    }
}
