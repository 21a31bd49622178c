//! `bench purge`: the retention purge at volume, and what the writers meet
//! while it runs. A database (SQLite and, given a server, PostgreSQL) holds
//! an agency with its listings and `--expired` webhook deliveries (each with
//! its attempt) finished 31 to 60 days ago, past the 30 days of retention.
//! One client creates listings through the public API (idempotent `POST
//! /listings`, one after another; no workers run, so webhook pacing is off)
//! with nothing else running and while the deliveries' purge runs as the
//! maintenance task runs it (batch after batch, run after run, until nothing
//! is past retention). With `--window S` (the default, 10 s) the two
//! alternate: S seconds of creates with the purge running, then S with it
//! stopped, until the purge is done, so both sides are timed over the same
//! minutes of the same machine, file and disk (and two windows before any
//! purge, as a baseline nothing of a purge can linger in); with `--window 0`,
//! `--requests` quiet creates first, then the whole purge. It prints the
//! create's median and p99 in both phases and their ratio, the purge's
//! rate, and the database's size before the seed, at its peak and after the
//! purge; with `--cycles 2` the seed and purge run twice, so the second peak
//! shows whether the file keeps growing once retention holds.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::ids::WebhookEndpointId;
use storage::volume::VolumePlan;
use storage::{Database, Environment, Store, Tenant};
use workers::handlers::maintenance::{Maintenance, PURGE_BATCH};

use crate::scale::{Timing, backends, open, percentiles};

/// Settings of `bench purge`.
#[derive(Debug, Clone, Args)]
pub struct PurgeArgs {
    /// Expired webhook deliveries (each with its attempt) to purge per cycle.
    #[arg(long, default_value_t = 5_000_000)]
    expired: u64,
    /// Listings of the agency before the seed.
    #[arg(long, default_value_t = 10_000)]
    listings: u64,
    /// Timed creates without a purge (after twenty to warm up), with
    /// `--window 0`.
    #[arg(long, default_value_t = 2_000)]
    requests: usize,
    /// Seconds the purge runs, then rests, in turn while the creates are
    /// timed; 0 times the quiet creates first and then the whole purge.
    #[arg(long, default_value_t = 10)]
    window: u64,
    /// Seed-and-purge cycles (2 shows the file's size once retention holds).
    #[arg(long, default_value_t = 2)]
    cycles: u32,
    /// Only PostgreSQL (with `--postgres-url`), not SQLite.
    #[arg(long)]
    postgres_only: bool,
    /// A PostgreSQL server (`postgres://user@127.0.0.1:5432/postgres`): the
    /// same run on a database made there. Without it, SQLite only.
    #[arg(long)]
    postgres_url: Option<String>,
}

pub async fn purge(args: PurgeArgs) -> anyhow::Result<()> {
    let backends = backends(args.postgres_only, args.postgres_url.as_deref());
    for backend in backends {
        let dir = tempfile::tempdir()?;
        let store = open(backend, args.postgres_url.as_deref(), dir.path(), "purge").await?;
        run(backend, &store, dir.path(), &args).await?;
        store.close().await;
    }
    Ok(())
}

/// The database's size in bytes: the SQLite file's pages in use and free,
/// or PostgreSQL's database.
async fn size_of(store: &Store) -> anyhow::Result<Value> {
    Ok(match store.db() {
        Database::Sqlite(_) => {
            let space = store.file_space().await?.context("a SQLite file")?;
            json!({
                "file_mib": mib(space.pages * 4_096),
                "free_mib": mib(space.free_pages * 4_096),
                "incremental_vacuum": space.incremental,
            })
        }
        Database::Postgres(pool) => {
            let bytes: i64 = sqlx::query_scalar("select pg_database_size(current_database())")
                .fetch_one(pool)
                .await?;
            json!({"database_mib": mib(bytes)})
        }
    })
}

fn mib(bytes: i64) -> f64 {
    (bytes as f64 / 1_048_576.0 * 10.0).round() / 10.0
}

