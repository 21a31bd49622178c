//! The job console's pages on the ops listener, server-rendered: jobs by
//! state and queue with search and bulk actions (confirmed on a page of
//! their own that says how many jobs they touch), one job with every
//! attempt, the worker processes with quiet and stop, history charts with
//! per-agency and per-endpoint breakdowns, and the audit log. Every change
//! is a form post that redirects back with what happened, so the pages work
//! without script; the one script refreshes them every few seconds.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use platform::admin::{JOB_STATES, JobFilter, JobSummary};
use serde::Deserialize;
use storage::Timestamp;
use storage::job_console::{AttemptRecord, Breakdown, HistoryPoint, Resolution, WorkerRequest};

use super::OpsState;
use super::auth::OpsActor;
use super::console::{Console, ConsoleError, FilterInput, Found, JobAction, RUNS_IN_PROCESS_SHOWN};
use crate::portal::chart::Columns;

/// Jobs a page lists.
const PAGE_SIZE: usize = 25;

/// A time as the console shows it (UTC).
pub(super) fn when(at: Timestamp) -> String {
    at.to_datetime().format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Unix seconds as the console shows them.
fn when_seconds(seconds: i64) -> String {
    when(Timestamp::from_micros(seconds.saturating_mul(1_000_000)))
}

/// Milliseconds as a person reads them.
fn duration(ms: i64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1_000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1_000)
    }
}

fn render(template: &impl Template) -> Response {
    crate::portal::page(StatusCode::OK, template)
}

fn unavailable(err: &ConsoleError) -> Response {
    tracing::error!(?err, "a console page could not read the platform");
    crate::portal::problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "The console cannot read the platform",
        "The database or the queue did not answer. Reload in a few seconds; if it keeps failing, check /readyz and the service logs.",
    )
}

