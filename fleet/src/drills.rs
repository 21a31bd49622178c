//! The drills: each puts the fleet under load, does one thing to a host and
//! checks that nothing acknowledged was lost. Each returns its verdict and
//! adds to the run's totals.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::load::{self, Writes};
use crate::receiver::Receiver;
use crate::service::Fleet;

/// Every drill, in the order they run.
pub const DRILLS: [&str; 6] = [
    "api_replicas",
    "kill_worker",
    "kill_api",
    "restart_redis",
    "restart_postgres",
    "partition_worker",
];

/// The queue of media variant jobs.
const VARIANTS: &str = "media_variants";
/// Hosts of a fleet.
const HOSTS: usize = 8;
/// How long committed events may take to arrive: the outbox sweep runs
/// every minute, and a first attempt that failed is retried 30 s later.
const DELIVERY_PATIENCE: Duration = Duration::from_secs(150);
/// How long acknowledged uploads may take to finish.
const UPLOAD_PATIENCE: Duration = Duration::from_secs(300);

/// `fleet-drill drill`.
#[derive(Debug, clap::Args)]
pub struct DrillArgs {
    /// An API replica's base URL (repeat: api-1, then api-2).
    #[arg(long = "api", required = true)]
    apis: Vec<String>,
    /// The fleet's PostgreSQL, for checks.
    #[arg(long)]
    database_url: String,
    /// The fleet's Redis, for checks.
    #[arg(long)]
    redis_url: String,
    /// Where the webhook receiver listens (this host's address).
    #[arg(long)]
    receiver: SocketAddr,
    /// Directory of the receiver's certificate and key.
    #[arg(long)]
    receiver_dir: PathBuf,
    /// Only these drills (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The workers' heartbeat, in seconds.
    #[arg(long, default_value_t = 2)]
    heartbeat_seconds: u64,
    /// How long `partition_worker` keeps worker-2 cut off.
    #[arg(long, default_value_t = 40)]
    partition_seconds: u64,
    /// How long `restart_redis` keeps Redis stopped.
    #[arg(long, default_value_t = 10)]
    redis_outage_seconds: u64,
    /// How long `restart_postgres` keeps PostgreSQL stopped: longer than the
    /// API's wait for a database connection (10 s), so some writes fail.
    #[arg(long, default_value_t = 15)]
    postgres_outage_seconds: u64,
}

/// The run's totals.
#[derive(Debug, Default)]
struct Totals {
    listings_acked: usize,
    listings_lost: usize,
    events_committed: usize,
    events_undelivered: usize,
    uploads_acked: usize,
    uploads_unfinished: usize,
}

