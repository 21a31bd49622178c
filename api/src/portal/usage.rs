//! `/settings/usage`: the agency's requests of the last 24 hours per hour
//! (a stacked column chart by status class) and per route and status, and
//! the headroom left in each agency budget; `/settings/changelog`.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use storage::requests::usage::hour_of;
use storage::rules::changelog::ENTRIES;

use super::chart::Columns;
use super::{Chrome, PortalSession, page, unavailable};
use crate::rate_limit::agency_buckets;
use crate::state::AppState;

pub(super) struct RouteRow {
    pub route: String,
    pub status: i32,
    pub requests: i64,
}

pub(super) struct Headroom {
    pub name: String,
    pub limit: u32,
    pub left: u32,
    pub percent: u32,
}

#[derive(Template)]
#[template(path = "portal/usage.html")]
struct UsagePage {
    chrome: Chrome,
    chart: Columns,
    routes: Vec<RouteRow>,
    total: i64,
    headroom: Vec<Headroom>,
}

/// `GET /settings/usage`.
pub(crate) async fn usage_page(State(state): State<AppState>, portal: PortalSession) -> Response {
    let chrome = portal.chrome(&state, "usage");
    let store = state.store();
    // This process's latest requests first, so the page is current.
    state.usage().flush(store).await;
    let tenant = portal.tenant();
    let now = store.clock().now();
    let since = now.plus_seconds(-23 * 3_600);
    let counts = match store.usage().requests_since(&tenant, since).await {
        Ok(counts) => counts,
        Err(err) => return unavailable(&err),
    };
    let first_hour = hour_of(since);
    let mut slots: Vec<(String, Vec<u64>)> = (0..24)
        .map(|index| {
            let hour = first_hour + index * 3_600;
            let label = chrono::DateTime::from_timestamp(hour, 0)
                .map(|at| at.format("%H:00").to_string())
                .unwrap_or_default();
            (label, vec![0, 0, 0])
        })
        .collect();
    let mut by_route: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut total = 0;
    for count in &counts {
        let index = usize::try_from((count.hour - first_hour) / 3_600).unwrap_or(usize::MAX);
        let series = match count.status {
            500.. => 2,
            400..=499 => 1,
            _ => 0,
        };
        if let Some((_, values)) = slots.get_mut(index) {
            values[series] += u64::try_from(count.requests).unwrap_or(0);
        }
        *by_route
            .entry((count.route.clone(), count.status))
            .or_default() += count.requests;
        total += count.requests;
    }
    let mut routes: Vec<RouteRow> = by_route
        .into_iter()
        .map(|((route, status), requests)| RouteRow {
            route,
            status,
            requests,
        })
        .collect();
    routes.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.route.cmp(&b.route)));
    let overrides = match store
        .agencies()
        .rate_limit_overrides(&tenant.agency_id)
        .await
    {
        Ok(overrides) => overrides,
        Err(err) => return unavailable(&err),
    };
    let buckets = agency_buckets(&tenant, &overrides);
    let left = state.rate_limiter().headroom(&buckets).await;
    let headroom = buckets
        .iter()
        .zip(left)
        .map(|(bucket, left)| Headroom {
            name: bucket.name.clone(),
            limit: bucket.limit,
            left,
            percent: u32::try_from(u64::from(left) * 100 / u64::from(bucket.limit.max(1)))
                .unwrap_or(100),
        })
        .collect();
    page(
        StatusCode::OK,
        &UsagePage {
            chrome,
            chart: Columns::new(
                &slots,
                &["ok", "client", "server"],
                &["2xx/3xx", "4xx", "5xx"],
            ),
            routes,
            total,
            headroom,
        },
    )
}

pub(super) struct ChangeRow {
    pub date: &'static str,
    pub change_type: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub routes: String,
    pub removal: &'static str,
}

#[derive(Template)]
#[template(path = "portal/changelog.html")]
struct ChangelogPage {
    chrome: Chrome,
    entries: Vec<ChangeRow>,
}

/// `GET /settings/changelog`: newest first.
pub(crate) async fn changelog_page(
    State(state): State<AppState>,
    portal: PortalSession,
) -> Response {
    let mut entries: Vec<ChangeRow> = ENTRIES
        .iter()
        .map(|entry| ChangeRow {
            date: entry.date,
            change_type: entry.change_type.as_str(),
            title: entry.title,
            description: entry.description,
            routes: entry.routes.join(", "),
            removal: entry.removal_date.unwrap_or_default(),
        })
        .collect();
    entries.sort_by(|a, b| b.date.cmp(a.date));
    page(
        StatusCode::OK,
        &ChangelogPage {
            chrome: portal.chrome(&state, "changelog"),
            entries,
        },
    )
}
