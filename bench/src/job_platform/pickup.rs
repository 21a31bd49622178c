//! `bench pickup`: job pickup latency after idle gaps, on both profiles.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use platform::kinds::Probe;
use platform::{JobQueue, PushOptions, QueueTarget};
use serde_json::{Value, json};
use sqlx::SqlitePool;
use storage::ids::{AgencyId, OperationId};

use crate::jobs::Redis;
use crate::media::api_server::{ApiArgs, ApiServer, ServerOptions, start_server};

/// Pickup latency after idle gaps.
#[derive(Debug, Clone, Args)]
pub struct PickupArgs {
    /// Idle gaps before a push, in seconds.
    #[arg(long, value_delimiter = ',', default_value = "1,15,120")]
    gaps: Vec<u64>,
    /// Samples per gap and profile (at least).
    #[arg(long, default_value_t = 20)]
    samples: usize,
    /// `embedded` (SQLite queue), `redis` (the queue on Redis).
    #[arg(long, value_delimiter = ',', default_value = "embedded,redis")]
    profiles: Vec<String>,
    /// About how long one gap's samples may take: longer gaps run servers
    /// side by side to fit.
    #[arg(long, default_value_t = 150)]
    budget_seconds: u64,
    /// Directory of the BullMQ reference (`npm install` done there); it runs
    /// the same gaps on the Redis profile's Redis.
    #[arg(long, default_value = "../shared/bench/bullmq")]
    bullmq_dir: std::path::PathBuf,
    /// The API binary.
    #[command(flatten)]
    api: ApiArgs,
}

/// Pushes to different servers this far apart, so none shares the core
/// with another's pickup.
const STAGGER: Duration = Duration::from_millis(500);
/// A pickup slower than this is reported as a failure.
const GIVE_UP: Duration = Duration::from_secs(60);

/// One server and what pushing to it and reading from it takes.
struct Lane {
    _server: ApiServer,
    agency: AgencyId,
    queue: JobQueue,
    store: SqlitePool,
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
        })
}

impl Lane {
    async fn start(api: &ApiArgs, redis_url: Option<String>) -> anyhow::Result<Self> {
        let options = ServerOptions {
            workers: true,
            redis_url: redis_url.clone(),
            agencies: 1,
        };
        let (server, agencies) = start_server(api, &options).await?;
        let agency = agencies.first().context("a seeded agency")?;
        let agency = AgencyId::parse(&agency.agency_id).context("agency id")?;
        let target = match redis_url {
            Some(url) => QueueTarget::Redis(url),
            None => QueueTarget::SqliteFile(server.data.path().join(platform::config::QUEUE_FILE)),
        };
        let queue = JobQueue::connect(&target).await?;
        let store_file = server.data.path().join(platform::config::SQLITE_FILE);
        let store =
            SqlitePool::connect(&format!("sqlite://{}?mode=ro", store_file.display())).await?;
        Ok(Self {
            _server: server,
            agency,
            queue,
            store,
        })
    }

    /// Pushes a one-step probe; returns how long until the worker recorded
    /// its first state, and waits until it finished.
    async fn probe(&self) -> anyhow::Result<Duration> {
        let operation_id = OperationId::generate();
        let probe = Probe {
            operation_id: operation_id.clone(),
            agency_id: self.agency.clone(),
            is_sandbox: false,
            steps: 1,
            step_ms: 0,
            fail: false,
        };
        let pushed = now_micros();
        self.queue.push(probe, PushOptions::default()).await?;
        let started = self.recorded_at(&operation_id, 1).await?;
        self.recorded_at(&operation_id, 2).await?;
        Ok(Duration::from_micros(
            u64::try_from(started - pushed).unwrap_or(0),
        ))
    }

