//! Configuration: command-line flags with environment fallbacks. With nothing
//! set, `api serve` runs the embedded profile: SQLite in `./data`, local files,
//! in-process workers, listening on 127.0.0.1:8080.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use ipnet::IpNet;
use storage::db::PoolSettings;
use storage::{Clock, Database, DatabaseTarget, MasterKey, Store};

/// File name of the embedded database inside the data directory.
pub const SQLITE_FILE: &str = "listing-api.sqlite3";
/// File name of the generated master key inside the data directory.
pub const MASTER_KEY_FILE: &str = "master.key";

/// Where the data lives; shared by `serve`, `migrate` and every `admin` command.
#[derive(Clone, Debug, Args)]
pub struct StorageArgs {
    /// Directory for the embedded database, local media files and the generated master key.
    #[arg(long, env = "DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// `postgres://…` runs on PostgreSQL (distributed profile); unset runs SQLite in the data directory.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Most connections in the database pool.
    #[arg(long, env = "DATABASE_MAX_CONNECTIONS", default_value_t = 10)]
    pub database_max_connections: u32,

    /// The master key (base64 or hex, at least 32 bytes). Prefer the environment
    /// variable to the flag. Every replica of a deployment needs the same key.
    #[arg(long, env = "MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,

    /// File holding the master key. Default: `<data-dir>/master.key`, created on first start.
    #[arg(long, env = "MASTER_KEY_FILE")]
    pub master_key_file: Option<PathBuf>,
}

impl StorageArgs {
    /// The configured database: a `DATABASE_URL`, or SQLite in the data directory.
    pub fn database_target(&self) -> DatabaseTarget {
        match self
            .database_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
        {
            Some(url) => DatabaseTarget::Url(url.to_owned()),
            None => DatabaseTarget::SqliteFile(self.data_dir.join(SQLITE_FILE)),
        }
    }

    /// Whether this is the distributed profile (PostgreSQL).
    pub fn is_distributed(&self) -> bool {
        matches!(self.database_target(), DatabaseTarget::Url(url) if url.starts_with("postgres"))
    }

    fn load_master_key(&self) -> anyhow::Result<MasterKey> {
        if let Some(text) = self.master_key.as_deref().filter(|t| !t.trim().is_empty()) {
            return MasterKey::from_text(text).context("MASTER_KEY");
        }
        let path = self
            .master_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join(MASTER_KEY_FILE));
        if self.is_distributed() && self.master_key_file.is_none() && !path.exists() {
            tracing::warn!(
                path = %path.display(),
                "no MASTER_KEY configured for PostgreSQL: generating one in the data directory; \
                 every replica must be given the same key"
            );
        }
        Ok(MasterKey::load_or_create(&path)?)
    }

    fn ensure_data_dir(&self) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        if !self.data_dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&self.data_dir)
                .with_context(|| format!("creating data directory {}", self.data_dir.display()))?;
        }
        Ok(())
    }

    /// Connects and applies pending migrations.
    pub async fn connect_and_migrate(&self) -> anyhow::Result<Database> {
        self.ensure_data_dir()?;
        let settings = PoolSettings {
            max_connections: self.database_max_connections.max(1),
        };
        let db = Database::connect(&self.database_target(), &settings)
            .await
            .context("connecting to the database")?;
        db.migrate().await.context("applying migrations")?;
        Ok(db)
    }

    /// Connects, migrates and opens the store with the master key.
    pub async fn open_store(&self) -> anyhow::Result<Store> {
        let db = self.connect_and_migrate().await?;
        let key = self.load_master_key()?;
        Ok(Store::open(db, &key, Clock::System).await?)
    }
}

/// `api serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Storage settings.
    #[command(flatten)]
    pub storage: StorageArgs,

    /// Address to listen on. Plain HTTP is served only on loopback or behind a trusted proxy.
    #[arg(long, env = "LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

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

    /// `redis://…`: shared rate limits, revocation and progress fan-out, and the Redis job queue.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,

    /// `s3://bucket` for media objects; unset stores them under the data directory.
    #[arg(long, env = "OBJECT_STORE_URL")]
    pub object_store_url: Option<String>,

    /// Allow webhook endpoints on private, loopback and link-local networks (development and tests).
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_NETWORKS")]
    pub webhook_allow_private_networks: bool,

    /// Extra CA certificate (PEM) trusted for webhook deliveries.
    #[arg(long, env = "WEBHOOK_CA_CERT")]
    pub webhook_ca_cert: Option<PathBuf>,
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

    /// Checks settings that are read now and used by later components, so a
    /// typo fails at start rather than at first use.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(url) = self.redis_url.as_deref().filter(|u| !u.is_empty())
            && !(url.starts_with("redis://")
                || url.starts_with("rediss://")
                || url.starts_with("unix://"))
        {
            bail!("REDIS_URL must start with redis://, rediss:// or unix://");
        }
        if let Some(url) = self.object_store_url.as_deref().filter(|u| !u.is_empty())
            && !(url.starts_with("s3://") || url.starts_with("file://"))
        {
            bail!("OBJECT_STORE_URL must start with s3:// or file://");
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
        assert_eq!(args.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(args.base_url(), "http://127.0.0.1:8080");
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
}