async fn run(
    backend: &str,
    store: &Store,
    dir: &std::path::Path,
    args: &PurgeArgs,
) -> anyhow::Result<()> {
    let plan = VolumePlan::listings_only(args.listings, 10);
    let seeded = store.volume().seed(&plan, &mut |_, _| {}).await?;
    let tenant = Tenant::new(seeded.agency_id.clone(), Environment::Live);
    let key = crate::fixture::unbounded_key(
        store,
        &seeded.agency_id,
        &seeded.owner_id,
        "purge",
        vec![Scope::ListingsWrite],
    )
    .await?;
    let queue = platform::QueueTarget::SqliteFile(dir.join(api::config::QUEUE_FILE));
    let platform = platform::Platform::connect(store.clone(), &queue, None).await?;
    let state = api::AppState::new(
        platform.clone(),
        api::PublicUrls {
            base_url: "https://api.bench.example".into(),
            legacy_base_url: None,
        },
        api::rate_limit::RateLimiter::in_process(),
    )
    // No worker delivers the creates' webhooks here: paced by the agency's
    // webhook backlog, every create would wait out the pacing's second.
    .with_write_pacing(api::pacing::PacingSettings {
        backlog_limit: 0,
        max_wait: Duration::ZERO,
    });
    let app = api::app(state, api::TransportPolicy::serve_all());
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/api/v1/listings", listener.local_addr()?);
    let server = tokio::spawn(async move {
        let _ = api::server::serve(listener, app, None, std::future::pending()).await;
    });
    let client = reqwest::Client::new();
    let body = json!({
        "address": "3 Retention Road, Springfield",
        "owner_user_id": seeded.owner_id.to_string(),
        "agent_one_id": seeded.agent_ids[0].to_string(),
    });
    let run_id = ulid::Ulid::generate();
    let mut counter = 0_u64;
    // One create, timed in milliseconds.
    let mut create = async || -> anyhow::Result<f64> {
        counter += 1;
        let started = Instant::now();
        let response = client
            .post(&url)
            .header("X-API-Key", &key)
            .header("X-Idempotency-Key", format!("{run_id}-{counter}"))
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let body = response.text().await?;
        ensure!(status.as_u16() == 201, "create answered {status}: {body}");
        Ok(started.elapsed().as_secs_f64() * 1_000.0)
    };
    let before_seed = size_of(store).await?;
    println!(
        "{}",
        json!({"backend": backend, "before_seed": before_seed})
    );
    for cycle in 1..=args.cycles {
        let now = store.clock().now();
        let started = Instant::now();
        let mut last_report = Instant::now();
        store
            .volume()
            .deliveries(
                &tenant,
                &seeded.endpoint_id,
                args.expired,
                now.plus_seconds(-60 * 86_400),
                now.plus_seconds(-31 * 86_400),
                &mut |rows| {
                    if last_report.elapsed() > Duration::from_secs(15) {
                        eprintln!("  {backend}: {rows} expired deliveries");
                        last_report = Instant::now();
                    }
                },
            )
            .await?;
        if let Database::Postgres(pool) = store.db() {
            sqlx::query("vacuum analyze").execute(pool).await?;
            sqlx::query("checkpoint").execute(pool).await?;
        }
        let seed_seconds = started.elapsed().as_secs_f64();
        let peak = size_of(store).await?;
        for _ in 0..20 {
            create().await?;
        }
        let mut quiet = Vec::new();
        let mut during = Vec::new();
        let mut before = Vec::new();
        let mut purge = PurgeProgress::default();
        let mut purge_seconds = 0.0;
        if args.window == 0 {
            // Without a purge, then while it runs to the end.
            for _ in 0..args.requests {
                quiet.push(create().await?);
            }
            let started = Instant::now();
            let purging = tokio::spawn(purge_runs(platform.clone()));
            while !purging.is_finished() {
                during.push(create().await?);
            }
            purge = purging.await??;
            purge_seconds = started.elapsed().as_secs_f64();
        } else {
            // Two windows before any purge: what a quiet window between two
            // purge windows may still carry of the last one (pages the
            // database writes back, a checkpoint) is not in these.
            let window = Duration::from_secs(args.window);
            let opened = Instant::now();
            while opened.elapsed() < window * 2 {
                before.push(create().await?);
            }
            // In turn: a window with the purge running, a window without.
            while !purge.finished {
                let purging = tokio::spawn(purge_runs(platform.clone()));
                let opened = Instant::now();
                while opened.elapsed() < window && !purging.is_finished() {
                    during.push(create().await?);
                }
                if purging.is_finished() {
                    purge.add(purging.await??);
                } else {
                    // Stopped mid-run: its batches so far are counted by
                    // the rows left past retention, read when it is done.
                    purging.abort();
                    let _ = purging.await;
                    purge.batches_cut += 1;
                }
                purge_seconds += opened.elapsed().as_secs_f64();
                let opened = Instant::now();
                while opened.elapsed() < window {
                    quiet.push(create().await?);
                }
            }
            // A run stopped while it gave space back leaves the rest to
            // the next run, which finds nothing to purge and so does not
            // reclaim: give back what it left, as a later run would.
            store.reclaim_space().await?;
        }
        let rows = args.expired
            - expired_left(store, &seeded.endpoint_id)
                .await?
                .min(args.expired);
        let after = size_of(store).await?;
        let before_count = before.len();
        let before_purge = (!before.is_empty()).then(|| percentiles(before));
        let (quiet_purge, during_purge): (Timing, Timing) =
            (percentiles(quiet.clone()), percentiles(during.clone()));
        println!(
            "{}",
            json!({
                "backend": backend,
                "cycle": cycle,
                "expired_deliveries": args.expired,
                "seed_seconds": (seed_seconds * 10.0).round() / 10.0,
                "window_seconds": args.window,
                "purged_deliveries": rows,
                "batches_of_finished_runs": purge.batches,
                "runs_stopped_at_a_window_end": purge.batches_cut,
                "purge_seconds": (purge_seconds * 10.0).round() / 10.0,
                "purged_per_second": (rows as f64 / purge_seconds).round(),
                "create_without_purge": {"requests": quiet.len(), "median_ms": round(quiet_purge.median_ms), "p99_ms": round(quiet_purge.p99_ms)},
                "create_during_purge": {"requests": during.len(), "median_ms": round(during_purge.median_ms), "p99_ms": round(during_purge.p99_ms)},
                "median_ratio": round(during_purge.median_ms / quiet_purge.median_ms),
                "p99_ratio": round(during_purge.p99_ms / quiet_purge.p99_ms),
                "create_before_any_purge": before_purge.map(|before: Timing| json!({"requests": before_count, "median_ms": round(before.median_ms), "p99_ms": round(before.p99_ms)})),
                "median_ratio_to_before": before_purge.map(|before: Timing| round(during_purge.median_ms / before.median_ms)),
                "p99_ratio_to_before": before_purge.map(|before: Timing| round(during_purge.p99_ms / before.p99_ms)),
                "size_at_peak": peak,
                "size_after_purge": after,
            })
        );
    }
    server.abort();
    Ok(())
}

