//! `WorkerState`: what every handler can reach, and what the API process
//! shares with its in-process workers.

use std::sync::Arc;

use jobs::dispatch::DispatchOnCommit;
use jobs::progress::ProgressHub;
use jobs::{JobQueue, QueueTarget};
use storage::Store;

use crate::webhooks::{AddressPolicy, DeliveryBatches, WebhookClient};

/// What every handler can reach, and what the API process shares with its
/// in-process workers. Cloned per job; cheap.
#[derive(Clone)]
pub struct WorkerState {
    /// The repositories.
    pub store: Store,
    /// The push side of the queue (for jobs that schedule more jobs).
    pub queue: JobQueue,
    /// Progress fan-out.
    pub progress: ProgressHub,
    /// The dispatch fast path the store announces committed events to.
    pub dispatch: DispatchOnCommit,
    /// How webhooks are delivered.
    pub webhooks: Arc<WebhookDelivery>,
    /// What this process's concurrent deliveries read and record together.
    pub delivery_batches: DeliveryBatches,
    /// How many first attempts this process makes at once outside the
    /// delivery queue (none where it does not consume that queue).
    pub first_attempt_slots: super::first_attempts::FirstAttemptSlots,
    /// The SMTP relay, when configured.
    pub mailer: Option<Arc<crate::mail::Mailer>>,
    /// Where media objects live; `None` until configured (media jobs then fail).
    pub media: Option<crate::media::stores::MediaStores>,
    /// Per-agency caps of the fair queues (none unless configured).
    pub agency_caps: Arc<super::agency_caps::AgencyCaps>,
    /// Where this process's runs are recorded for the ops console (set by
    /// the worker runtime; none elsewhere).
    pub attempt_log: Option<crate::console::AttemptLog>,
}

/// The webhook client and the retry schedule's pace.
#[derive(Clone, Debug)]
pub struct WebhookDelivery {
    /// Signs and sends attempts under the address policy.
    pub client: WebhookClient,
    /// Divides the retry schedule's waits (1 in production).
    pub retry_speedup: u32,
}

impl WebhookDelivery {
    /// The production setting: public addresses only, the public CA roots.
    pub fn strict() -> anyhow::Result<Self> {
        Ok(Self {
            client: WebhookClient::new(
                AddressPolicy {
                    allow_private_networks: false,
                },
                None,
            )?,
            retry_speedup: 1,
        })
    }
}

impl WorkerState {
    /// Connects the queue and progress fan-out to `store`, and wires the
    /// store's committed events to the dispatch fast path.
    pub async fn connect(
        store: Store,
        queue: &QueueTarget,
        redis_url: Option<&str>,
    ) -> anyhow::Result<Self> {
        let queue = JobQueue::connect(queue).await?;
        let dispatch = DispatchOnCommit::start(queue.clone());
        store.set_outbox_listener(std::sync::Arc::new(dispatch.clone()));
        let redis = match redis_url {
            Some(url) => Some(apalis_redis::connect(url).await?),
            None => None,
        };
        let progress = ProgressHub::new(store.clone(), redis);
        let delivery_batches = DeliveryBatches::start(&store);
        Ok(Self {
            store,
            delivery_batches,
            first_attempt_slots: super::first_attempts::FirstAttemptSlots::default(),
            queue,
            progress,
            dispatch,
            webhooks: Arc::new(WebhookDelivery::strict()?),
            mailer: None,
            media: None,
            agency_caps: Arc::default(),
            attempt_log: None,
        })
    }

    /// The same state e-mailing through `mailer` (none: notifications are
    /// only recorded).
    pub fn with_mailer(mut self, mailer: Option<crate::mail::Mailer>) -> Self {
        self.mailer = mailer.map(Arc::new);
        self
    }

    /// The same state storing media in `media`.
    pub fn with_media(mut self, media: crate::media::stores::MediaStores) -> Self {
        self.media = Some(media);
        self
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

    /// The same state delivering webhooks as `webhooks` says.
    pub fn with_webhooks(mut self, webhooks: WebhookDelivery) -> Self {
        self.webhooks = Arc::new(webhooks);
        self
    }
}
