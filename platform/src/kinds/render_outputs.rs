//! `delivery_outputs`: renders delivery profiles' outputs of photos already
//! processed: one photo's after its focal point moved, or a profile's
//! sweep over an agency's library after the profile was created or
//! changed, a small batch of photos per job so that agencies take turns.

use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, DeliveryProfileId, MediaId};
use storage::{Environment, Tenant};

use super::job::Job;

/// What a render job covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum RenderScope {
    /// Every output of one photo that is not current (its focal point
    /// moved).
    Photo {
        /// The photo (`med_…`).
        media_id: MediaId,
    },
    /// One profile's outputs over the agency's photos, in id order, from
    /// after `after`: a batch per job, the next batch pushed as a job of its
    /// own, until none is left or the profile has moved past `revision`.
    Profile {
        /// The profile (`dpf_…`).
        profile_id: DeliveryProfileId,
        /// The revision the sweep renders; a newer one has its own sweep.
        revision: i64,
        /// The profile's sweep round it belongs to (a resumed profile is
        /// swept again at the same revision, in a round of its own).
        #[serde(default)]
        round: i64,
        /// The last photo of the previous batch.
        after: Option<MediaId>,
        /// Photos rendered by the batches before.
        rendered: u64,
        /// Photos the agency had when the sweep started: counted by the
        /// first batch (a count of a library, kept out of the request that
        /// changed the profile), then carried.
        total: Option<u64>,
    },
}

/// Renders delivery outputs of already processed photos.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderOutputs {
    /// The agency (`agc_…`).
    pub agency_id: AgencyId,
    /// Whether it is sandbox media.
    pub is_sandbox: bool,
    /// What it renders.
    #[serde(flatten)]
    pub scope: RenderScope,
}

impl RenderOutputs {
    /// Photos a sweep renders per job: small enough that another agency's
    /// job waits for at most a few photos of this one.
    pub const BATCH: u32 = 4;

    /// A profile changed this long ago whose sweep has not finished may
    /// have lost the push of its first batch: the maintenance pushes it
    /// again (a sweep the queue still holds is the same job, and dropped).
    pub const LOST_PUSH_AFTER_SECONDS: i64 = 120;

    /// The job of `scope` for `tenant`.
    pub fn new(tenant: &Tenant, scope: RenderScope) -> Self {
        Self {
            agency_id: tenant.agency_id.clone(),
            is_sandbox: tenant.environment.is_sandbox(),
            scope,
        }
    }

    /// Whose photos they are.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(
            self.agency_id.clone(),
            Environment::from_sandbox_flag(self.is_sandbox),
        )
    }
}

impl Job for RenderOutputs {
    const KIND: &'static str = "delivery_outputs";
    const MAX_ATTEMPTS: usize = 3;
    // CPU-bound like the variants: one at a time per process.
    const DEFAULT_CONCURRENCY: usize = 1;

    /// A sweep's batch is one job however often it is pushed. A photo's
    /// render is not deduplicated: a key would also drop the push after a
    /// later move of the focal point once the first render ran, and a
    /// render finding its outputs current does nothing.
    fn dedupe_key(&self) -> Option<String> {
        match &self.scope {
            RenderScope::Photo { .. } => None,
            RenderScope::Profile {
                profile_id,
                revision,
                round,
                after,
                ..
            } => Some(format!(
                "outputs:{profile_id}:{revision}:{round}:{}",
                after.as_ref().map_or("", MediaId::as_str)
            )),
        }
    }

    /// Its agency: agencies take turns.
    fn fairness_key(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }
}
