//! How a worker process runs: which queues, how many jobs at once, liveness
//! timing, fair caps per agency; with the platform's webhook and mail
//! settings beside them. Command-line flags with environment fallbacks.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use platform::config::{MailArgs, WebhookArgs};

/// How workers run: which queues, how many jobs at once, liveness timing.
#[derive(Clone, Debug, Args)]
pub struct WorkerArgs {
    /// QUEUE=CONCURRENCY, repeatable (comma-separated in env): which queues this
    /// process consumes and how many of their jobs run at once. Default: every
    /// queue at its default concurrency.
    #[arg(long = "queue", env = "WORKER_QUEUES", value_delimiter = ',')]
    pub queues: Vec<String>,

    /// Seconds between a worker's heartbeats; a worker silent for three is
    /// presumed dead and its jobs go to others.
    #[arg(long, env = "WORKER_HEARTBEAT_SECONDS", default_value_t = 10)]
    pub heartbeat_seconds: u64,

    /// Milliseconds between polls of an idle queue.
    #[arg(long, env = "WORKER_POLL_MILLIS", default_value_t = 50)]
    pub poll_millis: u64,

    /// Seconds in-flight jobs get to finish after SIGTERM; what still runs then is put back in its queue for other workers.
    #[arg(long, env = "WORKER_SHUTDOWN_SECONDS", default_value_t = 30)]
    pub shutdown_seconds: u64,

    /// Jobs a worker claims per fetch. Default: its queue's concurrency.
    /// Claims beyond the free slots wait in the worker (and go back to the
    /// queue on shutdown).
    #[arg(long, env = "WORKER_FETCH_BATCH", value_parser = clap::value_parser!(u16).range(1..))]
    pub fetch_batch: Option<u16>,

    /// QUEUE=N, repeatable (comma-separated in env): at most N jobs of one
    /// agency of that queue run at once in this process; a job over the cap
    /// goes back to its queue behind the agency's other jobs, a second later.
    /// Off by default (agencies already take turns on the fair queues).
    #[arg(
        long = "agency-concurrency",
        env = "WORKER_AGENCY_CONCURRENCY",
        value_delimiter = ','
    )]
    pub agency_concurrency: Vec<String>,

    /// Do not run the scheduled maintenance (key expiry, purges, outbox sweep) in this process.
    #[arg(long, env = "NO_SCHEDULES")]
    pub no_schedules: bool,

    /// How webhooks are delivered.
    #[command(flatten)]
    pub webhooks: WebhookArgs,

    /// Where e-mail to agency owners goes.
    #[command(flatten)]
    pub mail: MailArgs,
}

/// Default jobs running at once per queue, where its kind sets none.
pub const DEFAULT_CONCURRENCY: usize = 4;

impl WorkerArgs {
    /// The queues to consume with their concurrency.
    pub fn queue_concurrency(&self) -> anyhow::Result<BTreeMap<&'static str, usize>> {
        if self.queues.is_empty() {
            return Ok(platform::kinds::QUEUES
                .iter()
                .map(|q| (*q, platform::kinds::default_concurrency(q)))
                .collect());
        }
        let mut chosen = BTreeMap::new();
        for text in &self.queues {
            let (name, concurrency) = match text.split_once('=') {
                Some((name, n)) => (
                    name.trim(),
                    n.trim().parse::<usize>().ok().filter(|n| *n > 0),
                ),
                None => (
                    text.trim(),
                    Some(platform::kinds::default_concurrency(text.trim())),
                ),
            };
            let Some(queue) = platform::kinds::QUEUES.iter().find(|q| **q == name) else {
                bail!(
                    "unknown queue {name:?}; queues are {}",
                    platform::kinds::QUEUES.join(", ")
                );
            };
            let Some(concurrency) = concurrency else {
                bail!("--queue {text:?}: concurrency must be a positive integer");
            };
            chosen.insert(*queue, concurrency);
        }
        Ok(chosen)
    }

    /// The per-agency caps of `--agency-concurrency`, by queue.
    pub fn agency_caps(&self) -> anyhow::Result<BTreeMap<&'static str, usize>> {
        let mut caps = BTreeMap::new();
        for text in &self.agency_concurrency {
            let Some((name, cap)) = text.split_once('=') else {
                bail!("--agency-concurrency {text:?}: expected QUEUE=N");
            };
            let Some(queue) = platform::kinds::QUEUES.iter().find(|q| **q == name.trim()) else {
                bail!(
                    "unknown queue {:?}; queues are {}",
                    name.trim(),
                    platform::kinds::QUEUES.join(", ")
                );
            };
            if !platform::kinds::AGENCY_QUEUES.contains(queue) {
                bail!(
                    "--agency-concurrency {text:?}: only queues shared between agencies take a cap ({})",
                    platform::kinds::AGENCY_QUEUES.join(", ")
                );
            }
            let Some(cap) = cap.trim().parse::<usize>().ok().filter(|n| *n > 0) else {
                bail!("--agency-concurrency {text:?}: N must be a positive integer");
            };
            caps.insert(*queue, cap);
        }
        Ok(caps)
    }

    /// Heartbeat interval.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.heartbeat_seconds.max(1))
    }

    /// Poll interval of idle queues.
    pub fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_millis.max(10))
    }

    /// Jobs claimed per fetch, if set.
    pub fn fetch_batch(&self) -> Option<usize> {
        self.fetch_batch.map(usize::from)
    }

    /// Grace period after SIGTERM.
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_secs(self.shutdown_seconds)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        workers: WorkerArgs,
    }

    #[test]
    fn no_configuration_consumes_every_queue() {
        let probe = Probe::try_parse_from(["workers"]).unwrap();
        assert_eq!(
            probe.workers.queue_concurrency().unwrap().len(),
            platform::kinds::QUEUES.len()
        );
    }

    #[test]
    fn agency_caps_name_a_fair_queue_and_a_positive_cap() {
        let probe = Probe::try_parse_from([
            "workers",
            "--agency-concurrency",
            "media_variants=2",
            "--agency-concurrency",
            "probe=1",
        ])
        .unwrap();
        let caps = probe.workers.agency_caps().unwrap();
        assert_eq!(caps.get("media_variants"), Some(&2));
        assert_eq!(caps.get("probe"), Some(&1));
        let off = Probe::try_parse_from(["workers"]).unwrap();
        assert!(
            off.workers.agency_caps().unwrap().is_empty(),
            "off by default"
        );
        for (bad, says) in [
            ("media_variants", "expected QUEUE=N"),
            ("nope=1", "unknown queue"),
            ("outbox_dispatch=1", "only queues shared between agencies"),
            ("webhook_delivery=1", "only queues shared between agencies"),
            ("probe=0", "positive integer"),
            ("probe=x", "positive integer"),
        ] {
            let probe = Probe::try_parse_from(["workers", "--agency-concurrency", bad]).unwrap();
            let err = probe.workers.agency_caps().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn queues_are_chosen_with_their_concurrency() {
        let probe = Probe::try_parse_from([
            "workers",
            "--queue",
            "probe=2",
            "--queue",
            "outbox_dispatch",
        ])
        .unwrap();
        let chosen = probe.workers.queue_concurrency().unwrap();
        assert_eq!(chosen.get("probe"), Some(&2));
        assert_eq!(chosen.get("outbox_dispatch"), Some(&DEFAULT_CONCURRENCY));
        for bad in ["nope=1", "probe=0", "probe=x"] {
            let probe = Probe::try_parse_from(["workers", "--queue", bad]).unwrap();
            assert!(probe.workers.queue_concurrency().is_err(), "{bad}");
        }
    }
}
