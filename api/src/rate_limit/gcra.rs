//! GCRA, the generic cell rate algorithm: a budget of `limit` requests per
//! 60-second window, spent evenly. Each bucket keeps one number, its
//! theoretical arrival time (TAT). A fresh bucket allows `limit` requests at
//! once, then one every `60 s / limit`; there is no window boundary a client
//! could straddle to double its budget.
//!
//! The Redis script (`redis.rs`) applies the same arithmetic atomically.

/// The window every budget is expressed over, in microseconds.
pub const WINDOW_MICROS: i64 = 60_000_000;

/// The outcome of one bucket for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Whether this bucket admits the request.
    pub allowed: bool,
    /// The TAT to store if the request is admitted.
    pub new_tat: i64,
    /// Requests left right after this one (0 when refused).
    pub remaining: u32,
    /// How long until the bucket is full again (microseconds).
    pub reset_in: i64,
    /// When the bucket is full again (microseconds since the epoch).
    pub reset_at: i64,
    /// How long until a refused request would be admitted (microseconds).
    pub retry_after: i64,
}

/// Evaluates a bucket holding `tat` (none for a fresh bucket) at `now`.
pub fn evaluate(tat: Option<i64>, now: i64, limit: u32) -> Outcome {
    let limit = i64::from(limit.max(1));
    // Budgets beyond a million a minute are spent at one request per microsecond.
    let interval = (WINDOW_MICROS / limit).max(1);
    let tat = tat.unwrap_or(now).max(now);
    let new_tat = tat + interval;
    let allow_at = new_tat - WINDOW_MICROS;
    if allow_at > now {
        Outcome {
            allowed: false,
            new_tat: tat,
            remaining: 0,
            reset_in: tat - now,
            reset_at: tat,
            retry_after: allow_at - now,
        }
    } else {
        let remaining = (now - allow_at) / interval;
        Outcome {
            allowed: true,
            new_tat,
            remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
            reset_in: new_tat - now,
            reset_at: new_tat,
            retry_after: 0,
        }
    }
}

/// The TAT after giving back one request spent from a bucket holding `tat`
/// (a request that turned out not to count); `None` when the bucket is then
/// as good as fresh.
pub fn refunded(tat: Option<i64>, now: i64, limit: u32) -> Option<i64> {
    let interval = (WINDOW_MICROS / i64::from(limit.max(1))).max(1);
    tat.map(|tat| tat - interval).filter(|tat| *tat > now)
}

/// How many requests a bucket holding `tat` would admit at `now`, without
/// spending any.
pub fn headroom(tat: Option<i64>, now: i64, limit: u32) -> u32 {
    admits(&evaluate(tat, now, limit))
}

/// How many requests the bucket an `outcome` was evaluated on would admit,
/// this one included.
pub fn admits(outcome: &Outcome) -> u32 {
    if outcome.allowed {
        outcome.remaining.saturating_add(1)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    /// Admits requests at `now` until refused; returns how many got through.
    fn burst(tat: &mut Option<i64>, now: i64, limit: u32, attempts: u32) -> u32 {
        let mut admitted = 0;
        for _ in 0..attempts {
            let outcome = evaluate(*tat, now, limit);
            if outcome.allowed {
                *tat = Some(outcome.new_tat);
                admitted += 1;
            }
        }
        admitted
    }

    #[test]
    fn a_fresh_bucket_admits_its_whole_budget_then_refuses() {
        let mut tat = None;
        assert_eq!(burst(&mut tat, 0, 200, 230), 200);
        let refused = evaluate(tat, 0, 200);
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.retry_after, WINDOW_MICROS / 200);
    }

    #[test]
    fn headroom_is_what_a_burst_would_get() {
        assert_eq!(headroom(None, 0, 5), 5);
        let mut tat = None;
        burst(&mut tat, 0, 5, 2);
        assert_eq!(headroom(tat, 0, 5), 3);
        burst(&mut tat, 0, 5, 3);
        assert_eq!(headroom(tat, 0, 5), 0);
    }

    #[test]
    fn remaining_counts_down() {
        let first = evaluate(None, 0, 5);
        assert_eq!(first.remaining, 4);
        let second = evaluate(Some(first.new_tat), 0, 5);
        assert_eq!(second.remaining, 3);
        assert_eq!(second.reset_at, 2 * 12 * SECOND);
    }

    #[test]
    fn the_budget_refills_evenly() {
        let mut tat = None;
        assert_eq!(burst(&mut tat, 0, 60, 60), 60);
        // One request per second comes back.
        assert_eq!(burst(&mut tat, SECOND, 60, 5), 1);
        assert_eq!(burst(&mut tat, 10 * SECOND, 60, 50), 9);
        // After a full window of silence, the whole budget is back.
        assert_eq!(burst(&mut tat, 100 * SECOND, 60, 100), 60);
    }

    #[test]
    fn no_boundary_doubles_the_budget() {
        // Spend the budget at the end of one minute; the next minute's start
        // gives back only what time has refilled, not another full budget.
        let mut tat = None;
        let end_of_minute = 59 * SECOND;
        assert_eq!(burst(&mut tat, end_of_minute, 100, 100), 100);
        let start_of_next = 61 * SECOND;
        let refilled = burst(&mut tat, start_of_next, 100, 100);
        assert!(
            refilled <= 4,
            "only two seconds' worth came back, got {refilled}"
        );
    }

    #[test]
    fn enormous_budgets_still_count() {
        let outcome = evaluate(None, 0, u32::MAX);
        assert!(outcome.allowed);
        assert_eq!(outcome.new_tat, 1);
        assert!(outcome.remaining > 59_000_000);
    }

    #[test]
    fn a_refused_request_does_not_spend() {
        let mut tat = None;
        burst(&mut tat, 0, 2, 2);
        let before = tat;
        let refused = evaluate(tat, 0, 2);
        assert!(!refused.allowed);
        assert_eq!(refused.new_tat, before.unwrap());
    }
}
