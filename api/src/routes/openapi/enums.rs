//! The enumerations the service accepts, on the wire types' properties and
//! the operations' parameters: values the domain defines (listing statuses in
//! every spelling, roles, packages, change types, event types, time zones),
//! which no attribute can state, read from the domain so the document lists
//! exactly what the service takes. A property is named through its wire type
//! (`Property(name::<StatusPatch>, "new_status")`), a parameter by its
//! operation as the document writes it (`GET /api/v1/listings`); one that
//! names nothing stops the service at start.

use serde_json::{Value, json};
use storage::people::users::Role;
use storage::rules::changelog::ChangeType;
use storage::rules::event_catalog;
use storage::rules::listing_status::ListingStatus;
use utoipa::ToSchema;

use super::json::{at, merge};
use crate::routes::developer_keys::KeyIn;
use crate::routes::listings::create::ListingIn;
use crate::routes::listings::status::StatusPatch;
use crate::routes::user_admin::{BatchCanEditIn, RoleIn, StatusIn, UserIn};
use crate::routes::webhooks::{EndpointIn, EndpointPatch};

/// Where an enumeration applies.
enum At {
    /// A property of a wire type's schema.
    Property(fn() -> String, &'static str),
    /// A query parameter of an operation (`METHOD /path` as the document
    /// writes it).
    Query(&'static str, &'static str),
    /// A header parameter of an operation.
    Header(&'static str, &'static str),
}

/// The schema name of a wire type.
fn name<T: ToSchema>() -> String {
    T::name().into_owned()
}

/// The listing statuses in their display form and their key form, as the
/// service parses them.
fn listing_status() -> Value {
    let display = ListingStatus::ALL.iter().map(|status| status.display());
    let keys = ListingStatus::ALL.iter().map(|status| status.key());
    json!({"enum": display.chain(keys).collect::<Vec<_>>()})
}

/// The roles a user may be given through the API (no administrator's).
fn assignable_role() -> Value {
    let roles: Vec<&str> = Role::ALL
        .iter()
        .filter(|role| !role.is_administrator())
        .map(|role| role.as_str())
        .collect();
    json!({"enum": roles})
}

/// The roles a user list may be filtered by (no platform role).
fn listed_role() -> Value {
    let roles: Vec<&str> = Role::ALL
        .iter()
        .filter(|role| !role.is_platform())
        .map(|role| role.as_str())
        .collect();
    json!({"enum": roles})
}

fn change_type() -> Value {
    json!({"enum": ChangeType::ALL.iter().map(|kind| kind.as_str()).collect::<Vec<_>>()})
}

fn package() -> Value {
    json!({"enum": storage::rules::packages::keys()})
}

/// A package, or null for the default.
fn package_or_default() -> Value {
    let mut keys: Vec<Value> = storage::rules::packages::keys()
        .into_iter()
        .map(Value::from)
        .collect();
    keys.push(Value::Null);
    json!({"enum": keys})
}

fn timezone() -> Value {
    let names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
    json!({"enum": names})
}

/// The event types an endpoint can subscribe to, by name or alias.
fn subscribable_types() -> Value {
    let names: Vec<&str> = event_catalog::entries()
        .iter()
        .filter(|entry| entry.emitted && !entry.test_only)
        .flat_map(|entry| std::iter::once(entry.event_type).chain(entry.aliases.iter().copied()))
        .collect();
    json!({"minItems": 1, "items": {"enum": names}})
}

/// The JSON Schema keywords of an enumeration.
type Keywords = fn() -> Value;

/// The enumerations, where each applies.
const ENUMERATIONS: &[(At, Keywords)] = &[
    (At::Query("GET /api/v1/listings", "status"), listing_status),
    (At::Query("GET /api/v1/users", "role"), listed_role),
    (
        At::Query("GET /api/v1/users", "active"),
        || json!({"enum": ["true", "false"]}),
    ),
    (
        At::Query("GET /api/v1/agency/changelog", "change_type"),
        change_type,
    ),
    (
        At::Query("GET /api/v1/scheduling/availability", "package"),
        package,
    ),
    (
        At::Query("GET /api/v1/scheduling/availability", "timezone"),
        timezone,
    ),
    // A header is text or absent, never null; the stream resumes after this id.
    (
        At::Header("GET /api/v1/progress/{operation_id}", "Last-Event-ID"),
        || json!({"type": "string", "pattern": "^[0-9]*$", "maxLength": 19}),
    ),
    (
        At::Property(name::<ListingIn>, "package"),
        package_or_default,
    ),
    (
        At::Property(name::<StatusPatch>, "new_status"),
        listing_status,
    ),
    (At::Property(name::<UserIn>, "role"), assignable_role),
    (At::Property(name::<RoleIn>, "role"), assignable_role),
    (
        At::Property(name::<StatusIn>, "status"),
        || json!({"enum": ["active", "suspended"]}),
    ),
    // Each id is answered on its own (a malformed one is user_not_found).
    (
        At::Property(name::<BatchCanEditIn>, "user_ids"),
        || json!({"items": {"minLength": 1}}),
    ),
    (
        At::Property(name::<EndpointIn>, "event_types"),
        subscribable_types,
    ),
    (
        At::Property(name::<EndpointIn>, "environment"),
        || json!({"enum": ["live", "sandbox", "both", null]}),
    ),
    (
        At::Property(name::<EndpointPatch>, "event_types"),
        subscribable_types,
    ),
    (
        At::Property(name::<EndpointPatch>, "environment"),
        || json!({"enum": ["live", "sandbox", "both", null]}),
    ),
    (
        At::Property(name::<KeyIn>, "environment"),
        || json!({"enum": ["live", "sandbox", null]}),
    ),
    (
        At::Property(name::<KeyIn>, "format"),
        || json!({"enum": ["sk", "ma", null]}),
    ),
];

/// Merges every enumeration into the schema it applies to.
pub(super) fn apply(doc: &mut Value) {
    for (place, keywords) in ENUMERATIONS {
        let target = match place {
            At::Property(schema, property) => at(
                doc,
                &["components", "schemas", &schema(), "properties", property],
            ),
            At::Query(operation, parameter) => parameter_schema(doc, operation, parameter, "query"),
            At::Header(operation, parameter) => {
                parameter_schema(doc, operation, parameter, "header")
            }
        };
        let Some(target) = target.filter(|target| target.is_object()) else {
            panic!("an OpenAPI enumeration names nothing: {}", describe(place));
        };
        merge(target, keywords());
    }
}

/// The schema of an operation's parameter.
fn parameter_schema<'a>(
    doc: &'a mut Value,
    operation: &str,
    parameter: &str,
    location: &str,
) -> Option<&'a mut Value> {
    let (method, path) = operation.split_once(' ')?;
    let method = method.to_ascii_lowercase();
    at(doc, &["paths", path, &method, "parameters"])
        .and_then(Value::as_array_mut)
        .and_then(|parameters| {
            parameters
                .iter_mut()
                .find(|p| p["name"] == parameter && p["in"] == location)
        })
        .map(|parameter| &mut parameter["schema"])
}

fn describe(place: &At) -> String {
    match place {
        At::Property(schema, property) => format!("{}.{property}", schema()),
        At::Query(operation, parameter) => format!("{operation}?{parameter}"),
        At::Header(operation, parameter) => format!("{operation}@{parameter}"),
    }
}
