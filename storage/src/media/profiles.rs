//! An agency's delivery profiles: create, read, list, change and delete,
//! each scoped by the tenant. What a profile may hold is
//! [`crate::rules::delivery_profiles`]; this stores what it accepted.

use crate::db::{in_transaction, on_pool};
use crate::ids::{DeliveryProfileId, MediaId};
use crate::page::{Page, Position};
use crate::rules::delivery_profiles::{MAX_PROFILES, ProfileDraft, ProfileOutput};
use crate::{Entity, Result, StorageError, Tenant, Timestamp};

use super::Media;

/// A stored delivery profile.
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryProfile {
    /// Its id.
    pub id: DeliveryProfileId,
    /// Unique in its agency and environment.
    pub name: String,
    /// What it renders.
    pub outputs: Vec<ProfileOutput>,
    /// Whether new photos are rendered to it and its outputs listed.
    pub active: bool,
    /// 1 at creation, one more at each change: a rendered output names the
    /// revision it was made from.
    pub revision: i64,
    /// Which sweep over the agency's photos is due: one more each time the
    /// outputs change or the profile is resumed (a sweep names its round).
    pub sweep_round: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

#[derive(sqlx::FromRow)]
struct ProfileRow {
    id: DeliveryProfileId,
    name: String,
    outputs: String,
    active: bool,
    revision: i64,
    sweep_round: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const PROFILE_COLUMNS: &str =
    "id, name, outputs, active, revision, sweep_round, created_at, updated_at";

/// Most images [`Media::watermark_candidates`] offers.
pub const MAX_WATERMARK_CANDIDATES: u32 = 50;

/// An agency's images of no listing, newest first: what a profile's
/// watermark may be (a logo is uploaded on its own). Served by the partial
/// index `media_items_loose`, so an agency's listing photos are never read.
pub(crate) const WATERMARK_CANDIDATES_SQL: &str = "select id, filename from media_items
     where agency_id = $1 and is_sandbox = $2 and listing_id is null
       and media_type in ('jpeg', 'png', 'webp', 'gif') and status <> 'failed'
     order by id desc limit $3";

/// An image a profile's watermark may name.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct WatermarkCandidate {
    /// The image.
    pub id: MediaId,
    /// Its file name as uploaded.
    pub filename: String,
}

impl TryFrom<ProfileRow> for DeliveryProfile {
    type Error = StorageError;

    fn try_from(row: ProfileRow) -> Result<Self> {
        let outputs = serde_json::from_str(&row.outputs).map_err(|err| {
            StorageError::Corrupt(format!("delivery profile {} outputs: {err}", row.id))
        })?;
        Ok(Self {
            id: row.id,
            name: row.name,
            outputs,
            active: row.active,
            revision: row.revision,
            sweep_round: row.sweep_round,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

fn outputs_json(outputs: &[ProfileOutput]) -> String {
    serde_json::to_string(outputs).expect("profile outputs serialize")
}

impl Media<'_> {
    /// Stores a checked draft as a new profile. `Conflict { field: "name" }`
    /// when the tenant has a profile of that name; `Invalid` on `name` when
    /// it already keeps [`MAX_PROFILES`].
    pub async fn create_profile(
        &self,
        tenant: &Tenant,
        draft: &ProfileDraft,
        active: bool,
    ) -> Result<DeliveryProfile> {
        let id = DeliveryProfileId::generate();
        let now = self.store.clock().now();
        let outputs = outputs_json(&draft.outputs);
        let sql = format!(
            "insert into delivery_profiles (id, agency_id, is_sandbox, name, outputs, active, revision, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $7, 1, $6, $6) returning {PROFILE_COLUMNS}"
        );
        let row: ProfileRow = in_transaction!(self.store.db(), |tx| {
            // Creates of one agency take turns from here to the commit, so
            // the count below sees every profile committed before: on
            // PostgreSQL the agency's row stays locked until then (SQLite
            // runs one writer at a time anyway).
            sqlx::query("update agencies set id = id where id = $1")
                .bind(&tenant.agency_id)
                .execute(&mut *tx)
                .await?;
            let kept: i64 = sqlx::query_scalar(
                "select count(*) from delivery_profiles where agency_id = $1 and is_sandbox = $2",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_one(&mut *tx)
            .await?;
            if kept >= MAX_PROFILES as i64 {
                return Err(StorageError::Invalid {
                    field: "name",
                    reason: format!(
                        "an agency keeps at most {MAX_PROFILES} delivery profiles per environment; delete one first"
                    ),
                });
            }
            let inserted = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&draft.name)
                .bind(&outputs)
                .bind(now)
                .bind(active)
                .fetch_one(&mut *tx)
                .await;
            match inserted {
                Err(err) if StorageError::is_unique_violation(&err) => {
                    return Err(StorageError::Conflict { field: "name" });
                }
                other => other?,
            }
        });
        // A listing read lists the outputs of the active profiles.
        self.changed(tenant);
        row.try_into()
    }

    /// One of the tenant's profiles.
    pub async fn profile(
        &self,
        tenant: &Tenant,
        id: &DeliveryProfileId,
    ) -> Result<DeliveryProfile> {
        let sql = format!(
            "select {PROFILE_COLUMNS} from delivery_profiles
             where id = $1 and agency_id = $2 and is_sandbox = $3"
        );
        let row: Option<ProfileRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::DeliveryProfile))?
            .try_into()
    }

    /// The tenant's profiles, oldest first. The total is a count of at most
    /// [`MAX_PROFILES`] rows, read through the same index as the page.
    pub async fn profiles(
        &self,
        tenant: &Tenant,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<DeliveryProfile>> {
        let list_sql = format!(
            "select {PROFILE_COLUMNS} from delivery_profiles
             where agency_id = $1 and is_sandbox = $2
               and ($3 is null or (created_at, id) > ($3, $4))
             order by created_at, id limit $5"
        );
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let (rows, total): (Vec<ProfileRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(list_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(after.map(|p| p.created_at))
                .bind(after.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar(
                "select count(*) from delivery_profiles where agency_id = $1 and is_sandbox = $2",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_one(pool)
            .await?;
            (rows, total)
        });
        let profiles = rows
            .into_iter()
            .map(DeliveryProfile::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(profiles, limit, total, |p| {
            Position::after(p.created_at, p.id.as_str())
        }))
    }

    /// The tenant's images of no listing, newest first (at most
    /// [`MAX_WATERMARK_CANDIDATES`]): the logos a watermark may name.
    pub async fn watermark_candidates(&self, tenant: &Tenant) -> Result<Vec<WatermarkCandidate>> {
        Ok(on_pool!(self.store.db(), pool => {
            sqlx::query_as(WATERMARK_CANDIDATES_SQL)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(i64::from(MAX_WATERMARK_CANDIDATES))
                .fetch_all(pool)
                .await?
        }))
    }

    /// The tenant's active profiles (at most [`MAX_PROFILES`]), oldest
    /// first: what a new photo is rendered to.
    pub async fn active_profiles(&self, tenant: &Tenant) -> Result<Vec<DeliveryProfile>> {
        let sql = format!(
            "select {PROFILE_COLUMNS} from delivery_profiles
             where agency_id = $1 and is_sandbox = $2 and active
             order by created_at, id"
        );
        let rows: Vec<ProfileRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(DeliveryProfile::try_from).collect()
    }

    /// Replaces a profile's name, outputs and activity with a checked
    /// draft; its revision moves on when its outputs change (a rename or a
    /// pause renders nothing again), and its sweep round when its outputs
    /// change or it is resumed. `Conflict { field: "name" }` when
    /// another profile of the tenant has that name.
    pub async fn update_profile(
        &self,
        tenant: &Tenant,
        id: &DeliveryProfileId,
        draft: &ProfileDraft,
        active: bool,
    ) -> Result<DeliveryProfile> {
        let now = self.store.clock().now();
        let outputs = outputs_json(&draft.outputs);
        let sql = format!(
            "update delivery_profiles set name = $4, outputs = $5, active = $7,
                 revision = case when outputs = $5 then revision else revision + 1 end,
                 sweep_round = case when outputs <> $5 or (not active and $7) then sweep_round + 1
                                    else sweep_round end,
                 updated_at = $6
             where id = $1 and agency_id = $2 and is_sandbox = $3
             returning {PROFILE_COLUMNS}"
        );
        let row: Option<ProfileRow> = in_transaction!(self.store.db(), |tx| {
            let updated = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&draft.name)
                .bind(&outputs)
                .bind(now)
                .bind(active)
                .fetch_optional(&mut *tx)
                .await;
            match updated {
                Err(err) if StorageError::is_unique_violation(&err) => {
                    return Err(StorageError::Conflict { field: "name" });
                }
                other => other?,
            }
        });
        self.changed(tenant);
        row.ok_or(StorageError::NotFound(Entity::DeliveryProfile))?
            .try_into()
    }

    /// Deletes a profile and the record of its rendered outputs; returns
    /// the object keys those outputs were stored under, for the caller to
    /// remove. `NotFound` when the tenant has no such profile.
    pub async fn delete_profile(
        &self,
        tenant: &Tenant,
        id: &DeliveryProfileId,
    ) -> Result<Vec<String>> {
        let deleted: Option<Vec<String>> = in_transaction!(self.store.db(), |tx| {
            let found: Option<String> = sqlx::query_scalar(
                "select id from delivery_profiles where id = $1 and agency_id = $2 and is_sandbox = $3",
            )
            .bind(id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_optional(&mut *tx)
            .await?;
            if found.is_none() {
                None
            } else {
                let keys: Vec<Option<String>> = sqlx::query_scalar(
                    "delete from media_outputs where profile_id = $1 returning object_key",
                )
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
                sqlx::query("delete from delivery_profiles where id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                Some(keys.into_iter().flatten().collect())
            }
        });
        self.changed(tenant);
        deleted.ok_or(StorageError::NotFound(Entity::DeliveryProfile))
    }
}
