//! What the console's pages share: formatting of times and durations,
//! rendering, links that stay in the console, the filter as links carry it,
//! the rows of the jobs table, and the notice an action redirects back with.

pub(super) use askama::Template;
pub(super) use axum::extract::{Path, Query, State};
pub(super) use axum::http::{HeaderValue, StatusCode, header};
pub(super) use axum::response::{IntoResponse, Redirect, Response};
pub(super) use axum::{Extension, Form};
pub(super) use platform::admin::{JOB_STATES, JobFilter, JobSummary, JobWindow};
pub(super) use serde::Deserialize;
pub(super) use storage::Timestamp;
pub(super) use storage::background::job_console::{
    AttemptRecord, Breakdown, HistoryPoint, Resolution, WorkerRequest,
};

pub(super) use crate::ops::OpsState;
pub(super) use crate::ops::auth::OpsActor;
pub(super) use crate::ops::console::{
    Console, ConsoleError, FilterInput, Found, JobAction, RUNS_IN_PROCESS_SHOWN,
};
pub(super) use crate::portal::chart::Columns;

/// Jobs a page lists.
pub(super) const PAGE_SIZE: usize = 25;

/// A time as the console shows it (UTC).
pub(in crate::ops) fn when(at: Timestamp) -> String {
    at.to_datetime().format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Unix seconds as the console shows them.
pub(super) fn when_seconds(seconds: i64) -> String {
    when(Timestamp::from_micros(seconds.saturating_mul(1_000_000)))
}

/// Milliseconds as a person reads them.
pub(super) fn duration(ms: i64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1_000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1_000)
    }
}

pub(super) fn render(template: &impl Template) -> Response {
    crate::portal::page(StatusCode::OK, template)
}

pub(super) fn unavailable(err: &ConsoleError) -> Response {
    tracing::error!(?err, "a console page could not read the platform");
    crate::portal::problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "The console cannot read the platform",
        "The database or the queue did not answer. Reload in a few seconds; if it keeps failing, check /readyz and the service logs.",
    )
}

/// Serves the console's stylesheets and script.
pub(in crate::ops) async fn asset(Path(name): Path<String>) -> Response {
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
pub(super) fn console_path(back: Option<&str>) -> String {
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
pub(super) fn job_path(id: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("/ops/jobs/{encoded}")
}

/// `path` with `key=value` added to its query.
pub(super) fn with_param(path: &str, key: &str, value: &str) -> String {
    let separator = if path.contains('?') { '&' } else { '?' };
    let encoded: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    format!("{path}{separator}{key}={encoded}")
}

/// What happened, as an action redirects back with it.
#[derive(Debug, Default, Deserialize)]
pub(in crate::ops) struct NoticeQuery {
    pub(super) notice: Option<String>,
    pub(super) problem: Option<String>,
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
    pub(super) fn of(filter: &JobFilter) -> Self {
        Self {
            state: filter.state.clone(),
            queue: filter.queue.clone().unwrap_or_default(),
            agency: filter.agency.clone().unwrap_or_default(),
            search: filter.search.clone().unwrap_or_default(),
        }
    }

    /// The jobs page of this filter, at `page` (from 1).
    pub(super) fn link(&self, page: usize) -> String {
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

pub(super) fn action_view(action: JobAction) -> ActionView {
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

pub(super) fn actions_for(state: &str) -> Vec<ActionView> {
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
    /// A profile sweep's progress over the agency's library, else `None`.
    pub sweep: Option<SweepProgress>,
}

/// How far a delivery profile's sweep is (`delivery_outputs` jobs of scope
/// `profile` carry the photos rendered by the batches before and the
/// library's size once the first batch counted it).
pub(super) struct SweepProgress {
    pub rendered: u64,
    /// `None` until the first batch counted the library.
    pub total: Option<u64>,
}

impl SweepProgress {
    /// The sweep of a job's payload, if it is one.
    pub fn of(payload: &serde_json::Value) -> Option<Self> {
        if payload.get("scope")?.as_str()? != "profile" {
            return None;
        }
        Some(Self {
            rendered: payload.get("rendered")?.as_u64()?,
            total: payload.get("total").and_then(serde_json::Value::as_u64),
        })
    }

    /// `1,200 of 10,000 photos rendered (12 %)`.
    pub fn text(&self) -> String {
        match self.total {
            Some(total) => format!(
                "{} of {} photos rendered ({} %)",
                separated(self.rendered),
                separated(total),
                (self.rendered * 100)
                    .checked_div(total)
                    .unwrap_or(100)
                    .min(100)
            ),
            None => format!(
                "{} photos rendered; counting the library",
                separated(self.rendered)
            ),
        }
    }

    /// The `<progress>` bar's maximum: the library, or 1 while uncounted.
    pub fn max(&self) -> u64 {
        self.total.unwrap_or(1).max(1)
    }

    /// The bar's value.
    pub fn value(&self) -> u64 {
        self.total.map_or(0, |total| self.rendered.min(total))
    }
}

/// `10,000` of 10000.
fn separated(number: u64) -> String {
    let digits = number.to_string();
    let mut text = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

pub(super) fn job_row(job: JobSummary) -> JobRow {
    let agency = job
        .payload
        .get("agency_id")
        .and_then(|a| a.as_str())
        .unwrap_or_default()
        .to_owned();
    let sweep = SweepProgress::of(&job.payload);
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
        sweep,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_sweep_reads_its_progress_from_its_payload() {
        let counted =
            json!({"agency_id": "agc_1", "scope": "profile", "rendered": 1200, "total": 10000});
        let sweep = SweepProgress::of(&counted).unwrap();
        assert_eq!(sweep.text(), "1,200 of 10,000 photos rendered (12 %)");
        assert_eq!((sweep.value(), sweep.max()), (1200, 10000));
        let first = json!({"scope": "profile", "rendered": 0, "total": null});
        let sweep = SweepProgress::of(&first).unwrap();
        assert_eq!(sweep.text(), "0 photos rendered; counting the library");
        assert_eq!((sweep.value(), sweep.max()), (0, 1));
        let empty = json!({"scope": "profile", "rendered": 0, "total": 0});
        assert_eq!(
            SweepProgress::of(&empty).unwrap().text(),
            "0 of 0 photos rendered (100 %)"
        );
        assert!(SweepProgress::of(&json!({"scope": "photo", "media_id": "med_1"})).is_none());
        assert!(SweepProgress::of(&json!({"listing_number": "MA-1"})).is_none());
        assert_eq!(separated(1_234_567), "1,234,567");
        assert_eq!(separated(999), "999");
    }
}
