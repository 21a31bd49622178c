#![doc = include_str!("../README.md")]

mod direct_uploads;
mod figures;
mod fixture;
mod job_platform;
mod jobs;
mod jpeg;
mod media;
mod process;
mod purge;
mod scale;
mod scenarios;
mod servers;
mod uploads;
mod webhooks;
mod webhooks_svix;
mod wrk;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The allocator of the `api` and `workers` binaries (mimalloc, SQLite's
/// allocations included), so the API this binary serves in `serve-app`
/// allocates as `api serve` does; the references it serves (the bare axum
/// handler, raw SQLite) use the same.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Benchmarks of the Media Agency Listing API.
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Scenarios, and the server roles they start in child processes.
#[derive(Debug, Subcommand)]
enum Command {
    /// Authenticated GET /listings/{n} against a bare axum JSON handler.
    ListingRead(scenarios::LoadArgs),
    /// Idempotent POST /listings against raw SQLite one-row transactions.
    ListingCreate(scenarios::LoadArgs),
    /// The same routes with and without the middleware stack.
    Middleware(scenarios::LoadArgs),
    /// Every list route's median and p99 on a small and a large seeded database, both backends.
    Scale(scale::ScaleArgs),
    /// The retention purge of millions of expired deliveries, and POST /listings while it runs.
    Purge(purge::PurgeArgs),
    /// No-op job enqueue→ack throughput on the SQLite and Redis queues vs BullMQ on the same Redis.
    Jobs(jobs::JobArgs),
    /// (child) Enqueue no-op jobs, consume them with one worker, print the figures.
    JobConsumer {
        /// Job counts and concurrency.
        #[command(flatten)]
        args: jobs::JobArgs,
        /// Which queue.
        #[arg(long, value_enum)]
        queue: jobs::QueueKind,
        /// Data directory (SQLite queue).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Redis URL (Redis queue).
        #[arg(long)]
        redis_url: Option<String>,
    },
    /// Webhook deliveries per second and commit-to-receiver latency, embedded and Redis queue.
    Webhooks(webhooks::WebhookArgs),
    /// Webhook delivery side by side with Svix server 1.99: four workloads, both queue profiles.
    WebhooksSvix(webhooks_svix::Args),
    /// A 1 GB shoot through tus to the API and to @tus/server with @tus/file-store; memory; a dropping link.
    Uploads(uploads::UploadArgs),
    /// A 1 GB shoot by the API's two doors on the S3 profile (s3s-fs): tus, and direct to the bucket; the API's traffic per GB.
    DirectUploads(direct_uploads::DirectArgs),
    /// (child) A loopback HTTPS webhook receiver recording arrivals.
    WebhookReceiver {
        /// Where to write its certificate (PEM).
        #[arg(long)]
        cert_out: PathBuf,
        /// Answer 500 to every n-th request (0: never).
        #[arg(long, default_value_t = 0)]
        fail_every: u64,
    },
    /// (child) Post numbered events to a system and print when each was sent.
    WebhookPoster(webhooks_svix::PosterArgs),
    /// (child) Commit events at a rate and deliver them to the receiver.
    WebhookSender(webhooks::SenderArgs),
    /// (child) The API on the embedded profile, seeded with a fixture.
    ServeApp {
        /// Data directory.
        #[arg(long)]
        data_dir: PathBuf,
        /// `full` (every middleware) or `unguarded` (handlers behind the global layers only).
        #[arg(long, default_value = "full")]
        stack: String,
        /// Listings the agency holds before serving (`storage::volume`).
        #[arg(long, default_value_t = 0)]
        listings: u64,
    },
    /// (child) A bare axum handler answering GET /bare with a JSON body.
    ServeBare {
        /// File holding the JSON body.
        #[arg(long)]
        body: PathBuf,
    },
    /// Six image variants of a 24 MP JPEG (with `--set mls` the MLS profile's outputs too, with `--set avif` one AVIF output): our engine vs libvips.
    Variants(media::VariantArgs),
    /// The JPEG encoders for the `mls` and `print` variants: speed, size, PSNR.
    JpegEncoders(jpeg::JpegArgs),
    /// (child) Render the six variants of one file (and a set of profile outputs) and write them.
    VariantsRun {
        /// The image.
        #[arg(long)]
        input: PathBuf,
        /// Where the variants are written.
        #[arg(long)]
        out: PathBuf,
        /// What is rendered besides (or instead of) the six variants.
        #[arg(long, value_enum, default_value = "none")]
        set: media::OutputSet,
    },
    /// The API's RSS growth during one streamed 1 GB upload to POST /api/v1/media/upload.
    Upload(media::UploadArgs),
    /// (child) Stream one multipart upload and print the answer.
    UploadClient(media::UploadClientArgs),
    /// The API's RSS with 10,000 open progress streams (server-sent events).
    Sse(media::SseArgs),
    /// (child) Open progress streams and hold them until stdin closes.
    SseClient(media::SseClientArgs),
    /// Job pickup latency after idle gaps of 1 s, 15 s and 120 s, both queue profiles.
    Pickup(job_platform::pickup::PickupArgs),
    /// Agency B's single photo during agency A's 200-photo upload vs on the idle server.
    Fairness(job_platform::fairness::FairnessArgs),
    /// A 10,000-photo library rendered again for a new delivery profile; agency B's photo during it.
    ProfileSweep(job_platform::profile_sweep::ProfileSweepArgs),
    /// (child) One-row transactions on a SQLite file with the store's settings.
    RawSqlite {
        /// Data directory.
        #[arg(long)]
        data_dir: PathBuf,
        /// How long to run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // What the service in this process logs, on stderr: warnings and errors
    // unless `RUST_LOG` says otherwise.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    // The variant engine's child runs without an async runtime, so its peak
    // RSS is the engine's and the binary's alone.
    if let Command::VariantsRun { input, out, set } = &cli.command {
        return match media::variants_run(input, out, *set) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::FAILURE
            }
        };
    }
    // Child servers run on one pinned core: one worker thread is all it can use.
    let single_core = matches!(
        cli.command,
        Command::ServeApp { .. }
            | Command::ServeBare { .. }
            | Command::RawSqlite { .. }
            | Command::JobConsumer { .. }
            | Command::WebhookReceiver { .. }
            | Command::WebhookSender(_)
            | Command::WebhookPoster(_)
            | Command::UploadClient(_)
            | Command::SseClient(_)
    );
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if single_core {
        builder.worker_threads(1);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::ListingRead(args) => scenarios::listing_read(args).await,
            Command::ListingCreate(args) => scenarios::listing_create(args).await,
            Command::Middleware(args) => scenarios::middleware(args).await,
            Command::Scale(args) => scale::scale(args).await,
            Command::Purge(args) => purge::purge(args).await,
            Command::Jobs(args) => tokio::task::spawn_blocking(move || jobs::compare(args)).await?,
            Command::Webhooks(args) => {
                tokio::task::spawn_blocking(move || webhooks::compare(args)).await?
            }
            Command::WebhooksSvix(args) => webhooks_svix::compare(args).await,
            Command::Uploads(args) => uploads::compare(args).await,
            Command::DirectUploads(args) => direct_uploads::compare(args).await,
            Command::WebhookReceiver {
                cert_out,
                fail_every,
            } => webhooks::serve_receiver(cert_out, fail_every).await,
            Command::WebhookPoster(args) => webhooks_svix::run_poster(args).await,
            Command::WebhookSender(args) => webhooks::run_sender(args).await,
            Command::JobConsumer {
                args,
                queue,
                data_dir,
                redis_url,
            } => jobs::consume(args, queue, data_dir, redis_url).await,
            Command::Variants(args) => {
                tokio::task::spawn_blocking(move || media::variants(args)).await?
            }
            Command::VariantsRun { input, out, set } => media::variants_run(&input, &out, set),
            Command::JpegEncoders(args) => {
                tokio::task::spawn_blocking(move || jpeg::jpeg_encoders(args)).await?
            }
            Command::Upload(args) => media::upload(args).await,
            Command::UploadClient(args) => media::upload_client(args).await,
            Command::Sse(args) => media::sse(args).await,
            Command::SseClient(args) => media::sse_client(args).await,
            Command::Pickup(args) => job_platform::pickup::pickup(args).await,
            Command::Fairness(args) => job_platform::fairness::fairness(args).await,
            Command::ProfileSweep(args) => job_platform::profile_sweep::profile_sweep(args).await,
            Command::ServeApp {
                data_dir,
                stack,
                listings,
            } => servers::serve_app(&data_dir, &stack, listings).await,
            Command::ServeBare { body } => servers::serve_bare(&body).await,
            Command::RawSqlite { data_dir, seconds } => {
                servers::raw_sqlite(&data_dir, seconds).await
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
