//! The job kinds, in one table: one payload type per kind, each with a stable
//! `KIND` that names its queue, its attempts, its default concurrency and its
//! dedupe key. Renaming a Rust type never orphans queued jobs because the
//! queue is named by `KIND`, not by the type; every id in a payload is typed,
//! and serialises as the same text it always did.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use storage::ids::{
    AgencyId, DeliveryId, EventId, MediaId, NotificationId, OperationId, RecoveryId,
    WebhookEndpointId,
};
use storage::{Environment, Tenant};

/// A kind of job.
pub trait Job: Serialize + DeserializeOwned + Send + Sync + Unpin + 'static {
    /// The stable name of the kind and of its queue.
    const KIND: &'static str;
    /// How many times a job of this kind runs before it is dead.
    const MAX_ATTEMPTS: usize;
    /// Jobs of this kind one worker process runs at once unless configured.
    const DEFAULT_CONCURRENCY: usize = 4;

    /// What makes two pushes the same work: a second push under the key of
    /// a job the queue still holds (waiting, running, or kept after it ran)
    /// is dropped. `None`: every push is a job of its own.
    fn dedupe_key(&self) -> Option<String>;

    /// Whose share of the queue this job is, when the queue is shared fairly
    /// (`crate::queue` tags it so that keys take turns): the agency for media
    /// and archives. `None`: first in, first out.
    fn fairness_key(&self) -> Option<String> {
        None
    }

    /// The agency the job works for, when it names one (the ops console's
    /// history is broken down by it).
    fn agency(&self) -> Option<String> {
        None
    }

    /// The webhook endpoint the job delivers to, when it is a delivery.
    fn endpoint(&self) -> Option<String> {
        None
    }
}

/// Fan committed outbox events out to their subscribers and mark them
/// dispatched, in order. One job carries the events of a batch of commits, so
/// queue traffic does not grow with the events a write emits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchEvents {
    /// The events' ids (`event_id` of the envelope), in commit order.
    pub event_ids: Vec<EventId>,
}

impl DispatchEvents {
    /// Most events one job carries.
    pub const MAX_EVENTS: usize = 100;

    /// Jobs for `event_ids`, at most [`Self::MAX_EVENTS`] each.
    pub fn chunked(event_ids: Vec<EventId>) -> Vec<Self> {
        event_ids
            .chunks(Self::MAX_EVENTS)
            .map(|chunk| Self {
                event_ids: chunk.to_vec(),
            })
            .collect()
    }
}

impl Job for DispatchEvents {
    const KIND: &'static str = "outbox_dispatch";
    const MAX_ATTEMPTS: usize = 10;

    /// A digest of its events, so the same set pushed twice (a sweep
    /// repeating itself while an earlier job waits dead, say) is dropped,
    /// while any other set is a new job.
    fn dedupe_key(&self) -> Option<String> {
        let mut digest = Sha256::new();
        for id in &self.event_ids {
            digest.update(id.as_str().as_bytes());
            digest.update(b"\n");
        }
        let digest = digest.finalize();
        Some(format!("events:{}", hex::encode(&digest[..16])))
    }
}

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

/// Make attempt `attempt` of a webhook delivery. The HTTP retry schedule is
/// the delivery's own (each failed attempt pushes the next with `run_at`);
/// the job's attempts only cover a worker failing before it recorded one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliverWebhook {
    /// The delivery (`whd_…`).
    pub delivery_id: DeliveryId,
    /// Which attempt, from 1.
    pub attempt: u32,
    /// The delivery's endpoint (`whe_…`): endpoints take turns. Absent from
    /// jobs pushed before the field existed; those go first in, first out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<WebhookEndpointId>,
}

impl Job for DeliverWebhook {
    const KIND: &'static str = "webhook_delivery";
    const MAX_ATTEMPTS: usize = 5;
    /// Attempts wait on receivers, not on the core. As many as write
    /// pacing's default backlog (100, `WEBHOOK_BACKLOG_LIMIT`) and more: a
    /// paced burst's first attempts then fit the process's first-attempt
    /// slots (as many again) instead of spilling into the queue. The api
    /// crate asserts this at compile time, and `api serve` warns when a
    /// configured backlog limit outgrows the configured slots.
    const DEFAULT_CONCURRENCY: usize = 128;

