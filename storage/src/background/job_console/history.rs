//! Finished runs counted per queue, agency and webhook endpoint: per minute
//! for a day and per hour for 30 days, rolled up from the runs by a
//! maintenance task every minute. The rollup recomputes the last
//! [`LIVE_SECONDS`] each time (runs are written in batches and may land
//! late); readers count that stretch from the runs themselves, so a chart is
//! current to the second and agrees with what the rollup will keep.

use std::collections::BTreeMap;

use crate::db::{in_transaction, on_pool};
use crate::{Result, Store, Timestamp};

/// Minute rows are kept this long (a day is shown, and the hour rollup of
/// the day's first hour still finds its minutes).
pub const HISTORY_MINUTES_KEPT_SECONDS: i64 = 26 * 3_600;
/// Hour rows are kept this long.
pub const HISTORY_HOURS_KEPT_SECONDS: i64 = 31 * 86_400;
/// The stretch before now that every rollup recomputes and every reader
/// counts from the runs.
pub const LIVE_SECONDS: i64 = 15 * 60;

/// How finely history is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Per minute.
    Minute,
    /// Per hour.
    Hour,
}

impl Resolution {
    /// Its width in seconds.
    pub const fn seconds(self) -> i64 {
        match self {
            Self::Minute => 60,
            Self::Hour => 3_600,
        }
    }

    const fn name(self) -> &'static str {
        match self {
            Self::Minute => "minute",
            Self::Hour => "hour",
        }
    }
}

/// Finished runs in one bucket (or one breakdown key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HistoryPoint {
    /// Runs that succeeded.
    pub succeeded: i64,
    /// Runs that failed.
    pub failed: i64,
    /// Milliseconds from due to start, summed over the runs whose due time is known.
    pub wait_ms_sum: i64,
    /// Runs whose due time is known.
    pub wait_count: i64,
    /// The longest wait, in milliseconds.
    pub wait_ms_max: i64,
    /// Milliseconds of running, summed.
    pub run_ms_sum: i64,
    /// The longest run, in milliseconds.
    pub run_ms_max: i64,
}

impl HistoryPoint {
    /// Adds `other` in (sums, and the larger maximum).
    pub fn merge(&mut self, other: &Self) {
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.wait_ms_sum += other.wait_ms_sum;
        self.wait_count += other.wait_count;
        self.wait_ms_max = self.wait_ms_max.max(other.wait_ms_max);
        self.run_ms_sum += other.run_ms_sum;
        self.run_ms_max = self.run_ms_max.max(other.run_ms_max);
    }

    /// Finished runs.
    pub fn finished(&self) -> i64 {
        self.succeeded + self.failed
    }

    /// Mean milliseconds from due to start.
    pub fn wait_ms_mean(&self) -> i64 {
        if self.wait_count == 0 {
            0
        } else {
            self.wait_ms_sum / self.wait_count
        }
    }

    /// Mean milliseconds of running.
    pub fn run_ms_mean(&self) -> i64 {
        let finished = self.finished();
        if finished == 0 {
            0
        } else {
            self.run_ms_sum / finished
        }
    }
}

/// The runs of one agency or one endpoint over a stretch.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Breakdown {
    /// The agency (`agc_…`) or endpoint (`whe_…`).
    pub key: String,
    /// Its runs.
    #[serde(flatten)]
    pub totals: HistoryPoint,
}

/// What a breakdown or series is grouped by.
#[derive(Clone, Copy, Debug)]
enum Key {
    Bucket(i64),
    Agency,
    Endpoint,
}

impl Key {
    fn on_runs(self) -> String {
        match self {
            Self::Bucket(width) => format!("(a.finished_at / 1000000 / {width}) * {width}"),
            Self::Agency => "coalesce(a.agency_id, e.agency_id, '')".to_owned(),
            Self::Endpoint => "coalesce(a.endpoint_id, '')".to_owned(),
        }
    }

    fn on_rows(self) -> String {
        match self {
            Self::Bucket(width) => format!("(h.bucket / {width}) * {width}"),
            Self::Agency => "h.agency_id".to_owned(),
            Self::Endpoint => "h.endpoint_id".to_owned(),
        }
    }
}

/// Milliseconds from due to start of a run (0 when unknown or early).
const WAIT_MS: &str = "case when a.due_at is not null and a.started_at > a.due_at then (a.started_at - a.due_at) / 1000 else 0 end";
/// Milliseconds of running of a finished run.
const RUN_MS: &str = "(a.finished_at - a.started_at) / 1000";

/// A grouped row: key, queue, then the point's fields.
type Row = (String, String, i64, i64, i64, i64, i64, i64, i64);

fn point_of(row: &Row) -> HistoryPoint {
    HistoryPoint {
        succeeded: row.2,
        failed: row.3,
        wait_ms_sum: row.4,
        wait_count: row.5,
        wait_ms_max: row.6,
        run_ms_sum: row.7,
        run_ms_max: row.8,
    }
}

/// Finished-run history.
pub struct JobHistory<'a> {
    store: &'a Store,
}

