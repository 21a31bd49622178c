//! `bench webhooks-svix`: our webhook delivery side by side with the
//! reference, Svix server 1.99 (`../shared/bench/svix/build.sh`), in the same
//! run, both driven through their HTTP APIs.
//!
//! Three systems: Svix (PostgreSQL 15 and Redis 7, its workers in the server
//! process; on C also a second time, retrying on the specification's
//! schedule as ours does, within its own ±20 % jitter), ours on the embedded profile (SQLite store and queue) and ours
//! with the queue on Redis, both the release `api serve` with its workers in
//! process. Each run starts the system afresh, registers the endpoints at one
//! loopback HTTPS receiver (a new one per run, its self-signed certificate
//! trusted by the system), waits `--idle` seconds, then posts events: a
//! listing (`POST /api/v1/listings`, one `listing.created` fanned out to
//! every endpoint) or a Svix message shaped like our envelope. Each event
//! carries a sequence number in its address, so the receiver ties every
//! arrival to the post that caused it.
//!
//! Workloads: (A) one endpoint, events posted as fast as the system accepts
//! them; (B) ten endpoints; (C) one endpoint whose receiver answers 500 to
//! every tenth request, until every event arrived once; (D) one endpoint at
//! a fixed rate, a share of Svix's capacity measured in A, for 30 s.
//!
//! The system under test runs pinned to core 0; the receiver, the posting
//! client, Redis and PostgreSQL to core 1.
//!
//! Layout: `svix` builds and runs the reference, `ours` runs ours, `poster`
//! is the posting client (a child role), `figures` turns posts and arrivals
//! into the table.

mod figures;
mod ours;
mod poster;
mod svix;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::ValueEnum;
use serde_json::Value;

use crate::media::api_server::ApiArgs;
use crate::webhooks::{ReceivedRequest, ReceiverProcess, start_receiver};

pub use poster::{PosterArgs, run_poster};

/// Settings of `bench webhooks-svix`; the defaults are the issue's.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Events of workload A (one endpoint, posted as fast as accepted).
    #[arg(long, default_value_t = 3_000)]
    events_a: u64,
    /// Events of workload B.
    #[arg(long, default_value_t = 1_000)]
    events_b: u64,
    /// Endpoints of workload B.
    #[arg(long, default_value_t = 10)]
    endpoints_b: u32,
    /// Events of workload C (one endpoint, some requests refused).
    #[arg(long, default_value_t = 1_000)]
    events_c: u64,
    /// In workload C the receiver answers 500 to every n-th request.
    #[arg(long, default_value_t = 10)]
    fail_every: u64,
    /// How long workload D posts at its fixed rate, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds_d: u64,
    /// Workload D's rate as a percentage of Svix's deliveries/s in A.
    #[arg(long, default_value_t = 80)]
    percent_d: u32,
    /// Workload D's rate in events/s, instead of the share of Svix's A
    /// (needed when Svix's A is not part of the run).
    #[arg(long)]
    rate_d: Option<f64>,
    /// Concurrent posting connections (A, B, C), the same for every system.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Idle seconds between a system's start and its first post.
    #[arg(long, default_value_t = 15)]
    idle: u64,
    /// Longest wait, after the last post, for a run's deliveries.
    #[arg(long, default_value_t = 300)]
    deadline: u64,
    /// Workloads to run, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "a,b,c,d")]
    workloads: Vec<Workload>,
    /// Systems to run each workload on, in order. `svix-spec-schedule`
    /// runs only where the receiver refuses requests (C).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "svix,svix-spec-schedule,embedded,redis"
    )]
    systems: Vec<System>,
    /// The reference's build script; it prints the binary's path.
    #[arg(long, default_value = "../shared/bench/svix/build.sh")]
    svix_build: PathBuf,
    /// Where the build script builds (its WORKDIR argument).
    #[arg(long, default_value = "/tmp/svix-ref")]
    svix_workdir: PathBuf,
    /// Run the build script even when its binary is there already (a
    /// rebuild takes about 7 minutes on two cores: the script lays its
    /// patched hyper down anew each time).
    #[arg(long)]
    svix_rebuild: bool,
    /// Our API binary.
    #[command(flatten)]
    api: ApiArgs,
}

/// One workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// One endpoint, events posted as fast as accepted.
    A,
    /// Ten endpoints.
    B,
    /// One endpoint, every n-th request refused.
    C,
    /// One endpoint at a fixed rate.
    D,
}