    /// The attempt: each attempt number of a delivery is pushed once.
    fn dedupe_key(&self) -> Option<String> {
        Some(format!("{}:{}", self.delivery_id, self.attempt))
    }

    /// Its endpoint: a slow or busy endpoint does not hold up the others.
    fn fairness_key(&self) -> Option<String> {
        self.endpoint_id.as_ref().map(ToString::to_string)
    }

    fn endpoint(&self) -> Option<String> {
        self.endpoint_id.as_ref().map(ToString::to_string)
    }
}

impl DeliverWebhook {
    /// The job of a due attempt.
    pub fn of(due: storage::webhooks::DueAttempt) -> Self {
        Self {
            delivery_id: due.delivery_id,
            attempt: u32::try_from(due.attempt).unwrap_or(1),
            endpoint_id: Some(due.endpoint_id),
        }
    }
}

/// Re-send, one at a time at its own pace, every delivery of an endpoint that
/// failed since a time (`POST /webhooks/endpoints/{id}/recover`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverWebhookEndpoint {
    /// The recovery (`whr_…`), which records its progress.
    pub recovery_id: RecoveryId,
    /// The endpoint.
    pub endpoint_id: WebhookEndpointId,
    /// Its agency.
    pub agency_id: AgencyId,
}

impl Job for RecoverWebhookEndpoint {
    const KIND: &'static str = "webhook_recovery";
    const MAX_ATTEMPTS: usize = 5;
    const DEFAULT_CONCURRENCY: usize = 2;

    /// The recovery: pushed once.
    fn dedupe_key(&self) -> Option<String> {
        Some(format!("recovery:{}", self.recovery_id))
    }

    fn agency(&self) -> Option<String> {
        Some(self.agency_id.to_string())
    }

    fn endpoint(&self) -> Option<String> {
        Some(self.endpoint_id.to_string())
    }
}

/// E-mail a recorded notification to its recipient.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendNotification {
    /// The notification (`ntf_…`).
    pub notification_id: NotificationId,
}

impl Job for SendNotification {
    const KIND: &'static str = "notification_email";
    const MAX_ATTEMPTS: usize = 8;

    fn dedupe_key(&self) -> Option<String> {
        Some(format!("notification:{}", self.notification_id))
    }
}

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

/// The names of every queue, in the order operators see them.
pub const QUEUES: [&str; 8] = [
    DispatchEvents::KIND,
    DeliverWebhook::KIND,
    RecoverWebhookEndpoint::KIND,
    SendNotification::KIND,
    ProcessMedia::KIND,
    BuildArchive::KIND,
    SeedSandbox::KIND,
    Probe::KIND,
];

/// The queues shared fairly between agencies (their jobs' fairness key is
/// the agency); `--agency-concurrency` caps these.
pub const AGENCY_QUEUES: [&str; 3] = [ProcessMedia::KIND, BuildArchive::KIND, Probe::KIND];

/// The queues shared fairly (their jobs name a [`Job::fairness_key`]):
/// between agencies, and for webhook deliveries between endpoints.
pub const FAIR_QUEUES: [&str; 4] = [
    AGENCY_QUEUES[0],
    AGENCY_QUEUES[1],
    AGENCY_QUEUES[2],
    DeliverWebhook::KIND,
];

