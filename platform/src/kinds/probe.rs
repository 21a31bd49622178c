//! `probe`: the canary operators push to check the fleet end to end.

use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, OperationId};
use storage::{Environment, Tenant};

use super::job::Job;

/// A canary operators push to check the worker fleet end to end: it runs
/// `steps` steps of `step_ms` each and publishes its progress, so it exercises
/// the queue, a worker and progress fan-out together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// The operation whose progress it publishes.
    pub operation_id: OperationId,
    /// The agency it reports to.
    pub agency_id: AgencyId,
    /// Whether it belongs to the agency's sandbox.
    pub is_sandbox: bool,
    /// Steps to run.
    pub steps: u32,
    /// Milliseconds per step.
    pub step_ms: u64,
    /// Fail on its only attempt, so it is dead at once: dead jobs made on
    /// purpose, for operators and tests (`api admin enqueue-probe --fail`).
    #[serde(default)]
    pub fail: bool,
}

impl Probe {
    /// The tenant it reports to.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(
            self.agency_id.clone(),
            Environment::from_sandbox_flag(self.is_sandbox),
        )
    }
}

impl Job for Probe {
    const KIND: &'static str = "probe";
    const MAX_ATTEMPTS: usize = 3;

    /// Its operation: each probe has an operation of its own.
    fn dedupe_key(&self) -> Option<String> {
        Some(format!("probe:{}", self.operation_id))
    }

    /// Its agency: agencies take turns.
    fn fairness_key(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }
}