/// Runs the drills and prints the verdict as the last line on stdout.
pub async fn run(args: DrillArgs) -> anyhow::Result<bool> {
    for name in &args.only {
        anyhow::ensure!(
            DRILLS.contains(&name.as_str()),
            "no drill {name}; the drills are {}",
            DRILLS.join(", ")
        );
    }
    let receiver = Receiver::start(args.receiver, &args.receiver_dir).await?;
    let fleet = Fleet::connect(
        args.apis.clone(),
        &args.database_url,
        &args.redis_url,
        receiver,
        Duration::from_secs(args.heartbeat_seconds),
    )
    .await?;
    let mut totals = Totals::default();
    let mut verdicts = serde_json::Map::new();
    for name in DRILLS {
        if !args.only.is_empty() && !args.only.iter().any(|only| only == name) {
            continue;
        }
        eprintln!("fleet-drill: {name} …");
        let started = Instant::now();
        let outcome = match name {
            "api_replicas" => api_replicas(&fleet).await,
            "kill_worker" => kill_worker(&fleet, &mut totals).await,
            "kill_api" => kill_api(&fleet, &mut totals).await,
            "restart_redis" => restart_redis(&fleet, &mut totals, args.redis_outage_seconds).await,
            "restart_postgres" => {
                restart_postgres(&fleet, &mut totals, args.postgres_outage_seconds).await
            }
            _ => partition_worker(&fleet, &mut totals, args.partition_seconds).await,
        };
        let mut verdict =
            outcome.unwrap_or_else(|err| json!({"ok": false, "error": format!("{err:#}")}));
        verdict["seconds"] = json!(started.elapsed().as_secs());
        eprintln!("fleet-drill: {name}: {verdict}");
        verdicts.insert(name.to_owned(), verdict);
        // Whatever the drill did, the next one starts with every host up.
        for host in ["db", "redis", "api-1", "api-2", "worker-1", "worker-2"] {
            let _ = fleet.hosts.link(host, true).await;
            if let Err(err) = fleet.hosts.start(host).await {
                eprintln!("fleet-drill: could not restart {host}: {err:#}");
            }
        }
        if let Err(err) = fleet.remove_endpoints().await {
            eprintln!("fleet-drill: could not remove {name}'s endpoints: {err:#}");
        }
    }
    let ok = verdicts.values().all(|v| v["ok"] == true)
        && totals.listings_lost == 0
        && totals.events_undelivered == 0
        && totals.uploads_unfinished == 0;
    let summary = json!({
        "ok": ok,
        "hosts": HOSTS,
        "listings_acked": totals.listings_acked,
        "listings_lost": totals.listings_lost,
        "events_committed": totals.events_committed,
        "events_undelivered": totals.events_undelivered,
        "uploads_acked": totals.uploads_acked,
        "uploads_unfinished": totals.uploads_unfinished,
        "drills": verdicts,
    });
    println!("{summary}");
    Ok(ok)
}

