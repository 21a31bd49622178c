//! From posts and the receiver's requests to figures: deliveries/s from the
//! first post to the last successful arrival, post→arrival latency of each
//! delivery's first successful arrival, and the Markdown table.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::{Args, Load, Post, System, Workload};
use crate::job_platform::percentile;
use crate::webhooks::ReceivedRequest;

/// The figures of one system on one workload.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) workload: Workload,
    pub(super) system: System,
    endpoints: u32,
    /// Events posted and accepted (2xx).
    posted: usize,
    accepted: usize,
    /// Accepted events × endpoints.
    expected: u64,
    /// Distinct deliveries that arrived successfully.
    delivered: u64,
    /// Requests the receiver answered for the load's events (refused and
    /// repeated ones included).
    requests: usize,
    /// Requests answered 500.
    refused: usize,
    /// Offered rate (D), events/s.
    offered: Option<f64>,
    /// The receiver refused every n-th request (0: none).
    fail_every: u64,
    /// Events accepted per second while posting.
    accepted_per_s: Option<f64>,
    /// Successful deliveries over first post → last successful arrival.
    pub(super) deliveries_per_s: Option<f64>,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Median time from a refused request to the next request for the same
    /// delivery (the first retry, as measured).
    retry_ms: Option<f64>,
}

/// Deliveries (endpoint, sequence number) of `sequence` answered 200 at
/// least once.
pub(super) fn distinct_successes(requests: &[ReceivedRequest], sequence: &HashSet<u64>) -> u64 {
    requests
        .iter()
        .filter(|(_, seq, _, status)| *status == 200 && seq.is_some_and(|s| sequence.contains(&s)))
        .map(|(endpoint, seq, _, _)| (endpoint, seq))
        .collect::<HashSet<_>>()
        .len() as u64
}

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

impl Row {
    /// Measures a run from its posts and the receiver's requests.
    pub(super) fn measure(
        system: System,
        load: &Load,
        posts: &[Post],
        requests: &[ReceivedRequest],
    ) -> Self {
        let sent: HashMap<u64, i64> = posts
            .iter()
            .filter(|(_, _, status)| (200..300).contains(status))
            .map(|(seq, at, _)| (*seq, *at))
            .collect();
        let ours: Vec<&ReceivedRequest> = requests
            .iter()
            .filter(|(_, seq, _, _)| seq.is_some_and(|s| sent.contains_key(&s)))
            .collect();
        // The first successful arrival of each delivery.
        let mut first: HashMap<(&str, u64), i64> = HashMap::new();
        for (endpoint, seq, at, status) in &ours {
            if *status == 200
                && let Some(seq) = seq
            {
                let slot = first.entry((endpoint.as_str(), *seq)).or_insert(*at);
                *slot = (*slot).min(*at);
            }
        }
        let mut latencies: Vec<f64> = first
            .iter()
            .filter_map(|((_, seq), at)| sent.get(seq).map(|post| (at - post) as f64 / 1000.0))
            .collect();
        latencies.sort_by(f64::total_cmp);
        let first_post = sent.values().copied().min();
        let last_post = sent.values().copied().max();
        let last_arrival = first.values().copied().max();
        let deliveries_per_s = first_post.zip(last_arrival).and_then(|(from, to)| {
            (to > from).then(|| first.len() as f64 / ((to - from) as f64 / 1e6))
        });
        let accepted_per_s = first_post.zip(last_post).and_then(|(from, to)| {
            (to > from).then(|| (sent.len() - 1) as f64 / ((to - from) as f64 / 1e6))
        });
        // Each refused request's delivery: how long until it was asked again.
        let mut by_delivery: HashMap<(&str, u64), Vec<(i64, u16)>> = HashMap::new();
        for (endpoint, seq, at, status) in &ours {
            if let Some(seq) = seq {
                by_delivery
                    .entry((endpoint.as_str(), *seq))
                    .or_default()
                    .push((*at, *status));
            }
        }
        let mut retries: Vec<f64> = Vec::new();
        for attempts in by_delivery.values_mut() {
            attempts.sort_unstable();
            for pair in attempts.windows(2) {
                if pair[0].1 != 200 {
                    retries.push((pair[1].0 - pair[0].0) as f64 / 1000.0);
                }
            }
        }
        retries.sort_by(f64::total_cmp);
        Self {
            workload: load.workload,
            system,
            endpoints: load.endpoints,
            posted: posts.len(),
            accepted: sent.len(),
            expected: sent.len() as u64 * u64::from(load.endpoints),
            delivered: first.len() as u64,
            requests: ours.len(),
            refused: ours.iter().filter(|r| r.3 != 200).count(),
            offered: load.rate,
            fail_every: load.fail_every,
            accepted_per_s,
            deliveries_per_s,
            p50_ms: percentile(&latencies, 50.0),
            p99_ms: percentile(&latencies, 99.0),
            max_ms: latencies.last().copied().unwrap_or(f64::NAN),
            retry_ms: (!retries.is_empty()).then(|| percentile(&retries, 50.0)),
        }
    }