/// Serves the console's stylesheets and script.
pub(super) async fn asset(Path(name): Path<String>) -> Response {
    let (content_type, body) = match name.as_str() {
        "portal.css" => (
            "text/css; charset=utf-8",
            include_str!("../../assets/portal.css"),
        ),
        "ops.css" => (
            "text/css; charset=utf-8",
            include_str!("../../assets/ops.css"),
        ),
        "ops.js" => (
            "text/javascript; charset=utf-8",
            include_str!("../../assets/ops.js"),
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// A link back into the console, and never out of it.
fn console_path(back: Option<&str>) -> String {
    back.filter(|b| {
        b.starts_with("/ops/")
            && !b.starts_with("/ops//")
            && !b.contains('\\')
            && b.chars().all(|c| c.is_ascii_graphic())
    })
    .unwrap_or("/ops/")
    .to_owned()
}

/// The page of job `id`, its id encoded (a path segment never carries a
/// header's line break into the redirect).
fn job_path(id: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("/ops/jobs/{encoded}")
}

/// `path` with `key=value` added to its query.
fn with_param(path: &str, key: &str, value: &str) -> String {
    let separator = if path.contains('?') { '&' } else { '?' };
    let encoded: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    format!("{path}{separator}{key}={encoded}")
}

/// A filter as the pages carry it in links and forms.
#[derive(Clone, Debug, Default)]
pub(super) struct FilterView {
    pub state: String,
    pub queue: String,
    pub agency: String,
    pub search: String,
}

impl FilterView {
    fn of(filter: &JobFilter) -> Self {
        Self {
            state: filter.state.clone(),
            queue: filter.queue.clone().unwrap_or_default(),
            agency: filter.agency.clone().unwrap_or_default(),
            search: filter.search.clone().unwrap_or_default(),
        }
    }

    /// The jobs page of this filter, at `page` (from 1).
    fn link(&self, page: usize) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("state", &self.state);
        for (key, value) in [
            ("queue", &self.queue),
            ("agency", &self.agency),
            ("search", &self.search),
        ] {
            if !value.is_empty() {
                query.append_pair(key, value);
            }
        }
        if page > 1 {
            query.append_pair("page", &page.to_string());
        }
        format!("/ops/?{}", query.finish())
    }
}

/// An action a page offers.
pub(super) struct ActionView {
    pub name: &'static str,
    pub label: &'static str,
    pub danger: bool,
}

fn action_view(action: JobAction) -> ActionView {
    let (label, danger) = match action {
        JobAction::Retry => ("Retry", false),
        JobAction::Discard => ("Discard", true),
        JobAction::RunNow => ("Run now", false),
        JobAction::Cancel => ("Cancel", true),
    };
    ActionView {
        name: action.name(),
        label,
        danger,
    }
}

fn actions_for(state: &str) -> Vec<ActionView> {
    JobAction::ALL
        .into_iter()
        .filter(|action| action.takes_state(state))
        .map(action_view)
        .collect()
}

pub(super) struct CountView {
    pub state: &'static str,
    pub count: u64,
    pub link: String,
}

pub(super) struct QueueRow {
    pub queue: String,
    pub counts: Vec<CountView>,
    pub paused: bool,
}

pub(super) struct JobRow {
    pub id: String,
    pub queue: String,
    pub attempts: u64,
    pub agency: String,
    pub last_error: String,
    pub payload: String,
}

fn job_row(job: JobSummary) -> JobRow {
    let agency = job
        .payload
        .get("agency_id")
        .and_then(|a| a.as_str())
        .unwrap_or_default()
        .to_owned();
    let mut payload = job.payload.to_string();
    if payload.chars().count() > 160 {
        payload = payload.chars().take(160).collect::<String>() + "…";
    }
    JobRow {
        id: job.id,
        queue: job.queue,
        attempts: job.attempts,
        agency,
        last_error: job.last_error.unwrap_or_default(),
        payload,
    }
}

#[derive(Template)]
#[template(path = "ops/jobs.html")]
struct JobsPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    states: [&'static str; 6],
    queue_names: [&'static str; 8],
    queues: Vec<QueueRow>,
    back: String,
    filter: FilterView,
    error: Option<String>,
    count: usize,
    first: usize,
    last: usize,
    actions: Vec<ActionView>,
    jobs: Vec<JobRow>,
    runs_in_process: Vec<RunRow>,
    runs_limit: usize,
    more_runs_in_process: bool,
    previous: Option<String>,
    next: Option<String>,
}

/// The jobs page's query: a filter, a page, and what the last action did.
#[derive(Debug, Default, Deserialize)]
pub(super) struct JobsQuery {
    state: Option<String>,
    queue: Option<String>,
    agency: Option<String>,
    search: Option<String>,
    page: Option<String>,
    notice: Option<String>,
    problem: Option<String>,
}

/// `GET /ops/`: counts per queue and state, and the jobs a filter finds.
pub(super) async fn jobs_page(
    State(state): State<OpsState>,
    Query(query): Query<JobsQuery>,
) -> Response {
    let app = &state.app;
    let console = Console::new(app.store(), &app.platform().queue);
    let depths = match console.admin().depths().await {
        Ok(depths) => depths,
        Err(err) => return unavailable(&err.into()),
    };
    let paused = match app.store().schedules().paused_queues().await {
        Ok(paused) => paused,
        Err(err) => return unavailable(&err.into()),
    };
    let queues = depths
        .into_iter()
        .map(|depth| {
            let counts = [
                ("queued", depth.pending),
                ("scheduled", depth.scheduled),
                ("running", depth.running),
                ("retrying", depth.retrying),
                ("dead", depth.dead),
                ("done", depth.done),
            ]
            .into_iter()
            .map(|(state, count)| CountView {
                state,
                count,
                link: FilterView {
                    state: state.to_owned(),
                    queue: depth.queue.clone(),
                    ..FilterView::default()
                }
                .link(1),
            })
            .collect();
            QueueRow {
                paused: paused.contains(&depth.queue),
                queue: depth.queue,
                counts,
            }
        })
        .collect();
    let input = FilterInput {
        state: Some(query.state.clone().unwrap_or_else(|| "dead".to_owned())),
        queue: query.queue.clone(),
        agency: query.agency.clone(),
        search: query.search.clone(),
    };
    let (filter, error) = match input.checked() {
        Ok(filter) => (filter, None),
        Err(ConsoleError::Invalid(field, reason)) => (
            JobFilter {
                state: "dead".to_owned(),
                ..JobFilter::default()
            },
            Some(format!(
                "The filter's {field} {reason}. Showing dead jobs instead."
            )),
        ),
        Err(err) => return unavailable(&err),
    };
    let view = FilterView::of(&filter);
    let Found {
        jobs: found,
        runs_in_process,
        more_runs_in_process,
    } = match console.search(filter.clone()).await {
        Ok(found) => found,
        Err(err) => return unavailable(&err),
    };
    let runs_in_process = runs_in_process
        .into_iter()
        .enumerate()
        .map(|(index, run)| run_row(index + 1, run))
        .collect();
    let count = found.len();
    let pages = count.div_ceil(PAGE_SIZE).max(1);
    let page = query
        .page
        .as_deref()
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, pages);
    let start = (page - 1) * PAGE_SIZE;
    let jobs: Vec<JobRow> = found
        .into_iter()
        .skip(start)
        .take(PAGE_SIZE)
        .map(job_row)
        .collect();
    render(&JobsPage {
        current: "jobs",
        notice: query.notice,
        problem: query.problem,
        updated: when(app.store().clock().now()),
        states: JOB_STATES,
        queue_names: platform::kinds::QUEUES,
        queues,
        back: view.link(page),
        first: if count == 0 { 0 } else { start + 1 },
        last: start + jobs.len(),
        actions: actions_for(&filter.state),
        previous: (page > 1).then(|| view.link(page - 1)),
        next: (page < pages).then(|| view.link(page + 1)),
        filter: view,
        error,
        count,
        jobs,
        runs_in_process,
        runs_limit: RUNS_IN_PROCESS_SHOWN,
        more_runs_in_process,
    })
}

#[derive(Template)]
#[template(path = "ops/confirm.html")]
struct ConfirmPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    action: &'static str,
    label: &'static str,
    verb: &'static str,
    danger: bool,
    count: usize,
    filter: FilterView,
    back: String,
}

/// A bulk action and its filter, as the forms send them.
#[derive(Debug, Default, Deserialize)]
pub(super) struct BulkForm {
    action: Option<String>,
    #[serde(flatten)]
    filter: FilterInput,
}

impl BulkForm {
    /// The action and its checked filter, or the way back to the jobs page
    /// saying what is wrong (or the problem page when the platform failed).
    fn read(self) -> Result<(JobAction, JobFilter), Box<Response>> {
        let back = |problem: &str| {
            Box::new(Redirect::to(&with_param("/ops/", "problem", problem)).into_response())
        };
        let action = self
            .action
            .as_deref()
            .and_then(JobAction::parse)
            .ok_or_else(|| back("Choose an action: retry, discard, run now or cancel."))?;
        match self.filter.checked() {
            Ok(filter) => Ok((action, filter)),
            Err(ConsoleError::Invalid(field, reason)) => {
                Err(back(&format!("The filter's {field} {reason}.")))
            }
            Err(err) => Err(Box::new(unavailable(&err))),
        }
    }
}

/// `GET /ops/jobs/confirm`: how many jobs a bulk action would touch, and the
/// button that does it.
pub(super) async fn confirm_page(
    State(state): State<OpsState>,
    Query(form): Query<BulkForm>,
) -> Response {
    let app = &state.app;
    let (action, filter) = match form.read() {
        Ok(read) => read,
        Err(response) => return *response,
    };
    let view = FilterView::of(&filter);
    if !action.takes_state(&filter.state) {
        let problem = format!(
            "{} takes {} jobs, not {} ones.",
            action_view(action).label,
            action.takes().join(" or "),
            filter.state
        );
        return Redirect::to(&with_param(&view.link(1), "problem", &problem)).into_response();
    }
    let count = match Console::new(app.store(), &app.platform().queue)
        .find(filter)
        .await
    {
        Ok(found) => found.len(),
        Err(err) => return unavailable(&err),
    };
    let shown = action_view(action);
    let verb = match action {
        JobAction::Retry => "put back in their queues, with fresh attempts,",
        JobAction::Discard => "throw away for good",
        JobAction::RunNow => "make due now",
        JobAction::Cancel => {
            "take out of their queues (they go dead as cancelled, and can be retried)"
        }
    };
    render(&ConfirmPage {
        current: "jobs",
        notice: None,
        problem: None,
        updated: when(app.store().clock().now()),
        action: action.name(),
        label: shown.label,
        verb,
        danger: shown.danger,
        count,
        back: view.link(1),
        filter: view,
    })
}

/// `POST /ops/jobs/bulk`: the confirmed action on every job the filter finds.
pub(super) async fn bulk(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Form(form): Form<BulkForm>,
) -> Response {
    let app = &state.app;
    let (action, filter) = match form.read() {
        Ok(read) => read,
        Err(response) => return *response,
    };
    let view = FilterView::of(&filter);
    match Console::new(app.store(), &app.platform().queue)
        .act_on_filter(action, filter, &actor.0)
        .await
    {
        Ok(touched) => {
            let notice = format!(
                "{}: {} job{}.",
                action_view(action).label,
                touched.len(),
                if touched.len() == 1 { "" } else { "s" }
            );
            Redirect::to(&with_param(&view.link(1), "notice", &notice)).into_response()
        }
        Err(ConsoleError::Invalid(_, reason)) => Redirect::to(&with_param(
            &view.link(1),
            "problem",
            &format!("Nothing was done: {reason}."),
        ))
        .into_response(),
        Err(err) => unavailable(&err),
    }
}

pub(super) struct RunRow {
    pub run: usize,
    pub job_id: String,
    pub queue: String,
    pub agency: String,
    pub attempt: i64,
    pub started: String,
    pub ended: String,
    pub took: String,
    pub waited: String,
    pub worker: String,
    pub host: String,
    pub outcome: String,
    pub outcome_class: &'static str,
    pub error: String,
}

/// A run as a row, numbered `number` in its table (a job's runs in order,
/// or a search's runs without a queue job).
fn run_row(number: usize, run: AttemptRecord) -> RunRow {
    let took = run
        .finished_at
        .map(|end| duration((end.as_micros() - run.started_at.as_micros()) / 1_000))
        .unwrap_or_default();
    let waited = run
        .due_at
        .map(|due| duration(((run.started_at.as_micros() - due.as_micros()) / 1_000).max(0)))
        .unwrap_or_default();
    let outcome = run.outcome.clone().unwrap_or_else(|| "running".to_owned());
    RunRow {
        run: number,
        job_id: run.job_id,
        queue: run.queue,
        agency: run.agency_id.unwrap_or_default(),
        attempt: run.attempt,
        started: when(run.started_at),
        ended: run.finished_at.map(when).unwrap_or_default(),
        took,
        waited,
        outcome_class: match outcome.as_str() {
            "succeeded" => "ok",
            "failed" => "error",
            _ => "muted",
        },
        outcome,
        worker: run.worker_id,
        host: run.host,
        error: run.error.unwrap_or_default(),
    }
}

#[derive(Template)]
#[template(path = "ops/job.html")]
struct JobPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    back: String,
    id: String,
    state: String,
    state_class: &'static str,
    queue: String,
    attempts: u64,
    max_attempts: Option<u64>,
    pushed_at: String,
    next_run: String,
    finished_at: Option<String>,
    last_error: Option<String>,
    actions: Vec<ActionView>,
    runs: Vec<RunRow>,
    payload: String,
}

