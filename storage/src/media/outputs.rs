//! A media item's focal point and its delivery profiles' outputs: reading
//! them with the item, and setting the focal point.

use crate::db::{in_transaction, on_pool, write_on_pool};
use crate::ids::{DeliveryProfileId, MediaId};
use crate::rules::delivery_profiles::{Fit, ProfileOutput};
use crate::{Entity, Result, StorageError, Tenant};

use super::item::{FocalPoint, MediaItem, MediaOutput, MediaStatus, OutputStatus};
use super::{Media, StorageKey};

#[derive(sqlx::FromRow)]
struct OutputRow {
    media_id: MediaId,
    profile_id: DeliveryProfileId,
    name: String,
    profile_revision: i64,
    status: String,
    focal_x: Option<f64>,
    focal_y: Option<f64>,
    object_key: Option<StorageKey>,
    format: String,
    width: Option<i32>,
    height: Option<i32>,
    size_bytes: Option<i64>,
    failure_reason: Option<String>,
}

const OUTPUT_COLUMNS: &str = "media_id, profile_id, name, profile_revision, status, focal_x, \
     focal_y, object_key, format, width, height, size_bytes, failure_reason";

/// A profile sweep's next batch of the tenant's photos, in id order.
pub(crate) const PHOTOS_AFTER_SQL: &str = "select id from media_items
     where agency_id = $1 and is_sandbox = $2 and id > $3
       and media_type in ('jpeg', 'png', 'webp', 'gif') and enable_optimization and status <> 'failed'
     order by id limit $4";

/// One output as a worker made it (or failed to).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedOutput {
    /// Its name in its profile.
    pub name: String,
    /// The profile's revision it was made from.
    pub profile_revision: i64,
    /// The focal point a `cover` crop was made around; `None` for `contain`.
    pub focal_point: Option<(f64, f64)>,
    /// Where it is stored; `None` when it failed.
    pub object_key: Option<StorageKey>,
    /// `jpeg`, `webp` or `avif`.
    pub format: String,
    /// Pixels.
    pub width: Option<i32>,
    /// Pixels.
    pub height: Option<i32>,
    /// Bytes.
    pub size_bytes: Option<i64>,
    /// Why it could not be made.
    pub failure_reason: Option<String>,
}

/// Whether an item has outputs: a photo uploaded with optimisation on
/// (it gets variants) whose processing did not fail.
pub fn renders_outputs(item: &MediaItem) -> bool {
    item.media_type.is_image() && item.enable_optimization && item.status != MediaStatus::Failed
}

/// Whether a rendered output of `output` is current for `item`: made from
/// the profile's `revision` and, for a crop, around the item's focal point.
fn is_current(row: &OutputRow, revision: i64, output: &ProfileOutput, item: &MediaItem) -> bool {
    let same_focus = || match (output.fit, item.focal_point) {
        (Fit::Contain, _) => true,
        (Fit::Cover, Some(point)) => row.focal_x == Some(point.x) && row.focal_y == Some(point.y),
        (Fit::Cover, None) => row.focal_x.is_none(),
    };
    row.profile_revision == revision && same_focus()
}

