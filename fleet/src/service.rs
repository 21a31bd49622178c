//! The fleet as the client host sees it: the two API replicas' public
//! routes (as a TLS-terminating proxy would call them, with
//! `X-Forwarded-Proto: https`), the database and Redis for checking what was
//! kept, and the hosts to act on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use redis::AsyncCommands;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::hosts::Hosts;
use crate::receiver::Receiver;

/// Far above any drill's load: the budgets stay on the request path but
/// never refuse a drill's request.
const UNREACHABLE: u32 = 1_000_000_000;

/// One API answer: its status and, for an error, its code.
#[derive(Clone, Debug)]
pub struct Answer {
    /// HTTP status, or `None` when no answer came (refused, reset, timed out).
    pub status: Option<u16>,
    /// `error.code` of an error envelope, or why no answer came.
    pub code: String,
    /// The body, when it was JSON.
    pub body: Value,
}

impl Answer {
    /// `"201"`, `"503 server.not_ready"`, `"no answer"`.
    pub fn label(&self) -> String {
        match self.status {
            Some(status) if status < 400 => status.to_string(),
            Some(status) => format!("{status} {}", self.code),
            None => "no answer".to_owned(),
        }
    }

    /// A 5xx that is not the envelope's retryable 503 (or no envelope at all).
    pub fn is_server_error(&self) -> bool {
        match self.status {
            Some(503) => self.code.is_empty(),
            Some(status) => status >= 500,
            None => false,
        }
    }

    /// Worth retrying with the same idempotency key.
    pub fn is_retryable(&self) -> bool {
        match self.status {
            None => true,
            Some(status) => status >= 500 || status == 429 || self.code.contains("in_progress"),
        }
    }
}

/// The drills' agency: its key and owner.
#[derive(Clone, Debug)]
pub struct Agency {
    /// `agc_…`.
    pub id: String,
    /// The owner, also each listing's agent.
    pub owner: String,
    /// An API key with every scope the drills use.
    pub key: String,
}

/// Everything the drills reach.
#[derive(Clone)]
pub struct Fleet {
    /// The API replicas' base URLs (`http://ip:port`).
    pub apis: Vec<String>,
    /// The database, for checks.
    pub db: PgPool,
    /// Redis, for checks.
    pub redis: redis::Client,
    /// The webhook receiver.
    pub receiver: Receiver,
    /// The hosts.
    pub hosts: Hosts,
    /// The HTTP client.
    pub http: reqwest::Client,
    /// The drills' agency.
    pub agency: Agency,
    /// Workers' heartbeat.
    pub heartbeat: Duration,
    /// Endpoints registered by the drill that runs, removed after it.
    endpoints: Arc<Mutex<Vec<String>>>,
}

