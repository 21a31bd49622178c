//! `fleet-drill`: the driver of `scripts/fleet drill`. It runs on the fleet's
//! client host, drives the public API of both replicas (listing creates,
//! uploads of photos, webhook endpoints on its own receiver), acts on the
//! other hosts through `scripts/fleet host|link` (kill, stop, start, cut a
//! cable) and checks from the database and Redis that nothing acknowledged
//! was lost. Its last line on stdout is one JSON object: the totals and each
//! drill's verdict.

mod drills;
mod hosts;
mod load;
mod photos;
mod receiver;
mod service;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The fleet drill driver.
#[derive(Debug, Parser)]
#[command(name = "fleet-drill", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes the webhook receiver's self-signed certificate and key
    /// (`receiver.pem`, `receiver-key.pem`) and its CA file
    /// (`receiver-ca.pem`, the same certificate) into a directory.
    Certificate {
        /// The receiver's address.
        #[arg(long)]
        ip: IpAddr,
        /// Directory to write into.
        #[arg(long)]
        out: PathBuf,
    },
    /// Runs the drills (all, or those named with --only).
    Drill(drills::DrillArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("fleet-drill: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match cli.command {
        Command::Certificate { ip, out } => receiver::write_certificate(ip, &out),
        Command::Drill(args) => runtime.block_on(drills::run(args)),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            eprintln!("fleet-drill: {err:#}");
            ExitCode::from(2)
        }
    }
}
