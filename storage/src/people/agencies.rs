//! Agencies (the tenants) and the owner user each one is created with.

use std::collections::BTreeMap;

use sqlx::types::Json;

use crate::db::{in_transaction, on_pool, write_on_pool};
use crate::ids::{AgencyId, UserId};
use crate::records::user::{Role, User};
use crate::{Entity, Result, StorageError, Store, Timestamp};

/// What kind of business an agency is; its owner user has the matching role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgencyKind {
    /// A real-estate media agency (photography, tours).
    MediaAgency,
    /// A brokerage.
    Broker,
}

impl AgencyKind {
    /// `media_agency` or `broker`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MediaAgency => "media_agency",
            Self::Broker => "broker",
        }
    }

    /// Parses the stored or configured name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "media_agency" => Some(Self::MediaAgency),
            "broker" => Some(Self::Broker),
            _ => None,
        }
    }

    /// The role of the agency's owner user.
    pub const fn owner_role(self) -> Role {
        match self {
            Self::MediaAgency => Role::MediaAgency,
            Self::Broker => Role::Broker,
        }
    }
}

/// An agency.
#[derive(Clone, Debug)]
pub struct Agency {
    /// Its id.
    pub id: AgencyId,
    /// Display name.
    pub name: String,
    /// Media agency or broker.
    pub kind: AgencyKind,
    /// When it was created.
    pub created_at: Timestamp,
}

#[derive(sqlx::FromRow)]
struct AgencyRow {
    id: AgencyId,
    name: String,
    kind: String,
    created_at: Timestamp,
}

impl TryFrom<AgencyRow> for Agency {
    type Error = StorageError;

    fn try_from(row: AgencyRow) -> Result<Self> {
        let kind = AgencyKind::parse(&row.kind)
            .ok_or_else(|| StorageError::Corrupt(format!("agency kind {}", row.kind)))?;
        Ok(Self {
            id: row.id,
            name: row.name,
            kind,
            created_at: row.created_at,
        })
    }
}

/// Longest agency name accepted.
const MAX_NAME_LEN: usize = 200;

/// Agency repository; see [`Store::agencies`].
pub struct Agencies<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Agencies and their owners.
    pub fn agencies(&self) -> Agencies<'_> {
        Agencies { store: self }
    }
}

impl Agencies<'_> {
    /// Creates an agency and its owner user (role = the agency kind) in one
    /// transaction: there is never an agency without an owner.
    pub async fn create(&self, name: &str, kind: AgencyKind) -> Result<(Agency, User)> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
            return Err(StorageError::Invalid {
                field: "name",
                reason: format!("must be 1 to {MAX_NAME_LEN} characters"),
            });
        }
        let now = self.store.clock().now();
        let agency = Agency {
            id: AgencyId::generate(),
            name: name.to_owned(),
            kind,
            created_at: now,
        };
        let owner = User {
            id: UserId::generate(),
            agency_id: agency.id.clone(),
            role: kind.owner_role(),
            email: None,
            name: Some(agency.name.clone()),
            manager_id: None,
            is_active: true,
            created_at: now,
        };
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into agencies (id, name, kind, created_at) values ($1, $2, $3, $4)",
            )
            .bind(&agency.id)
            .bind(&agency.name)
            .bind(kind.as_str())
            .bind(agency.created_at)
            .execute(&mut *tx)
            .await?;
            crate::records::user::insert_user!(&mut *tx, &owner).await?;
        });
        Ok((agency, owner))
    }

    /// The agency with this id.
    pub async fn get(&self, id: &AgencyId) -> Result<Agency> {
        let row: Option<AgencyRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as("select id, name, kind, created_at from agencies where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::Agency))?
            .try_into()
    }

    /// The agency's budget overrides (budget name → requests per minute).
    pub async fn rate_limit_overrides(&self, id: &AgencyId) -> Result<BTreeMap<String, u32>> {
        let row: Option<(Json<BTreeMap<String, u32>>,)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as("select rate_limit_overrides from agencies where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(overrides,)| overrides.0).unwrap_or_default())
    }

    /// Replaces the agency's budget overrides (budget name → requests per minute).
    pub async fn set_rate_limit_overrides(
        &self,
        id: &AgencyId,
        overrides: &BTreeMap<String, u32>,
    ) -> Result<()> {
        let updated = write_on_pool!(self.store.db(), pool => {
            sqlx::query("update agencies set rate_limit_overrides = $1 where id = $2")
                .bind(Json(overrides))
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated == 0 {
            return Err(StorageError::NotFound(Entity::Agency));
        }
        Ok(())
    }

    /// The agency's owner: its oldest user whose role matches the agency kind.
    pub async fn owner(&self, id: &AgencyId) -> Result<User> {
        let agency = self.get(id).await?;
        self.store
            .users()
            .oldest_with_role(id, agency.kind.owner_role())
            .await?
            .ok_or(StorageError::NotFound(Entity::AgencyOwner))
    }
}
