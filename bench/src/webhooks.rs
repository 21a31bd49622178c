//! Webhook deliveries per second and commit-to-receiver latency to a
//! loopback HTTPS receiver, on the embedded profile (SQLite store and queue)
//! and with the queue on Redis.
//!
//! The sender (store, in-process workers, the delivery client) runs pinned
//! to core 0; the receiver, and Redis when used, to core 1. The sender
//! commits listings at a steady rate for a while, each emitting one
//! subscribed event fanned out to every endpoint, waits until every delivery
//! succeeded, and asks the receiver when each arrived. Latency is the
//! arrival time minus the event's commit time (its `occurred_at`, taken
//! inside the writing transaction, so it slightly overstates it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::{get, post};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use storage::listings::NewListing;
use storage::webhooks::{EndpointEnvironment, NewEndpoint};
use storage::{Environment, Tenant};

use crate::jobs::Redis;
use crate::process::{announce_and_wait, pinned};

/// Settings of the webhook benchmark.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Endpoints subscribed to every committed event.
    #[arg(long, default_value_t = 20)]
    pub endpoints: u32,
    /// Events committed per second (deliveries/s = rate × endpoints).
    #[arg(long, default_value_t = 60)]
    pub rate: u32,
    /// How long events are committed.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

/// Where the sender's queue lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Profile {
    /// SQLite store and SQLite queue.
    Embedded,
    /// SQLite store, queue on Redis.
    Redis,
}

/// Runs both profiles and prints the figures.
pub fn compare(args: WebhookArgs) -> anyhow::Result<()> {
    let mut results = Vec::new();
    for profile in [Profile::Embedded, Profile::Redis] {
        let receiver = start_receiver(0)?;
        let redis = match profile {
            Profile::Redis => Some(Redis::start_on(1)?),
            Profile::Embedded => None,
        };
        let data_dir = tempfile::tempdir()?;
        let exe = std::env::current_exe()?;
        let mut child_args = vec![
            "webhook-sender".to_owned(),
            "--profile".into(),
            match profile {
                Profile::Embedded => "embedded".into(),
                Profile::Redis => "redis".into(),
            },
            "--data-dir".into(),
            data_dir.path().to_string_lossy().into_owned(),
            "--receiver-url".into(),
            receiver.url.clone(),
            "--receiver-cert".into(),
            receiver.cert_file.to_string_lossy().into_owned(),
            "--endpoints".into(),
            args.endpoints.to_string(),
            "--rate".into(),
            args.rate.to_string(),
            "--seconds".into(),
            args.seconds.to_string(),
        ];
        if let Some(redis) = &redis {
            child_args.extend(["--redis-url".to_owned(), redis.url()]);
        }
        let output = pinned(0, &exe.to_string_lossy(), &child_args)
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("running the sender")?;
        if !output.status.success() {
            bail!("the sender failed: {}", output.status);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text.lines().last().context("the sender printed nothing")?;
        let result: Value = serde_json::from_str(line)?;
        eprintln!("{result}");
        results.push(result);
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "scenario": "webhooks",
            "goal": ">= 1000 deliveries/s with p99 <= 250 ms",
            "results": results,
        }))?
    );
    Ok(())
}

