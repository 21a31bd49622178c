//! `sandbox_seed`: seeds (or resets) an agency's three sandbox fixture
//! listings in one transaction and reports `processing` then `completed`
//! (with the fixtures' numbers) under the request's operation id.

use jobs::kinds::SeedSandbox;
use serde_json::json;
use storage::ids::AgencyId;
use storage::{Environment, Tenant};

use super::{Handler, JobError, WorkerState};

impl Handler for SeedSandbox {
    /// Runs a seeding.
    async fn run(&self, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
        run(self, state, attempt).await
    }
}

async fn run(job: &SeedSandbox, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
    let agency = AgencyId::parse(&job.agency_id)
        .ok_or_else(|| JobError("sandbox seed for a malformed agency id".to_owned()))?;
    let tenant = Tenant::new(agency.clone(), Environment::Sandbox);
    state
        .progress
        .publish(
            &tenant,
            &job.operation_id,
            1,
            json!({"status": "processing", "attempt": attempt}),
        )
        .await?;
    let listings = state.store.sandbox().seed(&agency).await?;
    let numbers: Vec<&str> = listings
        .iter()
        .map(|listing| listing.listing_number.as_str())
        .collect();
    state
        .progress
        .publish(
            &tenant,
            &job.operation_id,
            2,
            json!({"status": "completed", "listing_numbers": numbers, "attempt": attempt}),
        )
        .await?;
    tracing::info!(agency_id = %agency, "sandbox fixtures seeded");
    Ok(())
}
