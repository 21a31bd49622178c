//! Pushing jobs: one or many of a kind in one queue transaction, each
//! under its dedupe key ([`Job::dedupe_key`], extended by a later offer).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apalis::prelude::{TaskBuilder, TaskId, TaskSink};
use storage::Timestamp;

use super::fair;
use super::promote::{PROMOTE_CHUNK, promote_due};
use super::target::{JobQueue, QueueBackend, QueueError};
use super::wake::wake_channel;
use crate::kinds::Job;

/// How to push one job. Whether it is new work is the job's own to say
/// ([`Job::dedupe_key`]).
#[derive(Clone, Debug, Default)]
pub struct PushOptions {
    /// Among due jobs of one queue, higher runs first (then the earlier
    /// `run_at`, then the earlier push). SQLite queue only: apalis-redis keeps
    /// no priority and its queues are first in, first out.
    pub priority: usize,
    /// Not before this instant.
    pub run_at: Option<Timestamp>,
    /// A later offer of work pushed before (a sweep's re-push, a deferral):
    /// it extends the job's dedupe key, so the earlier push, which the queue
    /// keeps for days once it ran, does not swallow this one, while a second
    /// push of the same offer is still dropped.
    pub offer: Option<String>,
}

impl PushOptions {
    /// Options of a later offer of the same work, named `offer`.
    pub fn offer(offer: impl Into<String>) -> Self {
        Self {
            offer: Some(offer.into()),
            ..Self::default()
        }
    }

    /// The dedupe key `job` is pushed under with these options.
    pub fn dedupe_key<J: Job>(&self, job: &J) -> Option<String> {
        let key = job.dedupe_key()?;
        Some(match &self.offer {
            Some(offer) => format!("{key}:{offer}"),
            None => key,
        })
    }
}

impl JobQueue {
    /// Pushes a job; returns its task id.
    pub async fn push<J: Job>(&self, job: J, options: PushOptions) -> Result<String, QueueError> {
        let mut ids = self.push_many(vec![(job, options)]).await?;
        ids.pop()
            .ok_or_else(|| QueueError::Push("nothing pushed".to_owned()))
    }

