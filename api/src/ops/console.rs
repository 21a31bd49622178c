//! The job console's actions, shared by the ops listener's pages and routes
//! and by `api ops` on the command line, so both read filters the same way,
//! act on every job a filter finds (never one page of them), and leave the
//! same audit record: who, what, on which job or filter, how many.

use platform::JobQueue;
use platform::admin::{JOB_STATES, JobFilter, JobSummary, JobWindow, QueueAdmin};
use serde_json::{Value, json};
use storage::Store;
use storage::background::job_console::{AttemptRecord, WorkerRequest};

/// Why a console action was refused or failed.
#[derive(Debug)]
pub enum ConsoleError {
    /// A filter or action that does not make sense: the field and why.
    Invalid(&'static str, String),
    /// No job (or worker) the action applies to.
    NotFound,
    /// The database or the queue failed.
    Failed(String),
}

impl From<storage::StorageError> for ConsoleError {
    fn from(err: storage::StorageError) -> Self {
        Self::Failed(err.to_string())
    }
}

impl From<platform::QueueError> for ConsoleError {
    fn from(err: platform::QueueError) -> Self {
        Self::Failed(err.to_string())
    }
}

/// What can be done to jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobAction {
    /// A dead job back in its queue with fresh attempts.
    Retry,
    /// A dead job thrown away.
    Discard,
    /// A scheduled or retrying job due now.
    RunNow,
    /// A queued job taken out, dead as cancelled.
    Cancel,
}

impl JobAction {
    /// Every action.
    pub const ALL: [JobAction; 4] = [Self::Retry, Self::Discard, Self::RunNow, Self::Cancel];

    /// Its name in routes, the audit log and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Discard => "discard",
            Self::RunNow => "run_now",
            Self::Cancel => "cancel",
        }
    }

    /// The action named `name` (`run-now` as well as `run_now`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|action| action.name() == name.replace('-', "_"))
    }

    /// What the action's result calls the jobs it touched.
    pub const fn done(self) -> &'static str {
        match self {
            Self::Retry => "retried",
            Self::Discard => "discarded",
            Self::RunNow => "run_now",
            Self::Cancel => "cancelled",
        }
    }

    /// The states of the jobs it takes.
    pub const fn takes(self) -> &'static [&'static str] {
        match self {
            Self::Retry | Self::Discard => &["dead"],
            Self::RunNow => &["scheduled", "retrying"],
            Self::Cancel => &["queued"],
        }
    }

    /// Whether it takes jobs in `state`.
    pub fn takes_state(self, state: &str) -> bool {
        self.takes().contains(&state)
    }

    async fn apply(self, admin: &QueueAdmin, id: &str) -> Result<bool, platform::QueueError> {
        match self {
            Self::Retry => admin.retry(id).await,
            Self::Discard => admin.discard(id).await,
            Self::RunNow => admin.run_now(id).await,
            Self::Cancel => admin.cancel(id).await,
        }
    }
}

/// A filter as given: every part optional and unchecked.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct FilterInput {
    /// queued, scheduled, running, retrying, dead or done (`pending` for queued).
    pub state: Option<String>,
    /// A queue.
    pub queue: Option<String>,
    /// An agency (`agc_…`).
    pub agency: Option<String>,
    /// Free text: a job id, event id, listing number or error text.
    pub search: Option<String>,
}

