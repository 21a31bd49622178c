//! The one way a job runs, whatever its kind: [`handle`] counts the start
//! (a job past its kind's attempts is dead without running), runs the kind's
//! [`Handler`], records its duration and outcome, lets the kind record a job
//! given up on, and tells apalis whether to retry or kill it.

use std::future::Future;
use std::time::Instant;

use apalis::prelude::{AbortError, Attempt, BoxDynError, Data, TaskId};
use apalis_core::task::Task;
use apalis_core::task::from_request::FromRequest;
use platform::{Job, PushOptions};
use storage::Timestamp;

use super::state::WorkerState;

/// Why a job failed; the message becomes the job's last error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

impl From<storage::StorageError> for JobError {
    fn from(err: storage::StorageError) -> Self {
        Self(err.to_string())
    }
}

impl From<platform::QueueError> for JobError {
    fn from(err: platform::QueueError) -> Self {
        Self(err.to_string())
    }
}

/// What a kind of job does when it runs.
pub trait Handler: Job {
    /// Runs attempt number `attempt` (from 1, runs cut short by a dead
    /// worker included). Runs are at least once: a handler must be idempotent.
    fn run(
        &self,
        state: &WorkerState,
        attempt: usize,
    ) -> impl Future<Output = Result<(), JobError>> + Send;

    /// How many failed runs this job gets before it is dead: its kind's
    /// attempts, unless the job itself asks for fewer.
    fn attempts_allowed(&self) -> usize {
        Self::MAX_ATTEMPTS
    }

    /// Records a job given up on: its last attempt failed, or its worker
    /// died during each. Best effort (errors are the handler's to log); by
    /// default nothing, since the dead job itself is the record.
    fn give_up(&self, _state: &WorkerState) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// When a task was due to run (Unix seconds), as its queue says: the
/// `run_at` it was pushed or retried with. Fair jobs parked on Redis carry
/// their parking score instead, which is not a time.
#[derive(Clone, Copy, Debug)]
pub struct DueAt(Option<u64>);

impl<Args: Sync> FromRequest<Task<Args>> for DueAt {
    type Error = std::convert::Infallible;

