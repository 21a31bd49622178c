//! The no-fee cancellation window: an owner's fee tiers and the cutoff they
//! put before a scheduled shoot.

use crate::db::{Tx, in_transaction, on_pool, on_tx};
use crate::ids::{AgencyId, UserId};
use crate::{Result, StorageError, Store, Timestamp};

/// One tier of an owner's cancellation fees: cancelling within `hours_before`
/// of the shoot costs `amount`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeeTier {
    /// Hours before the shoot from which this fee applies.
    pub hours_before: i64,
    /// Fee in minor units.
    pub amount: i64,
    /// ISO 4217 currency.
    pub currency: String,
}

/// The tier of an owner who has not set any: a fee inside 24 hours.
pub fn default_tiers() -> Vec<FeeTier> {
    vec![FeeTier {
        hours_before: 24,
        amount: 5_000,
        currency: "USD".to_owned(),
    }]
}

/// The last instant a listing can be cancelled without a fee: the shoot time
/// minus the largest `hours_before`. No shoot means no cutoff (always free).
pub fn no_fee_cutoff(scheduled_at: Option<Timestamp>, tiers: &[FeeTier]) -> Option<Timestamp> {
    let scheduled_at = scheduled_at?;
    let hours = tiers
        .iter()
        .map(|tier| tier.hours_before)
        .max()
        .unwrap_or(0);
    Some(scheduled_at.plus_seconds(-hours.saturating_mul(3600)))
}

/// Whether cancelling at `now` is inside the no-fee window (at or before the cutoff).
pub fn within_window(now: Timestamp, cutoff: Option<Timestamp>) -> bool {
    cutoff.is_none_or(|cutoff| now <= cutoff)
}

/// Repository of owners' fee tiers; see [`Store::cancellation_fees`].
pub struct CancellationFees<'a> {
    pub(crate) store: &'a Store,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(hours_before: i64) -> FeeTier {
        FeeTier {
            hours_before,
            amount: 100,
            currency: "USD".into(),
        }
    }

    #[test]
    fn the_largest_tier_sets_the_cutoff() {
        let shoot = Timestamp::from_micros(100 * 3_600_000_000);
        let cutoff = no_fee_cutoff(Some(shoot), &[tier(24), tier(48), tier(2)]).unwrap();
        assert_eq!(cutoff, shoot.plus_seconds(-48 * 3600));
    }

    #[test]
    fn the_cutoff_instant_itself_is_inside_the_window() {
        let cutoff = Some(Timestamp::from_micros(1_000));
        assert!(within_window(Timestamp::from_micros(999), cutoff));
        assert!(within_window(Timestamp::from_micros(1_000), cutoff));
        assert!(!within_window(Timestamp::from_micros(1_001), cutoff));
    }

    #[test]
    fn no_shoot_means_no_cutoff() {
        assert_eq!(no_fee_cutoff(None, &default_tiers()), None);
        assert!(within_window(Timestamp::from_micros(i64::MAX), None));
    }

    #[test]
    fn the_default_is_one_day() {
        let shoot = Timestamp::from_micros(10 * 86_400_000_000);
        assert_eq!(
            no_fee_cutoff(Some(shoot), &default_tiers()),
            Some(shoot.plus_seconds(-86_400))
        );
    }
}
