//! Progress fan-out for long-running operations. A job publishes each state
//! change of its operation: the state is persisted as the operation's latest
//! (so a subscriber arriving late starts from it), broadcast to subscribers in
//! this process, and, when Redis is configured, published on Redis so the API
//! processes of other hosts relay it to their own subscribers.
//!
//! States carry a per-operation sequence number, starting at 1: a subscriber reads the latest
//! persisted state and then every live state numbered above it, each number
//! once, whichever way it arrived. Publishers of one operation take their
//! numbers before they publish, so a state may arrive after a higher-numbered
//! one; it is still passed on. The terminal state ([`ProgressEvent::is_terminal`]) always
//! gets through, and once persisted is never replaced.
//!
//! What a state says is typed (`event`); [`ProgressHub::publish_step`] is the
//! one way a media operation's step is published, by the API (`queued`) and
//! by workers alike.

mod event;

use std::sync::Arc;

use futures::StreamExt;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use storage::ids::{AgencyId, OperationId};
use storage::{StorageError, Store, Tenant};
use tokio::sync::broadcast;

pub use event::{JobStatus, MediaStep, ProgressEvent, ProgressState};

/// Channel prefix of progress on Redis.
const CHANNEL_PREFIX: &str = "listing-api:progress:";
/// States a slow subscriber may fall behind by before it misses some.
const LOCAL_CAPACITY: usize = 4096;

/// One published state of an operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgressMessage {
    /// The operation.
    pub operation_id: OperationId,
    /// Its agency.
    pub agency_id: AgencyId,
    /// Whether it is sandbox activity.
    pub is_sandbox: bool,
    /// The state's number, also beside it: hosts of the release before typed
    /// states read it here from the Redis channel.
    pub seq: u64,
    /// The state itself, with its number.
    pub state: ProgressState,
    /// The process that published it (to ignore our own messages coming back from Redis).
    origin: String,
}

impl ProgressMessage {
    fn belongs_to(&self, tenant: &Tenant, operation_id: &OperationId) -> bool {
        self.operation_id == *operation_id
            && self.agency_id == tenant.agency_id
            && self.is_sandbox == tenant.environment.is_sandbox()
    }
}

/// Publishes and subscribes to operation progress. Cheap to clone.
#[derive(Clone)]
pub struct ProgressHub {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    local: broadcast::Sender<ProgressMessage>,
    redis: Option<redis::aio::ConnectionManager>,
    origin: String,
}

/// A stream resumed after the state numbered `after` (`Last-Event-ID`).
pub struct Resumption {
    /// The recorded states numbered above `after`, in order of their numbers,
    /// the terminal one (if recorded) last. A media state carries the
    /// operation's snapshot as it stands now: the history keeps the steps,
    /// not a snapshot per step.
    pub replay: Vec<ProgressState>,
    /// How far the operation's history goes, read after `replay`.
    pub ending: storage::background::progress::ProgressEnding,
    /// Live states numbered above `after` and not in `replay`.
    pub live: futures::stream::BoxStream<'static, ProgressMessage>,
}

/// States a resumed stream replays at most; an upload of 200 files publishes
/// about a thousand.
const REPLAY_LIMIT: u32 = 20_000;

/// A subscription: the state so far, then live states.
pub struct Subscription {
    /// The latest persisted state, if any was published yet.
    pub latest: Option<ProgressState>,
    /// Live states after `latest`, in order.
    pub live: futures::stream::BoxStream<'static, ProgressMessage>,
}

impl ProgressHub {
    /// A hub over `store`, publishing to Redis too when `redis` is given.
    pub fn new(store: Store, redis: Option<redis::aio::ConnectionManager>) -> Self {
        let (local, _) = broadcast::channel(LOCAL_CAPACITY);
        Self {
            inner: Arc::new(Inner {
                store,
                local,
                redis,
                origin: ulid::Ulid::generate().to_string(),
            }),
        }
    }

    /// Publishes `step` of a media operation, numbered next in its order
    /// and with a snapshot of the operation after it.
    pub async fn publish_step(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        step: MediaStep,
    ) -> Result<(), StorageError> {
        let media = self.inner.store.media();
        let seq = media.next_progress_seq(tenant, operation_id).await?;
        let operation = media.snapshot(tenant, operation_id).await?;
        let event = ProgressEvent::Media { step, operation };
        self.publish(tenant, operation_id, ProgressState { event, seq })
            .await
    }

    /// Publishes `state` of an operation. It is persisted first, so late
    /// subscribers know where the operation stands.
    pub async fn publish(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        state: ProgressState,
    ) -> Result<(), StorageError> {
        let stored = serde_json::to_value(&state)
            .map_err(|err| StorageError::Corrupt(format!("progress state: {err}")))?;
        self.inner
            .store
            .progress()
            .record(
                tenant,
                operation_id.as_str(),
                state.seq,
                &stored,
                state.event.is_terminal(),
            )
            .await?;
        let message = ProgressMessage {
            operation_id: operation_id.clone(),
            agency_id: tenant.agency_id.clone(),
            is_sandbox: tenant.environment.is_sandbox(),
            seq: state.seq,
            state,
            origin: self.inner.origin.clone(),
        };
        let _ = self.inner.local.send(message.clone());
        if let Some(redis) = &self.inner.redis {
            let mut connection = redis.clone();
            let payload = serde_json::to_string(&message).unwrap_or_default();
            let published: Result<(), redis::RedisError> = connection
                .publish(format!("{CHANNEL_PREFIX}{operation_id}"), payload)
                .await;
            if let Err(err) = published {
                // Other hosts' subscribers still get the persisted state when they (re)subscribe.
                tracing::warn!(%err, %operation_id, "progress not published on Redis");
            }
        }
        Ok(())
    }

