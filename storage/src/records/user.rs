//! A person of an agency as stored: their role, record and columns, the
//! insertion several repositories share (user and agency creation), and the
//! shape of a login email.

use crate::ids::{AgencyId, UserId};
use crate::{Result, StorageError, Timestamp};

pub use crate::rules::emails::{MAX_EMAIL_LEN, MAX_NAME_LEN, normalise_email};
pub use crate::rules::roles::Role;

/// A user.
#[derive(Clone, Debug)]
pub struct User {
    /// Its id.
    pub id: UserId,
    /// The agency the user belongs to.
    pub agency_id: AgencyId,
    /// Its role.
    pub role: Role,
    /// Lower-cased login email, if any.
    pub email: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// The user's manager in the agency hierarchy.
    pub manager_id: Option<UserId>,
    /// False once deactivated.
    pub is_active: bool,
    /// When the user was created.
    pub created_at: Timestamp,
}

#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    pub(crate) id: UserId,
    pub(crate) agency_id: AgencyId,
    pub(crate) role: String,
    pub(crate) email: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) manager_id: Option<UserId>,
    pub(crate) is_active: bool,
    pub(crate) created_at: Timestamp,
}

impl TryFrom<UserRow> for User {
    type Error = StorageError;

    fn try_from(row: UserRow) -> Result<Self> {
        let role = Role::parse(&row.role)
            .ok_or_else(|| StorageError::Corrupt(format!("role {}", row.role)))?;
        Ok(Self {
            id: row.id,
            agency_id: row.agency_id,
            role,
            email: row.email,
            name: row.name,
            manager_id: row.manager_id,
            is_active: row.is_active,
            created_at: row.created_at,
        })
    }
}

pub(crate) const USER_COLUMNS: &str =
    "id, agency_id, role, email, name, manager_id, is_active, created_at";

/// Inserts a `User` with the given executor; shared by user and agency creation
/// so the owner row and the agency row commit together.
macro_rules! insert_user {
    ($executor:expr, $user:expr) => {{
        let user: &$crate::records::user::User = $user;
        sqlx::query(
            "insert into users (id, agency_id, role, email, name, manager_id, is_active, created_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&user.id)
        .bind(&user.agency_id)
        .bind(user.role.as_str())
        .bind(&user.email)
        .bind(&user.name)
        .bind(&user.manager_id)
        .bind(user.is_active)
        .bind(user.created_at)
        .execute($executor)
    }};
}
pub(crate) use insert_user;
