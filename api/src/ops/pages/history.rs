//! `/ops/history`: runs per minute or hour with per-agency and per-endpoint
//! breakdowns, and the ranges the page and the JSON offer.

use super::shared::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::ops) struct Range {
    pub name: &'static str,
    pub label: &'static str,
    pub resolution: Resolution,
    pub buckets: i64,
    pub label_every: usize,
}

/// The periods: the last hour and day by the minute, 30 days by the hour.
pub(in crate::ops) const RANGES: [Range; 3] = [
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
pub(in crate::ops) fn range_named(name: Option<&str>) -> Option<Range> {
    match name.filter(|n| !n.is_empty()) {
        None => Some(RANGES[0]),
        Some(name) => RANGES.into_iter().find(|range| range.name == name),
    }
}

/// History as the page and the JSON route read it.
pub(in crate::ops) struct History {
    /// Per bucket (start in Unix seconds), summed over the queues shown.
    pub buckets: Vec<(i64, HistoryPoint)>,
    pub totals: HistoryPoint,
    pub agencies: Vec<Breakdown>,
    pub endpoints: Vec<Breakdown>,
}

/// Reads `range` of `queue` (or every queue).
pub(in crate::ops) async fn read_history(
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

pub(in crate::ops) struct ChartView {
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
    queue_names: [&'static str; platform::kinds::QUEUES.len()],
    queue: String,
    totals: HistoryPoint,
    charts: Vec<ChartView>,
    agencies: Vec<Breakdown>,
    endpoints: Vec<Breakdown>,
}

/// The history page's query.
#[derive(Debug, Default, Deserialize)]
pub(in crate::ops) struct HistoryQuery {
    range: Option<String>,
    queue: Option<String>,
}

/// `GET /ops/history`: throughput, failures and latency charts, and the
/// breakdowns by agency and endpoint.
pub(in crate::ops) async fn history_page(
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
    let queue = match queue.as_deref().map(crate::ops::console::known_queue) {
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