    /// Pushes several jobs of one kind in one queue transaction; returns their
    /// task ids. Jobs with a fairness key are tagged first (`super::fair`),
    /// and the queue's workers are woken, here and on other hosts.
    pub async fn push_many<J: Job>(
        &self,
        jobs: Vec<(J, PushOptions)>,
    ) -> Result<Vec<String>, QueueError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let tags = self.fair_tags(&jobs).await?;
        let due: BTreeSet<u64> = jobs
            .iter()
            .filter_map(|(_, options)| options.run_at.map(due_second))
            .collect();
        let mut ids = Vec::with_capacity(jobs.len());
        let mut parked = false;
        let redis = matches!(self.backend, QueueBackend::Redis(_));
        let tasks: Vec<_> = jobs
            .into_iter()
            .zip(tags)
            .map(|((job, mut options), tag)| {
                let id = ulid::Ulid::generate();
                ids.push(id.to_string());
                let park = match tag {
                    Some(tag) if redis && options.run_at.is_none() => {
                        parked = true;
                        Some(tag)
                    }
                    Some(tag) if !redis => {
                        options.priority = fair::sqlite_priority(options.priority, tag);
                        None
                    }
                    _ => None,
                };
                Self::task(id, job, &options, park)
            })
            .collect();
        match &self.backend {
            QueueBackend::Sqlite(pool) => Self::sqlite_storage::<J>(pool)
                .push_all(&mut futures::stream::iter(tasks))
                .await
                .map_err(|err| QueueError::Push(err.to_string()))?,
            QueueBackend::Redis(connection) => {
                let mut storage = Self::redis_storage::<J>(connection);
                let mut tasks = tasks.into_iter().peekable();
                let mut chunk_ids = ids.chunks(PROMOTE_CHUNK);
                while tasks.peek().is_some() {
                    let chunk: Vec<_> = tasks.by_ref().take(PROMOTE_CHUNK).collect();
                    storage
                        .push_all(&mut futures::stream::iter(chunk))
                        .await
                        .map_err(|err| QueueError::Push(err.to_string()))?;
                    // The console's indexes, of the jobs the push created.
                    super::redis_index::index_jobs(
                        connection,
                        J::KIND,
                        chunk_ids.next().unwrap_or_default(),
                    )
                    .await?;
                    // apalis-redis parks every job in the scheduled set, due now.
                    promote_due(connection, J::KIND).await?;
                }
                if parked {
                    fair::redis_enter(connection, J::KIND).await?;
                    // A process without workers of the queue leaves feeding
                    // to theirs, woken by the announcement below.
                    self.feed_fair(J::KIND).await?;
                }
            }
        }
        self.announce(J::KIND).await;
        for second in due {
            self.bells.ring_when_due(J::KIND, second);
        }
        Ok(ids)
    }

    /// Pushes in the background until the queue takes the jobs or `patience`
    /// runs out, waiting half a second, then twice as long each time up to
    /// five seconds, between tries. For a push that failed on a request's
    /// path because the queue was away: the work starts as soon as the queue
    /// is back instead of at the sweep that would otherwise find it. A job
    /// pushed twice is one job (its dedupe key), so the sweep and this may
    /// both push it.
    pub fn keep_pushing<J: Job + Clone>(&self, jobs: Vec<(J, PushOptions)>, patience: Duration) {
        if jobs.is_empty() {
            return;
        }
        let queue = self.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + patience;
            let mut wait = Duration::from_millis(500);
            loop {
                tokio::time::sleep(wait).await;
                match queue.push_many(jobs.clone()).await {
                    Ok(_) => {
                        tracing::info!(kind = J::KIND, count = jobs.len(), "queued after a retry");
                        return;
                    }
                    Err(err) if tokio::time::Instant::now() >= deadline => {
                        tracing::warn!(%err, kind = J::KIND, count = jobs.len(), "still not queued; leaving them to the sweep");
                        return;
                    }
                    Err(_) => wait = (wait * 2).min(Duration::from_secs(5)),
                }
            }
        });
    }

    /// Each job's fair tag (`None` for a job without a fairness key).
    async fn fair_tags<J: Job>(
        &self,
        jobs: &[(J, PushOptions)],
    ) -> Result<Vec<Option<u64>>, QueueError> {
        let mut by_key: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (index, (job, _)) in jobs.iter().enumerate() {
            if let Some(key) = job.fairness_key() {
                by_key.entry(key).or_default().push(index);
            }
        }
        let mut tags = vec![None; jobs.len()];
        for (key, indexes) in by_key {
            let count = indexes.len() as u64;
            let first = match &self.backend {
                QueueBackend::Sqlite(pool) => fair::sqlite_tags(pool, J::KIND, &key, count).await?,
                QueueBackend::Redis(connection) => {
                    fair::redis_tags(connection, J::KIND, &key, count).await?
                }
            };
            for (offset, index) in indexes.into_iter().enumerate() {
                tags[index] = Some(first + offset as u64);
            }
        }
        Ok(tags)
    }

    /// Wakes `queue`'s workers: this process's at once, other processes'
    /// through Redis (on SQLite they watch the file). A lost announcement
    /// costs latency, never the job: workers still poll.
    pub async fn announce(&self, queue: &str) {
        self.bells.ring(queue);
        if let QueueBackend::Redis(connection) = &self.backend {
            let mut connection = connection.clone();
            let published: Result<i64, _> = redis::cmd("PUBLISH")
                .arg(wake_channel(queue))
                .arg(self.bells.origin())
                .query_async(&mut connection)
                .await;
            if let Err(err) = published {
                tracing::debug!(%err, queue, "could not announce a push");
            }
        }
    }

    fn task<J: Job>(
        id: ulid::Ulid,
        job: J,
        options: &PushOptions,
        parked_tag: Option<u64>,
    ) -> apalis::prelude::Task<J> {
        let dedupe_key = options.dedupe_key(&job);
        let mut builder = TaskBuilder::new(job)
            .task_id(TaskId::from_ulid(id))
            .priority(options.priority)
            .max_attempts(J::MAX_ATTEMPTS);
        if let Some(tag) = parked_tag {
            builder = builder.run_at_timestamp(fair::parked_score(tag));
        } else if let Some(run_at) = options.run_at {
            builder = builder.run_at_timestamp(due_second(run_at));
        }
        if let Some(key) = &dedupe_key {
            builder = builder.idempotency_key(key);
        }
        builder.build()
    }
}

/// The Unix second a job with `run_at` is kept for. The queues keep whole
/// seconds: rounded up, so a job never runs before its time (a retry
/// schedule's wait is a minimum).
fn due_second(run_at: Timestamp) -> u64 {
    let seconds = run_at
        .as_micros()
        .saturating_add(999_999)
        .div_euclid(1_000_000);
    u64::try_from(seconds).unwrap_or(0)
}
