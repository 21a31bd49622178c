//! `/ops/`: jobs by state and queue, with search, counts, pages and the
//! runs no queue job holds.

use super::job::{RunRow, run_row};
use super::shared::*;

#[derive(Template)]
#[template(path = "ops/jobs.html")]
struct JobsPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    states: [&'static str; 6],
    queue_names: [&'static str; platform::kinds::QUEUES.len()],
    queues: Vec<QueueRow>,
    back: String,
    filter: FilterView,
    error: Option<String>,
    count: usize,
    count_capped: bool,
    /// How many done jobs a free-text search read, when it stopped short.
    searched: Option<usize>,
    /// Whether the jobs come newest first.
    newest_first: bool,
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
pub(in crate::ops) struct JobsQuery {
    state: Option<String>,
    queue: Option<String>,
    agency: Option<String>,
    search: Option<String>,
    page: Option<String>,
    notice: Option<String>,
    problem: Option<String>,
}

/// `GET /ops/`: counts per queue and state, and the jobs a filter finds.
pub(in crate::ops) async fn jobs_page(
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
    let asked = query
        .page
        .as_deref()
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    let page_size = PAGE_SIZE as u64;
    let window = |page: u64| JobWindow {
        offset: (page - 1).saturating_mul(page_size),
        limit: Some(page_size),
    };
    let mut found = match console.search(filter.clone(), window(asked)).await {
        Ok(found) => found,
        Err(err) => return unavailable(&err),
    };
    // A capped count has counted past this page: at least one job more.
    let pages = (found.total + u64::from(found.total_capped))
        .div_ceil(page_size)
        .max(1);
    let page = asked.min(pages);
    if page != asked {
        // Past the last page (jobs left meanwhile, or a hand-made link):
        // the last one.
        found = match console.search(filter.clone(), window(page)).await {
            Ok(found) => found,
            Err(err) => return unavailable(&err),
        };
    }
    let Found {
        jobs: found,
        total,
        total_capped,
        searched,
        newest_first,
        runs_in_process,
        more_runs_in_process,
    } = found;
    let runs_in_process = runs_in_process
        .into_iter()
        .enumerate()
        .map(|(index, run)| run_row(index + 1, run))
        .collect();
    let count = usize::try_from(total).unwrap_or(usize::MAX);
    let page = usize::try_from(page).unwrap_or(usize::MAX);
    let pages = usize::try_from(pages).unwrap_or(usize::MAX);
    let start = (page - 1) * PAGE_SIZE;
    let jobs: Vec<JobRow> = found.into_iter().map(job_row).collect();
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
        count_capped: total_capped,
        searched: searched.map(|read| usize::try_from(read).unwrap_or(usize::MAX)),
        newest_first,
        jobs,
        runs_in_process,
        runs_limit: RUNS_IN_PROCESS_SHOWN,
        more_runs_in_process,
    })
}
