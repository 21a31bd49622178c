//! `Platform`: what a process of the service connects to once and shares
//! between its parts: the repositories, the queue's push side, progress
//! fan-out, the dispatch fast path wired to the store's commits, the media
//! stores, webhook delivery and the mail relay. The API's handlers and the
//! workers' handlers both reach the platform through it; what only workers
//! hold (their slots, caps and run log) is the workers' own.

use std::sync::Arc;

use storage::Store;
use storage::objects::ObjectStoreTarget;

use crate::config::StorageArgs;
use crate::dispatch::DispatchOnCommit;
use crate::mail::Mailer;
use crate::media_stores::MediaStores;
use crate::progress::ProgressHub;
use crate::webhooks::{DeliveryBatches, WebhookDelivery};
use crate::{JobQueue, QueueTarget};

/// The platform a process runs on. Cloned per request and per job; cheap.
#[derive(Clone)]
pub struct Platform {
    /// The repositories.
    pub store: Store,
    /// The push side of the queue.
    pub queue: JobQueue,
    /// Progress fan-out.
    pub progress: ProgressHub,
    /// The dispatch fast path the store announces committed events to.
    pub dispatch: DispatchOnCommit,
    /// How webhooks are delivered.
    pub webhooks: Arc<WebhookDelivery>,
    /// What this process's concurrent deliveries read and record together.
    pub delivery_batches: DeliveryBatches,
    /// The SMTP relay, when configured.
    pub mailer: Option<Arc<Mailer>>,
    /// Where media objects live; `None` until configured (media jobs then fail).
    pub media: Option<MediaStores>,
}

impl Platform {
    /// Connects the queue and progress fan-out to `store`, and wires the
    /// store's committed events to the dispatch fast path (the outbox
    /// listener).
    pub async fn connect(
        store: Store,
        queue: &QueueTarget,
        redis_url: Option<&str>,
    ) -> anyhow::Result<Self> {
        let queue = JobQueue::connect(queue).await?;
        let dispatch = DispatchOnCommit::start(queue.clone());
        store.set_outbox_listener(Arc::new(dispatch.clone()));
        let redis = match redis_url {
            Some(url) => Some(apalis_redis::connect(url).await?),
            None => None,
        };
        let progress = ProgressHub::new(store.clone(), redis);
        let delivery_batches = DeliveryBatches::start(&store);
        Ok(Self {
            store,
            delivery_batches,
            queue,
            progress,
            dispatch,
            webhooks: Arc::new(WebhookDelivery::strict()?),
            mailer: None,
            media: None,
        })
    }

    /// Opens what `storage` configures: the store (migrated), the queue,
    /// progress fan-out and the media stores.
    pub async fn open(storage: &StorageArgs) -> anyhow::Result<Self> {
        let store = storage.open_store().await?;
        // Media jobs write there: a misconfigured store fails the start, not the first upload.
        let target = storage.object_store_target()?;
        let distributed = storage.is_distributed();
        if distributed && matches!(target, ObjectStoreTarget::Local(_)) {
            tracing::warn!(
                "media objects are kept in the data directory although the database is PostgreSQL: \
                 every API and worker host must share that directory, or set OBJECT_STORE_URL"
            );
        }
        let media = MediaStores::open(&target, &storage.data_dir)?.with_local_shared(!distributed);
        Ok(
            Self::connect(store, &storage.queue_target(), storage.redis())
                .await?
                .with_media(media),
        )
    }

    /// The same platform e-mailing through `mailer` (none: notifications are
    /// only recorded).
    pub fn with_mailer(mut self, mailer: Option<Mailer>) -> Self {
        self.mailer = mailer.map(Arc::new);
        self
    }

    /// The same platform storing media in `media`.
    pub fn with_media(mut self, media: MediaStores) -> Self {
        self.media = Some(media);
        self
    }

    /// The same platform delivering webhooks as `webhooks` says.
    pub fn with_webhooks(mut self, webhooks: WebhookDelivery) -> Self {
        self.webhooks = Arc::new(webhooks);
        self
    }
}
