//! `admin enqueue-probe`: a canary job that proves the queue and the workers
//! run end to end, reporting its progress like any long operation.

use clap::Args;
use serde_json::{Value, json};

use super::error::AdminError;
use super::open::{existing_agency, open_platform};
use crate::config::StorageArgs;

/// `admin enqueue-probe`.
#[derive(Debug, Args)]
pub struct EnqueueProbe {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency the probe reports its progress to (agc_…).
    #[arg(long)]
    agency: String,
    /// Report to the agency's sandbox.
    #[arg(long)]
    sandbox: bool,
    /// Steps the probe runs.
    #[arg(long, default_value_t = 3)]
    steps: u32,
    /// Milliseconds per step.
    #[arg(long, default_value_t = 200)]
    step_ms: u64,
    /// Fail on the only attempt, so each probe is dead at once (dead jobs
    /// made on purpose, to try the ops console's retry and discard).
    #[arg(long)]
    fail: bool,
    /// How many probes to enqueue (1 to 1000).
    #[arg(long, default_value_t = 1)]
    count: u32,
}

/// `admin enqueue-probe`.
pub(super) async fn enqueue_probe(args: EnqueueProbe) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let agency = existing_agency(&platform.store, &args.agency).await?;
    if args.steps == 0 || args.steps > 10_000 {
        return Err(AdminError::new(
            "validation.failed",
            "--steps must be 1 to 10000",
        ));
    }
    if args.count == 0 || args.count > 1_000 {
        return Err(AdminError::new(
            "validation.failed",
            "--count must be 1 to 1000",
        ));
    }
    let mut pushed = Vec::new();
    for _ in 0..args.count {
        let operation_id = storage::ids::OperationId::generate();
        let probe = platform::kinds::Probe {
            operation_id: operation_id.clone(),
            agency_id: agency.clone(),
            is_sandbox: args.sandbox,
            steps: args.steps,
            step_ms: args.step_ms,
            fail: args.fail,
        };
        let job_id = platform
            .queue
            .push(probe, platform::PushOptions::default())
            .await
            .map_err(|err| AdminError::new("server.internal", err.to_string()))?;
        pushed.push(json!({"operation_id": operation_id, "job_id": job_id}));
    }
    // The first probe's ids at the top, as before `--count`.
    let first = pushed[0].clone();
    Ok(json!({
        "operation_id": first["operation_id"],
        "job_id": first["job_id"],
        "probes": pushed,
    }))
}
