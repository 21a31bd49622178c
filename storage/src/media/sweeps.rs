//! A delivery profile's sweep over the agency's photos: its round (one more
//! each time the outputs change or the profile is resumed) is swept when
//! its last batch ran; an active profile whose round is not swept is found
//! by the maintenance, which pushes the round's first batch once more in
//! case that push was lost (the queue drops it when it still holds it).

use crate::db::{on_pool, write_on_pool};
use crate::ids::{AgencyId, DeliveryProfileId};
use crate::{Environment, Result, Tenant, Timestamp};

use super::Media;

/// The active profiles whose sweep round has not been swept, changed before
/// `$1`, oldest change first. Served by the partial index
/// `delivery_profiles_unswept`, which holds only such profiles.
pub(crate) const UNSWEPT_PROFILES_SQL: &str =
    "select agency_id, is_sandbox, id, revision, sweep_round from delivery_profiles
     where active and swept_round < sweep_round and updated_at < $1
     order by updated_at limit $2";

/// A profile whose sweep has not finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsweptProfile {
    /// Whose it is.
    pub tenant: Tenant,
    /// The profile.
    pub profile_id: DeliveryProfileId,
    /// The revision to sweep.
    pub revision: i64,
    /// The round of the sweep.
    pub sweep_round: i64,
}

impl Media<'_> {
    /// Records that the sweep of `round` went over every photo (nothing
    /// when the profile has begun another round since).
    pub async fn finish_sweep(
        &self,
        tenant: &Tenant,
        profile_id: &DeliveryProfileId,
        round: i64,
    ) -> Result<()> {
        write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update delivery_profiles set swept_round = $4
                 where agency_id = $1 and is_sandbox = $2 and id = $3 and sweep_round = $4",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(profile_id)
            .bind(round)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(())
    }

    /// Up to `limit` active profiles, changed before `before`, whose sweep
    /// round has not been swept.
    pub async fn unswept_profiles(
        &self,
        before: Timestamp,
        limit: u32,
    ) -> Result<Vec<UnsweptProfile>> {
        let rows: Vec<(AgencyId, bool, DeliveryProfileId, i64, i64)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(UNSWEPT_PROFILES_SQL)
                .bind(before)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(
                |(agency_id, is_sandbox, profile_id, revision, sweep_round)| UnsweptProfile {
                    tenant: Tenant::new(agency_id, Environment::from_sandbox_flag(is_sandbox)),
                    profile_id,
                    revision,
                    sweep_round,
                },
            )
            .collect())
    }
}
