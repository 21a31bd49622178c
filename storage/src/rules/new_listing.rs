//! What a new listing's fields must be, checked without the database: an
//! address of 1 to 500 characters, notes of at most 5000, a known package,
//! well-formed ids of distinct people. Every problem is collected by field;
//! whether the people are users of the agency is the repository's to check.
//! The API's `ListingIn` names the same limits on its fields.

use std::collections::BTreeMap;

use crate::ids::UserId;
use crate::rules::packages::{self, Package};

/// What a client asks to create. User ids arrive unparsed so every problem
/// can be reported per field.
#[derive(Clone, Debug, Default)]
pub struct NewListing {
    /// Street address (required).
    pub address: String,
    /// Owner (required).
    pub owner_user_id: String,
    /// First agent (required).
    pub agent_one_id: String,
    /// Second agent.
    pub agent_two_id: Option<String>,
    /// Package key; the default package when absent.
    pub package: Option<String>,
    /// Notes.
    pub notes: Option<String>,
    /// The request's idempotency key: a creation under a key that already made
    /// a listing within the idempotency window returns that listing instead.
    pub idempotency_key: Option<String>,
}

/// Longest address accepted.
pub const MAX_ADDRESS_CHARS: usize = 500;
/// Longest notes accepted.
pub const MAX_NOTES_CHARS: usize = 5000;

/// Problems by field.
pub type FieldErrors = BTreeMap<&'static str, String>;

/// A creation whose fields are well-formed, before its people are checked.
pub struct Checked {
    /// The address, trimmed (none when it was refused).
    pub address: Option<String>,
    /// The notes, trimmed.
    pub notes: Option<String>,
    /// The package (the default when none was named).
    pub package: Option<&'static Package>,
    /// The people named, by field, in the order owner, agent one, agent two.
    pub people: Vec<(&'static str, UserId)>,
    /// Every problem found, by field.
    pub errors: FieldErrors,
}

impl Checked {
    /// The person named in `field`, if well-formed.
    pub fn person(&self, field: &str) -> Option<UserId> {
        self.people
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, id)| id.clone())
    }
}

fn check_text(
    errors: &mut FieldErrors,
    field: &'static str,
    value: Option<&str>,
    required: bool,
    max: usize,
) -> Option<String> {
    match value.map(str::trim) {
        None | Some("") if required => {
            errors.insert(field, "is required".to_owned());
            None
        }
        None | Some("") => None,
        Some(text) if text.chars().count() > max => {
            errors.insert(field, format!("must be at most {max} characters"));
            None
        }
        Some(text) => Some(text.to_owned()),
    }
}

/// Checks every field that needs no database, collecting each problem.
pub fn check_fields(new: &NewListing) -> Checked {
    let mut errors = FieldErrors::new();
    let address = check_text(
        &mut errors,
        "address",
        Some(&new.address),
        true,
        MAX_ADDRESS_CHARS,
    );
    let notes = check_text(
        &mut errors,
        "notes",
        new.notes.as_deref(),
        false,
        MAX_NOTES_CHARS,
    );
    let package_key = new
        .package
        .as_deref()
        .map(str::trim)
        .unwrap_or(packages::DEFAULT_PACKAGE);
    let package = packages::find(package_key);
    if package.is_none() {
        errors.insert(
            "package",
            format!("must be one of {}", packages::keys().join(", ")),
        );
    }
    let mut people: Vec<(&'static str, UserId)> = Vec::new();
    for (field, value) in [
        ("owner_user_id", Some(new.owner_user_id.as_str())),
        ("agent_one_id", Some(new.agent_one_id.as_str())),
        ("agent_two_id", new.agent_two_id.as_deref()),
    ] {
        match value.map(str::trim) {
            None => {}
            Some("") if field == "agent_two_id" => {}
            Some("") => {
                errors.insert(field, "is required".to_owned());
            }
            Some(text) => match UserId::parse(text) {
                Some(id) => people.push((field, id)),
                None => {
                    errors.insert(field, "is not a user of this agency".to_owned());
                }
            },
        }
    }
    if new.agent_two_id.is_some()
        && new.agent_two_id.as_deref().map(str::trim) == Some(new.agent_one_id.trim())
    {
        errors.insert("agent_two_id", "must differ from agent_one_id".to_owned());
    }
    Checked {
        address,
        notes,
        package,
        people,
        errors,
    }
}