impl Media<'_> {
    /// Attaches every item's outputs: each output of the tenant's active
    /// profiles, rendered and current, failed, or pending (not rendered
    /// yet, or rendered from an older revision or around another focal
    /// point). The rendered ones are read in one query (the ids go in as
    /// one JSON array, as for the variants).
    pub(super) async fn attach_outputs(
        &self,
        tenant: &Tenant,
        items: &mut [MediaItem],
        ids: &str,
    ) -> Result<()> {
        if !items.iter().any(renders_outputs) {
            return Ok(());
        }
        let profiles = self.active_profiles(tenant).await?;
        if profiles.is_empty() {
            return Ok(());
        }
        let rows: Vec<OutputRow> = match self.store.db() {
            crate::Database::Sqlite(sqlite) => {
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "select {OUTPUT_COLUMNS} from media_outputs
                     where media_id in (select value from json_each($1))"
                )))
                .bind(ids)
                .fetch_all(sqlite.pool())
                .await?
            }
            crate::Database::Postgres(pool) => {
                sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "select {OUTPUT_COLUMNS} from media_outputs
                     where media_id in (select jsonb_array_elements_text($1::jsonb))"
                )))
                .bind(ids)
                .fetch_all(pool)
                .await?
            }
        };
        let rows: std::collections::HashMap<(&str, &str, &str), &OutputRow> = rows
            .iter()
            .map(|row| {
                (
                    (
                        row.media_id.as_str(),
                        row.profile_id.as_str(),
                        row.name.as_str(),
                    ),
                    row,
                )
            })
            .collect();
        for item in items.iter_mut().filter(|item| renders_outputs(item)) {
            for profile in &profiles {
                for output in &profile.outputs {
                    let key = (item.id.as_str(), profile.id.as_str(), output.name.as_str());
                    let row = rows.get(&key).copied();
                    let current = row.filter(|row| is_current(row, profile.revision, output, item));
                    let listed = match current {
                        Some(row) => MediaOutput {
                            profile_id: profile.id.clone(),
                            name: output.name.clone(),
                            profile_revision: row.profile_revision,
                            status: OutputStatus::parse(&row.status).ok_or_else(|| {
                                StorageError::Corrupt(format!("output status {}", row.status))
                            })?,
                            object_key: row.object_key.clone(),
                            format: row.format.clone(),
                            width: row.width,
                            height: row.height,
                            size_bytes: row.size_bytes,
                            failure_reason: row.failure_reason.clone(),
                        },
                        None => MediaOutput {
                            profile_id: profile.id.clone(),
                            name: output.name.clone(),
                            profile_revision: profile.revision,
                            status: OutputStatus::Pending,
                            object_key: None,
                            format: output.format.as_str().to_owned(),
                            width: None,
                            height: None,
                            size_bytes: None,
                            failure_reason: None,
                        },
                    };
                    item.outputs.push(listed);
                }
            }
        }
        Ok(())
    }

    /// How many photos of the tenant get outputs (a sweep's total; read
    /// once when the sweep starts).
    pub async fn photo_count(&self, tenant: &Tenant) -> Result<u64> {
        let count: i64 = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "select count(*) from media_items
                 where agency_id = $1 and is_sandbox = $2
                   and media_type in ('jpeg', 'png', 'webp', 'gif') and enable_optimization
                   and status <> 'failed'",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_one(pool)
            .await?
        });
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Up to `limit` photos of the tenant after `after`, in id order: a
    /// sweep's next batch.
    pub async fn photos_after(
        &self,
        tenant: &Tenant,
        after: Option<&MediaId>,
        limit: u32,
    ) -> Result<Vec<MediaId>> {
        Ok(on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(PHOTOS_AFTER_SQL)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(after.map_or("", MediaId::as_str))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        }))
    }

    /// Records a rendered (or failed) output of `profile` for an item,
    /// replacing the one before. The focal point is the one a `cover` crop
    /// was made around (`None` for `contain`). Returns the object key the
    /// replaced output had, when it differs, for the caller to remove.
    pub async fn record_output(
        &self,
        id: &MediaId,
        profile: &DeliveryProfileId,
        made: &RecordedOutput,
    ) -> Result<Option<StorageKey>> {
        let now = self.store.clock().now();
        let replaced: Option<Option<StorageKey>> = in_transaction!(self.store.db(), |tx| {
            let before: Option<Option<StorageKey>> = sqlx::query_scalar(
                "select object_key from media_outputs where media_id = $1 and profile_id = $2 and name = $3",
            )
            .bind(id)
            .bind(profile)
            .bind(&made.name)
            .fetch_optional(&mut *tx)
            .await?;
            sqlx::query(
                "insert into media_outputs (media_id, profile_id, name, profile_revision, status, focal_x, focal_y,
                     object_key, format, width, height, size_bytes, failure_reason, updated_at)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 on conflict (media_id, profile_id, name) do update set
                     profile_revision = excluded.profile_revision, status = excluded.status,
                     focal_x = excluded.focal_x, focal_y = excluded.focal_y,
                     object_key = excluded.object_key, format = excluded.format,
                     width = excluded.width, height = excluded.height,
                     size_bytes = excluded.size_bytes, failure_reason = excluded.failure_reason,
                     updated_at = excluded.updated_at",
            )
            .bind(id)
            .bind(profile)
            .bind(&made.name)
            .bind(made.profile_revision)
            .bind(if made.failure_reason.is_some() { "failed" } else { "ready" })
            .bind(made.focal_point.map(|p| p.0))
            .bind(made.focal_point.map(|p| p.1))
            .bind(&made.object_key)
            .bind(&made.format)
            .bind(made.width)
            .bind(made.height)
            .bind(made.size_bytes)
            .bind(&made.failure_reason)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            before
        });
        Ok(replaced
            .flatten()
            .filter(|key| Some(key) != made.object_key.as_ref()))
    }

    /// Forgets an item's outputs of `profile` whose names are not in
    /// `names` (outputs the profile no longer has); returns their object
    /// keys for the caller to remove.
    pub async fn drop_other_outputs(
        &self,
        id: &MediaId,
        profile: &DeliveryProfileId,
        names: &[String],
    ) -> Result<Vec<StorageKey>> {
        let names = serde_json::to_string(names).unwrap_or_default();
        let expand = match self.store.db() {
            crate::Database::Sqlite(_) => "select value from json_each($3)",
            crate::Database::Postgres(_) => "select jsonb_array_elements_text($3::jsonb)",
        };
        let sql = format!(
            "delete from media_outputs where media_id = $1 and profile_id = $2
               and name not in ({expand}) returning object_key"
        );
        let keys: Vec<Option<StorageKey>> = write_on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(profile)
                .bind(&names)
                .fetch_all(pool)
                .await?
        });
        Ok(keys.into_iter().flatten().collect())
    }

    /// Sets an item's focal point as the worker measured it, unless a
    /// person placed one.
    pub async fn set_auto_focal_point(
        &self,
        tenant: &Tenant,
        id: &MediaId,
        x: f64,
        y: f64,
    ) -> Result<()> {
        write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update media_items set focal_x = $4, focal_y = $5, focal_source = 'auto'
                 where agency_id = $1 and is_sandbox = $2 and id = $3
                   and (focal_source is null or focal_source = 'auto')",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .bind(x.clamp(0.0, 1.0))
            .bind(y.clamp(0.0, 1.0))
            .execute(pool)
            .await?
            .rows_affected()
        });
        self.changed(tenant);
        Ok(())
    }

    /// Sets an item's focal point. `NotFound` when the tenant has no such
    /// item; `Invalid` when a coordinate is outside 0 to 1.
    pub async fn set_focal_point(
        &self,
        tenant: &Tenant,
        id: &MediaId,
        focal_point: FocalPoint,
    ) -> Result<()> {
        for (field, value) in [
            ("focal_point.x", focal_point.x),
            ("focal_point.y", focal_point.y),
        ] {
            if !FocalPoint::is_coordinate(value) {
                return Err(StorageError::Invalid {
                    field,
                    reason: "must be from 0 to 1".to_owned(),
                });
            }
        }
        let updated = write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update media_items set focal_x = $4, focal_y = $5, focal_source = $6
                 where agency_id = $1 and is_sandbox = $2 and id = $3",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(id)
            .bind(focal_point.x)
            .bind(focal_point.y)
            .bind(focal_point.source.as_str())
            .execute(pool)
            .await?
            .rows_affected()
        });
        if updated == 0 {
            return Err(StorageError::NotFound(Entity::Media));
        }
        self.changed(tenant);
        Ok(())
    }
}
