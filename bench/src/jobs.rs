//! No-op job throughput, enqueue → ack: our queue on SQLite and on Redis, and
//! BullMQ (the reference, `../shared/bench/bullmq`) on the same Redis in the
//! same run.
//!
//! Like the reference's sequential mode: push N jobs in batches, then start
//! one worker process with concurrency C and time it from start to the N-th
//! acknowledged job (the queue says done, not merely "handler returned").
//! Redis runs pinned to core 0, every consumer (ours and Node's) to core 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use apalis::prelude::{
    Attempt, BackendExt, BoxDynError, Data, TaskId, WorkerBuilder, WorkerBuilderExt,
};
use clap::{Args, ValueEnum};
use platform::queue::QueueBackend;
use platform::{Job, JobQueue, PushOptions, QueueTarget};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;
use workers::pause::{Gates, Pausable};
use workers::runtime::{RuntimeSettings, redis_config, sqlite_config};

use crate::figures::median;
use crate::process::pinned;

/// The benchmark's job: carries a number, does nothing.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Noop {
    i: u64,
}

impl Job for Noop {
    const KIND: &'static str = "bench_noop";
    const MAX_ATTEMPTS: usize = 1;

    /// Every push is a job: the benchmark measures the queue, not dedupe.
    fn dedupe_key(&self) -> Option<String> {
        None
    }
}

/// Settings shared by the orchestrator and the consumer.
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// Jobs per measurement.
    #[arg(long, default_value_t = 50_000)]
    jobs: u64,
    /// Jobs one worker runs at once.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Jobs per enqueue batch.
    #[arg(long, default_value_t = 1_000)]
    batch: u64,
    /// Rounds; the median of each system is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Directory of the BullMQ reference (`npm install` done there).
    #[arg(long, default_value = "../shared/bench/bullmq")]
    bullmq_dir: PathBuf,
}

/// Which queue a consumer measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueueKind {
    /// apalis-sqlite in a file (embedded profile).
    Sqlite,
    /// apalis-redis (distributed profile).
    Redis,
}

/// A throwaway Redis on core 0, the way the reference's README starts it.
pub(crate) struct Redis {
    child: std::process::Child,
    port: u16,
}

impl Redis {
    pub(crate) fn start() -> anyhow::Result<Self> {
        Self::start_on(0)
    }

