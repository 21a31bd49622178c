//! `probe`: the canary operators push to see the fleet work end to end. It
//! publishes `processing` for each step and `completed` at the end, with the
//! attempt number, so a re-run after a worker died is visible. A probe
//! enqueued to fail goes dead after its only attempt.

use std::time::Duration;

use platform::kinds::Probe;
use platform::progress::{JobStatus, ProgressEvent, ProgressState};
use storage::StorageError;

use super::{Handler, JobError, WorkerState};

impl Handler for Probe {
    /// A probe asked to fail has one attempt.
    fn attempts_allowed(&self) -> usize {
        if self.fail {
            1
        } else {
            <Self as platform::Job>::MAX_ATTEMPTS
        }
    }

    /// Runs a probe: one state per step, then `completed` (or, asked to
    /// fail, an error after its steps).
    async fn run(&self, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
        match state.platform.store.agencies().get(&self.agency_id).await {
            Err(StorageError::NotFound(_)) => {
                return Err(JobError("probe for an unknown agency".to_owned()));
            }
            Err(err) => return Err(err.into()),
            Ok(_) => {}
        }
        let steps = u64::from(self.steps.max(1));
        for step in 1..=steps {
            tokio::time::sleep(Duration::from_millis(self.step_ms)).await;
            let status = JobStatus::Processing {
                step: Some(step),
                steps: Some(steps),
                attempt,
            };
            publish(state, self, step, status).await?;
        }
        if self.fail {
            return Err(JobError(
                "the probe was enqueued to fail (enqueue-probe --fail)".to_owned(),
            ));
        }
        let done = JobStatus::Completed {
            steps: Some(steps),
            listing_numbers: None,
            attempt,
        };
        publish(state, self, steps + 1, done).await
    }
}

/// Publishes state `seq` of the probe's operation.
async fn publish(
    state: &WorkerState,
    probe: &Probe,
    seq: u64,
    status: JobStatus,
) -> Result<(), JobError> {
    let event = ProgressEvent::Job(status);
    state
        .platform
        .progress
        .publish(
            &probe.tenant(),
            &probe.operation_id,
            ProgressState { event, seq },
        )
        .await?;
    Ok(())
}
