//! `sandbox_seed`: seeds (or resets) an agency's three sandbox fixture
//! listings in one transaction and reports `processing` then `completed`
//! (with the fixtures' numbers) under the request's operation id.

use platform::kinds::SeedSandbox;
use platform::progress::{JobStatus, ProgressEvent, ProgressState};
use storage::{Environment, Tenant};

use super::{Handler, JobError, WorkerState};

impl Handler for SeedSandbox {
    /// Runs a seeding: `processing`, then `completed` with the fixtures.
    async fn run(&self, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
        let tenant = Tenant::new(self.agency_id.clone(), Environment::Sandbox);
        let publish = |seq: u64, status: JobStatus| {
            let state_now = ProgressState {
                event: ProgressEvent::Job(status),
                seq,
            };
            state
                .platform
                .progress
                .publish(&tenant, &self.operation_id, state_now)
        };
        publish(
            1,
            JobStatus::Processing {
                step: None,
                steps: None,
                attempt,
            },
        )
        .await?;
        let listings = state.platform.store.sandbox().seed(&self.agency_id).await?;
        let listing_numbers = listings
            .into_iter()
            .map(|listing| listing.listing_number)
            .collect();
        publish(
            2,
            JobStatus::Completed {
                steps: None,
                listing_numbers: Some(listing_numbers),
                attempt,
            },
        )
        .await?;
        tracing::info!(agency_id = %self.agency_id, "sandbox fixtures seeded");
        Ok(())
    }
}