/// What a job page's query may carry.
#[derive(Debug, Default, Deserialize)]
pub(super) struct NoticeQuery {
    notice: Option<String>,
    problem: Option<String>,
}

fn state_class(state: &str) -> &'static str {
    match state {
        "done" => "ok",
        "dead" => "error",
        "retrying" | "scheduled" => "warn",
        _ => "muted",
    }
}

/// `GET /ops/jobs/{id}`: one job, every attempt, its payload.
pub(super) async fn job_page(
    State(state): State<OpsState>,
    Path(id): Path<String>,
    Query(query): Query<NoticeQuery>,
) -> Response {
    let app = &state.app;
    let console = Console::new(app.store(), &app.platform().queue);
    let job = match console.admin().find_job(&id).await {
        Ok(Some(job)) => job,
        Ok(None) => {
            return crate::portal::problem(
                StatusCode::NOT_FOUND,
                "No such job",
                "No queue holds a job with this id: it may have been discarded, or purged after its retention. Find jobs on the Jobs page (/ops/).",
            );
        }
        Err(err) => return unavailable(&err.into()),
    };
    let runs = match app.store().job_attempts().of_job(&id).await {
        Ok(runs) => runs,
        Err(err) => return unavailable(&err.into()),
    };
    let runs = runs
        .into_iter()
        .enumerate()
        .map(|(index, run)| run_row(index + 1, run))
        .collect();
    let pushed_at = ulid::Ulid::from_string(&job.summary.id)
        .ok()
        .map(|ulid| {
            when(Timestamp::from_micros(
                i64::try_from(ulid.timestamp_ms()).unwrap_or(0) * 1_000,
            ))
        })
        .unwrap_or_default();
    let next_run = match job.next_run_at {
        Some(at) if at > app.store().clock().now().as_unix_seconds() => when_seconds(at),
        Some(_) => "now, as soon as a worker is free".to_owned(),
        None => match job.summary.state.as_str() {
            "running" => "running now".to_owned(),
            "dead" => "never, unless retried".to_owned(),
            _ => "never: it finished".to_owned(),
        },
    };
    let payload = serde_json::to_string_pretty(&job.summary.payload).unwrap_or_default();
    let back = FilterView {
        state: job.summary.state.clone(),
        queue: job.summary.queue.clone(),
        ..FilterView::default()
    }
    .link(1);
    render(&JobPage {
        current: "jobs",
        notice: query.notice,
        problem: query.problem,
        updated: when(app.store().clock().now()),
        back,
        actions: actions_for(&job.summary.state),
        state_class: state_class(&job.summary.state),
        state: job.summary.state,
        queue: job.summary.queue,
        attempts: job.summary.attempts,
        max_attempts: job.max_attempts,
        pushed_at,
        next_run,
        finished_at: job.finished_at.map(when_seconds),
        last_error: job.summary.last_error,
        runs,
        payload,
        id: job.summary.id,
    })
}

