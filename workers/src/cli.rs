//! The `workers` command line: `workers run`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{StorageArgs, WorkerArgs};
use crate::handlers::WorkerState;
use crate::runtime::{self, RuntimeSettings};

/// Job workers of the Media Agency Listing API.
#[derive(Debug, Parser)]
#[command(name = "workers", version, about)]
pub struct Cli {
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
    },
}

/// Opens everything workers need: the store (dispatch fast path wired), the
/// queue and progress fan-out.
pub async fn open(storage: &StorageArgs) -> anyhow::Result<WorkerState> {
    let store = storage.open_store().await?;
    Ok(WorkerState::connect(store, &storage.queue_target(), storage.redis()).await?)
}

/// The runtime settings `args` describe.
pub fn settings(args: &WorkerArgs) -> anyhow::Result<RuntimeSettings> {
    Ok(RuntimeSettings {
        queues: args.queue_concurrency()?,
        heartbeat: args.heartbeat(),
        poll: args.poll(),
        shutdown_timeout: args.shutdown_timeout(),
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
    init_logging();
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
            Command::Run { storage, workers } => {
                let state = open(&storage).await?;
                let settings = settings(&workers)?;
                let store = state.store.clone();
                runtime::run(state, settings, shutdown_signal()).await?;
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

fn init_logging() {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let _ = tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .finish(),
    );
}
