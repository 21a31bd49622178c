//! `api serve` configuration: command-line flags with environment fallbacks.
//! With nothing set the server runs the embedded profile: SQLite in `./data`,
//! the job queue beside it, local files, in-process workers, listening on
//! 127.0.0.1:8080 with the ops listener on 127.0.0.1:8081. Where data and the
//! queue live is `platform::config`, and how workers run `workers::config`,
//! both shared with the `workers` binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use ipnet::IpNet;

use crate::pacing::PacingSettings;
pub use platform::config::{MASTER_KEY_FILE, QUEUE_FILE, SQLITE_FILE, StorageArgs};
pub use workers::config::WorkerArgs;

/// The longest `--webhook-backlog-max-wait-ms` allowed.
const MAX_PACING_WAIT_MS: u64 = 10_000;

/// `api serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Where data and the queue live.
    #[command(flatten)]
    pub storage: StorageArgs,

    /// How in-process workers run (ignored with --no-workers).
    #[command(flatten)]
    pub workers: WorkerArgs,

    /// Address to listen on. Plain HTTP is served only on loopback or behind a trusted proxy.
    #[arg(long, env = "LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Address of the operators' listener (job dashboard, queue actions, metrics); loopback by default.
    #[arg(long, env = "OPS_LISTEN", default_value = "127.0.0.1:8081")]
    pub ops_listen: SocketAddr,

    /// USER:PASSWORD accepted on the ops listener with HTTP basic auth (a platform administrator's API key is accepted too).
    #[arg(long, env = "OPS_BASIC_AUTH", hide_env_values = true)]
    pub ops_basic_auth: Option<String>,

    /// Do not run job workers in this process (run `workers run` elsewhere).
    #[arg(long, env = "NO_WORKERS")]
    pub no_workers: bool,

    /// PEM certificate chain; with --tls-key, serve HTTPS.
    #[arg(long, env = "TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert.
    #[arg(long, env = "TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Public base URL (canonical links, OpenAPI servers). Default: derived from --listen.
    #[arg(long, env = "BASE_URL")]
    pub base_url: Option<String>,

    /// Legacy alias host's base URL; it serves the same API.
    #[arg(long, env = "LEGACY_BASE_URL")]
    pub legacy_base_url: Option<String>,

    /// Proxy address or CIDR whose `X-Forwarded-Proto: https` is believed (repeatable, comma-separated in env).
    #[arg(long = "trusted-proxy", env = "TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_net)]
    pub trusted_proxies: Vec<IpNet>,

    /// An API key's write waits while its agency has this many webhook deliveries waiting (events not yet fanned out, deliveries due and not yet attempted); 0 turns pacing off.
    #[arg(long, env = "WEBHOOK_BACKLOG_LIMIT", default_value_t = PacingSettings::default().backlog_limit)]
    pub webhook_backlog_limit: u32,

    /// The longest a write waits for its agency's webhook backlog, in milliseconds (at most 10000).
    #[arg(long, env = "WEBHOOK_BACKLOG_MAX_WAIT_MS", default_value_t = 1000)]
    pub webhook_backlog_max_wait_ms: u64,

    /// Hours a resumable upload (`/api/v1/uploads`) waits for its next bytes before it expires and its bytes are deleted.
    #[arg(long, env = "UPLOAD_EXPIRY_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=720))]
    pub upload_expiry_hours: u64,
}

/// Parses an address or CIDR (`10.0.0.1` or `10.0.0.0/8`).
fn parse_net(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{text:?} is not an IP address or CIDR"))
}