/// A queue's default concurrency.
pub fn default_concurrency(queue: &str) -> usize {
    match queue {
        DeliverWebhook::KIND => DeliverWebhook::DEFAULT_CONCURRENCY,
        DispatchEvents::KIND => DispatchEvents::DEFAULT_CONCURRENCY,
        SeedSandbox::KIND => SeedSandbox::DEFAULT_CONCURRENCY,
        ProcessMedia::KIND => ProcessMedia::DEFAULT_CONCURRENCY,
        BuildArchive::KIND => BuildArchive::DEFAULT_CONCURRENCY,
        SendNotification::KIND => SendNotification::DEFAULT_CONCURRENCY,
        RecoverWebhookEndpoint::KIND => RecoverWebhookEndpoint::DEFAULT_CONCURRENCY,
        _ => Probe::DEFAULT_CONCURRENCY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fair_queues_are_the_kinds_with_a_fairness_key() {
        let agency = AgencyId::generate();
        let tenant = Tenant::new(agency.clone(), Environment::Live);
        let media = ProcessMedia::new(&tenant, &OperationId::generate(), &MediaId::generate());
        assert_eq!(media.fairness_key(), Some(agency.to_string()));
        assert!(FAIR_QUEUES.contains(&ProcessMedia::KIND));
        assert!(FAIR_QUEUES.contains(&BuildArchive::KIND));
        assert!(FAIR_QUEUES.contains(&Probe::KIND));
        let endpoint = WebhookEndpointId::generate();
        let delivery = DeliverWebhook::of(storage::webhooks::DueAttempt {
            delivery_id: DeliveryId::generate(),
            endpoint_id: endpoint.clone(),
            attempt: 2,
        });
        assert_eq!(delivery.attempt, 2);
        assert_eq!(delivery.fairness_key(), Some(endpoint.to_string()));
        assert!(FAIR_QUEUES.contains(&DeliverWebhook::KIND));
        assert!(!AGENCY_QUEUES.contains(&DeliverWebhook::KIND));
        assert!(
            AGENCY_QUEUES
                .iter()
                .all(|queue| FAIR_QUEUES.contains(queue))
        );
        // A job pushed before deliveries named their endpoint still reads.
        let earlier: DeliverWebhook =
            serde_json::from_str(r#"{"delivery_id":"whd_01JD00000000000000000000AA","attempt":1}"#)
                .unwrap();
        assert_eq!(earlier.fairness_key(), None);
        assert!(!FAIR_QUEUES.contains(&DispatchEvents::KIND));
    }

    #[test]
    fn kinds_are_stable_and_distinct() {
        assert_eq!(DispatchEvents::KIND, "outbox_dispatch");
        assert_eq!(Probe::KIND, "probe");
        let mut names = QUEUES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), QUEUES.len());
    }

    #[test]
    fn dispatch_jobs_are_chunked_and_keyed_by_their_events() {
        let ids: Vec<EventId> = (0..250).map(|_| EventId::generate()).collect();
        let jobs = DispatchEvents::chunked(ids.clone());
        assert_eq!(
            jobs.iter()
                .map(|job| job.event_ids.len())
                .collect::<Vec<_>>(),
            [100, 100, 50]
        );
        let flattened: Vec<EventId> = jobs.iter().flat_map(|job| job.event_ids.clone()).collect();
        assert_eq!(flattened, ids);
        let again = DispatchEvents::chunked(ids);
        assert_eq!(jobs[0].dedupe_key(), again[0].dedupe_key());
        assert_ne!(jobs[0].dedupe_key(), jobs[1].dedupe_key());
        assert!(DispatchEvents::chunked(Vec::new()).is_empty());
    }

    #[test]
    fn dedupe_keys_name_the_work() {
        let tenant = Tenant::new(AgencyId::generate(), Environment::Sandbox);
        let operation = OperationId::generate();
        let media = MediaId::generate();
        let job = ProcessMedia::new(&tenant, &operation, &media);
        assert_eq!(job.dedupe_key(), Some(format!("media:{media}")));
        assert_eq!(job.tenant(), tenant);
        let delivery = DeliverWebhook {
            delivery_id: DeliveryId::generate(),
            attempt: 3,
            endpoint_id: None,
        };
        assert_eq!(
            delivery.dedupe_key(),
            Some(format!("{}:3", delivery.delivery_id))
        );
        let probe = Probe {
            operation_id: operation,
            agency_id: tenant.agency_id.clone(),
            is_sandbox: true,
            steps: 1,
            step_ms: 1,
            fail: false,
        };
        assert_eq!(
            probe.dedupe_key(),
            Some(format!("probe:{}", probe.operation_id))
        );
    }

    #[test]
    fn payloads_keep_their_wire_form() {
        let media = MediaId::generate();
        let operation = OperationId::generate();
        let agency = AgencyId::generate();
        let job = ProcessMedia {
            media_id: media.clone(),
            operation_id: operation.clone(),
            agency_id: agency.clone(),
            is_sandbox: false,
        };
        let wire = serde_json::json!({
            "media_id": media.as_str(),
            "operation_id": operation.as_str(),
            "agency_id": agency.as_str(),
            "is_sandbox": false,
        });
        assert_eq!(serde_json::to_value(&job).unwrap(), wire);
        assert_eq!(serde_json::from_value::<ProcessMedia>(wire).unwrap(), job);
        let malformed = serde_json::json!({"delivery_id": "whd_x", "attempt": 1});
        assert!(serde_json::from_value::<DeliverWebhook>(malformed).is_err());
    }
}
