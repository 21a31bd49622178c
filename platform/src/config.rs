//! Deployment configuration of every process, shared by `api` and
//! `workers`: where the data, the queue and the media objects live, how
//! webhooks are delivered and where e-mail goes. Command-line flags with
//! environment fallbacks; with nothing set it is the embedded profile
//! (SQLite in `./data`, the queue in a SQLite file beside it).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use storage::db::PoolSettings;
use storage::objects::ObjectStoreTarget;
use storage::{Clock, Database, DatabaseTarget, MasterKey, Store};

use crate::QueueTarget;

/// File name of the embedded database inside the data directory.
pub const SQLITE_FILE: &str = "listing-api.sqlite3";
/// File name of the SQLite job queue inside the data directory.
pub const QUEUE_FILE: &str = "queue.sqlite3";
/// File name of the generated master key inside the data directory.
pub const MASTER_KEY_FILE: &str = "master.key";

/// Where the data and the queue live; shared by `api serve`, `api migrate`,
/// every `api admin` command and `workers run`.
#[derive(Clone, Debug, Args)]
pub struct StorageArgs {
    /// Directory for the embedded database, the SQLite queue, local media files and the generated master key.
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

    /// `redis://…`: the job queue, shared rate limits and progress fan-out live in Redis.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,

    /// `s3://bucket[/prefix]` for media objects (credentials, region and endpoint from the standard `AWS_*` variables); `file:///path` or unset stores them under the data directory.
    #[arg(long, env = "OBJECT_STORE_URL")]
    pub object_store_url: Option<String>,
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

    /// The configured Redis URL, if any.
    pub fn redis(&self) -> Option<&str> {
        self.redis_url
            .as_deref()
            .map(str::trim)
            .filter(|url| !url.is_empty())
    }

    /// Where the job queue lives: Redis when configured, else a SQLite file in the data directory.
    pub fn queue_target(&self) -> QueueTarget {
        match self.redis() {
            Some(url) => QueueTarget::Redis(url.to_owned()),
            None => QueueTarget::SqliteFile(self.data_dir.join(QUEUE_FILE)),
        }
    }

    /// Where media objects live.
    pub fn object_store_target(&self) -> anyhow::Result<ObjectStoreTarget> {
        Ok(ObjectStoreTarget::from_url(
            self.object_store_url.as_deref(),
            &self.data_dir,
        )?)
    }

    /// Checks settings that are easy to mistype, so a typo fails at start.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(url) = self.redis()
            && !(url.starts_with("redis://")
                || url.starts_with("rediss://")
                || url.starts_with("unix://"))
        {
            bail!("REDIS_URL must start with redis://, rediss:// or unix://");
        }
        self.object_store_target()?;
        Ok(())
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

    /// Creates the data directory (mode 0700) if needed.
    pub fn ensure_data_dir(&self) -> anyhow::Result<()> {
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
        self.validate()?;
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

/// The SMTP relay for e-mail to agency owners (a webhook endpoint disabled).
#[derive(Clone, Debug, Args)]
pub struct MailArgs {
    /// `smtp://[user:password@]host[:port]` (STARTTLS when offered; add
    /// `?tls=required` to insist) or `smtps://…`. Unset: notifications are
    /// only recorded.
    #[arg(long, env = "SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,

    /// The sender of that e-mail.
    #[arg(
        long,
        env = "MAIL_FROM",
        default_value = "Media Agency Listing API <no-reply@localhost>"
    )]
    pub mail_from: String,
}

impl MailArgs {
    /// The mailer these settings describe, if a relay is configured.
    pub fn mailer(&self) -> anyhow::Result<Option<crate::mail::Mailer>> {
        match self.smtp_url.as_deref().filter(|url| !url.is_empty()) {
            None => Ok(None),
            Some(url) => Ok(Some(crate::mail::Mailer::new(url, &self.mail_from)?)),
        }
    }
}

/// Webhook delivery settings, read by the API (registration checks, test
/// fires, replays) and by the workers (deliveries).
#[derive(Clone, Debug, Args)]
pub struct WebhookArgs {
    /// Allow webhook endpoints on private, loopback and link-local networks (development and tests).
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_NETWORKS")]
    pub webhook_allow_private_networks: bool,

    /// Extra CA certificate (PEM) trusted for webhook deliveries.
    #[arg(long, env = "WEBHOOK_CA_CERT")]
    pub webhook_ca_cert: Option<std::path::PathBuf>,
}

impl WebhookArgs {
    /// The delivery settings these arguments describe: the retry schedule
    /// at its real pace (only in-process tests ever shorten it).
    pub fn delivery(&self) -> anyhow::Result<crate::webhooks::WebhookDelivery> {
        Ok(crate::webhooks::WebhookDelivery {
            client: self.client()?,
            retry_speedup: 1,
        })
    }

    /// The delivery client these settings describe.
    pub fn client(&self) -> anyhow::Result<crate::webhooks::WebhookClient> {
        let pem = match &self.webhook_ca_cert {
            Some(path) => Some(std::fs::read(path).with_context(|| {
                format!("reading the webhook CA certificate {}", path.display())
            })?),
            None => None,
        };
        crate::webhooks::WebhookClient::new(
            crate::webhooks::AddressPolicy {
                allow_private_networks: self.webhook_allow_private_networks,
            },
            pem.as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        storage: StorageArgs,
    }

    #[test]
    fn no_configuration_is_the_embedded_profile() {
        let probe = Probe::try_parse_from(["api"]).unwrap();
        assert_eq!(
            probe.storage.database_target(),
            DatabaseTarget::SqliteFile(PathBuf::from("./data").join(SQLITE_FILE))
        );
        assert_eq!(
            probe.storage.queue_target(),
            QueueTarget::SqliteFile(PathBuf::from("./data").join(QUEUE_FILE))
        );
        assert!(!probe.storage.is_distributed());
    }
}
