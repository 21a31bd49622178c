//! `media_variants`: the delivery variants of one uploaded media item.

use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, MediaId, OperationId};
use storage::{Environment, Tenant};

use super::job::Job;

/// Make the delivery variants of one uploaded media item and report each
/// step under its upload's operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMedia {
    /// The item (`med_…`).
    pub media_id: MediaId,
    /// Its upload (`op_…`).
    pub operation_id: OperationId,
    /// The agency (`agc_…`).
    pub agency_id: AgencyId,
    /// Whether it is sandbox media.
    pub is_sandbox: bool,
}

impl ProcessMedia {
    /// An item still queued this long after its upload had its push lost:
    /// the media sweep pushes it again (a process that saw its push fail
    /// keeps trying until then).
    pub const LOST_PUSH_AFTER_SECONDS: i64 = 300;

    /// The job of `media`, uploaded by `tenant` under `operation`.
    pub fn new(tenant: &Tenant, operation: &OperationId, media: &MediaId) -> Self {
        Self {
            media_id: media.clone(),
            operation_id: operation.clone(),
            agency_id: tenant.agency_id.clone(),
            is_sandbox: tenant.environment.is_sandbox(),
        }
    }

    /// Whose media it is.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(
            self.agency_id.clone(),
            Environment::from_sandbox_flag(self.is_sandbox),
        )
    }
}

impl Job for ProcessMedia {
    const KIND: &'static str = "media_variants";
    const MAX_ATTEMPTS: usize = 3;
    // Image work is CPU-bound and each job already uses every core (the
    // variant engine runs `available_parallelism` threads): one at a time per
    // process. Measured with `bench fairness` on two cores, two at a time
    // was slower for a backlog and made another agency's photo wait twice as
    // long, each job getting half the cores. Raise it (`--queue
    // media_variants=N`) where fetching originals from the object store,
    // not the CPU, is the bottleneck.
    const DEFAULT_CONCURRENCY: usize = 1;

    /// The item: the upload's push and the sweep's re-push are one job.
    fn dedupe_key(&self) -> Option<String> {
        Some(format!("media:{}", self.media_id))
    }

    /// Its agency: agencies take turns.
    fn fairness_key(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }
}
