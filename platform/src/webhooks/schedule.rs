//! The retry schedule of a delivery: attempt 1 at once, then 30 seconds,
//! 5 minutes, 30 minutes and 2 hours after the previous failure. After the
//! fifth failed attempt the delivery has failed.

use std::time::Duration;

/// Attempts a delivery gets.
pub const MAX_ATTEMPTS: u32 = 5;

/// The wait before attempt `attempt` (1-based) after the previous one
/// failed; `None` when there is no such attempt.
pub const fn delay_before(attempt: u32) -> Option<Duration> {
    match attempt {
        1 => Some(Duration::ZERO),
        2 => Some(Duration::from_secs(30)),
        3 => Some(Duration::from_secs(5 * 60)),
        4 => Some(Duration::from_secs(30 * 60)),
        5 => Some(Duration::from_secs(2 * 60 * 60)),
        _ => None,
    }
}

/// After attempt `failed` failed: the wait before the next one, or `None`
/// when the delivery has failed for good.
pub const fn after_failure(failed: u32) -> Option<Duration> {
    delay_before(failed + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_the_specifications() {
        let delays: Vec<u64> = (1..=MAX_ATTEMPTS)
            .map(|attempt| {
                delay_before(attempt)
                    .map(|d| d.as_secs())
                    .unwrap_or(u64::MAX)
            })
            .collect();
        assert_eq!(delays, [0, 30, 300, 1_800, 7_200]);
    }

    #[test]
    fn a_fifth_failure_is_final_and_earlier_ones_are_retried() {
        assert_eq!(after_failure(1), Some(Duration::from_secs(30)));
        assert_eq!(after_failure(2), Some(Duration::from_secs(300)));
        assert_eq!(after_failure(3), Some(Duration::from_secs(1_800)));
        assert_eq!(after_failure(4), Some(Duration::from_secs(7_200)));
        assert_eq!(after_failure(5), None);
        assert_eq!(after_failure(6), None);
        assert_eq!(delay_before(0), None);
    }
}
