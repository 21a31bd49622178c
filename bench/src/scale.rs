//! `bench scale`: how the list routes' cost grows with the data. Seeds a
//! small and a large database (`storage::volume`, on SQLite and, given a
//! server, on PostgreSQL), serves the API over each, and times every list
//! route sequentially from one client: median and p99 at both sizes and
//! their ratio.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::db::PoolSettings;
use storage::volume::{Seeded, VolumePlan};
use storage::{Clock, Database, DatabaseTarget, MasterKey, Store};

/// Settings of `bench scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    /// The large database as a share of the volume (1.0: a million
    /// listings, ten million deliveries, five million job runs, a million
    /// progress states).
    #[arg(long, default_value_t = 1.0)]
    large: f64,
    /// The small database, the same way (0.01: ten thousand listings).
    #[arg(long, default_value_t = 0.01)]
    small: f64,
    /// The deliveries, job runs and progress states as a share of their
    /// volume at each size (1.0: as the listings; less to seed faster).
    #[arg(long, default_value_t = 1.0)]
    history: f64,
    /// Only PostgreSQL (with `--postgres-url`), not SQLite.
    #[arg(long)]
    postgres_only: bool,
    /// Timed requests per route and size (after ten to warm up).
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// A PostgreSQL server (`postgres://user@127.0.0.1:5432/postgres`): the
    /// same sizes are seeded in databases made there. Without it, SQLite only.
    #[arg(long)]
    postgres_url: Option<String>,
}

/// One route's timings at one size.
#[derive(Clone, Copy, Debug)]
struct Timing {
    median_ms: f64,
    p99_ms: f64,
}

pub async fn scale(args: ScaleArgs) -> anyhow::Result<()> {
    let mut backends = if args.postgres_only {
        vec![]
    } else {
        vec!["sqlite"]
    };
    if args.postgres_url.is_some() {
        backends.push("postgres");
    }
    let mut table: BTreeMap<(String, String), [Option<Timing>; 2]> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    for backend in backends {
        for (slot, scale) in [(0, args.small), (1, args.large)] {
            let dir = tempfile::tempdir()?;
            let store = open(backend, &args, dir.path(), scale).await?;
            let mut plan = VolumePlan::scaled(scale);
            plan.deliveries = ((plan.deliveries as f64) * args.history).round() as u64;
            plan.job_runs = ((plan.job_runs as f64) * args.history).round() as u64;
            plan.progress_events = ((plan.progress_events as f64) * args.history).round() as u64;
            let started = Instant::now();
            let mut last_report = Instant::now();
            let seeded = store
                .volume()
                .seed(&plan, &mut |part, rows| {
                    if last_report.elapsed() > Duration::from_secs(10) {
                        eprintln!("  {backend} ×{scale}: {part} {rows}");
                        last_report = Instant::now();
                    }
                })
                .await?;
            let seed_seconds = started.elapsed().as_secs_f64();
            // A database that grew over years has been vacuumed and
            // analysed by autovacuum; one bulk-loaded a minute ago has
            // not, and autovacuum would run during the measurement.
            // Its pages written out too, so the checkpoint after a bulk
            // load does not flush during the measurement.
            if let Database::Postgres(pool) = store.db() {
                sqlx::query("vacuum analyze").execute(pool).await?;
                sqlx::query("checkpoint").execute(pool).await?;
            }
            println!(
                "{}",
                json!({
                    "seeded": backend,
                    "scale": scale,
                    "listings": seeded.listings,
                    "deliveries": seeded.deliveries,
                    "job_runs": plan.job_runs,
                    "progress_states": plan.progress_events,
                    "seconds": (seed_seconds * 10.0).round() / 10.0,
                })
            );
            let timings = measure(&store, dir.path(), &seeded, args.requests).await?;
            for (route, timing) in timings {
                let key = (backend.to_owned(), route);
                if !order.contains(&key) {
                    order.push(key.clone());
                }
                table.entry(key).or_default()[slot] = Some(timing);
            }
            store.close().await;
        }
    }
    println!(
        "\n| backend | route | median small | p99 small | median large | p99 large | median ratio | p99 ratio |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for key in order {
        let [Some(small), Some(large)] = table[&key] else {
            continue;
        };
        println!(
            "| {} | `{}` | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2}× | {:.2}× |",
            key.0,
            key.1,
            small.median_ms,
            small.p99_ms,
            large.median_ms,
            large.p99_ms,
            large.median_ms / small.median_ms,
            large.p99_ms / small.p99_ms,
        );
    }
    Ok(())
}