/// What the purge's runs did; `finished` once a run found nothing left.
#[derive(Debug, Default)]
struct PurgeProgress {
    batches: u32,
    batches_cut: u32,
    finished: bool,
}

impl PurgeProgress {
    fn add(&mut self, other: PurgeProgress) {
        self.batches += other.batches;
        self.finished |= other.finished;
    }
}

/// The delivery purge as its maintenance task runs it, run after run,
/// until a run finds nothing past retention.
async fn purge_runs(platform: platform::Platform) -> anyhow::Result<PurgeProgress> {
    let mut progress = PurgeProgress::default();
    loop {
        let purged = Maintenance::PurgeDeliveries
            .purge(&platform, PURGE_BATCH)
            .await
            .map_err(|err| anyhow::anyhow!("purge: {err}"))?
            .context("a purge")?;
        progress.batches += purged.batches;
        if purged.rows == 0 {
            progress.finished = true;
            return Ok(progress);
        }
    }
}

/// The deliveries the seeded endpoint still holds (the seeded ones past
/// retention are all it has: no worker fans the creates' events out), from
/// the total the store keeps with them.
async fn expired_left(store: &Store, endpoint_id: &WebhookEndpointId) -> anyhow::Result<u64> {
    let page = store.webhooks().deliveries(endpoint_id, None, 1).await?;
    Ok(u64::try_from(page.total).unwrap_or(0))
}

fn round(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}