fn present(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl FilterInput {
    /// The filter checked, its state required.
    pub fn checked(self) -> Result<JobFilter, ConsoleError> {
        let state = present(self.state).ok_or_else(|| {
            ConsoleError::Invalid(
                "state",
                format!("is required: one of {}", JOB_STATES.join(", ")),
            )
        })?;
        let state = match state.as_str() {
            "pending" => "queued".to_owned(),
            other if JOB_STATES.contains(&other) => other.to_owned(),
            other => {
                return Err(ConsoleError::Invalid(
                    "state",
                    format!(
                        "{other} is not a state: use one of {}",
                        JOB_STATES.join(", ")
                    ),
                ));
            }
        };
        let queue = present(self.queue);
        if let Some(queue) = &queue {
            known_queue(queue)?;
        }
        let search = present(self.search);
        if search.as_ref().is_some_and(|s| s.chars().count() > 200) {
            return Err(ConsoleError::Invalid(
                "search",
                "is longer than 200 characters".into(),
            ));
        }
        Ok(JobFilter {
            state,
            queue,
            agency: present(self.agency),
            search,
            related: Vec::new(),
        })
    }
}

/// The queue named `queue`.
pub fn known_queue(queue: &str) -> Result<&'static str, ConsoleError> {
    platform::kinds::QUEUES
        .iter()
        .copied()
        .find(|known| *known == queue)
        .ok_or_else(|| {
            ConsoleError::Invalid(
                "queue",
                format!(
                    "{queue} is not a queue: use one of {}",
                    platform::kinds::QUEUES.join(", ")
                ),
            )
        })
}

/// A filter as the audit log keeps it.
fn filter_json(filter: &JobFilter) -> Value {
    json!({
        "state": filter.state,
        "queue": filter.queue,
        "agency": filter.agency,
        "search": filter.search,
    })
}

/// Most runs made without a queue job that a search shows.
pub const RUNS_IN_PROCESS_SHOWN: usize = 100;

/// What a filter finds.
#[derive(Debug)]
pub struct Found {
    /// The asked window of its jobs, oldest first.
    pub jobs: Vec<JobSummary>,
    /// Every job it finds, or with `total_capped` how many it counted.
    pub total: u64,
    /// Whether it finds more than `total` (a search or agency filter of
    /// done jobs counts past its window and a thousand, then stops).
    pub total_capped: bool,
    /// When a free-text search stopped before reading every job it could
    /// match (done jobs on the Redis queue, read newest first up to a
    /// budget): how many it read.
    pub searched: Option<u64>,
    /// Whether `jobs` come newest first (a page of such a search), not in
    /// the order they were pushed.
    pub newest_first: bool,
    /// Runs no queue holds (an event's dispatch, a delivery's first
    /// attempt) of what its listing number stands for, in its queue, newest
    /// first, at most [`RUNS_IN_PROCESS_SHOWN`].
    pub runs_in_process: Vec<AttemptRecord>,
    /// Whether older such runs were left out.
    pub more_runs_in_process: bool,
}

impl Found {
    /// As the JSON routes and `api ops jobs` give it: the jobs of the
    /// window (the first `limit`), the `count` of every job found (with
    /// `count_capped`, more than `count` match), and the runs no queue holds.
    pub fn into_json(self) -> Value {
        let count = self.total;
        let items = self.jobs;
        let runs: Vec<Value> = self.runs_in_process.iter().map(run_json).collect();
        json!({
            "items": items,
            "count": count,
            "count_capped": self.total_capped,
            "searched": self.searched,
            "newest_first": self.newest_first,
            "runs_in_process": runs,
            "more_runs_in_process": self.more_runs_in_process,
        })
    }
}

/// A run as JSON.
pub fn run_json(run: &AttemptRecord) -> Value {
    json!({
        "job_id": run.job_id,
        "queue": run.queue,
        "attempt": run.attempt,
        "worker_id": run.worker_id,
        "host": run.host,
        "agency_id": run.agency_id,
        "endpoint_id": run.endpoint_id,
        "due_at": run.due_at.map(|at| at.to_rfc3339()),
        "started_at": run.started_at.to_rfc3339(),
        "finished_at": run.finished_at.map(|at| at.to_rfc3339()),
        "outcome": run.outcome,
        "error": run.error,
    })
}

/// The console over a store and a queue.
pub struct Console<'a> {
    store: &'a Store,
    admin: QueueAdmin,
}

impl<'a> Console<'a> {
    /// The console of `store` and `queue`.
    pub fn new(store: &'a Store, queue: &JobQueue) -> Self {
        Self {
            store,
            admin: QueueAdmin::new(queue.clone()),
        }
    }

    /// The queue administration underneath.
    pub fn admin(&self) -> &QueueAdmin {
        &self.admin
    }