/// A running receiver role, stopped when dropped.
pub(crate) struct ReceiverProcess {
    child: std::process::Child,
    /// `https://localhost:<port>/hooks`; endpoint `n` is `<url>/<n>`.
    pub(crate) url: String,
    /// Its self-signed certificate (PEM), for the senders to trust.
    pub(crate) cert_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for ReceiverProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the receiver on core 1; with `fail_every` > 0 it answers 500 to
/// every `fail_every`-th request (see [`serve_receiver`]).
pub(crate) fn start_receiver(fail_every: u64) -> anyhow::Result<ReceiverProcess> {
    use std::io::BufRead;
    let dir = tempfile::tempdir()?;
    let cert_file = dir.path().join("receiver.pem");
    let exe = std::env::current_exe()?;
    let args = vec![
        "webhook-receiver".to_owned(),
        "--cert-out".into(),
        cert_file.to_string_lossy().into_owned(),
        "--fail-every".into(),
        fail_every.to_string(),
    ];
    let mut child = pinned(1, &exe.to_string_lossy(), &args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("starting the receiver")?;
    let stdout = child.stdout.take().context("receiver stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let announcement: Value = serde_json::from_str(line.trim())?;
    let port = announcement["port"].as_u64().context("receiver port")?;
    Ok(ReceiverProcess {
        child,
        url: format!("https://localhost:{port}/hooks"),
        cert_file,
        _dir: dir,
    })
}

/// One request the receiver answered: the endpoint (the last path segment
/// after `/hooks/`), the load's sequence number when the body carries one,
/// when it arrived (Unix microseconds) and the status it was answered with.
pub(crate) type ReceivedRequest = (String, Option<u64>, i64, u16);

/// What the receiver keeps.
#[derive(Default)]
struct ReceiverLog {
    /// Accepted requests by event id (`X-Event-Id`), for `bench webhooks`.
    arrivals: Mutex<Vec<(String, i64)>>,
    /// Every request, for `bench webhooks-svix`.
    requests: Mutex<Vec<ReceivedRequest>>,
    /// Answer 500 to every n-th request (0: never).
    fail_every: u64,
    /// Requests so far.
    seen: std::sync::atomic::AtomicU64,
    /// Requests answered 200 so far.
    accepted: std::sync::atomic::AtomicU64,
    /// Deliveries (endpoint, sequence number) refused once already.
    refused: Mutex<std::collections::HashSet<(String, u64)>>,
}

/// The load's sequence number in a delivery's body: the leading number of
/// `data.address` (the bench posts listings, and Svix messages shaped like
/// our envelope, at "<n> Delivery Lane").
fn sequence_number(body: &[u8]) -> Option<u64> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let address = body["data"]["address"].as_str()?;
    let digits: String = address.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

async fn receive(
    State(log): State<Arc<ReceiverLog>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let now = chrono::Utc::now().timestamp_micros();
    let endpoint = uri
        .path()
        .strip_prefix("/hooks/")
        .unwrap_or_default()
        .to_owned();
    let seq = sequence_number(&body);
    let nth = log.seen.fetch_add(1, Ordering::Relaxed) + 1;
    // Every n-th request is refused, but never the same delivery twice: a
    // second refusal would put it on both systems' next retry (minutes
    // later) and the run would measure the schedule's tail, not delivery.
    let refuse = log.fail_every > 0
        && nth.is_multiple_of(log.fail_every)
        && match seq {
            Some(seq) => log
                .refused
                .lock()
                .is_ok_and(|mut refused| refused.insert((endpoint.clone(), seq))),
            None => true,
        };
    let status = if refuse {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    if let Ok(mut requests) = log.requests.lock() {
        requests.push((endpoint, seq, now, status.as_u16()));
    }
    if !refuse {
        log.accepted.fetch_add(1, Ordering::Relaxed);
    }
    if !refuse
        && let Some(event_id) = headers.get("x-event-id").and_then(|v| v.to_str().ok())
        && let Ok(mut arrivals) = log.arrivals.lock()
    {
        arrivals.push((event_id.to_owned(), now));
    }
    status
}

async fn arrivals(State(log): State<Arc<ReceiverLog>>) -> axum::Json<Value> {
    let list = log.arrivals.lock().map(|a| a.clone()).unwrap_or_default();
    axum::Json(json!(list))
}

async fn requests(State(log): State<Arc<ReceiverLog>>) -> axum::Json<Value> {
    let list = log.requests.lock().map(|r| r.clone()).unwrap_or_default();
    axum::Json(json!(list))
}

/// How many requests were answered 200.
async fn accepted(State(log): State<Arc<ReceiverLog>>) -> axum::Json<u64> {
    axum::Json(log.accepted.load(Ordering::Relaxed))
}

/// (child) The receiver: answers 200 (or 500 to every `fail_every`-th
/// request), records when each request arrived.
pub async fn serve_receiver(cert_out: PathBuf, fail_every: u64) -> anyhow::Result<()> {
    api::server::install_crypto_provider();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    std::fs::write(&cert_out, certified.cert.pem())?;
    let tls = api::server::tls_from_pem(
        certified.cert.pem().into_bytes(),
        certified.signing_key.serialize_pem().into_bytes(),
    )
    .await?;
    let log = Arc::new(ReceiverLog {
        fail_every,
        ..ReceiverLog::default()
    });
    let app = Router::new()
        .route("/hooks", post(receive))
        .route("/hooks/{endpoint}", post(receive))
        .route("/arrivals", get(arrivals))
        .route("/requests", get(requests))
        .route("/accepted", get(accepted))
        .with_state(log);
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        if let Err(err) = api::server::serve(listener, app, Some(tls), std::future::pending()).await
        {
            eprintln!("receiver stopped: {err:#}");
        }
    });
    announce_and_wait(&json!({ "port": port })).await
}

/// What the sender child is told.
#[derive(Debug, Clone, Args)]
pub struct SenderArgs {
    /// Queue placement.
    #[arg(long, value_enum)]
    pub profile: Profile,
    /// Data directory.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The receiver.
    #[arg(long)]
    pub receiver_url: String,
    /// The receiver's certificate.
    #[arg(long)]
    pub receiver_cert: PathBuf,
    /// Redis (profile redis).
    #[arg(long)]
    pub redis_url: Option<String>,
    /// Load.
    #[command(flatten)]
    pub load: WebhookArgs,
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)] as f64 / 1000.0
}

