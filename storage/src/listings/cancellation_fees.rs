//! Owners' cancellation fee tiers as stored: set by operators, read by the
//! cancellation (in its transaction) and by the detail read's cutoff.

use crate::db::{Tx, in_transaction, on_pool, on_tx};
use crate::ids::{AgencyId, UserId};
use crate::rules::cancellation::{FeeTier, default_tiers};
use crate::{Result, StorageError, Store};

/// Repository of owners' fee tiers; see [`Store::cancellation_fees`].
pub struct CancellationFees<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Owners' cancellation fee tiers.
    pub fn cancellation_fees(&self) -> CancellationFees<'_> {
        CancellationFees { store: self }
    }
}

impl CancellationFees<'_> {
    /// Replaces the owner's tiers (an empty list restores the default).
    pub async fn set(&self, agency: &AgencyId, owner: &UserId, tiers: &[FeeTier]) -> Result<()> {
        for tier in tiers {
            if tier.hours_before <= 0 || tier.amount < 0 {
                return Err(StorageError::Invalid {
                    field: "tiers",
                    reason: "hours_before must be positive and amount not negative".to_owned(),
                });
            }
        }
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "delete from cancellation_fee_tiers where agency_id = $1 and owner_user_id = $2",
            )
            .bind(agency)
            .bind(owner)
            .execute(&mut *tx)
            .await?;
            for tier in tiers {
                let inserted = sqlx::query(
                    "insert into cancellation_fee_tiers (agency_id, owner_user_id, hours_before, amount, currency)
                     values ($1, $2, $3, $4, $5)",
                )
                .bind(agency)
                .bind(owner)
                .bind(tier.hours_before)
                .bind(tier.amount)
                .bind(&tier.currency)
                .execute(&mut *tx)
                .await;
                match inserted {
                    Ok(_) => {}
                    Err(err) if StorageError::is_foreign_key_violation(&err) => {
                        return Err(StorageError::Invalid {
                            field: "owner",
                            reason: "does not name a user of this agency".to_owned(),
                        });
                    }
                    Err(err) if StorageError::is_unique_violation(&err) => {
                        return Err(StorageError::Invalid {
                            field: "tiers",
                            reason: "two tiers have the same hours_before".to_owned(),
                        });
                    }
                    Err(err) => return Err(err.into()),
                }
            }
        });
        // Fee tiers move the no-fee cutoff of every listing the owner has.
        self.store.listing_cache().invalidate_agency(agency);
        Ok(())
    }

    /// The owner's tiers, or the default when none are set.
    pub async fn for_owner(&self, agency: &AgencyId, owner: &UserId) -> Result<Vec<FeeTier>> {
        let rows: Vec<TierRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(OWNER_TIERS).bind(agency).bind(owner).fetch_all(pool).await?
        });
        Ok(tiers_or_default(rows))
    }
}

/// An owner's stored tiers, largest first.
const OWNER_TIERS: &str = "select hours_before, amount, currency from cancellation_fee_tiers
     where agency_id = $1 and owner_user_id = $2 order by hours_before desc";

/// `hours_before`, `amount`, `currency`.
type TierRow = (i64, i64, String);

fn tiers_or_default(rows: Vec<TierRow>) -> Vec<FeeTier> {
    if rows.is_empty() {
        return default_tiers();
    }
    rows.into_iter()
        .map(|(hours_before, amount, currency)| FeeTier {
            hours_before,
            amount,
            currency,
        })
        .collect()
}

/// The owner's tiers (or the default), read in the lender's transaction.
pub(crate) async fn tiers_in<'c>(
    tx: impl Into<Tx<'c>>,
    agency: &AgencyId,
    owner: &UserId,
) -> Result<Vec<FeeTier>> {
    let rows: Vec<TierRow> = on_tx!(tx.into(), conn => {
        sqlx::query_as(OWNER_TIERS).bind(agency).bind(owner).fetch_all(&mut *conn).await?
    });
    Ok(tiers_or_default(rows))
}
