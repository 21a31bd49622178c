//! `sandbox_seed`: an agency's sandbox fixture listings.

use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, OperationId};

use super::job::Job;

/// Seed (or reset) an agency's three sandbox fixture listings, reporting
/// progress under `operation_id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedSandbox {
    /// The operation whose progress it publishes.
    pub operation_id: OperationId,
    /// The agency (`agc_…`) whose sandbox is seeded.
    pub agency_id: AgencyId,
}

impl Job for SeedSandbox {
    const KIND: &'static str = "sandbox_seed";
    const MAX_ATTEMPTS: usize = 5;
    const DEFAULT_CONCURRENCY: usize = 2;

    fn dedupe_key(&self) -> Option<String> {
        Some(format!("sandbox_seed:{}", self.operation_id))
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }
}