    /// Every job `filter` finds, oldest first; a search that is a listing
    /// number also finds the jobs of its listing, media, events and deliveries.
    pub async fn find(&self, filter: JobFilter) -> Result<Vec<JobSummary>, ConsoleError> {
        let (filter, _) = self.with_related(filter).await?;
        Ok(self.admin.find_jobs(&filter).await?)
    }

    /// How many jobs `filter` finds, as [`Self::find`] would.
    pub async fn count(&self, filter: JobFilter) -> Result<u64, ConsoleError> {
        let (filter, _) = self.with_related(filter).await?;
        let window = JobWindow {
            offset: 0,
            limit: Some(0),
        };
        Ok(self.admin.find_jobs_in(&filter, window).await?.total)
    }

    /// What `filter` finds: the `window` of its jobs, as [`Self::find`]
    /// orders them, how many it finds, and the latest
    /// [`RUNS_IN_PROCESS_SHOWN`] runs made without a queue job that a
    /// listing number stands for (in the filter's queue, in any state; none
    /// for another agency's filter): an event's dispatch and a delivery's
    /// first attempt run in the process that committed them, so no queue
    /// holds them.
    pub async fn search(
        &self,
        filter: JobFilter,
        window: JobWindow,
    ) -> Result<Found, ConsoleError> {
        let (filter, listing_agency) = self.with_related(filter).await?;
        let found = self.admin.find_jobs_in(&filter, window).await?;
        let mut runs_in_process = Vec::new();
        // Every id a listing number stands for is its agency's: another
        // agency's filter finds none of them.
        let agency_matches = filter.agency.is_none() || filter.agency == listing_agency;
        if !filter.related.is_empty() && agency_matches {
            runs_in_process = self
                .store
                .job_attempts()
                .of_jobs(
                    &filter.related,
                    filter.queue.as_deref(),
                    RUNS_IN_PROCESS_SHOWN + 1,
                )
                .await?;
        }
        let more_runs_in_process = runs_in_process.len() > RUNS_IN_PROCESS_SHOWN;
        runs_in_process.truncate(RUNS_IN_PROCESS_SHOWN);
        Ok(Found {
            jobs: found.jobs,
            total: found.total,
            total_capped: found.total_capped,
            searched: found.searched,
            newest_first: found.newest_first,
            runs_in_process,
            more_runs_in_process,
        })
    }

    /// `filter` with the ids its search stands for, and the agency of the
    /// listing it names, if it names one.
    async fn with_related(
        &self,
        mut filter: JobFilter,
    ) -> Result<(JobFilter, Option<String>), ConsoleError> {
        let Some(search) = &filter.search else {
            return Ok((filter, None));
        };
        let Some(related) = self.store.job_search().listing(search).await? else {
            return Ok((filter, None));
        };
        filter.related = related.ids;
        Ok((filter, Some(related.agency_id)))
    }

    /// Job `id` as JSON with every run (`attempt_history`), if a queue holds it.
    pub async fn job_json(&self, id: &str) -> Result<Option<Value>, ConsoleError> {
        let Some(job) = self.admin.find_job(id).await? else {
            return Ok(None);
        };
        let runs = self.store.job_attempts().of_job(id).await?;
        let mut body = json!(job);
        body["attempt_history"] = runs.iter().map(run_json).collect();
        Ok(Some(body))
    }

    /// The latest 200 operator actions as JSON, newest first (`{"items"}`).
    pub async fn audit_json(&self) -> Result<Value, ConsoleError> {
        let items: Vec<Value> = self
            .store
            .ops_audit()
            .recent(200)
            .await?
            .into_iter()
            .map(|entry| {
                json!({
                    "id": entry.id,
                    "at": entry.at.to_rfc3339(),
                    "actor": entry.actor,
                    "action": entry.action,
                    "target": serde_json::from_str::<Value>(&entry.target).unwrap_or(Value::Null),
                    "count": entry.count,
                })
            })
            .collect();
        Ok(json!({ "items": items }))
    }

