//! The `api` command line: `serve`, `migrate`, `admin` and `ops`. Names, flags and
//! outputs are a contract operators script against.

pub mod admin;
pub mod listen;
pub mod serve;
pub mod upload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{ServeArgs, StorageArgs};
use platform::telemetry::{self, LogFormat};

/// Media Agency Listing API.
#[derive(Debug, Parser)]
#[command(name = "api", version, about)]
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
    /// Run the HTTP API (and, unless --no-workers, the job workers).
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate(StorageArgs),
    /// Operator commands; each prints one JSON object on stdout.
    Admin {
        /// The operator command.
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Follow the key's webhook events and forward each, signed with a
    /// secret made for the session, to a local URL.
    Listen(listen::Listen),
    /// Emit an event type's catalog sample into the sandbox.
    Trigger(listen::Trigger),
    /// Upload a shoot's folder to a listing, resumably (run again to resume).
    Upload(upload::Upload),
    /// The job console: queues, jobs by filter, retry, discard, pause and
    /// resume, against the database and queue directly (the API may be down).
    Ops {
        /// The console command.
        #[command(subcommand)]
        command: admin::OpsCommand,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
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
    runtime.block_on(run(cli))
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Serve(args) => {
            telemetry::init(cli.log_format, "info");
            report(serve::run(*args).await)
        }
        Command::Migrate(storage) => {
            telemetry::init(cli.log_format, "info");
            report(
                storage
                    .connect_and_migrate()
                    .await
                    .map(|_| tracing::info!("migrations applied")),
            )
        }
        Command::Admin { command } => {
            // stdout carries exactly one JSON object; logs stay quiet on stderr.
            telemetry::init(cli.log_format, "warn");
            admin::run(command).await
        }
        Command::Listen(args) => {
            telemetry::init(cli.log_format, "warn");
            report(listen::listen(args).await)
        }
        Command::Trigger(args) => {
            telemetry::init(cli.log_format, "warn");
            report(listen::trigger(args).await)
        }
        Command::Upload(args) => {
            telemetry::init(cli.log_format, "warn");
            report(upload::upload(args).await)
        }
        Command::Ops { command } => {
            telemetry::init(cli.log_format, "warn");
            admin::run_ops(command).await
        }
    }
}

fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
