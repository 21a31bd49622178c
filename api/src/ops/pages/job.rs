//! `/ops/jobs/{id}`: one job with every run, its actions, and the queue
//! controls posted from the pages.

use super::shared::*;

pub(in crate::ops) struct RunRow {
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
pub(in crate::ops) fn run_row(number: usize, run: AttemptRecord) -> RunRow {
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
    /// A profile sweep's progress, when the job is one of its batches.
    sweep: Option<super::shared::SweepProgress>,
}

/// What a job page's query may carry.
fn state_class(state: &str) -> &'static str {
    match state {
        "done" => "ok",
        "dead" => "error",
        "retrying" | "scheduled" => "warn",
        _ => "muted",
    }
}

/// `GET /ops/jobs/{id}`: one job, every attempt, its payload.
pub(in crate::ops) async fn job_page(
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
    let sweep = super::shared::SweepProgress::of(&job.summary.payload);
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
        sweep,
        id: job.summary.id,
    })
}

/// `POST /ops/jobs/{id}/{action}` from the job page.
pub(in crate::ops) async fn job_action(
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
pub(in crate::ops) struct BackForm {
    back: Option<String>,
}

/// `POST /ops/queues/{queue}/{pause|resume}` from the jobs page.
pub(in crate::ops) async fn queue_control(
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