    async fn from_request(task: &Task<Args>) -> Result<Self, Self::Error> {
        Ok(Self(
            task.ctx()
                .run_at()
                .filter(|at| *at < platform::queue::PARKED_AT),
        ))
    }
}

impl DueAt {
    /// When run `attempt` of task `task_id` came due: its `run_at` if later
    /// than its push; the push for a first run; unknown for a retry whose
    /// queue kept no due time.
    fn of(self, task_id: &TaskId, attempt: usize) -> Option<Timestamp> {
        let pushed = ulid::Ulid::from_string(&task_id.to_string())
            .ok()
            .map(|id| {
                Timestamp::from_micros(i64::try_from(id.timestamp_ms()).unwrap_or(0) * 1_000)
            });
        let run_at = self
            .0
            .and_then(|at| i64::try_from(at).ok())
            .map(|at| Timestamp::from_micros(at * 1_000_000));
        match (pushed, run_at) {
            (Some(pushed), Some(run_at)) if run_at > pushed => Some(run_at),
            (Some(pushed), _) if attempt <= 1 => Some(pushed),
            (None, run_at) => run_at,
            _ => None,
        }
    }
}

/// The apalis handler of every kind: start, run, observe, settle. A fair
/// job holds one of this process's worker slots of its queue while it is
/// here; once it lets go, the freed slot is fed the queue's next tag.
pub async fn handle<J: Handler>(
    job: J,
    state: Data<WorkerState>,
    task_id: TaskId,
    attempt: Attempt,
    due: DueAt,
) -> Result<(), BoxDynError> {
    let slot = match job.fairness_key() {
        Some(_) => state.platform.queue.start_fair_job(J::KIND),
        None => None,
    };
    let settled = start_and_run(job, &state, &task_id, attempt, due).await;
    if let Some(slot) = slot {
        drop(slot);
        state.platform.queue.after_fair_job(J::KIND).await;
    }
    settled
}

async fn start_and_run<J: Handler>(
    job: J,
    state: &WorkerState,
    task_id: &TaskId,
    attempt: Attempt,
    due: DueAt,
) -> Result<(), BoxDynError> {
    let attempt = state
        .platform
        .queue
        .count_start::<J>(&task_id.to_string(), attempt.current())
        .await
        .map_err(|err| Box::new(JobError::from(err)) as BoxDynError)?;
    if attempt > J::MAX_ATTEMPTS {
        job.give_up(state).await;
        let err = JobError(format!(
            "its worker stopped during each of its {} attempts",
            J::MAX_ATTEMPTS
        ));
        tracing::warn!(kind = J::KIND, %task_id, error = %err, "job dead");
        return Err(Box::new(AbortError::new(err)));
    }
    let _agency_slot = match job.fairness_key() {
        Some(agency) if state.agency_caps.caps(J::KIND) => {
            match state.agency_caps.try_start(J::KIND, &agency) {
                Some(slot) => Some(slot),
                None => return defer(job, state, task_id).await,
            }
        }
        _ => None,
    };
    let run = crate::console::RunOf {
        job_id: task_id.to_string(),
        queue: J::KIND,
        attempt,
        agency_id: job.agency(),
        endpoint_id: job.endpoint(),
        due_at: due.of(task_id, attempt),
    };
    let result = run_here(state, run, job.run(state, attempt)).await;
    let allowed = job.attempts_allowed().min(J::MAX_ATTEMPTS);
    if result.is_err() && attempt >= allowed {
        job.give_up(state).await;
    }
    settle::<J>(attempt, allowed, result)
}

/// Puts a job over its agency's cap back in its queue, due a second later,
/// as a later offer of the same work; the job in hand then ends without
/// running. Should the push fail, the job fails and is retried like any.
async fn defer<J: Handler>(
    job: J,
    state: &WorkerState,
    task_id: &TaskId,
) -> Result<(), BoxDynError> {
    let mut options = PushOptions::offer(format!("deferred-{}", ulid::Ulid::generate()));
    options.run_at = Some(state.platform.store.clock().now().plus_seconds(1));
    state
        .platform
        .queue
        .push(job, options)
        .await
        .map_err(|err| Box::new(JobError::from(err)) as BoxDynError)?;
    tracing::debug!(kind = J::KIND, %task_id, "agency at its cap; job deferred");
    metrics::counter!("jobs_deferred_total", "kind" => J::KIND).increment(1);
    Ok(())
}

/// What a handler hands back to apalis. A failure with attempts left is
/// retried; the failure of the kind's last attempt kills the job, which makes
/// it dead (kept for an operator) on every backend: apalis-redis would
/// otherwise retry any job 25 times whatever its kind allows.
fn settle<J: Job>(
    attempt: usize,
    allowed: usize,
    result: Result<(), JobError>,
) -> Result<(), BoxDynError> {
    match result {
        Ok(()) => Ok(()),
        Err(err) if attempt >= allowed => {
            tracing::warn!(kind = J::KIND, attempt, error = %err, "job dead");
            Err(Box::new(AbortError::new(err)))
        }
        Err(err) => {
            tracing::info!(kind = J::KIND, attempt, error = %err, "job failed; it will be retried");
            Err(Box::new(err))
        }
    }
}

/// Runs `work` as `run`, recorded for the console and in the metrics as a
/// run of its queue: a job's run, or work made here outside the queue (a
/// first attempt, a dispatch on the fast path).
pub async fn run_here<T>(
    state: &WorkerState,
    run: crate::console::RunOf,
    work: impl Future<Output = Result<T, JobError>>,
) -> Result<T, JobError> {
    let queue = run.queue;
    let running = state
        .attempt_log
        .as_ref()
        .map(|log| log.started(run, state.platform.store.clock().now()));
    let started = Instant::now();
    let result = work.await;
    observe(queue, started, &result);
    if let (Some(log), Some(running)) = (&state.attempt_log, running) {
        let error = result.as_ref().err().map(ToString::to_string);
        log.finished(running, state.platform.store.clock().now(), error);
    }
    result
}

/// Records a run's duration and outcome by kind (`job_duration_seconds`,
/// `jobs_total`); the maintenance schedules record theirs by task name.
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