impl Store {
    /// Finished-run history.
    pub fn job_history(&self) -> JobHistory<'_> {
        JobHistory { store: self }
    }
}

/// The start of the minute `at` falls in, in seconds.
fn minute_of(at: Timestamp) -> i64 {
    at.as_unix_seconds().div_euclid(60) * 60
}

impl JobHistory<'_> {
    /// Rolls the runs up: the minutes of the last [`LIVE_SECONDS`] (and any
    /// earlier minute of the last day no rollup reached) recomputed from the
    /// runs, the hours they fall in recomputed from the minutes; then drops
    /// what is past keeping. Idempotent; returns the minute rows written.
    pub async fn roll_up(&self, now: Timestamp) -> Result<u64> {
        let to = minute_of(now);
        let day_ago = to - 86_400;
        let latest: Option<i64> = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar("select max(bucket) from job_history where resolution = 'minute'")
                .fetch_one(pool)
                .await?
        });
        let live = to - LIVE_SECONDS;
        let from = match latest {
            Some(latest) if latest + 60 >= live => live,
            Some(latest) => (latest + 60).max(day_ago),
            None => day_ago,
        };
        let hours_from = from.div_euclid(3_600) * 3_600;
        let mut written = 0;
        // Durable: once a minute, and read back by the console at once.
        in_transaction!(self.store.db(), |tx| {
            sqlx::query("delete from job_history where resolution = 'minute' and bucket >= $1 and bucket < $2")
                .bind(from)
                .bind(to)
                .execute(&mut *tx)
                .await?;
            written = sqlx::query(sqlx::AssertSqlSafe(format!(
                "insert into job_history (resolution, bucket, queue, agency_id, endpoint_id, succeeded,
                     failed, wait_ms_sum, wait_count, wait_ms_max, run_ms_sum, run_ms_max)
                 select 'minute', {bucket}, a.queue, {agency}, {endpoint},
                     sum(case when a.outcome = 'succeeded' then 1 else 0 end),
                     sum(case when a.outcome = 'failed' then 1 else 0 end),
                     coalesce(sum({WAIT_MS}), 0),
                     sum(case when a.due_at is not null then 1 else 0 end),
                     coalesce(max({WAIT_MS}), 0),
                     coalesce(sum({RUN_MS}), 0),
                     coalesce(max({RUN_MS}), 0)
                 from job_attempts a left join webhook_endpoints e on e.id = a.endpoint_id
                 where a.finished_at >= $1 and a.finished_at < $2
                 group by 2, 3, 4, 5",
                bucket = Key::Bucket(60).on_runs(),
                agency = Key::Agency.on_runs(),
                endpoint = Key::Endpoint.on_runs(),
            )))
            .bind(from * 1_000_000)
            .bind(to * 1_000_000)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            sqlx::query("delete from job_history where resolution = 'hour' and bucket >= $1")
                .bind(hours_from)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "insert into job_history (resolution, bucket, queue, agency_id, endpoint_id, succeeded,
                     failed, wait_ms_sum, wait_count, wait_ms_max, run_ms_sum, run_ms_max)
                 select 'hour', (bucket / 3600) * 3600, queue, agency_id, endpoint_id, sum(succeeded),
                     sum(failed), sum(wait_ms_sum), sum(wait_count), max(wait_ms_max), sum(run_ms_sum),
                     max(run_ms_max)
                 from job_history where resolution = 'minute' and bucket >= $1
                 group by 2, 3, 4, 5",
            )
            .bind(hours_from)
            .execute(&mut *tx)
            .await?;
            let now_seconds = now.as_unix_seconds();
            sqlx::query(
                "delete from job_history where (resolution = 'minute' and bucket < $1)
                     or (resolution = 'hour' and bucket < $2)",
            )
            .bind(now_seconds - HISTORY_MINUTES_KEPT_SECONDS)
            .bind(now_seconds - HISTORY_HOURS_KEPT_SECONDS)
            .execute(&mut *tx)
            .await?;
        });
        Ok(written)
    }

    /// Grouped runs finished in `[from, to)` (seconds), of `queue` or all.
    async fn counted_runs(
        &self,
        key: Key,
        from: i64,
        to: i64,
        queue: Option<&str>,
    ) -> Result<Vec<Row>> {
        let sql = format!(
            "select cast({key} as text), a.queue,
                 cast(sum(case when a.outcome = 'succeeded' then 1 else 0 end) as bigint),
                 cast(sum(case when a.outcome = 'failed' then 1 else 0 end) as bigint),
                 cast(coalesce(sum({WAIT_MS}), 0) as bigint),
                 cast(sum(case when a.due_at is not null then 1 else 0 end) as bigint),
                 cast(coalesce(max({WAIT_MS}), 0) as bigint),
                 cast(coalesce(sum({RUN_MS}), 0) as bigint),
                 cast(coalesce(max({RUN_MS}), 0) as bigint)
             from job_attempts a left join webhook_endpoints e on e.id = a.endpoint_id
             where a.finished_at >= $1 and a.finished_at < $2 and ($3 is null or a.queue = $3)
             group by 1, 2",
            key = key.on_runs()
        );
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(from * 1_000_000)
                .bind(to * 1_000_000)
                .bind(queue)
                .fetch_all(pool)
                .await?)
        })
    }

    /// Grouped rollup rows of `resolution` with buckets in `[from, to)`.
    async fn rolled_up_rows(
        &self,
        key: Key,
        resolution: Resolution,
        from: i64,
        to: i64,
        queue: Option<&str>,
    ) -> Result<Vec<Row>> {
        if from >= to {
            return Ok(Vec::new());
        }
        let sql = format!(
            "select cast({key} as text), h.queue, cast(sum(h.succeeded) as bigint),
                 cast(sum(h.failed) as bigint), cast(sum(h.wait_ms_sum) as bigint),
                 cast(sum(h.wait_count) as bigint), cast(max(h.wait_ms_max) as bigint),
                 cast(sum(h.run_ms_sum) as bigint), cast(max(h.run_ms_max) as bigint)
             from job_history h
             where h.resolution = $1 and h.bucket >= $2 and h.bucket < $3 and ($4 is null or h.queue = $4)
             group by 1, 2",
            key = key.on_rows()
        );
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(resolution.name())
                .bind(from)
                .bind(to)
                .bind(queue)
                .fetch_all(pool)
                .await?)
        })
    }

    /// Every source of `[since, now]`, grouped by `key`: hour rows up to the
    /// hour of the live stretch (for hourly reads), minute rows up to the live
    /// stretch, the runs themselves after.
    async fn gather(
        &self,
        key: Key,
        resolution: Resolution,
        since: i64,
        now: Timestamp,
        queue: Option<&str>,
    ) -> Result<Vec<Row>> {
        let live = minute_of(now) - LIVE_SECONDS;
        let mut rows = Vec::new();
        let minutes_from = match resolution {
            Resolution::Minute => since,
            Resolution::Hour => {
                let live_hour = live.div_euclid(3_600) * 3_600;
                rows.extend(
                    self.rolled_up_rows(key, Resolution::Hour, since, live_hour, queue)
                        .await?,
                );
                live_hour.max(since)
            }
        };
        rows.extend(
            self.rolled_up_rows(key, Resolution::Minute, minutes_from, live, queue)
                .await?,
        );
        rows.extend(
            self.counted_runs(key, live.max(since), now.as_unix_seconds() + 1, queue)
                .await?,
        );
        Ok(rows)
    }

    /// Finished runs per bucket of `resolution` from `since` to `now`, per
    /// queue (only `queue`'s if given): `(bucket start in seconds, queue) → point`.
    pub async fn series(
        &self,
        resolution: Resolution,
        since: Timestamp,
        now: Timestamp,
        queue: Option<&str>,
    ) -> Result<BTreeMap<(i64, String), HistoryPoint>> {
        let width = resolution.seconds();
        let since = since.as_unix_seconds().div_euclid(width) * width;
        let rows = self
            .gather(Key::Bucket(width), resolution, since, now, queue)
            .await?;
        let mut series: BTreeMap<(i64, String), HistoryPoint> = BTreeMap::new();
        for row in &rows {
            let Ok(bucket) = row.0.parse::<i64>() else {
                continue;
            };
            series
                .entry((bucket, row.1.clone()))
                .or_default()
                .merge(&point_of(row));
        }
        Ok(series)
    }

    /// Finished runs per agency (`by_endpoint` false) or per webhook endpoint
    /// from `since` to `now`, most runs first; runs of neither are left out.
    pub async fn breakdown(
        &self,
        by_endpoint: bool,
        resolution: Resolution,
        since: Timestamp,
        now: Timestamp,
        queue: Option<&str>,
    ) -> Result<Vec<Breakdown>> {
        let key = if by_endpoint {
            Key::Endpoint
        } else {
            Key::Agency
        };
        let width = resolution.seconds();
        let since = since.as_unix_seconds().div_euclid(width) * width;
        let rows = self.gather(key, resolution, since, now, queue).await?;
        let mut totals: BTreeMap<String, HistoryPoint> = BTreeMap::new();
        for row in rows.iter().filter(|row| !row.0.is_empty()) {
            totals
                .entry(row.0.clone())
                .or_default()
                .merge(&point_of(row));
        }
        let mut breakdown: Vec<Breakdown> = totals
            .into_iter()
            .map(|(key, totals)| Breakdown { key, totals })
            .collect();
        breakdown.sort_by(|a, b| {
            b.totals
                .finished()
                .cmp(&a.totals.finished())
                .then_with(|| a.key.cmp(&b.key))
        });
        Ok(breakdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_divide_by_what_they_count() {
        let point = HistoryPoint {
            succeeded: 3,
            failed: 1,
            wait_ms_sum: 90,
            wait_count: 3,
            wait_ms_max: 50,
            run_ms_sum: 400,
            run_ms_max: 200,
        };
        assert_eq!(point.finished(), 4);
        assert_eq!(point.wait_ms_mean(), 30);
        assert_eq!(point.run_ms_mean(), 100);
        assert_eq!(HistoryPoint::default().run_ms_mean(), 0);
    }
}