impl ServeArgs {
    /// The public base URL, without a trailing slash.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls_cert.is_some() {
            "https"
        } else {
            "http"
        };
        self.base_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{}", self.listen))
            .trim_end_matches('/')
            .to_owned()
    }

    /// The ops credential from `--ops-basic-auth`, split.
    pub fn ops_basic_auth(&self) -> anyhow::Result<Option<(String, String)>> {
        match self.ops_basic_auth.as_deref().filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(text) => match text.split_once(':') {
                Some((user, password)) if !user.is_empty() && password.len() >= 12 => {
                    Ok(Some((user.to_owned(), password.to_owned())))
                }
                _ => bail!(
                    "OPS_BASIC_AUTH must be USER:PASSWORD with a password of at least 12 characters"
                ),
            },
        }
    }

    /// The upload limits, with the configured expiry of resumable uploads.
    pub fn upload_limits(&self) -> UploadLimits {
        UploadLimits {
            resumable_expiry: Duration::from_secs(self.upload_expiry_hours * 3_600),
            ..UploadLimits::default()
        }
    }

    /// How writes are paced by their agency's webhook backlog.
    pub fn write_pacing(&self) -> PacingSettings {
        PacingSettings {
            backlog_limit: self.webhook_backlog_limit,
            max_wait: Duration::from_millis(self.webhook_backlog_max_wait_ms),
        }
    }

    /// Checks settings that are read now and used by later components, so a
    /// typo fails at start rather than at first use.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.storage.validate()?;
        self.ops_basic_auth()?;
        if self.webhook_backlog_max_wait_ms > MAX_PACING_WAIT_MS {
            bail!(
                "WEBHOOK_BACKLOG_MAX_WAIT_MS must be at most {MAX_PACING_WAIT_MS} (a paced write must finish well within its request deadline), got {}",
                self.webhook_backlog_max_wait_ms
            );
        }
        for url in [Some(self.base_url()), self.legacy_base_url.clone()]
            .into_iter()
            .flatten()
        {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                bail!("base URLs must start with https:// or http://, got {url}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use storage::DatabaseTarget;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn no_configuration_is_the_embedded_profile() {
        let probe = Probe::try_parse_from(["api"]).unwrap();
        let args = probe.serve;
        assert_eq!(
            args.storage.database_target(),
            DatabaseTarget::SqliteFile(PathBuf::from("./data").join(SQLITE_FILE))
        );
        assert!(!args.storage.is_distributed());
        assert!(!args.no_workers);
        assert_eq!(args.listen, "127.0.0.1:8080".parse().unwrap());
        assert!(args.ops_listen.ip().is_loopback());
        assert_eq!(args.base_url(), "http://127.0.0.1:8080");
        assert_eq!(args.write_pacing(), PacingSettings::default());
        args.validate().unwrap();
    }

    #[test]
    fn pacing_takes_a_limit_and_a_bounded_wait() {
        let off = Probe::try_parse_from(["api", "--webhook-backlog-limit", "0"]).unwrap();
        assert_eq!(off.serve.write_pacing().backlog_limit, 0);
        let tuned = Probe::try_parse_from([
            "api",
            "--webhook-backlog-limit",
            "50",
            "--webhook-backlog-max-wait-ms",
            "250",
        ])
        .unwrap();
        assert_eq!(
            tuned.serve.write_pacing(),
            PacingSettings {
                backlog_limit: 50,
                max_wait: Duration::from_millis(250),
            }
        );
        tuned.serve.validate().unwrap();
        let too_long =
            Probe::try_parse_from(["api", "--webhook-backlog-max-wait-ms", "10001"]).unwrap();
        assert!(too_long.serve.validate().is_err());
        assert!(Probe::try_parse_from(["api", "--webhook-backlog-limit", "-1"]).is_err());
    }

    #[test]
    fn proxies_accept_addresses_and_cidrs() {
        let probe = Probe::try_parse_from([
            "api",
            "--trusted-proxy",
            "10.0.0.0/8",
            "--trusted-proxy",
            "192.0.2.1",
        ])
        .unwrap();
        assert_eq!(probe.serve.trusted_proxies.len(), 2);
        assert!(Probe::try_parse_from(["api", "--trusted-proxy", "nonsense"]).is_err());
    }

    #[test]
    fn tls_flags_come_in_pairs() {
        assert!(Probe::try_parse_from(["api", "--tls-cert", "c.pem"]).is_err());
        assert!(
            Probe::try_parse_from(["api", "--tls-cert", "c.pem", "--tls-key", "k.pem"]).is_ok()
        );
    }

    #[test]
    fn ops_passwords_must_be_long_enough() {
        let short = Probe::try_parse_from(["api", "--ops-basic-auth", "ops:short"]).unwrap();
        assert!(short.serve.validate().is_err());
        let good = Probe::try_parse_from(["api", "--ops-basic-auth", "ops:correct-horse-battery"])
            .unwrap();
        assert_eq!(
            good.serve.ops_basic_auth().unwrap(),
            Some(("ops".into(), "correct-horse-battery".into()))
        );
    }
}

/// The specification's upload limits; tests lower them to exercise each one
/// without gigabytes of traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadLimits {
    /// Most files one request carries (200).
    pub max_files: usize,
    /// Largest file (50 MB).
    pub max_file_bytes: u64,
    /// Largest request, all parts together (1 GB).
    pub max_request_bytes: u64,
    /// How long a request may take to arrive (60 seconds).
    pub timeout: Duration,
    /// How long a resumable upload waits for its next bytes (24 hours).
    pub resumable_expiry: Duration,
    /// How long a resumable upload's request waits for its next bytes
    /// before what arrived is kept and the request ends (60 seconds).
    pub resumable_idle: Duration,
}

impl Default for UploadLimits {
    fn default() -> Self {
        Self {
            max_files: 200,
            max_file_bytes: 50 * 1024 * 1024,
            max_request_bytes: 1024 * 1024 * 1024,
            timeout: Duration::from_secs(60),
            resumable_expiry: Duration::from_secs(24 * 3_600),
            resumable_idle: Duration::from_secs(60),
        }
    }
}
