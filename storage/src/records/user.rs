//! A person of an agency as stored: their role, record and columns, the
//! insertion several repositories share (user and agency creation), and the
//! shape of a login email.

use crate::ids::{AgencyId, UserId};
use crate::{Result, StorageError, Timestamp};

/// The roles of the specification. `super_admin` and `admin` are platform roles:
/// they are never listed among an agency's people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Platform super administrator.
    SuperAdmin,
    /// Platform administrator.
    Admin,
    /// Owner of a media agency.
    MediaAgency,
    /// Owner of a brokerage.
    Broker,
    /// Photographer.
    Photographer,
    /// Listing agent.
    Agent,
    /// Assistant to an agent or broker.
    Assistant,
    /// Read-only member.
    Viewer,
}

impl Role {
    /// Every role, in the specification's order.
    pub const ALL: [Role; 8] = [
        Role::SuperAdmin,
        Role::Admin,
        Role::MediaAgency,
        Role::Broker,
        Role::Photographer,
        Role::Agent,
        Role::Assistant,
        Role::Viewer,
    ];

    /// The wire and column name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SuperAdmin => "super_admin",
            Self::Admin => "admin",
            Self::MediaAgency => "media_agency",
            Self::Broker => "broker",
            Self::Photographer => "photographer",
            Self::Agent => "agent",
            Self::Assistant => "assistant",
            Self::Viewer => "viewer",
        }
    }

    /// Parses a wire or column name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == text)
    }

    /// True for the platform roles `super_admin` and `admin`.
    pub const fn is_platform(self) -> bool {
        matches!(self, Self::SuperAdmin | Self::Admin)
    }

    /// True for the roles that administer an agency: the platform roles and
    /// the agency owners' (`media_agency`, `broker`).
    pub const fn is_administrator(self) -> bool {
        matches!(
            self,
            Self::SuperAdmin | Self::Admin | Self::MediaAgency | Self::Broker
        )
    }

    /// Rank in the role order, highest first: super_admin, admin,
    /// media_agency, broker, photographer, agent, assistant, viewer.
    pub const fn rank(self) -> u8 {
        match self {
            Self::SuperAdmin => 7,
            Self::Admin => 6,
            Self::MediaAgency => 5,
            Self::Broker => 4,
            Self::Photographer => 3,
            Self::Agent => 2,
            Self::Assistant => 1,
            Self::Viewer => 0,
        }
    }
}

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

/// Longest email accepted (RFC 5321 path limit).
pub const MAX_EMAIL_LEN: usize = 254;
/// Longest display name accepted.
pub(crate) const MAX_NAME_LEN: usize = 200;

/// Checks the shape of an email address and returns it lower-cased. Deliberately
/// simple: one `@`, a non-empty local part, a dotted domain, no whitespace.
pub fn normalise_email(email: &str) -> Option<String> {
    let email = email.trim();
    if email.len() > MAX_EMAIL_LEN || email.chars().any(char::is_whitespace) {
        return None;
    }
    let (local, domain) = email.split_once('@')?;
    let domain_ok = !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.');
    (!local.is_empty() && domain_ok).then(|| email.to_lowercase())
}
