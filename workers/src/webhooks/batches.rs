//! What the concurrent delivery attempts of one process read and write
//! together ([`crate::batched`]): their targets, read two statements a
//! batch, and their attempts, recorded in one transaction a batch.

use storage::Store;
use storage::ids::DeliveryId;
use storage::webhooks::{AttemptRecorded, AttemptToRecord, DeliveryTarget};

use crate::batched::{Answer, Batched};

/// Most requests answered by one batch.
const BATCH: usize = 256;

/// The batched reads and writes of webhook deliveries.
#[derive(Clone, Debug)]
pub struct DeliveryBatches {
    targets: Batched<DeliveryId, Option<DeliveryTarget>>,
    records: Batched<AttemptToRecord, AttemptRecorded>,
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
        let records = Batched::start(BATCH, move |attempts: Vec<AttemptToRecord>| {
            let store = writer.clone();
            async move { record(&store, attempts).await }
        });
        Self { targets, records }
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