    /// The row as one JSON line (progress on standard error).
    pub(super) fn json(&self) -> Value {
        json!({
            "workload": self.workload.label(),
            "system": self.system.label(),
            "endpoints": self.endpoints,
            "posted": self.posted,
            "accepted": self.accepted,
            "expected": self.expected,
            "delivered": self.delivered,
            "requests": self.requests,
            "refused": self.refused,
            "offered_per_s": self.offered.map(round1),
            "accepted_per_s": self.accepted_per_s.map(round1),
            "deliveries_per_s": self.deliveries_per_s.map(round1),
            "p50_ms": round1(self.p50_ms),
            "p99_ms": round1(self.p99_ms),
            "max_ms": round1(self.max_ms),
            "first_retry_ms": self.retry_ms.map(round1),
        })
    }
}

/// What the run ran on.
pub(super) struct Versions {
    pub(super) svix: Option<String>,
    pub(super) postgres: Option<String>,
    pub(super) redis: Option<String>,
}

/// `redis-server --version`'s `v=…`.
pub(super) fn redis_version() -> Option<String> {
    let output = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .map(str::to_owned)
}

/// A count with thousands separators.
fn grouped(value: f64) -> String {
    if !value.is_finite() {
        return "–".into();
    }
    let digits = format!("{:.0}", value.round());
    let (sign, digits) = digits
        .strip_prefix('-')
        .map_or(("", digits.as_str()), |rest| ("-", rest));
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    format!("{sign}{out}")
}

