//! Running `wrk` on core 1 and reading its figures.

use anyhow::{Context, bail};

use crate::process::pinned;

/// What a wrk run measured.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// Requests per second.
    pub requests_per_second: f64,
    /// Responses with a status outside 2xx/3xx.
    pub non_2xx: u64,
    /// 99th percentile latency in milliseconds.
    pub p99_ms: f64,
}

/// Load generator settings.
#[derive(Debug, Clone)]
pub struct Load {
    /// Seconds to run.
    pub seconds: u64,
    /// Open connections.
    pub connections: u32,
}

fn parse_latency(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, factor) = if let Some(n) = text.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|n| n * factor)
}

/// Runs wrk against `url` with extra arguments (headers, a script).
pub fn run(url: &str, load: &Load, extra: &[String]) -> anyhow::Result<Figures> {
    let mut args = vec![
        "-t1".to_owned(),
        format!("-c{}", load.connections),
        format!("-d{}s", load.seconds),
        "--latency".to_owned(),
    ];
    args.extend_from_slice(extra);
    args.push(url.to_owned());
    let output = pinned(1, "wrk", &args)
        .output()
        .context("running wrk (apt-get install wrk)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "wrk failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let requests_per_second = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no Requests/sec in {text}"))?;
    let non_2xx = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let p99_ms = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .and_then(parse_latency)
        .unwrap_or(f64::NAN);
    Ok(Figures {
        requests_per_second,
        non_2xx,
        p99_ms,
    })
}
