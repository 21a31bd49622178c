//! The job handlers, one module per kind, and what they share.

pub mod archive;
pub mod deliver;
pub mod dispatch;
pub mod maintenance;
pub mod media;
pub mod notify;
pub mod probe;
pub mod sandbox;

use std::sync::Arc;
use std::time::Instant;

use apalis::prelude::{AbortError, Attempt, BoxDynError, TaskId};
use jobs::dispatch::DispatchOnCommit;
use jobs::progress::ProgressHub;
use jobs::{Job, JobQueue, QueueTarget};
use storage::Store;

use crate::webhooks::{AddressPolicy, WebhookClient};

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
    /// The SMTP relay, when configured.
    pub mailer: Option<Arc<crate::mail::Mailer>>,
    /// Where media objects live; `None` until configured (media jobs then fail).
    pub media: Option<crate::media::stores::MediaStores>,
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
        Ok(Self {
            store,
            queue,
            progress,
            dispatch,
            webhooks: Arc::new(WebhookDelivery::strict()?),
            mailer: None,
            media: None,
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

    /// The same state delivering webhooks as `webhooks` says.
    pub fn with_webhooks(mut self, webhooks: WebhookDelivery) -> Self {
        self.webhooks = Arc::new(webhooks);
        self
    }
}

/// Why a job failed; the message becomes the job's last error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

impl From<storage::StorageError> for JobError {
    fn from(err: storage::StorageError) -> Self {
        Self(err.to_string())
    }
}

impl From<jobs::QueueError> for JobError {
    fn from(err: jobs::QueueError) -> Self {
        Self(err.to_string())
    }
}

/// What a handler hands back to apalis. A failure with attempts left is
/// retried; the failure of the kind's last attempt kills the job, which makes
/// it dead (kept for an operator) on every backend: apalis-redis would
/// otherwise retry any job 25 times whatever its kind allows.
pub fn settle<J: Job>(attempt: usize, result: Result<(), JobError>) -> Result<(), BoxDynError> {
    match result {
        Ok(()) => Ok(()),
        Err(err) if attempt >= J::MAX_ATTEMPTS => {
            tracing::warn!(kind = J::KIND, attempt, error = %err, "job dead");
            Err(Box::new(AbortError::new(err)))
        }
        Err(err) => {
            tracing::info!(kind = J::KIND, attempt, error = %err, "job failed; it will be retried");
            Err(Box::new(err))
        }
    }
}

/// How a job's run begins: it runs as attempt `n`, or it is past its kind's
/// attempts and is dead without running.
pub enum Start {
    /// Run it; this is its attempt number.
    Run(usize),
    /// Give up on it, for this reason.
    Dead(JobError),
}

/// Counts the start of a job and tells whether it may run: a job past its
/// kind's attempts (one that took its worker down every time) may not.
/// Handlers that must record a job given up on (a media item, an archive)
/// use this and [`dead`]; the others [`begin`].
pub async fn start<J: Job>(
    state: &WorkerState,
    task_id: &TaskId,
    attempt: &Attempt,
) -> Result<Start, BoxDynError> {
    let attempt = state
        .queue
        .count_start::<J>(&task_id.to_string(), attempt.current())
        .await
        .map_err(|err| Box::new(JobError::from(err)) as BoxDynError)?;
    if attempt > J::MAX_ATTEMPTS {
        return Ok(Start::Dead(JobError(format!(
            "its worker stopped during each of its {} attempts",
            J::MAX_ATTEMPTS
        ))));
    }
    Ok(Start::Run(attempt))
}

/// What a handler hands back to apalis for a job given up on before it ran.
pub fn dead<J: Job>(task_id: &TaskId, err: JobError) -> BoxDynError {
    tracing::warn!(kind = J::KIND, %task_id, error = %err, "job dead");
    Box::new(AbortError::new(err))
}

/// Whether a run that ended in `result` was the job's last: the job dies
/// rather than being retried.
pub fn is_last_failure<J: Job, T>(attempt: usize, result: &Result<T, JobError>) -> bool {
    result.is_err() && attempt >= J::MAX_ATTEMPTS
}

/// What a handler does first: counts the start and returns the attempt this
/// run is, runs whose worker died included. A job past its kind's attempts
/// (one that took its worker down every time) is dead without running again.
pub async fn begin<J: Job>(
    state: &WorkerState,
    task_id: &TaskId,
    attempt: &Attempt,
) -> Result<usize, BoxDynError> {
    match start::<J>(state, task_id, attempt).await? {
        Start::Run(attempt) => Ok(attempt),
        Start::Dead(err) => Err(dead::<J>(task_id, err)),
    }
}

/// Records a job's duration and outcome by kind (`job_duration_seconds`,
/// `jobs_total`).
pub fn observe<T, E>(kind: &'static str, started: Instant, result: &Result<T, E>) {
    let outcome = if result.is_ok() {
        "succeeded"
    } else {
        "failed"
    };
    metrics::histogram!("job_duration_seconds", "kind" => kind, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
    metrics::counter!("jobs_total", "kind" => kind, "outcome" => outcome).increment(1);
}