    /// When the probe's state `seq` was recorded (store clock, microseconds).
    async fn recorded_at(&self, operation_id: &OperationId, seq: i64) -> anyhow::Result<i64> {
        let deadline = tokio::time::Instant::now() + GIVE_UP;
        loop {
            let at: Option<i64> = sqlx::query_scalar(
                "select recorded_at from operation_progress_events where operation_id = ?1 and seq = ?2",
            )
            .bind(operation_id.as_str())
            .bind(seq)
            .fetch_optional(&self.store)
            .await?;
            if let Some(at) = at {
                return Ok(at);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("probe {operation_id} not taken within {GIVE_UP:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Samples of one gap on one profile.
async fn one_gap(
    args: &PickupArgs,
    gap: Duration,
    redis: Option<(&Redis, &mut u32)>,
) -> anyhow::Result<Vec<f64>> {
    let wanted = args.samples.max(1);
    let budget = args.budget_seconds.max(1) as f64;
    let lanes = ((wanted as f64 * gap.as_secs_f64()) / budget).ceil() as usize;
    let lanes = lanes.clamp(1, wanted);
    let per_lane = wanted.div_ceil(lanes);
    let mut urls = Vec::new();
    if let Some((redis, next_db)) = redis {
        for _ in 0..lanes {
            urls.push(Some(format!("{}/{}", redis.url(), *next_db)));
            *next_db += 1;
        }
    } else {
        urls.resize(lanes, None);
    }
    let mut started = Vec::new();
    for url in urls {
        started.push(Lane::start(&args.api, url).await?);
    }
    eprintln!(
        "  gap {} s: {lanes} server(s) × {per_lane} sample(s)",
        gap.as_secs()
    );
    let runs = started.iter().enumerate().map(|(index, lane)| async move {
        // Staggered, so pushes to different servers never meet.
        tokio::time::sleep(STAGGER * u32::try_from(index).unwrap_or(0)).await;
        lane.probe().await?;
        let mut samples = Vec::with_capacity(per_lane);
        for _ in 0..per_lane {
            tokio::time::sleep(gap).await;
            samples.push(lane.probe().await?.as_secs_f64() * 1000.0);
        }
        anyhow::Ok(samples)
    });
    let mut samples = Vec::new();
    for lane in futures::future::join_all(runs).await {
        samples.extend(lane?);
    }
    Ok(samples)
}

/// The reference: BullMQ's pickup after the same gaps on `redis`, its
/// process on core 0 as our servers are (`bench/bullmq_pickup.mjs`).
fn bullmq(args: &PickupArgs, redis: &Redis) -> anyhow::Result<Vec<Value>> {
    if !args.bullmq_dir.join("node_modules").exists() {
        bail!("run `npm install` in {} first", args.bullmq_dir.display());
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bullmq_pickup.mjs");
    let gaps: Vec<String> = args.gaps.iter().map(u64::to_string).collect();
    let output = crate::process::pinned(
        0,
        "node",
        &[
            script.to_string_lossy().into_owned(),
            format!("--dir={}", args.bullmq_dir.display()),
            format!("--port={}", redis.port()),
            format!("--gaps={}", gaps.join(",")),
            format!("--samples={}", args.samples),
            format!("--budget={}", args.budget_seconds),
        ],
    )
    .stderr(std::process::Stdio::inherit())
    .output()
    .context("node (Node >= 20)")?;
    anyhow::ensure!(
        output.status.success(),
        "bullmq_pickup.mjs: {}",
        output.status
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| Ok(serde_json::from_str(line)?))
        .collect()
}

/// `bench pickup`.
pub async fn pickup(args: PickupArgs) -> anyhow::Result<()> {
    let mut report = Vec::new();
    for profile in &args.profiles {
        let redis = super::profile_redis(profile)?;
        let mut next_db = 1;
        for gap in &args.gaps {
            let gap = Duration::from_secs(*gap);
            let redis = redis.as_ref().map(|redis| (redis, &mut next_db));
            let mut samples = one_gap(&args, gap, redis).await?;
            let mut row = super::summary(&mut samples);
            row["profile"] = json!(profile);
            row["gap_s"] = json!(gap.as_secs());
            row["within_100_ms"] = json!(samples.iter().filter(|ms| **ms <= 100.0).count());
            println!("{row}");
            report.push(row);
        }
        if let Some(redis) = &redis {
            let args = args.clone();
            let reference = tokio::task::block_in_place(|| bullmq(&args, redis))?;
            for row in reference {
                let ours = report
                    .iter()
                    .find(|ours| ours["profile"] == "redis" && ours["gap_s"] == row["gap_s"]);
                let ratio = |field: &str| {
                    ours.and_then(|ours| ours[field].as_f64())
                        .zip(row[field].as_f64())
                        .map(|(ours, theirs)| (ours / theirs * 10.0).round() / 10.0)
                };
                let (p50, p99) = (ratio("p50_ms"), ratio("p99_ms"));
                let mut row = row;
                row["redis_ratio_p50"] = json!(p50);
                row["redis_ratio_p99"] = json!(p99);
                println!("{row}");
                report.push(row);
            }
        }
    }
    println!("{}", json!({ "pickup": Value::Array(report) }));
    Ok(())
}