/// `POST /ops/jobs/{id}/{action}` from the job page.
pub(super) async fn job_action(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    let app = &state.app;
    let page = job_path(&id);
    let Some(action) = JobAction::parse(&action) else {
        return Redirect::to(&with_param(&page, "problem", "No such action.")).into_response();
    };
    let label = action_view(action).label;
    match Console::new(app.store(), &app.platform().queue)
        .act_on_job(action, &id, &actor.0)
        .await
    {
        Ok(()) if action == JobAction::Discard => Redirect::to(&with_param(
            "/ops/",
            "notice",
            &format!("Discarded job {id}."),
        ))
        .into_response(),
        Ok(()) => {
            Redirect::to(&with_param(&page, "notice", &format!("{label}: done."))).into_response()
        }
        Err(ConsoleError::NotFound) => Redirect::to(&with_param(
            &page,
            "problem",
            &format!(
                "{label} takes {} jobs; this one is no longer one, so nothing was done.",
                action.takes().join(" or ")
            ),
        ))
        .into_response(),
        Err(err) => unavailable(&err),
    }
}

/// The back link of a queue control.
#[derive(Debug, Default, Deserialize)]
pub(super) struct BackForm {
    back: Option<String>,
}

/// `POST /ops/queues/{queue}/{pause|resume}` from the jobs page.
pub(super) async fn queue_control(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((queue, control)): Path<(String, String)>,
    Form(form): Form<BackForm>,
) -> Response {
    let app = &state.app;
    let back = console_path(form.back.as_deref());
    let paused = match control.as_str() {
        "pause" => true,
        "resume" => false,
        _ => {
            return Redirect::to(&with_param(&back, "problem", "No such control.")).into_response();
        }
    };
    match Console::new(app.store(), &app.platform().queue)
        .set_paused(&queue, paused, &actor.0)
        .await
    {
        Ok(queue) => {
            let notice = if paused {
                format!(
                    "Paused {queue}: workers finish what they hold and take no more within a second."
                )
            } else {
                format!("Resumed {queue}.")
            };
            Redirect::to(&with_param(&back, "notice", &notice)).into_response()
        }
        Err(ConsoleError::Invalid(_, reason)) => {
            Redirect::to(&with_param(&back, "problem", &reason)).into_response()
        }
        Err(err) => unavailable(&err),
    }
}