    /// Starts one pinned to `core`.
    pub(crate) fn start_on(core: u32) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            // Benchmarks running several servers give each a database.
            "--databases",
            "64",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let child = pinned(core, "redis-server", &args)
            .stdout(Stdio::null())
            .spawn()
            .context("redis-server (apt-get install redis-server)")?;
        let redis = Self { child, port };
        for _ in 0..100 {
            if redis.cli(&["PING"]).is_ok_and(|out| out.trim() == "PONG") {
                return Ok(redis);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("redis-server did not answer")
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    fn cli(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn version(&self) -> String {
        self.cli(&["INFO", "server"])
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `program args` on core 1 and returns the last JSON line it printed.
fn run_json(mut command: Command, what: &str) -> anyhow::Result<Value> {
    let output = command
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| what.to_owned())?;
    if !output.status.success() {
        bail!("{what} failed with {}", output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .rev()
        .find(|line| line.starts_with('{'))
        .with_context(|| format!("{what} printed no JSON: {text}"))?;
    Ok(serde_json::from_str(line)?)
}

fn ours(args: &JobArgs, kind: QueueKind, redis: &Redis, dir: &Path) -> anyhow::Result<Value> {
    let exe = std::env::current_exe()?;
    let mut child_args: Vec<String> = vec![
        "job-consumer".into(),
        "--queue".into(),
        format!("{kind:?}").to_lowercase(),
        "--jobs".into(),
        args.jobs.to_string(),
        "--concurrency".into(),
        args.concurrency.to_string(),
        "--batch".into(),
        args.batch.to_string(),
    ];
    match kind {
        QueueKind::Sqlite => {
            let run_dir = dir.join(ulid::Ulid::generate().to_string());
            std::fs::create_dir_all(&run_dir)?;
            child_args.extend(["--data-dir".into(), run_dir.to_string_lossy().into_owned()]);
        }
        QueueKind::Redis => {
            redis.cli(&["FLUSHALL"])?;
            child_args.extend(["--redis-url".into(), redis.url()]);
        }
    }
    run_json(
        pinned(1, &exe.to_string_lossy(), &child_args),
        &format!("{kind:?} consumer"),
    )
}

fn bullmq(args: &JobArgs, redis: &Redis) -> anyhow::Result<Value> {
    redis.cli(&["FLUSHALL"])?;
    if !args.bullmq_dir.join("bench.mjs").exists() {
        bail!("no BullMQ reference in {}", args.bullmq_dir.display());
    }
    if !args.bullmq_dir.join("node_modules").exists() {
        bail!("run `npm install` in {} first", args.bullmq_dir.display());
    }
    // The child runs in the reference's directory (its modules resolve from
    // there), so the script is named by its file name.
    let node_args = vec![
        "bench.mjs".to_owned(),
        args.concurrency.to_string(),
        format!("--port={}", redis.port),
        format!("--jobs={}", args.jobs),
        format!("--batch={}", args.batch),
    ];
    let mut command = pinned(1, "node", &node_args);
    command.current_dir(&args.bullmq_dir);
    run_json(command, "BullMQ reference")
}

/// `bench jobs`: every system, `rounds` times, interleaved; medians and ratios.
pub fn compare(args: JobArgs) -> anyhow::Result<()> {
    let redis = Redis::start()?;
    let dir = tempfile::tempdir()?;
    let systems = ["sqlite", "redis", "bullmq"];
    let mut enqueue: Vec<Vec<f64>> = vec![Vec::new(); systems.len()];
    let mut process: Vec<Vec<f64>> = vec![Vec::new(); systems.len()];
    for round in 1..=args.rounds {
        for (index, system) in systems.iter().enumerate() {
            let figures = match *system {
                "sqlite" => ours(&args, QueueKind::Sqlite, &redis, dir.path())?,
                "redis" => ours(&args, QueueKind::Redis, &redis, dir.path())?,
                _ => bullmq(&args, &redis)?,
            };
            eprintln!("round {round} {system}: {figures}");
            enqueue[index].push(figures["enqueue_per_s"].as_f64().unwrap_or(0.0));
            process[index].push(figures["process_per_s"].as_f64().unwrap_or(0.0));
        }
    }
    let enqueue: Vec<f64> = enqueue.iter().map(|v| median(v.clone())).collect();
    let process: Vec<f64> = process.iter().map(|v| median(v.clone())).collect();
    let report = json!({
        "jobs": args.jobs,
        "concurrency": args.concurrency,
        "batch": args.batch,
        "rounds": args.rounds,
        "redis_version": redis.version(),
        "median_enqueue_per_s": {"sqlite": enqueue[0].round(), "redis": enqueue[1].round(), "bullmq": enqueue[2].round()},
        "median_process_per_s": {"sqlite": process[0].round(), "redis": process[1].round(), "bullmq": process[2].round()},
        "ratio_vs_bullmq": {
            "redis_process": (process[1] / process[2] * 100.0).round() / 100.0,
            "sqlite_process": (process[0] / process[2] * 100.0).round() / 100.0,
            "redis_enqueue": (enqueue[1] / enqueue[2] * 100.0).round() / 100.0,
            "sqlite_enqueue": (enqueue[0] / enqueue[2] * 100.0).round() / 100.0,
        },
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// How many of the benchmark's jobs the queue has acknowledged as done.
async fn acknowledged(queue: &JobQueue) -> anyhow::Result<u64> {
    Ok(match queue.backend() {
        QueueBackend::Sqlite(pool) => {
            let (done,): (i64,) =
                sqlx::query_as("select count(*) from Jobs where job_type = $1 and status = 'Done'")
                    .bind(Noop::KIND)
                    .fetch_one(pool)
                    .await?;
            u64::try_from(done).unwrap_or(0)
        }
        QueueBackend::Redis(connection) => {
            let mut connection = connection.clone();
            redis::cmd("SCARD")
                .arg(format!("{}:done", Noop::KIND))
                .query_async(&mut connection)
                .await?
        }
    })
}

struct Finish {
    handled: AtomicUsize,
    target: usize,
    all_handled: Notify,
    queue: JobQueue,
}

/// Does nothing but what every production handler does first: count the
/// start (`workers::handlers::handle`; one Redis round trip on Redis).
async fn noop(
    _job: Noop,
    finish: Data<Arc<Finish>>,
    task_id: TaskId,
    attempt: Attempt,
) -> Result<(), BoxDynError> {
    finish
        .queue
        .count_start::<Noop>(&task_id.to_string(), attempt.current())
        .await?;
    if finish.handled.fetch_add(1, Ordering::Relaxed) + 1 == finish.target {
        finish.all_handled.notify_one();
    }
    Ok(())
}

/// `bench job-consumer` (a child on core 1): enqueue, then consume and time.
pub async fn consume(
    args: JobArgs,
    queue_kind: QueueKind,
    data_dir: Option<PathBuf>,
    redis_url: Option<String>,
) -> anyhow::Result<()> {
    let target = match queue_kind {
        QueueKind::Sqlite => QueueTarget::SqliteFile(
            data_dir
                .context("--data-dir")?
                .join(platform::config::QUEUE_FILE),
        ),
        QueueKind::Redis => QueueTarget::Redis(redis_url.context("--redis-url")?),
    };
    let queue = JobQueue::connect(&target).await?;
    let total = usize::try_from(args.jobs)?;

    let enqueue_started = Instant::now();
    let mut next = 0;
    while next < args.jobs {
        let end = (next + args.batch).min(args.jobs);
        let batch = (next..end)
            .map(|i| (Noop { i }, PushOptions::default()))
            .collect();
        queue.push_many(batch).await?;
        next = end;
    }
    let enqueue_seconds = enqueue_started.elapsed().as_secs_f64();

    // The production worker stack: the same backend configuration, poll
    // interval and pause gate as `workers run` gives every queue.
    let settings = RuntimeSettings {
        queues: [(Noop::KIND, args.concurrency)].into_iter().collect(),
        heartbeat: Duration::from_secs(10),
        poll: Duration::from_millis(200),
        shutdown_timeout: Duration::from_secs(5),
        fetch_batch: None,
        agency_caps: Default::default(),
        schedules: false,
    };
    let gates = Gates::new(&[Noop::KIND]);
    let finish = Arc::new(Finish {
        handled: AtomicUsize::new(0),
        target: total,
        all_handled: Notify::new(),
        queue: queue.clone(),
    });
    let name = format!("bench@{}", ulid::Ulid::generate());
    let started = Instant::now();
    let worker = match queue.backend() {
        QueueBackend::Sqlite(pool) => {
            let storage = JobQueue::sqlite_storage::<Noop>(pool)
                .with_config(sqlite_config::<Noop>(&settings, args.concurrency));
            let worker = WorkerBuilder::new(name)
                .backend(Pausable::new(
                    storage.poll_with_interval(settings.poll),
                    gates.gate(Noop::KIND),
                ))
                .data(finish.clone())
                .concurrency(args.concurrency)
                .build(noop);
            tokio::spawn(async move { worker.run().await.map_err(|e| e.to_string()) })
        }
        QueueBackend::Redis(connection) => {
            let storage =
                JobQueue::redis_storage::<Noop>(connection)
                    .with_config(redis_config::<Noop>(&settings, args.concurrency));
            let worker = WorkerBuilder::new(name)
                .backend(Pausable::new(
                    storage.poll_with_interval(settings.poll),
                    gates.gate(Noop::KIND),
                ))
                .data(finish.clone())
                .concurrency(args.concurrency)
                .build(noop);
            tokio::spawn(async move { worker.run().await.map_err(|e| e.to_string()) })
        }
    };
    tokio::time::timeout(Duration::from_secs(600), finish.all_handled.notified())
        .await
        .context("the jobs did not all run within 10 minutes")?;
    while acknowledged(&queue).await? < args.jobs {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let process_seconds = started.elapsed().as_secs_f64();
    worker.abort();
    println!(
        "{}",
        json!({
            "queue": format!("{queue_kind:?}").to_lowercase(),
            "jobs": args.jobs,
            "concurrency": args.concurrency,
            "enqueue_per_s": (args.jobs as f64 / enqueue_seconds).round(),
            "process_per_s": (args.jobs as f64 / process_seconds).round(),
            "enqueue_ms": (enqueue_seconds * 1000.0).round(),
            "process_ms": (process_seconds * 1000.0).round(),
        })
    );
    Ok(())
}