    /// Subscribes to an operation of `tenant`: the latest persisted state, then
    /// every later state published anywhere.
    pub async fn subscribe(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
    ) -> Result<Subscription, StorageError> {
        // Listen before reading the latest state, so nothing falls in between.
        let receiver = self.inner.local.subscribe();
        let latest = match self
            .inner
            .store
            .progress()
            .latest(tenant, operation_id.as_str())
            .await?
        {
            None => None,
            Some(record) => Some(
                serde_json::from_value::<ProgressState>(record.state).map_err(|err| {
                    StorageError::Corrupt(format!("stored progress state: {err}"))
                })?,
            ),
        };
        let after = latest.as_ref().map_or(0, |state| state.seq);
        let tenant = tenant.clone();
        let operation_id = operation_id.clone();
        // Everything after the persisted state is new, in whatever order it
        // arrives: publishers take their numbers before publishing, so two
        // jobs of one operation may deliver 6 before 5, and 5 must not be lost.
        // A number is passed on once; the end gets through whatever its number.
        let mut seen = std::collections::HashSet::new();
        let live = tokio_stream_from(receiver)
            .filter(move |message| {
                let state = &message.state;
                let keep = message.belongs_to(&tenant, &operation_id)
                    && (state.event.is_terminal() || (state.seq > after && seen.insert(state.seq)));
                std::future::ready(keep)
            })
            .boxed();
        Ok(Subscription { latest, live })
    }

    /// Resumes a stream of an operation of `tenant` after its state numbered
    /// `after`: the recorded states above it, then the live ones not among them.
    pub async fn resume(
        &self,
        tenant: &Tenant,
        operation_id: &OperationId,
        after: u64,
    ) -> Result<Resumption, StorageError> {
        // Listen before reading the history, so nothing falls in between.
        let receiver = self.inner.local.subscribe();
        let progress = self.inner.store.progress();
        let steps = progress
            .steps_after(tenant, operation_id.as_str(), after, REPLAY_LIMIT)
            .await?;
        let ending = progress.ending(tenant, operation_id.as_str()).await?;
        let mut snapshot = None;
        let mut replay = Vec::with_capacity(steps.len());
        let mut terminal = None;
        for recorded in steps {
            let mut state = recorded.step;
            if let Some(members) = state.as_object_mut()
                && members.contains_key("event")
            {
                if snapshot.is_none() {
                    let now = self
                        .inner
                        .store
                        .media()
                        .snapshot(tenant, operation_id)
                        .await?;
                    snapshot = Some(serde_json::to_value(now).map_err(|err| {
                        StorageError::Corrupt(format!("operation snapshot: {err}"))
                    })?);
                }
                members.insert("operation".to_owned(), snapshot.clone().unwrap_or_default());
            }
            let state = serde_json::from_value::<ProgressState>(state)
                .map_err(|err| StorageError::Corrupt(format!("recorded progress state: {err}")))?;
            if recorded.terminal {
                terminal = Some(state);
            } else {
                replay.push(state);
            }
        }
        let ended = terminal.is_some();
        replay.extend(terminal);
        let mut seen: std::collections::HashSet<u64> =
            replay.iter().map(|state| state.seq).collect();
        let tenant = tenant.clone();
        let operation_id = operation_id.clone();
        let live = tokio_stream_from(receiver)
            .filter(move |message| {
                let state = &message.state;
                let keep = !ended
                    && message.belongs_to(&tenant, &operation_id)
                    && (state.seq > after || state.event.is_terminal())
                    && seen.insert(state.seq);
                std::future::ready(keep)
            })
            .boxed();
        Ok(Resumption {
            replay,
            ending,
            live,
        })
    }

    /// Relays progress published by other hosts (on Redis) to this process's
    /// subscribers, until the returned task is aborted.
    pub fn spawn_redis_relay(&self, redis_url: String) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(err) = hub.relay_once(&redis_url).await {
                    tracing::warn!(%err, "progress relay lost Redis; reconnecting");
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        })
    }

    async fn relay_once(&self, redis_url: &str) -> Result<(), redis::RedisError> {
        let client = redis::Client::open(redis_url)?;
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.psubscribe(format!("{CHANNEL_PREFIX}*")).await?;
        let mut messages = pubsub.on_message();
        while let Some(message) = messages.next().await {
            let Ok(payload) = message.get_payload::<String>() else {
                continue;
            };
            let Ok(progress) = serde_json::from_str::<ProgressMessage>(&payload) else {
                continue;
            };
            if progress.origin != self.inner.origin {
                let _ = self.inner.local.send(progress);
            }
        }
        Ok(())
    }
}

/// A stream over a broadcast receiver that skips over lag instead of ending.
fn tokio_stream_from(
    receiver: broadcast::Receiver<ProgressMessage>,
) -> impl futures::Stream<Item = ProgressMessage> + Send + 'static {
    futures::stream::unfold(receiver, |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok(message) => return Some((message, receiver)),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "a progress subscriber fell behind");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}