impl Workload {
    fn label(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
            Self::D => "D",
        }
    }
}

/// One system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum System {
    /// Svix server (PostgreSQL, Redis queue and cache).
    Svix,
    /// Svix server retrying on the specification's schedule (first retry
    /// after 30 s, not 5 s): the same workload as ours where requests fail.
    SvixSpecSchedule,
    /// Ours, embedded profile (SQLite store and queue).
    Embedded,
    /// Ours, the queue on Redis (SQLite store).
    Redis,
}

impl System {
    fn is_svix(self) -> bool {
        matches!(self, Self::Svix | Self::SvixSpecSchedule)
    }

    fn label(self) -> &'static str {
        match self {
            Self::Svix => "Svix 1.99",
            Self::SvixSpecSchedule => "Svix 1.99, the spec's retry schedule",
            Self::Embedded => "Ours, embedded",
            Self::Redis => "Ours, Redis queue",
        }
    }
}

/// What one run asks of a system.
#[derive(Debug, Clone, Copy)]
struct Load {
    workload: Workload,
    endpoints: u32,
    events: u64,
    /// Events per second; `None`: as fast as accepted.
    rate: Option<f64>,
    /// The receiver refuses every n-th request (0: never).
    fail_every: u64,
}

/// A system started for one run, ready to take posts.
struct Target {
    /// Where events are posted.
    post_url: String,
    /// Bearer token.
    token: String,
    /// The JSON body of one post, `{seq}` standing for its sequence number.
    body: String,
    /// The header a post's idempotency key goes in, where one is required.
    idempotency_header: Option<&'static str>,
    /// Keeps the system running; dropping it stops everything.
    _running: Box<dyn Send>,
}

/// A posted event's sequence number, when its post was sent (Unix
/// microseconds) and the status it was answered with.
type Post = (u64, i64, u16);

/// `bench webhooks-svix`.
pub async fn compare(args: Args) -> anyhow::Result<()> {
    let svix_bin = if args.systems.iter().any(|system| system.is_svix()) {
        Some(tokio::task::block_in_place(|| svix::binary(&args))?)
    } else {
        None
    };
    let mut rows: Vec<figures::Row> = Vec::new();
    for &workload in &args.workloads {
        for &system in &args.systems {
            let load = load_of(&args, workload, &rows)?;
            if system == System::SvixSpecSchedule && load.fail_every == 0 {
                // Without a refused request no retry happens: it would be
                // Svix's run again.
                continue;
            }
            eprintln!(
                "webhooks-svix: workload {} on {}: {} event(s) × {} endpoint(s){}",
                workload.label(),
                system.label(),
                load.events,
                load.endpoints,
                load.rate
                    .map(|rate| format!(" at {rate:.0}/s"))
                    .unwrap_or_default()
            );
            let row = one_run(&args, system, load, svix_bin.as_deref()).await?;
            eprintln!("{}", row.json());
            rows.push(row);
        }
    }
    let versions = figures::Versions {
        svix: svix_bin.as_deref().map(svix::version),
        postgres: svix_bin.as_ref().map(|_| svix::postgres_version()),
        redis: figures::redis_version(),
    };
    println!("{}", figures::markdown(&args, &rows, &versions));
    Ok(())
}

/// The load of `workload`; D's rate comes from Svix's A among `done`.
fn load_of(args: &Args, workload: Workload, done: &[figures::Row]) -> anyhow::Result<Load> {
    let one = |events| Load {
        workload,
        endpoints: 1,
        events,
        rate: None,
        fail_every: 0,
    };
    Ok(match workload {
        Workload::A => one(args.events_a),
        Workload::B => Load {
            endpoints: args.endpoints_b,
            ..one(args.events_b)
        },
        Workload::C => Load {
            fail_every: args.fail_every,
            ..one(args.events_c)
        },
        Workload::D => {
            let rate = match args.rate_d {
                Some(rate) => rate,
                None => {
                    let svix_a = done
                        .iter()
                        .find(|row| row.system == System::Svix && row.workload == Workload::A)
                        .and_then(|row| row.deliveries_per_s)
                        .context("workload D offers a share of Svix's A: run A on svix first, or give --rate-d")?;
                    svix_a * f64::from(args.percent_d) / 100.0
                }
            };
            anyhow::ensure!(rate > 0.0, "workload D's rate must be positive");
            let events = (rate * args.seconds_d as f64).round().max(1.0) as u64;
            Load {
                rate: Some(rate),
                ..one(events)
            }
        }
    })
}

