//! `probe`: the canary operators push to see the fleet work end to end. It
//! publishes `processing` for each step and `completed` at the end, with the
//! attempt number, so a re-run after a worker died is visible.

use std::time::Duration;

use jobs::kinds::Probe;
use serde_json::json;
use storage::ids::AgencyId;
use storage::{Environment, Tenant};

use super::{Handler, JobError, WorkerState};

impl Handler for Probe {
    /// Runs a probe.
    async fn run(&self, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
        run(self, state, attempt).await
    }
}

async fn run(job: &Probe, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
    let agency = AgencyId::parse(&job.agency_id)
        .ok_or_else(|| JobError("probe for an unknown agency".to_owned()))?;
    let tenant = Tenant::new(agency, Environment::from_sandbox_flag(job.is_sandbox));
    let steps = u64::from(job.steps.max(1));
    for step in 1..=steps {
        tokio::time::sleep(Duration::from_millis(job.step_ms)).await;
        let state_now =
            json!({"status": "processing", "step": step, "steps": steps, "attempt": attempt});
        state
            .progress
            .publish(&tenant, &job.operation_id, step, state_now)
            .await?;
    }
    let done = json!({"status": "completed", "steps": steps, "attempt": attempt});
    state
        .progress
        .publish(&tenant, &job.operation_id, steps + 1, done)
        .await?;
    Ok(())
}
