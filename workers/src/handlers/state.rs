//! `WorkerState`: what every handler can reach: the platform the process
//! runs on, and what only a worker process holds (its first-attempt slots,
//! the per-agency caps of the fair queues, the log of its runs).

use std::sync::Arc;

use platform::Platform;

/// What every handler can reach. Cloned per job; cheap.
#[derive(Clone)]
pub struct WorkerState {
    /// The platform: store, queue, progress, dispatch, media, webhooks, mail.
    pub platform: Platform,
    /// How many first attempts this process makes at once outside the
    /// delivery queue (none where it does not consume that queue).
    pub first_attempt_slots: super::first_attempts::FirstAttemptSlots,
    /// Per-agency caps of the fair queues (none unless configured).
    pub agency_caps: Arc<super::agency_caps::AgencyCaps>,
    /// Where this process's runs are recorded for the ops console (set by
    /// the worker runtime; none elsewhere).
    pub attempt_log: Option<crate::console::AttemptLog>,
}

impl WorkerState {
    /// A worker's state on `platform`, with no slots, caps or run log yet.
    pub fn new(platform: Platform) -> Self {
        Self {
            platform,
            first_attempt_slots: super::first_attempts::FirstAttemptSlots::default(),
            agency_caps: Arc::default(),
            attempt_log: None,
        }
    }

    /// The same state capping each agency's jobs per queue as `caps` says.
    pub fn with_agency_caps(
        mut self,
        caps: std::collections::BTreeMap<&'static str, usize>,
    ) -> Self {
        self.agency_caps = Arc::new(super::agency_caps::AgencyCaps::new(caps));
        self
    }

    /// The same state making first attempts in `slots`.
    pub fn with_first_attempt_slots(
        mut self,
        slots: super::first_attempts::FirstAttemptSlots,
    ) -> Self {
        self.first_attempt_slots = slots;
        self
    }

    /// The same state recording its runs in `log`.
    pub fn with_attempt_log(mut self, log: crate::console::AttemptLog) -> Self {
        self.attempt_log = Some(log);
        self
    }
}