/// Starts `system` for `load`, idles, posts, waits for the deliveries and
/// measures; everything it started is stopped when it returns.
async fn one_run(
    args: &Args,
    system: System,
    load: Load,
    svix_bin: Option<&std::path::Path>,
) -> anyhow::Result<figures::Row> {
    let receiver = tokio::task::block_in_place(|| start_receiver(load.fail_every))?;
    let target = match system {
        System::Svix | System::SvixSpecSchedule => {
            let bin = svix_bin.context("the Svix binary")?;
            let schedule = if system == System::Svix {
                svix::RetrySchedule::Svix
            } else {
                svix::RetrySchedule::Specification
            };
            svix::start(bin, &receiver, load.endpoints, schedule).await?
        }
        System::Embedded | System::Redis => {
            ours::start(
                &args.api,
                system == System::Redis,
                &receiver,
                load.endpoints,
            )
            .await?
        }
    };
    tokio::time::sleep(Duration::from_secs(args.idle)).await;
    let posts = post(args, &target, &load).await?;
    let accepted: Vec<&Post> = posts.iter().filter(|p| (200..300).contains(&p.2)).collect();
    if accepted.len() < posts.len() {
        eprintln!(
            "  {} of {} posts were not accepted",
            posts.len() - accepted.len(),
            posts.len()
        );
    }
    let expected = accepted.len() as u64 * u64::from(load.endpoints);
    let requests = wait_for_deliveries(args, &receiver, &accepted, expected).await?;
    Ok(figures::Row::measure(system, &load, &posts, &requests))
}

/// Runs the posting client on core 1 and returns its posts.
async fn post(args: &Args, target: &Target, load: &Load) -> anyhow::Result<Vec<Post>> {
    let exe = std::env::current_exe()?;
    let mut child_args = vec![
        "webhook-poster".to_owned(),
        "--url".into(),
        target.post_url.clone(),
        "--token".into(),
        target.token.clone(),
        "--body".into(),
        target.body.clone(),
        "--events".into(),
        load.events.to_string(),
        "--connections".into(),
        args.connections.to_string(),
        "--rate".into(),
        load.rate.unwrap_or(0.0).to_string(),
    ];
    if let Some(header) = target.idempotency_header {
        child_args.extend(["--idempotency-header".to_owned(), header.to_owned()]);
    }
    let command = crate::process::pinned(1, &exe.to_string_lossy(), &child_args);
    // `output()` captures stderr whatever was set: it is passed on here.
    let output = tokio::process::Command::from(command)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("running the posting client")?;
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!("the posting client failed: {}", output.status);
    }
    let report: Value = serde_json::from_slice(&output.stdout).context("the posts")?;
    Ok(serde_json::from_value(report["posts"].clone())?)
}

/// Polls the receiver until every accepted event arrived successfully at
/// every endpoint (or the deadline passed), then returns every request it
/// answered.
async fn wait_for_deliveries(
    args: &Args,
    receiver: &ReceiverProcess,
    accepted: &[&Post],
    expected: u64,
) -> anyhow::Result<Vec<ReceivedRequest>> {
    let certificate = std::fs::read(&receiver.cert_file)?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([reqwest::Certificate::from_pem(&certificate)?])
        .build()?;
    let requests_url = receiver.url.replace("/hooks", "/requests");
    let accepted_url = receiver.url.replace("/hooks", "/accepted");
    let sequence: std::collections::HashSet<u64> = accepted.iter().map(|p| p.0).collect();
    let deadline = Instant::now() + Duration::from_secs(args.deadline);
    loop {
        // The count is cheap; the whole list is read only once the count
        // says every delivery may be there (a repeated delivery counts too).
        let answered_200: u64 = client.get(&accepted_url).send().await?.json().await?;
        let past_deadline = Instant::now() > deadline;
        if answered_200 >= expected || past_deadline {
            let requests: Vec<ReceivedRequest> =
                client.get(&requests_url).send().await?.json().await?;
            let delivered = figures::distinct_successes(&requests, &sequence);
            if delivered >= expected {
                return Ok(requests);
            }
            if past_deadline {
                eprintln!(
                    "  deadline: {delivered} of {expected} deliveries arrived within {} s",
                    args.deadline
                );
                return Ok(requests);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The receiver's URL for endpoint `n`.
fn endpoint_url(receiver: &ReceiverProcess, n: u32) -> String {
    format!("{}/{n}", receiver.url)
}
