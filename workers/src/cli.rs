//! The `workers` command line: `workers run`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use platform::Platform;
use platform::config::StorageArgs;
use platform::telemetry::{self, LogFormat};

use crate::config::WorkerArgs;
use crate::runtime::{self, RuntimeSettings};

/// Job workers of the Media Agency Listing API.
#[derive(Debug, Parser)]
#[command(name = "workers", version, about)]
pub struct Cli {
    /// Log line format (logs go to stderr).
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consume the queues until SIGTERM.
    Run {
        /// Where data and queue live.
        #[command(flatten)]
        storage: StorageArgs,
        /// How the workers run.
        #[command(flatten)]
        workers: WorkerArgs,
        /// Address of a listener serving `/healthz`, `/readyz` and Prometheus `/metrics` (no credential; bind it where only the orchestrator and the scraper reach it). Unset: none.
        #[arg(long, env = "WORKER_STATUS_LISTEN")]
        status_listen: Option<SocketAddr>,
    },
}

/// The runtime settings `args` describe.
pub fn settings(args: &WorkerArgs) -> anyhow::Result<RuntimeSettings> {
    Ok(RuntimeSettings {
        queues: args.queue_concurrency()?,
        heartbeat: args.heartbeat(),
        poll: args.poll(),
        shutdown_timeout: args.shutdown_timeout(),
        fetch_batch: args.fetch_batch(),
        agency_caps: args.agency_caps()?,
        schedules: !args.no_schedules,
    })
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = terminate => {},
    }
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format, "info");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run {
                storage,
                workers,
                status_listen,
            } => {
                storage.validate()?;
                let metrics = telemetry::install_metrics();
                let platform = Platform::open(&storage)
                    .await?
                    .with_webhooks(workers.webhooks.delivery()?)
                    .with_mailer(workers.mail.mailer()?);
                let settings = settings(&workers)?;
                let store = platform.store.clone();
                let (stop, stopped) = tokio::sync::watch::channel(false);
                let status = match status_listen {
                    Some(listen) => {
                        let listener = telemetry::bind_status(listen).await?;
                        let router = telemetry::status_router(platform.clone(), metrics);
                        Some(tokio::spawn(telemetry::serve_status(
                            listener, router, stopped,
                        )))
                    }
                    None => None,
                };
                let outcome = runtime::run(platform, settings, shutdown_signal()).await;
                // The status listener reports until the last job settled.
                let _ = stop.send(true);
                if let Some(status) = status {
                    status.await??;
                }
                outcome?;
                store.close().await;
                anyhow::Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
