//! A listing as stored: its record, its columns, the lookup of a tenant's
//! listing by number (in a transaction or on the pool), and the `data` its
//! events carry.

use serde_json::json;
use sqlx::types::Json;

use crate::ids::{AgencyId, ListingId, UserId};
use crate::rules::listing_status::ListingStatus;
use crate::rules::sections::FloorplanFile;
use crate::{Entity, Environment, Result, StorageError, Tenant, Timestamp};

/// A listing.
#[derive(Clone, Debug)]
pub struct Listing {
    /// Internal id.
    pub id: ListingId,
    /// Owning agency.
    pub agency_id: AgencyId,
    /// Live or sandbox.
    pub environment: Environment,
    /// The public slug.
    pub listing_number: String,
    /// Current status.
    pub status: ListingStatus,
    /// Street address.
    pub address: String,
    /// The listing's owner.
    pub owner_user_id: UserId,
    /// First agent.
    pub agent_one_id: UserId,
    /// Second agent.
    pub agent_two_id: Option<UserId>,
    /// Package key.
    pub package: String,
    /// Free-form notes.
    pub notes: Option<String>,
    /// When the invoice was paid and the listing activated.
    pub activated_at: Option<Timestamp>,
    /// When the listing was billed.
    pub billed_at: Option<Timestamp>,
    /// The 3D-tour section.
    pub tour3d_url: Option<String>,
    /// The floorplan section.
    pub floorplan: Vec<FloorplanFile>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

impl Listing {
    /// Activated and billed: status changes are allowed.
    pub fn is_activated(&self) -> bool {
        self.activated_at.is_some() && self.billed_at.is_some()
    }

    /// The tenant it belongs to.
    pub(crate) fn tenant(&self) -> Tenant {
        Tenant::new(self.agency_id.clone(), self.environment)
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ListingRow {
    id: ListingId,
    agency_id: AgencyId,
    is_sandbox: bool,
    listing_number: String,
    status: String,
    address: String,
    owner_user_id: UserId,
    agent_one_id: UserId,
    agent_two_id: Option<UserId>,
    package: String,
    notes: Option<String>,
    activated_at: Option<Timestamp>,
    billed_at: Option<Timestamp>,
    tour3d_url: Option<String>,
    floorplan: Json<Vec<FloorplanFile>>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl ListingRow {
    /// Whether it was created after `instant`.
    pub(crate) fn created_after(&self, instant: Timestamp) -> bool {
        self.created_at > instant
    }

    /// Whether it belongs to `environment`.
    pub(crate) fn belongs_to(&self, environment: Environment) -> bool {
        self.is_sandbox == environment.is_sandbox()
    }
}

impl TryFrom<ListingRow> for Listing {
    type Error = StorageError;

    fn try_from(row: ListingRow) -> Result<Self> {
        let status = ListingStatus::from_key(&row.status)
            .ok_or_else(|| StorageError::Corrupt(format!("listing status {}", row.status)))?;
        Ok(Self {
            id: row.id,
            agency_id: row.agency_id,
            environment: Environment::from_sandbox_flag(row.is_sandbox),
            listing_number: row.listing_number,
            status,
            address: row.address,
            owner_user_id: row.owner_user_id,
            agent_one_id: row.agent_one_id,
            agent_two_id: row.agent_two_id,
            package: row.package,
            notes: row.notes,
            activated_at: row.activated_at,
            billed_at: row.billed_at,
            tour3d_url: row.tour3d_url,
            floorplan: row.floorplan.0,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

pub(crate) const LISTING_COLUMNS: &str = "id, agency_id, is_sandbox, listing_number, status, address, \
     owner_user_id, agent_one_id, agent_two_id, package, notes, activated_at, billed_at, tour3d_url, \
     floorplan, created_at, updated_at";

/// Reads the tenant's listing by number with the given executor.
macro_rules! fetch_listing {
    ($executor:expr, $tenant:expr, $number:expr) => {{
        let tenant: &$crate::Tenant = $tenant;
        sqlx::query_as::<_, $crate::records::listing::ListingRow>(sqlx::AssertSqlSafe(format!(
            "select {} from listings where agency_id = $1 and is_sandbox = $2 and listing_number = $3",
            $crate::records::listing::LISTING_COLUMNS
        )))
        .bind(&tenant.agency_id)
        .bind(tenant.environment.is_sandbox())
        .bind($number)
        .fetch_optional($executor)
    }};
}
pub(crate) use fetch_listing;

/// Turns a fetched row into a listing, or `NotFound`.
pub(crate) fn found(row: Option<ListingRow>) -> Result<Listing> {
    row.ok_or(StorageError::NotFound(Entity::Listing))?
        .try_into()
}

/// The `data` of listing events: what identifies and describes the listing.
pub fn listing_event_data(listing: &Listing) -> serde_json::Value {
    json!({
        "listing_number": listing.listing_number,
        "status": listing.status.display(),
        "address": listing.address,
        "owner_user_id": listing.owner_user_id,
        "agent_one_id": listing.agent_one_id,
        "agent_two_id": listing.agent_two_id,
        "package": listing.package,
    })
}
