//! The server roles: the API (full stack or handlers only), a bare axum JSON
//! handler, and raw SQLite one-row transactions.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use api::principal::Principal;
use api::routes::listings::{create, read};
use api::{AppState, PublicUrls, TransportPolicy};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use clap::Parser;
use serde_json::{Value, json};
use storage::db::PoolSettings;
use storage::{Clock, Database, DatabaseTarget, MasterKey, Store};

use crate::fixture;
use crate::process::announce_and_wait;

/// The worker settings `api serve` starts with when given none.
#[derive(clap::Parser)]
struct DefaultWorkers {
    #[command(flatten)]
    workers: workers::config::WorkerArgs,
}

/// The worker arguments `api serve` runs with when given none.
pub fn default_workers() -> workers::config::WorkerArgs {
    DefaultWorkers::parse_from(["bench"]).workers
}

pub(crate) async fn open_store(data_dir: &Path) -> anyhow::Result<Store> {
    std::fs::create_dir_all(data_dir)?;
    let target = DatabaseTarget::SqliteFile(data_dir.join(api::config::SQLITE_FILE));
    let db = Database::connect(&target, &PoolSettings::default()).await?;
    db.migrate().await?;
    let key = MasterKey::load_or_create(&data_dir.join(api::config::MASTER_KEY_FILE))?;
    Ok(Store::open(db, &key, Clock::System).await?)
}

async fn listen(app: Router) -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(err) = api::server::serve(listener, app, None, std::future::pending()).await {
            eprintln!("server stopped: {err:#}");
        }
    });
    Ok(addr)
}

/// Seeds `plan` and deletes the seeder's webhook endpoint, which points at
/// a receiver that does not exist: the events of the bench's writes would
/// pile up for it and the writes be paced by that backlog (a second each),
/// which is the pacing's work, not what a bench measures.
pub(crate) async fn seed_without_endpoint(
    store: &Store,
    plan: &storage::volume::VolumePlan,
) -> anyhow::Result<storage::volume::Seeded> {
    let seeded = store.volume().seed(plan, &mut |_, _| {}).await?;
    let tenant = storage::Tenant::new(seeded.agency_id.clone(), storage::Environment::Live);
    store
        .webhooks()
        .delete(&tenant, &seeded.endpoint_id)
        .await?;
    Ok(seeded)
}

/// The API with a seeded fixture. `unguarded` serves the same handlers behind
/// the global layers only, with the fixture's principal attached directly.
pub async fn serve_app(data_dir: &Path, stack: &str, listings: u64) -> anyhow::Result<()> {
    let store = open_store(data_dir).await?;
    let volume = if listings > 0 {
        // One agency's listings, spread over its agents and 30 days; no
        // other agencies or history: the requests read and write this one.
        let plan = storage::volume::VolumePlan::listings_only(listings, 50);
        Some(seed_without_endpoint(&store, &plan).await?)
    } else {
        None
    };
    let mut described = fixture::seed(&store, volume.as_ref()).await?;
    let urls = PublicUrls {
        base_url: "https://api.bench.example".into(),
        legacy_base_url: None,
    };
    let queue = platform::QueueTarget::SqliteFile(data_dir.join(api::config::QUEUE_FILE));
    let platform = platform::Platform::connect(store.clone(), &queue, None).await?;
    let state = AppState::new(
        platform.clone(),
        urls,
        api::rate_limit::RateLimiter::in_process(),
    );
    let app = match stack {
        "full" => {
            // As `api serve` runs by default: the workers in process, so the
            // dispatch jobs every create pushes are consumed alongside.
            let settings = workers::cli::settings(&default_workers())?;
            tokio::spawn(async move {
                if let Err(err) =
                    workers::runtime::run(platform, settings, std::future::pending()).await
                {
                    eprintln!("workers stopped: {err:#}");
                }
            });
            api::app(state, TransportPolicy::serve_all())
        }
        "unguarded" => {
            let key = described["key"].as_str().context("fixture key")?;
            let credential = store
                .api_keys()
                .find_by_plaintext(key)
                .await?
                .context("fixture key stored")?;
            let principal = Principal::of(&credential);
            let routes = Router::new()
                .route("/api/v1/listings", post(create::create_listing))
                .route("/api/v1/listings/{listing_number}", get(read::read_listing))
                .layer(Extension(principal))
                .with_state(state);
            let deadlines = api::middleware::deadline::Deadlines {
                deadlines: Default::default(),
                uploads: Default::default(),
            };
            api::middleware::apply(routes, TransportPolicy::serve_all(), Some(deadlines))
        }
        other => anyhow::bail!("unknown stack {other}"),
    };
    let addr = listen(app).await?;
    described["port"] = addr.port().into();
    announce_and_wait(&described).await
}

/// A bare axum handler returning the JSON in `body` at GET /bare.
pub async fn serve_bare(body: &Path) -> anyhow::Result<()> {
    let value: Value = serde_json::from_slice(&std::fs::read(body)?)?;
    let app = Router::new().route(
        "/bare",
        get(move || {
            let value = value.clone();
            async move { Json(value) }
        }),
    );
    let addr = listen(app).await?;
    announce_and_wait(&json!({"port": addr.port()})).await
}

/// Sequential one-row write transactions on a SQLite file opened exactly as
/// the store opens its own (WAL, synchronous=FULL, foreign keys, busy timeout).
pub async fn raw_sqlite(data_dir: &Path, seconds: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    let target = DatabaseTarget::SqliteFile(data_dir.join("raw.sqlite3"));
    let Database::Sqlite(sqlite) = Database::connect(&target, &PoolSettings::default()).await?
    else {
        anyhow::bail!("expected SQLite");
    };
    let pool = sqlite.pool().clone();
    sqlx::query(
        "create table if not exists rows (id text primary key, payload text not null) strict",
    )
    .execute(&pool)
    .await?;
    let payload = "x".repeat(300);
    let started = Instant::now();
    let mut transactions = 0u64;
    while started.elapsed() < Duration::from_secs(seconds) {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("insert into rows (id, payload) values ($1, $2)")
            .bind(ulid::Ulid::generate().to_string())
            .bind(&payload)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        transactions += 1;
    }
    let per_second = transactions as f64 / started.elapsed().as_secs_f64();
    announce_and_wait(&json!({"transactions": transactions, "per_second": per_second})).await
}