/// A duration in milliseconds, as the tables in BENCHMARKS.md write them.
fn duration(ms: f64) -> String {
    if !ms.is_finite() {
        "–".into()
    } else if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn ratio(value: Option<f64>) -> String {
    value
        .filter(|v| v.is_finite())
        .map_or_else(|| "–".into(), |v| format!("{v:.2}×"))
}

/// The "Deliveries/s vs Svix" cell: the ratio against Svix on its own
/// schedule, then the one against Svix on ours, where each was run (and
/// gave a finite ratio).
fn throughput_cell(own_schedule: Option<f64>, our_schedule: Option<f64>) -> String {
    let finite = |ratio: Option<f64>| ratio.filter(|v| v.is_finite());
    match (finite(own_schedule), finite(our_schedule)) {
        (own, None) => ratio(own),
        (None, Some(ours)) => format!("{} against Svix on our schedule", ratio(Some(ours))),
        (Some(own), Some(ours)) => format!(
            "{} ({} against Svix on our schedule)",
            ratio(Some(own)),
            ratio(Some(ours))
        ),
    }
}

/// What a workload is, for the table.
fn workload_text(row: &Row) -> String {
    match row.workload {
        Workload::A => "A: 1 endpoint, as fast as accepted".into(),
        Workload::B => format!("B: {} endpoints", row.endpoints),
        Workload::C => format!(
            "C: 1 endpoint, every {}th request answered 500",
            row.fail_every
        ),
        Workload::D => format!(
            "D: 1 endpoint at {} events/s",
            grouped(row.offered.unwrap_or(f64::NAN))
        ),
    }
}

/// The table ready for BENCHMARKS.md, with the command that made it.
pub(super) fn markdown(args: &Args, rows: &[Row], versions: &Versions) -> String {
    let command: Vec<String> = std::env::args().skip(1).collect();
    let mut out = String::new();
    out.push_str(&format!(
        "Command: `cargo run --release -p bench -- {}` ({}).\n\n",
        command.join(" "),
        chrono::Utc::now().format("%Y-%m-%d")
    ));
    out.push_str(&format!(
        "Svix: 1.99 by `../shared/bench/svix/build.sh` (commit 4fc0cfb; `--version`: {}); \
         PostgreSQL: {}; Redis: {}. The system under test (our `api serve` \
         with its workers in process, or svix-server) runs pinned to core 0; the \
         receiver (loopback HTTPS, axum + rustls), the posting client ({} connections), \
         Redis and PostgreSQL on core 1. Each run starts its system afresh and idles \
         {} s before the first post. Posts to ours carry the `X-Idempotency-Key` our API \
         requires; Svix's optional one is not sent. Deliveries/s: successful deliveries over the time \
         from the first post to the last successful arrival. Latency: the first \
         successful arrival of a delivery minus the sending of the post that created \
         its event. Ratios: deliveries/s ours / Svix, latency Svix / ours (above 1: \
         ours is better); on C also ours / Svix retrying on the specification's \
         schedule (30 s, 5 min, 30 min, 2 h, each wait jittered ±20 % by Svix; \
         its own schedule begins at 5 s).\n\n",
        versions.svix.as_deref().unwrap_or("not run"),
        versions.postgres.as_deref().unwrap_or("not run"),
        versions.redis.as_deref().unwrap_or("?"),
        args.connections,
        args.idle,
    ));
    out.push_str(
        "| Workload | System | Events | Deliveries | Requests | Accepted/s | Deliveries/s | p50 | p99 | max | First retry | Deliveries/s vs Svix | p50 Svix/ours | p99 Svix/ours |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let svix = rows
            .iter()
            .find(|r| r.workload == row.workload && r.system == System::Svix);
        let ours = matches!(row.system, System::Embedded | System::Redis);
        let throughput_against = |system: System| {
            rows.iter()
                .find(|r| r.workload == row.workload && r.system == system)
                .and_then(|theirs| row.deliveries_per_s.zip(theirs.deliveries_per_s))
                .filter(|_| ours)
                .map(|(ours, theirs)| ours / theirs)
        };
        let (throughput, p50, p99) = match svix {
            Some(svix) if ours => (
                throughput_against(System::Svix),
                Some(svix.p50_ms / row.p50_ms),
                Some(svix.p99_ms / row.p99_ms),
            ),
            _ => (None, None, None),
        };
        let throughput = throughput_cell(throughput, throughput_against(System::SvixSpecSchedule));
        let delivered = if row.delivered < row.expected {
            format!(
                "{} of {}",
                grouped(row.delivered as f64),
                grouped(row.expected as f64)
            )
        } else {
            grouped(row.delivered as f64)
        };
        let events = if row.accepted < row.posted {
            format!(
                "{} ({} not accepted)",
                grouped(row.accepted as f64),
                row.posted - row.accepted
            )
        } else {
            grouped(row.accepted as f64)
        };
        let requests = if row.refused > 0 {
            format!("{} ({} × 500)", grouped(row.requests as f64), row.refused)
        } else {
            grouped(row.requests as f64)
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            workload_text(row),
            row.system.label(),
            events,
            delivered,
            requests,
            grouped(row.accepted_per_s.unwrap_or(f64::NAN)),
            grouped(row.deliveries_per_s.unwrap_or(f64::NAN)),
            duration(row.p50_ms),
            duration(row.p99_ms),
            duration(row.max_ms),
            row.retry_ms.map_or_else(|| "–".into(), duration),
            throughput,
            ratio(p50),
            ratio(p99),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throughput_cell_names_only_the_runs_made() {
        let own = ratio(Some(0.25));
        let ours = ratio(Some(1.2));
        assert_eq!(throughput_cell(None, None), ratio(None));
        assert_eq!(
            throughput_cell(Some(f64::INFINITY), Some(1.2)),
            format!("{ours} against Svix on our schedule")
        );
        assert_eq!(throughput_cell(Some(0.25), None), own);
        assert_eq!(
            throughput_cell(None, Some(1.2)),
            format!("{ours} against Svix on our schedule")
        );
        assert_eq!(
            throughput_cell(Some(0.25), Some(1.2)),
            format!("{own} ({ours} against Svix on our schedule)")
        );
    }
}
