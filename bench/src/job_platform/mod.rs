//! The job platform over time (issue 15).
//!
//! - `pickup`: how long a job pushed to an idle queue waits for a worker,
//!   after idle gaps of 1 s, 15 s and 120 s, on the embedded profile (SQLite
//!   queue) and with the queue on Redis. The release `api serve` runs its
//!   workers in-process, pinned to core 0; this binary pushes a one-step
//!   probe into its queue from outside (the harder case: no in-process bell)
//!   and reads when the probe's first progress state was recorded. Long gaps
//!   run several servers side by side, each idle but for its own pushes,
//!   staggered so no two pushes meet.
//! - `fairness`: how long agency B's single photo takes, upload to
//!   `completed`, while agency A's 200-photo upload is processing, against
//!   the same photo on the idle server.
//! - `profile_sweep`: the same, while agency A's library of 10,000 photos
//!   is rendered again for the delivery profile it has just created; and
//!   how many of A's photos the sweep renders a second.
//!
//! `summary` rounds and orders what both report.

pub mod fairness;
pub mod pickup;
pub mod profile_sweep;

/// The Redis a profile's queue runs on: none for `embedded`, a throwaway
/// `redis-server` on core 1 for `redis`.
pub(crate) fn profile_redis(profile: &str) -> anyhow::Result<Option<crate::jobs::Redis>> {
    match profile {
        "embedded" => Ok(None),
        "redis" => Ok(Some(crate::jobs::Redis::start_on(1)?)),
        other => anyhow::bail!("unknown profile {other:?}: embedded or redis"),
    }
}

/// Nearest-rank percentile `p` (0–100) of `sorted` (ascending).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// p50, p99 and max of `samples`, rounded to 0.1 ms.
pub(crate) fn summary(samples: &mut [f64]) -> serde_json::Value {
    samples.sort_by(f64::total_cmp);
    let round = |value: f64| (value * 10.0).round() / 10.0;
    serde_json::json!({
        "samples": samples.len(),
        "p50_ms": round(percentile(samples, 50.0)),
        "p99_ms": round(percentile(samples, 99.0)),
        "max_ms": round(samples.last().copied().unwrap_or(f64::NAN)),
    })
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank() {
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&twenty, 50.0), 10.0);
        assert_eq!(percentile(&twenty, 99.0), 20.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }
}
