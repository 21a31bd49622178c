//! `media_archive`: a ZIP of an archive operation's originals.

use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, OperationId};
use storage::{Environment, Tenant};

use super::job::Job;

/// Pack the originals of an archive operation's media into a ZIP in the
/// object store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildArchive {
    /// The archive operation (`op_…`).
    pub operation_id: OperationId,
    /// The agency (`agc_…`).
    pub agency_id: AgencyId,
    /// Whether it is sandbox media.
    pub is_sandbox: bool,
}

impl BuildArchive {
    /// Whose archive it is.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(
            self.agency_id.clone(),
            Environment::from_sandbox_flag(self.is_sandbox),
        )
    }
}

impl Job for BuildArchive {
    const KIND: &'static str = "media_archive";
    const MAX_ATTEMPTS: usize = 3;
    const DEFAULT_CONCURRENCY: usize = 2;

    fn dedupe_key(&self) -> Option<String> {
        Some(format!("archive:{}", self.operation_id))
    }

    /// Its agency: agencies take turns.
    fn fairness_key(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }
}
