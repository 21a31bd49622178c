//! The no-fee cancellation window: an owner's fee tiers and the cutoff they
//! put before a scheduled shoot. The tiers an owner set are stored by
//! `cancellation_fees`.

use crate::Timestamp;

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
