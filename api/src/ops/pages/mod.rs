//! The job console's pages on the ops listener, server-rendered: jobs by
//! state and queue with search and bulk actions (confirmed on a page of
//! their own that says how many jobs they touch), one job with every
//! attempt, the worker processes with quiet and stop, history charts with
//! per-agency and per-endpoint breakdowns, and the audit log. Every change
//! is a form post that redirects back with what happened, so the pages work
//! without script; the one script refreshes them every few seconds.
//!
//! One file per page; here what they share: formatting, links, the filter
//! as links carry it and the rows of the jobs table.

mod audit;
mod bulk;
mod history;
mod job;
mod jobs;
mod workers;

pub(super) use audit::audit_page;
pub(super) use bulk::{bulk, confirm_page};
pub(super) use history::{history_page, range_named, read_history};
pub(super) use job::{job_action, job_page, queue_control};
pub(super) use jobs::jobs_page;
pub(super) use workers::{shown_state, worker_request, workers_page};

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use platform::admin::{JOB_STATES, JobFilter, JobSummary};
use serde::Deserialize;
use storage::Timestamp;
use storage::background::job_console::{
    AttemptRecord, Breakdown, HistoryPoint, Resolution, WorkerRequest,
};

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
            include_str!("../../../assets/portal.css"),
        ),
        "ops.css" => (
            "text/css; charset=utf-8",
            include_str!("../../../assets/ops.css"),
        ),
        "ops.js" => (
            "text/javascript; charset=utf-8",
            include_str!("../../../assets/ops.js"),
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

/// What happened, as an action redirects back with it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct NoticeQuery {
    notice: Option<String>,
    problem: Option<String>,
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