/// (child) The system under test: commit events at the rate, deliver them
/// with the production worker runtime, report the figures.
pub async fn run_sender(args: SenderArgs) -> anyhow::Result<()> {
    api::server::install_crypto_provider();
    std::fs::create_dir_all(&args.data_dir)?;
    let target = storage::DatabaseTarget::SqliteFile(args.data_dir.join(api::config::SQLITE_FILE));
    let db = storage::Database::connect(&target, &storage::db::PoolSettings::default()).await?;
    db.migrate().await?;
    let key =
        storage::MasterKey::load_or_create(&args.data_dir.join(api::config::MASTER_KEY_FILE))?;
    let store = storage::Store::open(db, &key, storage::Clock::System).await?;
    let queue = match args.profile {
        Profile::Embedded => {
            platform::QueueTarget::SqliteFile(args.data_dir.join(api::config::QUEUE_FILE))
        }
        Profile::Redis => {
            platform::QueueTarget::Redis(args.redis_url.clone().context("--redis-url")?)
        }
    };
    let cert = std::fs::read(&args.receiver_cert)?;
    let delivery = platform::webhooks::WebhookDelivery {
        client: platform::webhooks::WebhookClient::new(
            platform::webhooks::AddressPolicy {
                allow_private_networks: true,
            },
            Some(&cert),
        )?,
        retry_speedup: 1,
    };
    let platform = platform::Platform::connect(store.clone(), &queue, args.redis_url.as_deref())
        .await?
        .with_webhooks(delivery);

    let fixture = crate::fixture::seed(&store, None).await?;
    let agency =
        storage::ids::AgencyId::parse(fixture["agency_id"].as_str().context("fixture agency")?)
            .context("agency id")?;
    let tenant = Tenant::new(agency, Environment::Live);
    for i in 0..args.load.endpoints {
        store
            .webhooks()
            .create(
                &tenant,
                NewEndpoint {
                    name: Some(format!("bench {i}")),
                    url: format!("{}/{i}", args.receiver_url),
                    event_types: Some(vec!["listing.created".to_owned()]),
                    environment: EndpointEnvironment::Live,
                    ..Default::default()
                },
            )
            .await?;
    }
    let settings = workers::cli::settings(&crate::servers::default_workers())?;
    let workers_platform = platform.clone();
    tokio::spawn(async move {
        if let Err(err) =
            workers::runtime::run(workers_platform, settings, std::future::pending()).await
        {
            eprintln!("workers stopped: {err:#}");
        }
    });

    // Commit at the rate, each commit on its own task so a slow one does not
    // hold back the schedule.
    let owner = fixture["owner_user_id"]
        .as_str()
        .context("owner")?
        .to_owned();
    let agent = fixture["agent_id"].as_str().context("agent")?.to_owned();
    let total = u64::from(args.load.rate) * args.load.seconds;
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.load.rate.max(1)));
    let started = Instant::now();
    let load_started = store.clock().now();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut commits = Vec::with_capacity(total as usize);
    for _ in 0..total {
        ticker.tick().await;
        let store = store.clone();
        let tenant = tenant.clone();
        let (owner, agent) = (owner.clone(), agent.clone());
        commits.push(tokio::spawn(async move {
            store
                .listings()
                .create(
                    &tenant,
                    NewListing {
                        address: "2 Delivery Lane".into(),
                        owner_user_id: owner,
                        agent_one_id: agent,
                        ..Default::default()
                    },
                )
                .await
                .map(|_| ())
        }));
    }
    for commit in commits {
        commit.await??;
    }
    let committed_in = started.elapsed();

    // The load's events and their commit times.
    let committed: HashMap<String, i64> = store
        .outbox()
        .for_tenant(&tenant, 0, u32::MAX)
        .await?
        .into_iter()
        .filter(|e| e.event_type == "listing.created" && e.occurred_at >= load_started)
        .map(|e| (e.event_id.to_string(), e.occurred_at.as_micros()))
        .collect();

    // Wait for every delivery to arrive.
    let expected = total * u64::from(args.load.endpoints);
    let client = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([reqwest::Certificate::from_pem(&cert)?])
        .build()?;
    let arrivals_url = args.receiver_url.replace("/hooks", "/arrivals");
    let deadline = Instant::now() + Duration::from_secs(300);
    let arrivals: Vec<(String, i64)> = loop {
        let arrivals: Vec<(String, i64)> = client.get(&arrivals_url).send().await?.json().await?;
        // Only the load's events count (the fixture's own are delivered too).
        let arrivals: Vec<(String, i64)> = arrivals
            .into_iter()
            .filter(|(event_id, _)| committed.contains_key(event_id))
            .collect();
        if arrivals.len() as u64 >= expected {
            break arrivals;
        }
        if Instant::now() > deadline {
            bail!("{} of {expected} deliveries arrived", arrivals.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // Latency: arrival minus the event's commit time.
    let mut latencies: Vec<i64> = arrivals
        .iter()
        .filter_map(|(event_id, at)| committed.get(event_id).map(|c| at - c))
        .collect();
    latencies.sort_unstable();
    let first_commit = committed.values().copied().min().unwrap_or(0);
    let last_arrival = arrivals.iter().map(|(_, at)| *at).max().unwrap_or(0);
    let span_s = (last_arrival - first_commit) as f64 / 1e6;
    let result = json!({
        "profile": match args.profile { Profile::Embedded => "embedded", Profile::Redis => "redis" },
        "endpoints": args.load.endpoints,
        "events": total,
        "deliveries": arrivals.len(),
        "offered_deliveries_per_s": f64::from(args.load.rate) * f64::from(args.load.endpoints),
        "deliveries_per_s": (arrivals.len() as f64 / span_s).round(),
        "commit_seconds": committed_in.as_secs_f64(),
        "latency_ms": {
            "p50": percentile(&latencies, 50.0),
            "p99": percentile(&latencies, 99.0),
            "max": percentile(&latencies, 100.0),
        },
    });
    println!("{result}");
    Ok(())
}
