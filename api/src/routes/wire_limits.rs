//! The limits the wire types carry in their `#[schema]` and `#[param]`
//! attributes are the ones their validation enforces. utoipa reads those
//! attributes as literals, so the constants validation uses cannot be named
//! there; this test holds each literal to its constant, and a change to
//! either side without the other fails it.

use serde_json::Value;
use utoipa::{IntoParams, PartialSchema};

use super::availability::{AvailabilityQuery, MAX_ADDRESS_CHARS as MAX_SHOOT_ADDRESS_CHARS};
use super::changelog::ChangelogQuery;
use super::developer_keys::{AgencyPageQuery as KeyPageQuery, KeyIn};
use super::listings::create::ListingIn;
use super::listings::orders::OrderListQuery;
use super::listings::read::ListingListQuery;
use super::listings::sections::{FloorplanFileBody, SectionPatch};
use super::media::archive::{ArchiveIn, MAX_ARCHIVE_FILES, MAX_NAME_CHARS as MAX_ARCHIVE_NAME};
use super::session::password::{NewPasswordIn, PasswordResetIn};
use super::user_admin::{BatchCanEditIn, MAX_BATCH, UserIn};
use super::users::UserListQuery;
use super::webhooks::endpoint_rules::{
    MAX_NAME_CHARS as MAX_ENDPOINT_NAME, MAX_URL_CHARS as MAX_ENDPOINT_URL,
};
use super::webhooks::{EndpointIn, EndpointPatch, PageQuery as WebhookPageQuery};
use storage::people::accounts::MAX_FIELD_CHARS;
use storage::rules::sections::{
    MAX_FLOORPLAN_FILES, MAX_LABEL_CHARS, MAX_URL_LEN as MAX_SECTION_URL,
};

use crate::pagination::{MAX_LIMIT, PageQuery};

/// The JSON schema of `T`'s property `name`.
fn property<T: PartialSchema>(name: &str) -> Value {
    let schema = serde_json::to_value(T::schema()).unwrap_or_default();
    schema["properties"][name].clone()
}

/// The JSON schema of `T`'s parameter `name`.
fn parameter<T: IntoParams>(name: &str) -> Value {
    T::into_params(|| None)
        .into_iter()
        .find(|parameter| parameter.name == name)
        .map(|parameter| serde_json::to_value(parameter.schema).unwrap_or_default())
        .unwrap_or_default()
}

fn number(value: usize) -> Value {
    Value::from(value)
}

#[test]
fn text_lengths_are_the_validations() {
    let rows: [(&str, Value, &str, usize); 9] = [
        (
            "ListingIn.address",
            property::<ListingIn>("address"),
            "maxLength",
            storage::listings::MAX_ADDRESS_CHARS,
        ),
        (
            "ListingIn.notes",
            property::<ListingIn>("notes"),
            "maxLength",
            storage::listings::MAX_NOTES_CHARS,
        ),
        (
            "UserIn.email",
            property::<UserIn>("email"),
            "maxLength",
            storage::people::users::MAX_EMAIL_LEN,
        ),
        (
            "UserIn.password",
            property::<UserIn>("password"),
            "maxLength",
            storage::people::accounts::MAX_PASSWORD_CHARS,
        ),
        (
            "PasswordResetIn.email",
            property::<PasswordResetIn>("email"),
            "maxLength",
            storage::people::users::MAX_EMAIL_LEN,
        ),
        (
            "NewPasswordIn.new_password",
            property::<NewPasswordIn>("new_password"),
            "maxLength",
            storage::people::accounts::MAX_PASSWORD_CHARS,
        ),
        (
            "ArchiveIn.archive_name",
            property::<ArchiveIn>("archive_name"),
            "maxLength",
            MAX_ARCHIVE_NAME,
        ),
        (
            "KeyIn.name",
            property::<KeyIn>("name"),
            "maxLength",
            storage::api_keys::MAX_NAME_LEN,
        ),
        (
            "availability?address",
            parameter::<AvailabilityQuery>("address"),
            "maxLength",
            MAX_SHOOT_ADDRESS_CHARS,
        ),
    ];
    for (what, schema, keyword, limit) in rows {
        assert_eq!(schema[keyword], number(limit), "{what} {keyword}: {schema}");
    }
    for schema in [
        property::<EndpointIn>("name"),
        property::<EndpointPatch>("name"),
    ] {
        assert_eq!(schema["maxLength"], number(MAX_ENDPOINT_NAME), "{schema}");
    }
    for schema in [
        property::<EndpointIn>("url"),
        property::<EndpointPatch>("url"),
    ] {
        assert_eq!(schema["maxLength"], number(MAX_ENDPOINT_URL), "{schema}");
    }
    for field in [
        "name",
        "first_name",
        "last_name",
        "brokerage_name",
        "office_name",
    ] {
        let schema = property::<UserIn>(field);
        assert_eq!(
            schema["maxLength"],
            number(MAX_FIELD_CHARS),
            "UserIn.{field}: {schema}"
        );
    }
    for schema in [
        property::<FloorplanFileBody>("url"),
        property::<SectionPatch>("url"),
    ] {
        assert_eq!(schema["maxLength"], number(MAX_SECTION_URL), "{schema}");
    }
    assert_eq!(
        property::<FloorplanFileBody>("label")["maxLength"],
        number(MAX_LABEL_CHARS)
    );
}