pub(super) struct WorkerRow {
    pub id: String,
    pub host: String,
    pub pid: i64,
    pub version: String,
    pub queues: String,
    pub in_hand: i64,
    pub heartbeat: String,
    pub state: String,
    pub state_class: &'static str,
    pub requested: Option<String>,
    pub can_quiet: bool,
    pub can_stop: bool,
}

#[derive(Template)]
#[template(path = "ops/workers.html")]
struct WorkersPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    workers: Vec<WorkerRow>,
}

/// A process's state as the console shows it: `lost` once it missed three
/// heartbeats without saying it stopped.
pub(super) fn shown_state(worker: &storage::job_console::WorkerProcess, now: Timestamp) -> &str {
    if worker.is_lost(now) {
        "lost"
    } else {
        &worker.state
    }
}

/// `GET /ops/workers`.
pub(super) async fn workers_page(
    State(state): State<OpsState>,
    Query(query): Query<NoticeQuery>,
) -> Response {
    let app = &state.app;
    let now = app.store().clock().now();
    let processes = match app.store().worker_processes().list().await {
        Ok(processes) => processes,
        Err(err) => return unavailable(&err.into()),
    };
    let workers = processes
        .into_iter()
        .map(|worker| {
            let state = shown_state(&worker, now).to_owned();
            let ago = (now.as_micros() - worker.heartbeat_at.as_micros()) / 1_000_000;
            let queues =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&worker.queues)
                    .map(|map| {
                        map.iter()
                            .map(|(queue, concurrency)| format!("{queue} ×{concurrency}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or(worker.queues.clone());
            let live = matches!(state.as_str(), "running" | "quiet");
            WorkerRow {
                can_quiet: state == "running" && worker.requested.is_none(),
                can_stop: live && worker.requested.as_deref() != Some("stop"),
                state_class: match state.as_str() {
                    "running" => "ok",
                    "quiet" | "stopping" => "warn",
                    "lost" => "error",
                    _ => "muted",
                },
                heartbeat: format!("{} ({ago} s ago)", when(worker.heartbeat_at)),
                state,
                id: worker.id,
                host: worker.host,
                pid: worker.pid,
                version: worker.version,
                queues,
                in_hand: worker.in_hand,
                requested: worker.requested,
            }
        })
        .collect();
    render(&WorkersPage {
        current: "workers",
        notice: query.notice,
        problem: query.problem,
        updated: when(now),
        workers,
    })
}

/// `POST /ops/workers/{id}/{quiet|stop}`.
pub(super) async fn worker_request(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((id, request)): Path<(String, String)>,
) -> Response {
    let app = &state.app;
    let Some(request) = WorkerRequest::parse(&request) else {
        return Redirect::to(&with_param(
            "/ops/workers",
            "problem",
            "No such request: quiet or stop.",
        ))
        .into_response();
    };
    match Console::new(app.store(), &app.platform().queue)
        .request_worker(&id, request, &actor.0)
        .await
    {
        Ok(()) => Redirect::to(&with_param(
            "/ops/workers",
            "notice",
            &format!(
                "Asked {id} to {}; it does within one heartbeat.",
                request.name()
            ),
        ))
        .into_response(),
        Err(ConsoleError::NotFound) => Redirect::to(&with_param(
            "/ops/workers",
            "problem",
            &format!("{id} is not a running worker process; nothing was asked."),
        ))
        .into_response(),
        Err(err) => unavailable(&err),
    }
}

pub(super) struct AuditRow {
    pub id: String,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub count: i64,
}

#[derive(Template)]
#[template(path = "ops/audit.html")]
struct AuditPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    entries: Vec<AuditRow>,
}

/// `GET /ops/audit`.
pub(super) async fn audit_page(State(state): State<OpsState>) -> Response {
    let app = &state.app;
    let entries = match app.store().ops_audit().recent(200).await {
        Ok(entries) => entries,
        Err(err) => return unavailable(&err.into()),
    };
    render(&AuditPage {
        current: "audit",
        notice: None,
        problem: None,
        updated: when(app.store().clock().now()),
        entries: entries
            .into_iter()
            .map(|entry| AuditRow {
                id: entry.id,
                at: when(entry.at),
                actor: entry.actor,
                action: entry.action,
                target: entry.target,
                count: entry.count,
            })
            .collect(),
    })
}

/// A period the history page shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Range {
    pub name: &'static str,
    pub label: &'static str,
    pub resolution: Resolution,
    pub buckets: i64,
    pub label_every: usize,
}

/// The periods: the last hour and day by the minute, 30 days by the hour.
pub(super) const RANGES: [Range; 3] = [
    Range {
        name: "hour",
        label: "the last hour",
        resolution: Resolution::Minute,
        buckets: 60,
        label_every: 10,
    },
    Range {
        name: "day",
        label: "the last 24 hours",
        resolution: Resolution::Minute,
        buckets: 1_440,
        label_every: 120,
    },
    Range {
        name: "month",
        label: "the last 30 days",
        resolution: Resolution::Hour,
        buckets: 720,
        label_every: 72,
    },
];

/// The range named `name` (the last hour by default).
pub(super) fn range_named(name: Option<&str>) -> Option<Range> {
    match name.filter(|n| !n.is_empty()) {
        None => Some(RANGES[0]),
        Some(name) => RANGES.into_iter().find(|range| range.name == name),
    }
}

/// History as the page and the JSON route read it.
pub(super) struct History {
    /// Per bucket (start in Unix seconds), summed over the queues shown.
    pub buckets: Vec<(i64, HistoryPoint)>,
    pub totals: HistoryPoint,
    pub agencies: Vec<Breakdown>,
    pub endpoints: Vec<Breakdown>,
}

/// Reads `range` of `queue` (or every queue).
pub(super) async fn read_history(
    store: &storage::Store,
    range: Range,
    queue: Option<&str>,
) -> Result<History, ConsoleError> {
    let now = store.clock().now();
    let width = range.resolution.seconds();
    let last = now.as_unix_seconds().div_euclid(width) * width;
    let first = last - (range.buckets - 1) * width;
    let since = Timestamp::from_micros(first * 1_000_000);
    let history = store.job_history();
    let series = history.series(range.resolution, since, now, queue).await?;
    let mut buckets: Vec<(i64, HistoryPoint)> = (0..range.buckets)
        .map(|index| (first + index * width, HistoryPoint::default()))
        .collect();
    let mut totals = HistoryPoint::default();
    for ((bucket, _queue), point) in &series {
        let index = (bucket - first) / width;
        if let Some((_, slot)) = usize::try_from(index).ok().and_then(|i| buckets.get_mut(i)) {
            slot.merge(point);
            totals.merge(point);
        }
    }
    let agencies = history
        .breakdown(false, range.resolution, since, now, queue)
        .await?;
    let endpoints = history
        .breakdown(true, range.resolution, since, now, queue)
        .await?;
    Ok(History {
        buckets,
        totals,
        agencies,
        endpoints,
    })
}

pub(super) struct ChartView {
    pub id: &'static str,
    pub title: &'static str,
    pub unit: &'static str,
    pub columns: Columns,
    pub legend: Vec<(&'static str, &'static str)>,
}

#[derive(Template)]
#[template(path = "ops/history.html")]
struct HistoryPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    ranges: Vec<(&'static str, &'static str)>,
    range: &'static str,
    range_label: &'static str,
    bucket_label: &'static str,
    queue_names: [&'static str; 8],
    queue: String,
    totals: HistoryPoint,
    charts: Vec<ChartView>,
    agencies: Vec<Breakdown>,
    endpoints: Vec<Breakdown>,
}

/// The history page's query.
#[derive(Debug, Default, Deserialize)]
pub(super) struct HistoryQuery {
    range: Option<String>,
    queue: Option<String>,
}

/// `GET /ops/history`: throughput, failures and latency charts, and the
/// breakdowns by agency and endpoint.
pub(super) async fn history_page(
    State(state): State<OpsState>,
    Query(query): Query<HistoryQuery>,
) -> Response {
    let app = &state.app;
    let (range, mut problem) = match range_named(query.range.as_deref()) {
        Some(range) => (range, None),
        None => (
            RANGES[0],
            Some("No such period: showing the last hour.".to_owned()),
        ),
    };
    let queue = query.queue.filter(|q| !q.is_empty());
    let queue = match queue.as_deref().map(super::console::known_queue) {
        Some(Ok(queue)) => Some(queue),
        Some(Err(_)) => {
            problem = Some("No such queue: showing every queue.".to_owned());
            None
        }
        None => None,
    };
    let history = match read_history(app.store(), range, queue).await {
        Ok(history) => history,
        Err(err) => return unavailable(&err),
    };
    let label = |bucket: i64| {
        let at = chrono::DateTime::from_timestamp(bucket, 0).unwrap_or_default();
        match range.resolution {
            Resolution::Minute => at.format("%H:%M").to_string(),
            Resolution::Hour => at.format("%d %b %H:00").to_string(),
        }
    };
    let slots = |values: &dyn Fn(&HistoryPoint) -> Vec<u64>| -> Vec<(String, Vec<u64>)> {
        history
            .buckets
            .iter()
            .map(|(bucket, point)| (label(*bucket), values(point)))
            .collect()
    };
    let as_count = |value: i64| u64::try_from(value).unwrap_or(0);
    let charts = vec![
        ChartView {
            id: "throughput-chart",
            title: "Runs finished",
            unit: "runs",
            columns: Columns::labelled_every(
                &slots(&|p| vec![as_count(p.succeeded), as_count(p.failed)]),
                &["s0", "s1"],
                &["succeeded", "failed"],
                range.label_every,
            ),
            legend: vec![("s0", "succeeded"), ("s1", "failed")],
        },
        ChartView {
            id: "wait-chart",
            title: "Mean wait from due to start",
            unit: "ms",
            columns: Columns::labelled_every(
                &slots(&|p| vec![as_count(p.wait_ms_mean())]),
                &["s2"],
                &["ms waited"],
                range.label_every,
            ),
            legend: vec![("s2", "mean wait (ms)")],
        },
        ChartView {
            id: "run-chart",
            title: "Mean run time",
            unit: "ms",
            columns: Columns::labelled_every(
                &slots(&|p| vec![as_count(p.run_ms_mean())]),
                &["s2"],
                &["ms running"],
                range.label_every,
            ),
            legend: vec![("s2", "mean run (ms)")],
        },
    ];
    render(&HistoryPage {
        current: "history",
        notice: None,
        problem,
        updated: when(app.store().clock().now()),
        ranges: RANGES.iter().map(|r| (r.name, r.label)).collect(),
        range: range.name,
        range_label: range.label,
        bucket_label: match range.resolution {
            Resolution::Minute => "minute",
            Resolution::Hour => "hour",
        },
        queue_names: platform::kinds::QUEUES,
        queue: queue.unwrap_or_default().to_owned(),
        totals: history.totals,
        charts,
        agencies: history.agencies.into_iter().take(25).collect(),
        endpoints: history.endpoints.into_iter().take(25).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_back_stay_in_the_console() {
        assert_eq!(console_path(Some("/ops/?state=dead")), "/ops/?state=dead");
        assert_eq!(console_path(Some("https://evil.example/")), "/ops/");
        assert_eq!(console_path(Some("//evil.example/ops/")), "/ops/");
        assert_eq!(console_path(Some("/ops//evil.example")), "/ops/");
        assert_eq!(console_path(None), "/ops/");
        assert_eq!(console_path(Some("/ops/?a=1\r\nSet-Cookie: x")), "/ops/");
        assert_eq!(job_path("01J\r\nX: y"), "/ops/jobs/01J%0D%0AX%3A+y");
    }

    #[test]
    fn filters_make_links_that_keep_them() {
        let view = FilterView {
            state: "dead".into(),
            queue: "probe".into(),
            agency: String::new(),
            search: "a b&c".into(),
        };
        assert_eq!(view.link(1), "/ops/?state=dead&queue=probe&search=a+b%26c");
        assert_eq!(
            view.link(2),
            "/ops/?state=dead&queue=probe&search=a+b%26c&page=2"
        );
        assert_eq!(
            with_param("/ops/", "notice", "Retry: 3 jobs."),
            "/ops/?notice=Retry%3A+3+jobs."
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(250), "250 ms");
        assert_eq!(duration(2_500), "2.5 s");
        assert_eq!(duration(125_000), "2 min 5 s");
    }
}