impl Fleet {
    /// Connects and creates the drills' agency.
    pub async fn connect(
        apis: Vec<String>,
        database_url: &str,
        redis_url: &str,
        receiver: Receiver,
        heartbeat: Duration,
    ) -> anyhow::Result<Self> {
        let hosts = Hosts::from_env()?;
        let db = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect(database_url)
            .await
            .context("connecting to the fleet's database")?;
        let redis = redis::Client::open(redis_url)?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(3))
            .build()?;
        let agency = bootstrap(&hosts).await?;
        Ok(Self {
            apis,
            db,
            redis,
            receiver,
            hosts,
            http,
            agency,
            heartbeat,
            endpoints: Arc::default(),
        })
    }

    /// A request to replica `replica` as the drills' key.
    pub fn request(
        &self,
        method: reqwest::Method,
        replica: usize,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(
                method,
                format!("{}/api/v1{path}", self.apis[replica % self.apis.len()]),
            )
            .header("X-Forwarded-Proto", "https")
            .header("X-API-Key", &self.agency.key)
    }

    /// Sends and reads the answer.
    pub async fn answer(request: reqwest::RequestBuilder) -> Answer {
        match request.send().await {
            Err(err) => Answer {
                status: None,
                code: err.to_string(),
                body: Value::Null,
            },
            Ok(response) => {
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap_or(Value::Null);
                let code = body["error"]["code"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                Answer {
                    status: Some(status),
                    code,
                    body,
                }
            }
        }
    }

    /// Registers an endpoint on the receiver at `name` for `event_types`.
    pub async fn endpoint(&self, name: &str, event_types: &[&str]) -> anyhow::Result<String> {
        let answer = Self::answer(
            self.request(reqwest::Method::POST, 0, "/webhooks/endpoints")
                .header("X-Idempotency-Key", ulid::Ulid::generate().to_string())
                .json(&json!({
                    "url": self.receiver.url(name),
                    "event_types": event_types,
                    "name": format!("fleet drill {name}"),
                })),
        )
        .await;
        if answer.status != Some(StatusCode::CREATED.as_u16()) {
            bail!("registering the {name} endpoint: {}", answer.label());
        }
        let id = answer.body["id"].as_str().unwrap_or_default().to_owned();
        self.registered_endpoints().push(id.clone());
        Ok(id)
    }

    /// Deletes the endpoints registered since the last call, so the next
    /// drill's writes do not spend their hourly delivery budget (1,000
    /// deliveries per endpoint) and every drill's deliveries are its own.
    pub async fn remove_endpoints(&self) -> anyhow::Result<()> {
        let ids = std::mem::take(&mut *self.registered_endpoints());
        for id in ids {
            let answer = Self::answer(self.request(
                reqwest::Method::DELETE,
                0,
                &format!("/webhooks/endpoints/{id}"),
            ))
            .await;
            if !matches!(answer.status, Some(200 | 204 | 404)) {
                bail!("deleting endpoint {id}: {}", answer.label());
            }
        }
        Ok(())
    }

    fn registered_endpoints(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        match self.endpoints.lock() {
            Ok(endpoints) => endpoints,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The newest event's sequence number (events after it are a drill's).
    pub async fn last_event_seq(&self) -> anyhow::Result<i64> {
        let seq: Option<i64> = sqlx::query_scalar("select max(seq) from events")
            .fetch_one(&self.db)
            .await?;
        Ok(seq.unwrap_or(0))
    }

    /// The ids of this agency's `listing.created` events after `seq`.
    pub async fn listing_events_after(&self, seq: i64) -> anyhow::Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "select event_id from events where agency_id = $1 and seq > $2 \
             and event_type = 'listing.created' order by seq",
        )
        .bind(&self.agency.id)
        .bind(seq)
        .fetch_all(&self.db)
        .await?)
    }

    /// The nonces of every attempt recorded for deliveries to `endpoint`.
    pub async fn attempt_nonces(&self, endpoint: &str) -> anyhow::Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("select nonce from webhook_attempts where endpoint_id = $1")
                .bind(endpoint)
                .fetch_all(&self.db)
                .await?,
        )
    }

    /// How many listings have `address` (one per idempotency key).
    pub async fn listings_at(&self, address: &str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "select count(*) from listings where agency_id = $1 and address = $2",
        )
        .bind(&self.agency.id)
        .bind(address)
        .fetch_one(&self.db)
        .await?)
    }

    /// The status of each of these operations (`processing`, `completed`, `failed`).
    pub async fn operation_statuses(
        &self,
        operations: &[String],
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("select id, status from media_operations where id = any($1)")
                .bind(operations)
                .fetch_all(&self.db)
                .await?;
        Ok(rows.into_iter().collect())
    }

    /// Jobs of `queue` in the hands of workers of `host` (by worker name).
    pub async fn held_by(&self, queue: &str, host: &str) -> anyhow::Result<u64> {
        let mut connection = self.redis.get_multiplexed_async_connection().await?;
        let workers: Vec<String> = connection.zrange(format!("{queue}:workers"), 0, -1).await?;
        let mut held = 0;
        for worker in workers.iter().filter(|w| w.contains(&format!("@{host}-"))) {
            let count: u64 = connection
                .scard(format!("{queue}:inflight:{worker}"))
                .await?;
            held += count;
        }
        Ok(held)
    }

    /// Workers of `host` still registered on `queue`.
    pub async fn registered(&self, queue: &str, host: &str) -> anyhow::Result<usize> {
        let mut connection = self.redis.get_multiplexed_async_connection().await?;
        let workers: Vec<String> = connection.zrange(format!("{queue}:workers"), 0, -1).await?;
        Ok(workers
            .iter()
            .filter(|w| w.contains(&format!("@{host}-")))
            .count())
    }
}

/// Creates the drills' agency, its owner's key with every scope the drills
/// use, and budgets raised out of the way.
async fn bootstrap(hosts: &Hosts) -> anyhow::Result<Agency> {
    let agency = hosts
        .admin(
            &[
                "create-agency",
                "--name",
                &format!("Fleet drill {}", ulid::Ulid::generate()),
            ],
            None,
        )
        .await?;
    let id = agency["agency_id"].as_str().unwrap_or_default().to_owned();
    let owner = agency["owner_user_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut budgets = vec!["set-agency-budgets", "--agency", &id];
    let budget_args: Vec<String> = api::endpoints::AGENCY_BUDGETS
        .iter()
        .map(|b| format!("{}={UNREACHABLE}", b.name))
        .collect();
    for arg in &budget_args {
        budgets.extend(["--budget", arg]);
    }
    hosts.admin(&budgets, None).await?;
    let mut key_args = vec![
        "create-key",
        "--agency",
        &id,
        "--name",
        "fleet drill",
        "--scopes",
        "listings:read,listings:write,media:write,webhooks:read,webhooks:write",
    ];
    let limits: Vec<String> = api::endpoints::ALL
        .iter()
        .map(|e| format!("{}={UNREACHABLE}", e.name))
        .collect();
    for arg in &limits {
        key_args.extend(["--rate-limit", arg]);
    }
    let key = hosts.admin(&key_args, None).await?;
    Ok(Agency {
        id,
        owner,
        key: key["key"].as_str().unwrap_or_default().to_owned(),
    })
}