/// A migrated store of `backend`, empty: a SQLite file in `dir`, or a new
/// database on the PostgreSQL server.
async fn open(
    backend: &str,
    args: &ScaleArgs,
    dir: &std::path::Path,
    scale: f64,
) -> anyhow::Result<Store> {
    let target = match backend {
        "sqlite" => DatabaseTarget::SqliteFile(dir.join(api::config::SQLITE_FILE)),
        _ => {
            let server = args.postgres_url.as_deref().context("--postgres-url")?;
            let name = format!(
                "bench_scale_{}_{}",
                (scale * 1_000_000.0).round() as u64,
                ulid::Ulid::generate().to_string().to_lowercase()
            );
            let admin = sqlx::PgPool::connect(server).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
                .execute(&admin)
                .await?;
            admin.close().await;
            let (base, _) = server.rsplit_once('/').context("a database in the URL")?;
            DatabaseTarget::Url(format!("{base}/{name}"))
        }
    };
    let db = Database::connect(&target, &PoolSettings::default()).await?;
    db.migrate().await?;
    Ok(Store::open(db, &MasterKey::generate(), Clock::System).await?)
}

/// Serves the API over `store` (no workers: nothing is queued) and times
/// every list route.
async fn measure(
    store: &Store,
    dir: &std::path::Path,
    seeded: &Seeded,
    requests: usize,
) -> anyhow::Result<Vec<(String, Timing)>> {
    let key = crate::fixture::unbounded_key(
        store,
        &seeded.agency_id,
        &seeded.owner_id,
        "scale",
        vec![Scope::ListingsRead, Scope::UsersRead, Scope::WebhooksRead],
    )
    .await?;
    let queue = platform::QueueTarget::SqliteFile(dir.join(api::config::QUEUE_FILE));
    let platform = platform::Platform::connect(store.clone(), &queue, None).await?;
    let state = api::AppState::new(
        platform,
        api::PublicUrls {
            base_url: "https://api.bench.example".into(),
            legacy_base_url: None,
        },
        api::rate_limit::RateLimiter::in_process(),
    );
    let app = api::app(state, api::TransportPolicy::serve_all());
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let base = format!("http://{}/api/v1", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let _ = api::server::serve(listener, app, None, std::future::pending()).await;
    });
    let client = reqwest::Client::new();
    let get = |path: String| {
        let request = client
            .get(format!("{base}{path}"))
            .header("X-API-Key", &key);
        async move {
            let response = request.send().await?;
            let status = response.status();
            let body: Value = response.json().await?;
            ensure!(status.is_success(), "{status}: {body}");
            anyhow::Ok(body)
        }
    };
    // What the routes read by: a listing, an agent, the endpoint, and
    // cursors 25 pages of 200 deep.
    let first = get("/listings?limit=1".into()).await?;
    let number = first["items"][0]["listing_number"]
        .as_str()
        .context("a listing")?
        .to_owned();
    let agent = seeded.agent_ids[0].to_string();
    let endpoint = seeded.endpoint_id.to_string();
    let deep = |path: String| {
        let get = &get;
        async move {
            let mut cursor = String::new();
            for _ in 0..25 {
                let separator = if path.contains('?') { '&' } else { '?' };
                let page = get(format!("{path}{separator}limit=200&cursor={cursor}")).await?;
                match page["next_cursor"].as_str() {
                    Some(next) if !next.is_empty() => cursor = next.to_owned(),
                    _ => break,
                }
            }
            anyhow::Ok(cursor)
        }
    };
    let listings_cursor = deep("/listings".to_owned()).await?;
    // A working set larger than the single-listing cache (20,000 entries):
    // 30,000 listings read in turn, each read a different one.
    let mut working_set = Vec::new();
    let mut cursor = String::new();
    while working_set.len() < 30_000 {
        let page = get(format!("/listings?limit=200&cursor={cursor}")).await?;
        for item in page["items"].as_array().into_iter().flatten() {
            if let Some(number) = item["listing_number"].as_str() {
                working_set.push(number.to_owned());
            }
        }
        match page["next_cursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = next.to_owned(),
            _ => break,
        }
    }
    let deliveries_path = format!("/webhooks/endpoints/{endpoint}/deliveries");
    let deliveries_cursor = deep(deliveries_path.clone()).await?;
    let routes: Vec<(String, String)> = vec![
        ("GET /listings".into(), "/listings?limit=50".into()),
        (
            "GET /listings, page 26 by cursor".into(),
            format!("/listings?limit=50&cursor={listings_cursor}"),
        ),
        (
            "GET /listings?status=Sold".into(),
            "/listings?limit=50&status=Sold".into(),
        ),
        (
            "GET /listings?status=Off Market".into(),
            "/listings?limit=50&status=Off%20Market".into(),
        ),
        (
            "GET /listings?agent_id".into(),
            format!("/listings?limit=50&agent_id={agent}"),
        ),
        (
            "GET /listings?agent_id&status=Active".into(),
            format!("/listings?limit=50&agent_id={agent}&status=Active"),
        ),
        ("GET /listings/{n}".into(), format!("/listings/{number}")),
        ("GET /users".into(), "/users?limit=50".into()),
        (
            "GET /users?role=agent".into(),
            "/users?limit=50&role=agent".into(),
        ),
        (
            "GET /users?active=true".into(),
            "/users?limit=50&active=true".into(),
        ),
        (
            "GET /webhooks/endpoints".into(),
            "/webhooks/endpoints?limit=50".into(),
        ),
        (
            "GET …/deliveries".into(),
            format!("{deliveries_path}?limit=50"),
        ),
        (
            "GET …/deliveries, page 26 by cursor".into(),
            format!("{deliveries_path}?limit=50&cursor={deliveries_cursor}"),
        ),
    ];
    let mut timings = Vec::new();
    // Every read a different listing of the working set, round and round:
    // warmed by one pass, then timed.
    for number in &working_set {
        get(format!("/listings/{number}")).await?;
    }
    let mut samples = Vec::with_capacity(requests * 10);
    for number in working_set.iter().cycle().take(requests * 10) {
        let started = Instant::now();
        get(format!("/listings/{number}")).await?;
        samples.push(started.elapsed().as_secs_f64() * 1_000.0);
    }
    timings.push((
        "GET /listings/{n}, up to 30,000 different in turn".to_owned(),
        percentiles(samples),
    ));
    for (name, path) in routes {
        for _ in 0..10 {
            get(path.clone()).await?;
        }
        let mut samples = Vec::with_capacity(requests);
        for _ in 0..requests {
            let started = Instant::now();
            get(path.clone()).await?;
            samples.push(started.elapsed().as_secs_f64() * 1_000.0);
        }
        timings.push((name, percentiles(samples)));
    }
    server.abort();
    Ok(timings)
}

/// The median and 99th percentile of `samples` (milliseconds).
fn percentiles(mut samples: Vec<f64>) -> Timing {
    samples.sort_by(f64::total_cmp);
    let at = |share: f64| samples[((samples.len() as f64 * share) as usize).min(samples.len() - 1)];
    Timing {
        median_ms: at(0.5),
        p99_ms: at(0.99),
    }
}
