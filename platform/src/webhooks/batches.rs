//! What the concurrent delivery attempts of one process read and write
//! together ([`crate::batched`]): their targets, read two statements a
//! batch, and their attempts, recorded in one transaction a batch.

use std::sync::Arc;

use storage::Store;
use storage::ids::DeliveryId;
use storage::webhooks::{AttemptRecorded, AttemptToRecord, DeliveryTarget};

use tokio::sync::Notify;

use crate::batched::{Answer, Batched};

/// Most requests answered by one batch.
const BATCH: usize = 256;

/// The batched reads and writes of webhook deliveries.
#[derive(Clone, Debug)]
pub struct DeliveryBatches {
    targets: Batched<DeliveryId, Option<DeliveryTarget>>,
    records: Batched<AttemptToRecord, AttemptRecorded>,
    recorded: Arc<Notify>,
}

impl DeliveryBatches {
    /// Starts both on the current runtime.
    pub fn start(store: &Store) -> Self {
        let reader = store.clone();
        let targets = Batched::start(BATCH, move |ids: Vec<DeliveryId>| {
            let store = reader.clone();
            async move {
                match store.webhooks().targets(&ids).await {
                    // A delivery asked for twice gets its target twice.
                    Ok(found) => ids.iter().map(|id| Ok(found.get(id).cloned())).collect(),
                    Err(err) => ids.iter().map(|_| Err(err.to_string())).collect(),
                }
            }
        });
        let writer = store.clone();
        let recorded = Arc::new(Notify::new());
        let announce = recorded.clone();
        let records = Batched::start(BATCH, move |attempts: Vec<AttemptToRecord>| {
            let store = writer.clone();
            let announce = announce.clone();
            async move {
                let answers = record(&store, attempts).await;
                announce.notify_waiters();
                answers
            }
        });
        Self {
            targets,
            records,
            recorded,
        }
    }

    /// Woken (every waiter at once) after each batch of attempts this
    /// process records: what waits for a backlog to shrink listens here.
    pub fn attempts_recorded(&self) -> Arc<Notify> {
        self.recorded.clone()
    }

    /// A delivery with its endpoint and secrets; `None` once purged.
    pub async fn target(&self, delivery_id: &DeliveryId) -> Answer<Option<DeliveryTarget>> {
        self.targets.call(delivery_id.clone()).await
    }

    /// Records an attempt with what follows it.
    pub async fn record(&self, attempt: AttemptToRecord) -> Answer<AttemptRecorded> {
        self.records.call(attempt).await
    }
}

/// Records a batch; should it fail, each attempt on its own, so that one
/// attempt the database refuses does not fail the others with it.
async fn record(store: &Store, attempts: Vec<AttemptToRecord>) -> Vec<Answer<AttemptRecorded>> {
    let webhooks = store.webhooks();
    let err = match webhooks.record_attempts(&attempts).await {
        Ok(recorded) => return recorded.into_iter().map(Ok).collect(),
        Err(err) => err,
    };
    if attempts.len() == 1 {
        return vec![Err(err.to_string())];
    }
    tracing::warn!(%err, attempts = attempts.len(), "a batch of attempts failed to record; recording them one by one");
    let mut answers = Vec::with_capacity(attempts.len());
    for attempt in &attempts {
        let one = webhooks
            .record_attempts(std::slice::from_ref(attempt))
            .await
            .map_err(|err| err.to_string())
            .and_then(|mut recorded| {
                recorded
                    .pop()
                    .ok_or_else(|| "an attempt recorded nothing".to_owned())
            });
        answers.push(one);
    }
    answers
}