    /// Applies `action` to job `id` on behalf of `actor`.
    pub async fn act_on_job(
        &self,
        action: JobAction,
        id: &str,
        actor: &str,
    ) -> Result<(), ConsoleError> {
        if !action.apply(&self.admin, id).await? {
            return Err(ConsoleError::NotFound);
        }
        self.store
            .ops_audit()
            .record(actor, action.name(), &json!({ "job": id }).to_string(), 1)
            .await?;
        tracing::info!(action = action.name(), job = %id, actor, "job changed by an operator");
        Ok(())
    }

    /// Applies `action` to every job `filter` finds, on behalf of `actor`;
    /// returns the ids it touched (jobs that left the state meanwhile are not).
    pub async fn act_on_filter(
        &self,
        action: JobAction,
        filter: JobFilter,
        actor: &str,
    ) -> Result<Vec<String>, ConsoleError> {
        if !action.takes_state(&filter.state) {
            return Err(ConsoleError::Invalid(
                "state",
                format!(
                    "{} takes {} jobs, not {}",
                    action.name(),
                    action.takes().join(" or "),
                    filter.state
                ),
            ));
        }
        let target = filter_json(&filter);
        let found = self.find(filter).await?;
        let mut touched = Vec::new();
        for job in found {
            if action.apply(&self.admin, &job.id).await? {
                touched.push(job.id);
            }
        }
        self.store
            .ops_audit()
            .record(
                actor,
                action.name(),
                &target.to_string(),
                touched.len() as u64,
            )
            .await?;
        tracing::warn!(
            action = action.name(),
            count = touched.len(),
            actor,
            "jobs changed by an operator, by filter"
        );
        Ok(touched)
    }

    /// Pauses or resumes `queue` on every worker process.
    pub async fn set_paused(
        &self,
        queue: &str,
        paused: bool,
        actor: &str,
    ) -> Result<&'static str, ConsoleError> {
        let queue = known_queue(queue)?;
        self.store.schedules().set_paused(queue, paused).await?;
        let action = if paused { "pause" } else { "resume" };
        self.store
            .ops_audit()
            .record(actor, action, &json!({ "queue": queue }).to_string(), 1)
            .await?;
        tracing::info!(queue, paused, actor, "queue control changed by an operator");
        Ok(queue)
    }

    /// Asks worker process `id` to go quiet or stop.
    pub async fn request_worker(
        &self,
        id: &str,
        request: WorkerRequest,
        actor: &str,
    ) -> Result<(), ConsoleError> {
        if !self.store.worker_processes().request(id, request).await? {
            return Err(ConsoleError::NotFound);
        }
        self.store
            .ops_audit()
            .record(
                actor,
                request.name(),
                &json!({ "worker": id }).to_string(),
                1,
            )
            .await?;
        tracing::info!(request = request.name(), worker = %id, actor, "worker process asked by an operator");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_take_the_states_they_name() {
        assert_eq!(JobAction::parse("run-now"), Some(JobAction::RunNow));
        assert_eq!(JobAction::parse("run_now"), Some(JobAction::RunNow));
        assert_eq!(JobAction::parse("explode"), None);
        assert!(JobAction::Retry.takes_state("dead"));
        assert!(!JobAction::Retry.takes_state("queued"));
        assert!(JobAction::RunNow.takes_state("retrying"));
        assert!(JobAction::Cancel.takes_state("queued"));
    }

    #[test]
    fn filters_are_checked() {
        let filter = |state: &str, queue: Option<&str>| FilterInput {
            state: Some(state.into()),
            queue: queue.map(str::to_owned),
            agency: Some(" ".into()),
            search: Some("  QX7 ".into()),
        };
        let checked = filter("pending", Some("probe")).checked().ok();
        assert_eq!(checked.as_ref().map(|f| f.state.as_str()), Some("queued"));
        assert_eq!(checked.as_ref().and_then(|f| f.agency.clone()), None);
        assert_eq!(checked.and_then(|f| f.search), Some("QX7".into()));
        assert!(matches!(
            filter("lost", None).checked(),
            Err(ConsoleError::Invalid("state", _))
        ));
        assert!(matches!(
            filter("dead", Some("nope")).checked(),
            Err(ConsoleError::Invalid("queue", _))
        ));
        assert!(matches!(
            FilterInput::default().checked(),
            Err(ConsoleError::Invalid("state", _))
        ));
    }
}