#[test]
fn list_sizes_and_page_sizes_are_the_validations() {
    assert_eq!(
        property::<BatchCanEditIn>("user_ids")["maxItems"],
        number(MAX_BATCH)
    );
    assert_eq!(
        property::<ArchiveIn>("file_ids")["maxItems"],
        number(MAX_ARCHIVE_FILES)
    );
    assert_eq!(
        property::<SectionPatch>("files")["maxItems"],
        number(MAX_FLOORPLAN_FILES)
    );
    let limits = [
        parameter::<ChangelogQuery>("limit"),
        parameter::<KeyPageQuery>("limit"),
        parameter::<PageQuery>("limit"),
        parameter::<WebhookPageQuery>("limit"),
        parameter::<ListingListQuery>("limit"),
        parameter::<OrderListQuery>("limit"),
        parameter::<UserListQuery>("limit"),
    ];
    for limit in limits {
        assert_eq!(limit["maximum"], Value::from(MAX_LIMIT), "{limit}");
        assert_eq!(limit["minimum"], Value::from(1), "{limit}");
    }
}

#[test]
fn upload_sizes_are_the_validations() {
    use super::media::resumable::direct::{DirectUploadIn, MIN_PART_BYTES};
    let max_file_bytes = crate::config::UploadLimits::default().max_file_bytes;
    let size = property::<DirectUploadIn>("size_bytes");
    assert_eq!(size["maximum"], Value::from(max_file_bytes), "{size}");
    assert_eq!(size["minimum"], Value::from(1), "{size}");
    let part = property::<DirectUploadIn>("part_size");
    assert_eq!(part["minimum"], Value::from(MIN_PART_BYTES), "{part}");
    assert_eq!(part["maximum"], Value::from(max_file_bytes), "{part}");
}

#[test]
fn delivery_profile_limits_are_the_validations() {
    use super::delivery_profiles::wire::{OutputWire, ProfileIn, ProfilePatch, WatermarkWire};
    use storage::rules::delivery_profiles as rules;
    for name in [
        property::<ProfileIn>("name"),
        property::<ProfilePatch>("name"),
    ] {
        assert_eq!(
            name["maxLength"],
            number(rules::MAX_PROFILE_NAME_CHARS),
            "{name}"
        );
    }
    for outputs in [
        property::<ProfileIn>("outputs"),
        property::<ProfilePatch>("outputs"),
    ] {
        assert_eq!(outputs["maxItems"], number(rules::MAX_OUTPUTS), "{outputs}");
    }
    assert_eq!(
        property::<OutputWire>("name")["maxLength"],
        number(rules::MAX_OUTPUT_NAME_CHARS)
    );
    for side in ["width", "height"] {
        let side = property::<OutputWire>(side);
        assert_eq!(side["minimum"], Value::from(rules::MIN_SIDE), "{side}");
        assert_eq!(side["maximum"], Value::from(rules::MAX_SIDE), "{side}");
    }
    let cap = property::<OutputWire>("max_bytes");
    assert_eq!(cap["minimum"], Value::from(rules::MIN_MAX_BYTES), "{cap}");
    assert_eq!(cap["maximum"], Value::from(rules::MAX_MAX_BYTES), "{cap}");
    let scale = property::<WatermarkWire>("scale");
    assert_eq!(
        scale["minimum"].as_f64(),
        Some(rules::MIN_WATERMARK_SCALE),
        "{scale}"
    );
    assert_eq!(
        scale["maximum"].as_f64(),
        Some(rules::MAX_WATERMARK_SCALE),
        "{scale}"
    );
}
