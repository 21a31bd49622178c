//! What a new account's fields must be, checked without the database: a
//! valid login email, a role that is neither an owner's nor a platform
//! role, a password by the rules (or none, to choose one at first login),
//! and names of at most 200 characters. Every problem is collected by field;
//! whether the email is taken is the repository's to find.

use std::collections::BTreeMap;

use crate::ids::UserId;
use crate::rules::emails::normalise_email;
use crate::rules::passwords::password_problem;
use crate::rules::roles::Role;

/// Longest free-text account field.
pub const MAX_FIELD_CHARS: usize = 200;

/// What creating an account takes.
#[derive(Clone, Debug, Default)]
pub struct NewAccount {
    /// Login email (required).
    pub email: String,
    /// The password, or `None` to force a reset at first login.
    pub password: Option<String>,
    /// The role (not an owner or platform role).
    pub role: Option<Role>,
    /// Display name.
    pub name: Option<String>,
    /// Given name.
    pub first_name: Option<String>,
    /// Family name.
    pub last_name: Option<String>,
    /// Brokerage.
    pub brokerage_name: Option<String>,
    /// Office.
    pub office_name: Option<String>,
    /// Manager in the agency's hierarchy.
    pub manager_id: Option<UserId>,
    /// Without a password: where the e-mailed link to choose one points. A
    /// link is then issued in the same transaction as the account.
    pub password_link_base: Option<String>,
}

/// The new account's login email, normalised (none when it is not one),
/// and every problem of its fields, by field.
pub fn check(new: &NewAccount) -> (Option<String>, BTreeMap<&'static str, String>) {
    let mut problems = BTreeMap::new();
    let email = normalise_email(&new.email);
    if email.is_none() {
        problems.insert("email", "is not a valid email address".to_owned());
    }
    match new.role {
        None => {
            problems.insert("role", "is required".to_owned());
        }
        Some(role) if role.is_administrator() => {
            problems.insert(
                "role",
                "owner and platform roles are not created through the API".to_owned(),
            );
        }
        Some(_) => {}
    }
    if let Some(problem) = new.password.as_deref().and_then(password_problem) {
        problems.insert("password", problem.to_owned());
    }
    for (field, value) in [
        ("name", &new.name),
        ("first_name", &new.first_name),
        ("last_name", &new.last_name),
        ("brokerage_name", &new.brokerage_name),
        ("office_name", &new.office_name),
    ] {
        if value
            .as_ref()
            .is_some_and(|v| v.chars().count() > MAX_FIELD_CHARS)
        {
            problems.insert(
                field,
                format!("must be at most {MAX_FIELD_CHARS} characters"),
            );
        }
    }
    (email, problems)
}