/// Polls `check` every 200 ms until it holds or `patience` runs out.
async fn until<F, Fut>(patience: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + patience;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Listings acknowledged but not readable through `replica`, or not exactly
/// once in the database: (lost, duplicated).
async fn check_writes(fleet: &Fleet, writes: &Writes, replica: usize) -> (usize, usize) {
    let mut lost = 0;
    let mut duplicated = 0;
    for acked in &writes.acked {
        let read = Fleet::answer(fleet.request(
            Method::GET,
            replica,
            &format!("/listings/{}", acked.number),
        ))
        .await;
        let count = fleet.listings_at(&acked.address).await.unwrap_or(0);
        if read.status != Some(200) || count == 0 {
            lost += 1;
        } else if count > 1 {
            duplicated += 1;
        }
    }
    (lost, duplicated)
}

/// Waits for this agency's `listing.created` events after `seq` to arrive
/// at endpoint path `name`: (committed, undelivered).
async fn check_deliveries(fleet: &Fleet, name: &str, seq: i64) -> anyhow::Result<(usize, usize)> {
    let committed = fleet.listing_events_after(seq).await?;
    let missing = |arrived: &[crate::receiver::Arrival]| {
        let arrived: BTreeSet<&str> = arrived.iter().map(|a| a.event_id.as_str()).collect();
        committed
            .iter()
            .filter(|id| !arrived.contains(id.as_str()))
            .count()
    };
    until(DELIVERY_PATIENCE, || async {
        missing(&fleet.receiver.arrivals(name)) == 0
    })
    .await;
    Ok((committed.len(), missing(&fleet.receiver.arrivals(name))))
}

/// Waits for acknowledged uploads to finish: (unfinished, failed).
async fn check_uploads(fleet: &Fleet, operations: &[String]) -> anyhow::Result<(usize, usize)> {
    let finished = |statuses: &BTreeMap<String, String>| {
        operations
            .iter()
            .filter(|op| statuses.get(*op).is_some_and(|s| s != "processing"))
            .count()
    };
    until(UPLOAD_PATIENCE, || async {
        let statuses = fleet
            .operation_statuses(operations)
            .await
            .unwrap_or_default();
        finished(&statuses) == operations.len()
    })
    .await;
    let statuses = fleet.operation_statuses(operations).await?;
    let failed = statuses.values().filter(|s| *s == "failed").count();
    Ok((operations.len() - finished(&statuses), failed))
}

/// Waits (at most a minute) until workers of `host` hold variant jobs, and
/// says how many.
async fn holding(fleet: &Fleet, host: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = fleet.held_by(VARIANTS, host).await.unwrap_or(0);
        if held > 0 || Instant::now() > deadline {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn add_writes(totals: &mut Totals, writes: &Writes, lost: usize) {
    totals.listings_acked += writes.acked.len();
    totals.listings_lost += lost;
}

/// Starts writers and returns the handle to stop them.
fn start_writers(
    fleet: &Fleet,
    drill: &'static str,
    writers: usize,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<Writes>) {
    let (stop, stopped) = watch::channel(false);
    let fleet = fleet.clone();
    let task =
        tokio::spawn(async move { load::write_listings(&fleet, drill, writers, stopped).await });
    (stop, task)
}

async fn stop_writers(
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Writes>,
) -> anyhow::Result<Writes> {
    let _ = stop.send(true);
    task.await.context("the writers")
}

/// An upload through api-1 followed to the end over SSE through api-2, and
/// a key revoked through api-1 refused by api-2 on the next request.
async fn api_replicas(fleet: &Fleet) -> anyhow::Result<Value> {
    let listing = load::one_listing(fleet, "api_replicas")
        .await
        .context("no listing")?;
    let (operations, refused) = load::upload_photos(fleet, &listing, 1, (1200, 900)).await;
    let operation = operations
        .first()
        .with_context(|| format!("the upload was refused: {refused:?}"))?;
    let stream = fleet
        .request(Method::GET, 1, &format!("/progress/{operation}"))
        .header("Accept", "text/event-stream")
        .timeout(UPLOAD_PATIENCE)
        .send()
        .await?;
    let stream_status = stream.status().as_u16();
    let mut events = Vec::new();
    let mut text = String::new();
    let mut body = stream.bytes_stream();
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            if let Some(event) = block
                .lines()
                .find_map(|line| line.strip_prefix("event:").map(|e| e.trim().to_owned()))
            {
                events.push(event);
            }
        }
    }
    let followed = events.last().map(String::as_str) == Some("completed");

    // A second key, used once on api-2 (so api-2 has it cached), revoked by
    // an administrator signed in on api-1.
    let email = format!("ops-{}@fleet.example", ulid::Ulid::generate()).to_lowercase();
    let user = fleet
        .hosts
        .admin(
            &[
                "create-user",
                "--agency",
                &fleet.agency.id,
                "--role",
                "media_agency",
                "--email",
                &email,
            ],
            None,
        )
        .await?;
    let user_id = user["user_id"].as_str().unwrap_or_default().to_owned();
    let password = format!("fleet-{}", ulid::Ulid::generate());
    fleet
        .hosts
        .admin(
            &[
                "set-password",
                "--agency",
                &fleet.agency.id,
                "--user",
                &user_id,
            ],
            Some(&password),
        )
        .await?;
    let key = fleet
        .hosts
        .admin(
            &[
                "create-key",
                "--agency",
                &fleet.agency.id,
                "--name",
                "revoked across replicas",
            ],
            None,
        )
        .await?;
    let (plaintext, key_id) = (
        key["key"].as_str().unwrap_or_default().to_owned(),
        key["key_id"].as_str().unwrap_or_default().to_owned(),
    );
    let with_key = |replica: usize| {
        fleet
            .http
            .get(format!("{}/api/v1/listings?limit=1", fleet.apis[replica]))
            .header("X-Forwarded-Proto", "https")
            .header("X-API-Key", &plaintext)
    };
    let before = Fleet::answer(with_key(1)).await;
    let login = fleet
        .http
        .post(format!("{}/api/v1/session", fleet.apis[0]))
        .header("X-Forwarded-Proto", "https")
        .json(&json!({"email": email, "password": password}))
        .send()
        .await?;
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .to_owned();
    let session: Value = login.json().await.unwrap_or(Value::Null);
    let csrf = session["csrf_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let revoked = Fleet::answer(
        fleet
            .http
            .delete(format!("{}/api/v1/agency/api-keys/{key_id}", fleet.apis[0]))
            .header("X-Forwarded-Proto", "https")
            .header("Cookie", &cookie)
            .header("X-CSRF-Token", &csrf),
    )
    .await;
    let revoked_at = Instant::now();
    let next = Fleet::answer(with_key(1)).await;
    let refused_at_once = next.status == Some(401);
    let refused = refused_at_once
        || until(Duration::from_secs(30), || async {
            Fleet::answer(with_key(1)).await.status == Some(401)
        })
        .await;
    let refused_after_ms = refused.then(|| revoked_at.elapsed().as_millis());
    Ok(json!({
        "ok": stream_status == 200 && followed && before.status == Some(200)
            && revoked.status == Some(200) && refused_at_once,
        "progress_through_api_2": {"status": stream_status, "events": events},
        "key_before_revoke": before.label(),
        "revoke_through_api_1": revoked.label(),
        "next_request_through_api_2": next.label(),
        "refused_after_ms": refused_after_ms,
    }))
}

/// `kill -9` of worker-1 while it holds variant jobs: worker-2 finishes them.
async fn kill_worker(fleet: &Fleet, totals: &mut Totals) -> anyhow::Result<Value> {
    let listing = load::one_listing(fleet, "kill_worker")
        .await
        .context("no listing")?;
    let (operations, refused) = load::upload_photos(fleet, &listing, 8, (1600, 1200)).await;
    totals.uploads_acked += operations.len();
    let held = holding(fleet, "worker-1").await;
    fleet.hosts.kill("worker-1").await?;
    let killed = Instant::now();
    // worker-2 notices the missed heartbeats and takes the jobs back.
    let handed_back = until(Duration::from_secs(60), || async {
        fleet.registered(VARIANTS, "worker-1").await.unwrap_or(1) == 0
    })
    .await;
    let rescued_ms = killed.elapsed().as_millis();
    let (unfinished, failed) = check_uploads(fleet, &operations).await?;
    let finished_ms = killed.elapsed().as_millis();
    totals.uploads_unfinished += unfinished;
    fleet.hosts.start("worker-1").await?;
    let heartbeat_ms = fleet.heartbeat.as_millis();
    Ok(json!({
        "ok": held > 0 && refused.is_empty() && handed_back && unfinished == 0 && failed == 0
            && rescued_ms <= 3 * heartbeat_ms + heartbeat_ms,
        "jobs_held_at_kill": held,
        "uploads_acked": operations.len(),
        "uploads_refused": refused,
        "uploads_unfinished": unfinished,
        "uploads_failed": failed,
        "heartbeat_ms": heartbeat_ms,
        "rescued_after_ms": rescued_ms,
        "all_finished_after_ms": finished_ms,
    }))
}

/// `kill -9` of api-1 under write load: every acknowledged write is readable
/// through api-2 and every committed event is delivered.
async fn kill_api(fleet: &Fleet, totals: &mut Totals) -> anyhow::Result<Value> {
    let seq = fleet.last_event_seq().await?;
    fleet.endpoint("kill_api", &["listing.created"]).await?;
    let (stop, task) = start_writers(fleet, "kill_api", 2);
    tokio::time::sleep(Duration::from_secs(3)).await;
    fleet.hosts.kill("api-1").await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let writes = stop_writers(stop, task).await?;
    let (lost, duplicated) = check_writes(fleet, &writes, 1).await;
    add_writes(totals, &writes, lost);
    let (committed, undelivered) = check_deliveries(fleet, "kill_api", seq).await?;
    totals.events_committed += committed;
    totals.events_undelivered += undelivered;
    Ok(json!({
        "ok": lost == 0 && duplicated == 0 && undelivered == 0 && writes.server_errors == 0
            && writes.abandoned.is_empty(),
        "listings_acked": writes.acked.len(),
        "listings_lost": lost,
        "listings_duplicated": duplicated,
        "creates_retried": writes.retried,
        "creates_abandoned": writes.abandoned,
        "answers": writes.answers,
        "events_committed": committed,
        "events_undelivered": undelivered,
    }))
}

/// Redis stopped, then restarted from its append-only file: the API answers
/// cleanly meanwhile, and nothing queued before the stop is lost.
async fn restart_redis(fleet: &Fleet, totals: &mut Totals, outage: u64) -> anyhow::Result<Value> {
    let seq = fleet.last_event_seq().await?;
    fleet
        .endpoint("restart_redis", &["listing.created"])
        .await?;
    let listing = load::one_listing(fleet, "restart_redis")
        .await
        .context("no listing")?;
    let (mut operations, refused) = load::upload_photos(fleet, &listing, 4, (1200, 900)).await;
    let (stop, task) = start_writers(fleet, "restart_redis", 2);
    fleet.hosts.stop("redis").await?;
    let down = Instant::now();
    // Each route, on both replicas, while Redis is away.
    let mut routes: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut server_errors = 0u64;
    while down.elapsed() < Duration::from_secs(outage) {
        for replica in 0..fleet.apis.len() {
            let probes = [
                (
                    "GET /listings",
                    fleet.request(Method::GET, replica, "/listings?limit=5"),
                ),
                (
                    "GET /listings/{listing_number}",
                    fleet.request(Method::GET, replica, &format!("/listings/{listing}")),
                ),
            ];
            for (route, request) in probes {
                let answer = Fleet::answer(request).await;
                server_errors += u64::from(answer.is_server_error());
                *routes
                    .entry(route.to_owned())
                    .or_default()
                    .entry(answer.label())
                    .or_default() += 1;
            }
        }
        let (uploaded, answers) = load::upload_photos(fleet, &listing, 1, (640, 480)).await;
        let label = if uploaded.is_empty() {
            answers.first().cloned().unwrap_or_default()
        } else {
            "200".to_owned()
        };
        server_errors += u64::from(label.starts_with('5') && !label.starts_with("503 "));
        *routes
            .entry("POST /media/upload".to_owned())
            .or_default()
            .entry(label)
            .or_default() += 1;
        operations.extend(uploaded);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    fleet.hosts.start("redis").await?;
    // Workers reconnect by themselves: an upload after the restart finishes.
    let (after, _) = load::upload_photos(fleet, &listing, 1, (640, 480)).await;
    operations.extend(after);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = stop_writers(stop, task).await?;
    let mut creates = writes.answers.clone();
    routes
        .entry("POST /listings".to_owned())
        .or_default()
        .append(&mut creates);
    let (lost, duplicated) = check_writes(fleet, &writes, 1).await;
    add_writes(totals, &writes, lost);
    totals.uploads_acked += operations.len();
    let (unfinished, failed) = check_uploads(fleet, &operations).await?;
    totals.uploads_unfinished += unfinished;
    let (committed, undelivered) = check_deliveries(fleet, "restart_redis", seq).await?;
    totals.events_committed += committed;
    totals.events_undelivered += undelivered;
    let server_errors = server_errors + writes.server_errors;
    Ok(json!({
        "ok": refused.is_empty() && server_errors == 0 && lost == 0 && duplicated == 0
            && unfinished == 0 && failed == 0 && undelivered == 0,
        "outage_seconds": outage,
        "answers_during_outage": routes,
        "server_errors": server_errors,
        "listings_acked": writes.acked.len(),
        "listings_lost": lost,
        "uploads_acked": operations.len(),
        "uploads_unfinished": unfinished,
        "uploads_failed": failed,
        "events_committed": committed,
        "events_undelivered": undelivered,
    }))
}

/// PostgreSQL restarted under load: writes fail cleanly and are retried with
/// the same key into exactly one listing each; nothing is restarted.
async fn restart_postgres(
    fleet: &Fleet,
    totals: &mut Totals,
    outage: u64,
) -> anyhow::Result<Value> {
    let seq = fleet.last_event_seq().await?;
    fleet
        .endpoint("restart_postgres", &["listing.created"])
        .await?;
    let (stop, task) = start_writers(fleet, "restart_postgres", 2);
    tokio::time::sleep(Duration::from_secs(2)).await;
    fleet.hosts.stop("db").await?;
    tokio::time::sleep(Duration::from_secs(outage)).await;
    fleet.hosts.start("db").await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes = stop_writers(stop, task).await?;
    let mut still_running = BTreeMap::new();
    for host in ["api-1", "api-2", "worker-1", "worker-2"] {
        still_running.insert(host, fleet.hosts.running(host).await);
    }
    let (lost, duplicated) = check_writes(fleet, &writes, 0).await;
    add_writes(totals, &writes, lost);
    let (committed, undelivered) = check_deliveries(fleet, "restart_postgres", seq).await?;
    totals.events_committed += committed;
    totals.events_undelivered += undelivered;
    Ok(json!({
        "ok": lost == 0 && duplicated == 0 && undelivered == 0 && writes.server_errors == 0
            && writes.abandoned.is_empty() && still_running.values().all(|r| *r),
        "outage_seconds": outage,
        "listings_acked": writes.acked.len(),
        "listings_lost": lost,
        "listings_duplicated": duplicated,
        "creates_retried": writes.retried,
        "creates_abandoned": writes.abandoned,
        "answers": writes.answers,
        "events_committed": committed,
        "events_undelivered": undelivered,
        "processes_kept_running": still_running,
    }))
}

/// worker-2's cable pulled while it holds jobs: worker-1 rescues them, and
/// when the cable is back worker-2 does not repeat what was already done.
async fn partition_worker(
    fleet: &Fleet,
    totals: &mut Totals,
    seconds: u64,
) -> anyhow::Result<Value> {
    let seq = fleet.last_event_seq().await?;
    fleet
        .endpoint("partition_worker", &["listing.created"])
        .await?;
    let endpoint_id = fleet
        .endpoint("partition_worker_attempts", &["listing.created"])
        .await?;
    let listing = load::one_listing(fleet, "partition_worker")
        .await
        .context("no listing")?;
    let (operations, refused) = load::upload_photos(fleet, &listing, 8, (1600, 1200)).await;
    totals.uploads_acked += operations.len();
    let (stop, task) = start_writers(fleet, "partition_worker", 2);
    let held = holding(fleet, "worker-2").await;
    fleet.hosts.link("worker-2", false).await?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    fleet.hosts.link("worker-2", true).await?;
    let writes = stop_writers(stop, task).await?;
    let (lost, duplicated) = check_writes(fleet, &writes, 0).await;
    add_writes(totals, &writes, lost);
    let (unfinished, failed) = check_uploads(fleet, &operations).await?;
    totals.uploads_unfinished += unfinished;
    let (committed, undelivered) = check_deliveries(fleet, "partition_worker", seq).await?;
    totals.events_committed += committed;
    totals.events_undelivered += undelivered;
    // Every arrival is one recorded attempt, and no attempt arrived twice.
    let _ = check_deliveries(fleet, "partition_worker_attempts", seq).await?;
    let recorded: BTreeSet<String> = fleet
        .attempt_nonces(&endpoint_id)
        .await?
        .into_iter()
        .collect();
    let mut seen = BTreeSet::new();
    let mut repeated = 0;
    let mut unrecorded = 0;
    for arrival in fleet.receiver.arrivals("partition_worker_attempts") {
        if !seen.insert(arrival.nonce.clone()) {
            repeated += 1;
        }
        if !recorded.contains(&arrival.nonce) {
            unrecorded += 1;
        }
    }
    let reconnected = until(Duration::from_secs(30), || async {
        fleet.registered(VARIANTS, "worker-2").await.unwrap_or(0) > 0
    })
    .await;
    Ok(json!({
        "ok": held > 0 && refused.is_empty() && lost == 0 && duplicated == 0 && unfinished == 0
            && failed == 0 && undelivered == 0 && repeated == 0 && unrecorded == 0 && reconnected,
        "partition_seconds": seconds,
        "jobs_held_at_cut": held,
        "uploads_unfinished": unfinished,
        "uploads_failed": failed,
        "listings_acked": writes.acked.len(),
        "listings_lost": lost,
        "events_committed": committed,
        "events_undelivered": undelivered,
        "arrivals_repeating_an_attempt": repeated,
        "arrivals_without_an_attempt_record": unrecorded,
        "worker_2_registered_again": reconnected,
    }))
}
