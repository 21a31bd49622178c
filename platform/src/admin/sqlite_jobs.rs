//! The jobs a console filter finds on the embedded queue (apalis-sqlite's
//! `Jobs`): one window of a state in its index's order, the done jobs' text
//! searches by the text index (`crate::queue::search_index`), the finished
//! states' totals from the kept counts (`crate::queue::state_counts`).

use serde_json::Value;
use sqlx::Arguments;
use sqlx::sqlite::SqliteArguments;

use super::found::{FoundJobs, JobFilter, JobSummary, JobWindow, redacted};
use super::queue_admin::DEAD;
use crate::queue::{QueueError, search_index};

/// The SQL condition of a state on apalis-sqlite's `Jobs` (`$1` is now).
fn sqlite_state(state: &str) -> Option<String> {
    Some(match state {
        "dead" => DEAD.to_owned(),
        "done" => "status = 'Done'".to_owned(),
        "running" => "status in ('Queued', 'Running')".to_owned(),
        "retrying" => format!("status = 'Failed' and not {DEAD}"),
        "scheduled" => "status = 'Pending' and run_at > $1".to_owned(),
        "queued" => "status = 'Pending' and run_at <= $1".to_owned(),
        _ => return None,
    })
}

/// A SQLite row: id, queue, attempts, last result, payload.
type Row = (String, String, i64, Option<String>, Vec<u8>);

/// How a filter reads SQLite's jobs. Done jobs (a week of them) with text
/// the index serves start from the text index's matches, each job then
/// looked up by its row id; every other state is the backlog or the dead
/// (bounded by retention), read by the status index and checked row by row.
/// Placeholders: `$3` the text index's query, `$4` the agency as a JSON
/// string, `$5` the search text in lower case, `$6` the related ids (a JSON
/// array).
#[derive(Debug, Default)]
struct SqliteText {
    /// The text index's query, when the index serves the filter.
    query: Option<String>,
    /// The agency as its payloads name it, when checked row by row.
    agency: Option<String>,
    /// The search text in lower case, when checked row by row.
    search: Option<String>,
    /// The ids the search stands for, when checked row by row.
    related: Option<String>,
}

impl SqliteText {
    fn of(filter: &JobFilter) -> Self {
        if filter.agency.is_none() && filter.search.is_none() {
            return Self::default();
        }
        if filter.state == "done" {
            let agency = filter
                .agency
                .as_deref()
                .map(|agency| search_index::phrase(&format!("\"{agency}\"")));
            let search = match filter.search.as_deref() {
                None => Ok(None),
                Some(search) => search_index::any_of(Some(search), &filter.related)
                    .map(Some)
                    .ok_or(()),
            };
            if let Ok(search) = search {
                let query = match (agency, search) {
                    (Some(agency), Some(search)) => format!("{agency} AND ({search})"),
                    (Some(only), None) | (None, Some(only)) => only,
                    (None, None) => unreachable!("a filter with text"),
                };
                return Self {
                    query: Some(query),
                    ..Self::default()
                };
            }
        }
        Self {
            query: None,
            agency: filter
                .agency
                .as_deref()
                .map(|agency| format!("\"{agency}\"")),
            search: filter.search.as_deref().map(str::to_lowercase),
            related: (!filter.related.is_empty())
                .then(|| serde_json::to_string(&filter.related).unwrap_or_default()),
        }
    }

    /// Whether the filter has text at all (so its total is counted).
    fn any(&self) -> bool {
        self.query.is_some() || self.agency.is_some() || self.search.is_some()
    }

    /// The `from` clause: the index's matches driving, joined to their jobs
    /// by row id (a cross join, so the planner never walks every job of a
    /// state checking each against the matches), or the jobs alone.
    fn from(&self) -> &'static str {
        if self.query.is_some() {
            "job_text cross join Jobs on Jobs.rowid = job_text.rowid"
        } else {
            "Jobs"
        }
    }

    /// The conditions on the text, each with a leading `and`.
    fn conditions(&self) -> String {
        let mut conditions = String::new();
        if self.query.is_some() {
            conditions.push_str(" and job_text match $3");
        }
        if self.agency.is_some() {
            conditions.push_str(" and instr(cast(Jobs.job as text), $4) > 0");
        }
        if self.search.is_some() {
            let mut either = vec![
                "instr(lower(Jobs.id), $5) > 0",
                "instr(lower(cast(Jobs.job as text)), $5) > 0",
                "instr(lower(coalesce(Jobs.last_result, '')), $5) > 0",
            ];
            if self.related.is_some() {
                either.push(
                    "exists (select 1 from json_each($6)
                             where instr(cast(Jobs.job as text), '\"' || value || '\"') > 0)",
                );
            }
            conditions.push_str(&format!(" and ({})", either.join(" or ")));
        }
        conditions
    }
}

/// Adds `value` as the next placeholder's.
fn bind<'q, T>(arguments: &mut SqliteArguments, value: T) -> Result<(), QueueError>
where
    T: sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite> + 'q,
{
    arguments
        .add(value)
        .map_err(|err| QueueError::Sqlite(sqlx::Error::Encode(err)))
}

/// The `from` clause of a state's condition and a filter's text: the dead
/// jobs by their own index (without statistics SQLite's planner prefers an
/// `or` of the status index's two ranges, then sorts every dead job).
fn from_of<'a>(state: &str, text: &'a SqliteText) -> &'a str {
    if state == DEAD && text.query.is_none() {
        "Jobs indexed by jobs_dead_by_run_at"
    } else {
        text.from()
    }
}

/// The `where` clause of a state's condition and a filter's text.
fn conditions_of(state: &str, text: &SqliteText) -> String {
    format!(
        "({state}) and ($2 is null or job_type = $2){}",
        text.conditions()
    )
}

/// One window of the jobs a state's condition and a filter's text find, in
/// the order of the state's index (`$7` the limit, `$8` the offset).
fn window_statement(state: &str, text: &SqliteText) -> String {
    format!(
        "select Jobs.id, job_type, attempts, Jobs.last_result, Jobs.job from {}
         where {} order by run_at, Jobs.rowid limit $7 offset $8",
        from_of(state, text),
        conditions_of(state, text)
    )
}

/// The window of jobs a filter finds on SQLite.
pub(super) async fn sqlite_jobs(
    pool: &sqlx::SqlitePool,
    filter: &JobFilter,
    window: JobWindow,
) -> Result<FoundJobs, QueueError> {
    let Some(state) = sqlite_state(&filter.state) else {
        return Ok(FoundJobs::default());
    };
    let text = SqliteText::of(filter);
    if text.query.is_some() {
        // The jobs pushed since the maintenance schedule last indexed.
        search_index::catch_up(pool).await?;
    }
    let from = from_of(&state, &text);
    let conditions = conditions_of(&state, &text);
    let now = chrono::Utc::now().timestamp();
    let limit = window
        .limit
        .map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
    let offset = i64::try_from(window.offset).unwrap_or(i64::MAX);
    // The filter's values, bound once for the window and for the count
    // (`$7` and `$8`, the window, only the former reads).
    let mut arguments = SqliteArguments::default();
    bind(&mut arguments, now)?;
    bind(&mut arguments, filter.queue.clone())?;
    bind(&mut arguments, text.query.clone())?;
    bind(&mut arguments, text.agency.clone())?;
    bind(&mut arguments, text.search.clone())?;
    bind(&mut arguments, text.related.clone())?;
    let counted = arguments.clone();
    bind(&mut arguments, limit)?;
    bind(&mut arguments, offset)?;
    let rows: Vec<Row> = sqlx::query_as_with(
        sqlx::AssertSqlSafe(window_statement(&state, &text)),
        arguments,
    )
    .fetch_all(pool)
    .await?;
    let jobs = rows
        .into_iter()
        .map(|(id, queue, attempts, result, job)| JobSummary {
            id,
            queue,
            state: filter.state.clone(),
            attempts: u64::try_from(attempts).unwrap_or(0),
            last_error: super::dead::error_of(result.as_deref()),
            payload: redacted(serde_json::from_slice(&job).unwrap_or(Value::Null)),
        })
        .collect();
    let kept = match filter.state.as_str() {
        "done" => Some("Done"),
        "dead" => Some("dead"),
        "retrying" => Some("Failed"),
        _ => None,
    };
    let total: i64 = match kept {
        // The finished states grow with the history, and the failed share a
        // status with the dead: their count is kept.
        Some(kept) if !text.any() => {
            sqlx::query_scalar(
                "select coalesce(sum(jobs), 0) from job_state_counts
                 where state = $1 and ($2 is null or job_type = $2)",
            )
            .bind(kept)
            .bind(filter.queue.as_deref())
            .fetch_one(pool)
            .await?
        }
        // The waiting and running states are the backlog; a search counts
        // what it found.
        _ => {
            sqlx::query_scalar_with(
                sqlx::AssertSqlSafe(format!("select count(*) from {from} where {conditions}")),
                counted,
            )
            .fetch_one(pool)
            .await?
        }
    };
    Ok(FoundJobs {
        jobs,
        total: u64::try_from(total).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admin::QueueAdmin;
    use crate::queue::QueueBackend;

    /// A job written straight into the table: id, queue, status, attempts,
    /// run_at, payload, last result.
    type Written<'a> = (&'a str, &'a str, &'a str, i64, i64, Value, Option<&'a str>);

    /// A queue file with `jobs` written straight into its table.
    async fn sqlite_queue(dir: &tempfile::TempDir, jobs: &[Written<'_>]) -> QueueAdmin {
        let queue = crate::queue::JobQueue::connect(&crate::queue::QueueTarget::SqliteFile(
            dir.path().join("queue.sqlite"),
        ))
        .await
        .unwrap();
        let QueueBackend::Sqlite(pool) = queue.backend() else {
            unreachable!()
        };
        for (id, queue_name, status, attempts, run_at, payload, result) in jobs {
            // Pushed as apalis pushes, then moved to its state as a worker
            // moves it.
            sqlx::query(
                "insert into Jobs (job, id, job_type, status, attempts, max_attempts, run_at)
                 values ($1, $2, $3, 'Pending', 0, 3, $4)",
            )
            .bind(payload.to_string().into_bytes())
            .bind(id)
            .bind(queue_name)
            .bind(run_at)
            .execute(pool)
            .await
            .unwrap();
            sqlx::query(
                "update Jobs set status = $2, attempts = $3, last_result = $4 where id = $1",
            )
            .bind(id)
            .bind(status)
            .bind(attempts)
            .bind(result)
            .execute(pool)
            .await
            .unwrap();
        }
        QueueAdmin::new(queue)
    }

    fn ids(found: &FoundJobs) -> Vec<&str> {
        found.jobs.iter().map(|job| job.id.as_str()).collect()
    }

    #[tokio::test]
    async fn sqlite_finds_a_window_by_state_queue_agency_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let failed = Some(r#"{"Err": "endpoint answered 503"}"#);
        let admin = sqlite_queue(
            &dir,
            &[
                (
                    "j1",
                    "media",
                    "Done",
                    1,
                    30,
                    json!({"agency_id": "agc_1", "listing_number": "QX7ABC1"}),
                    None,
                ),
                (
                    "j2",
                    "media",
                    "Done",
                    1,
                    10,
                    json!({"agency_id": "agc_2", "listing_number": "QX7ABC2"}),
                    None,
                ),
                (
                    "j3",
                    "webhook_delivery",
                    "Done",
                    1,
                    20,
                    json!({"agency_id": "agc_1", "delivery_id": "dlv_1"}),
                    None,
                ),
                (
                    "j4",
                    "webhook_delivery",
                    "Failed",
                    3,
                    40,
                    json!({"agency_id": "agc_1", "delivery_id": "dlv_2"}),
                    failed,
                ),
                (
                    "j5",
                    "outbox_dispatch",
                    "Done",
                    1,
                    50,
                    json!({"event_ids": ["evt_10", "evt_1"]}),
                    None,
                ),
                (
                    "j6",
                    "outbox_dispatch",
                    "Done",
                    1,
                    60,
                    json!({"event_ids": ["evt_10"]}),
                    None,
                ),
            ],
        )
        .await;
        let filter = |state: &str| JobFilter {
            state: state.to_owned(),
            ..JobFilter::default()
        };
        let all = admin
            .find_jobs_in(&filter("done"), JobWindow::ALL)
            .await
            .unwrap();
        // Oldest due first, counted by the queue's kept counts.
        assert_eq!(ids(&all), ["j2", "j3", "j1", "j5", "j6"]);
        assert_eq!(all.total, 5);
        let window = JobWindow {
            offset: 1,
            limit: Some(2),
        };
        let page = admin.find_jobs_in(&filter("done"), window).await.unwrap();
        assert_eq!((ids(&page), page.total), (vec!["j3", "j1"], 5));
        let media = JobFilter {
            queue: Some("media".into()),
            ..filter("done")
        };
        let found = admin.find_jobs_in(&media, JobWindow::ALL).await.unwrap();
        assert_eq!((ids(&found), found.total), (vec!["j2", "j1"], 2));
        // An agency: jobs naming it exactly, by the text index.
        let agency = JobFilter {
            agency: Some("agc_1".into()),
            ..filter("done")
        };
        let found = admin.find_jobs_in(&agency, JobWindow::ALL).await.unwrap();
        assert_eq!((ids(&found), found.total), (vec!["j3", "j1"], 2));
        // Free text, any case, in the payload, the id or the last error.
        let search = |state: &str, text: &str| JobFilter {
            search: Some(text.to_owned()),
            ..filter(state)
        };
        let found = admin
            .find_jobs_in(&search("done", "qx7abc"), JobWindow::ALL)
            .await
            .unwrap();
        assert_eq!((ids(&found), found.total), (vec!["j2", "j1"], 2));
        let found = admin
            .find_jobs_in(&search("dead", "ANSWERED 503"), JobWindow::ALL)
            .await
            .unwrap();
        assert_eq!(ids(&found), ["j4"]);
        assert_eq!(
            found.jobs[0].last_error.as_deref(),
            Some("endpoint answered 503")
        );
        let with_agency = JobFilter {
            agency: Some("agc_2".into()),
            ..search("done", "QX7ABC")
        };
        assert_eq!(
            ids(&admin
                .find_jobs_in(&with_agency, JobWindow::ALL)
                .await
                .unwrap()),
            ["j2"]
        );
        // Text shorter than the index serves is looked for all the same.
        let found = admin
            .find_jobs_in(&search("done", "J5"), JobWindow::ALL)
            .await
            .unwrap();
        assert_eq!((ids(&found), found.total), (vec!["j5"], 1));
        // A listing number's related ids match as whole JSON strings.
        let related = JobFilter {
            related: vec!["evt_1".into()],
            ..search("done", "NOSUCHNUMBER")
        };
        let found = admin.find_jobs_in(&related, JobWindow::ALL).await.unwrap();
        assert_eq!((ids(&found), found.total), (vec!["j5"], 1));
        let none = admin
            .find_jobs_in(&search("done", "nothing like it"), JobWindow::ALL)
            .await
            .unwrap();
        assert_eq!((ids(&none), none.total), (Vec::<&str>::new(), 0));
        let counted = admin
            .find_jobs_in(
                &filter("done"),
                JobWindow {
                    offset: 0,
                    limit: Some(0),
                },
            )
            .await
            .unwrap();
        assert_eq!((counted.jobs.len(), counted.total), (0, 5));
    }

    #[tokio::test]
    async fn a_sqlite_search_starts_from_the_text_index() {
        let dir = tempfile::tempdir().unwrap();
        let admin = sqlite_queue(&dir, &[]).await;
        let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
            unreachable!()
        };
        let filter = JobFilter {
            state: "done".into(),
            agency: Some("agc_1".into()),
            search: Some("QX7ABC".into()),
            ..JobFilter::default()
        };
        let text = SqliteText::of(&filter);
        let sql = format!(
            "explain query plan select Jobs.id from {} where (status = 'Done'){} order by run_at, Jobs.rowid limit 25",
            text.from(),
            text.conditions()
        );
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(0)
            .bind(None::<String>)
            .bind(text.query.as_deref())
            .fetch_all(pool)
            .await
            .unwrap();
        let plan: Vec<&str> = plan.iter().map(|row| row.3.as_str()).collect();
        assert!(
            plan[0].starts_with("SCAN job_text VIRTUAL TABLE"),
            "{plan:?}"
        );
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SEARCH Jobs USING INTEGER PRIMARY KEY")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN Jobs")),
            "{plan:?}"
        );
    }

    /// The plan of `statement` on the queue file, one line per step.
    async fn plan_of(pool: &sqlx::SqlitePool, statement: &str) -> Vec<String> {
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "explain query plan {statement}"
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        rows.into_iter().map(|row| row.3).collect()
    }

    #[tokio::test]
    async fn the_dead_jobs_are_read_by_their_own_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let admin = sqlite_queue(&dir, &[]).await;
        let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
            unreachable!()
        };
        // The console's dead list (with or without a queue) and the most
        // recent dead jobs: the dead jobs' index in the statement's order,
        // no sort of every dead job.
        let dead = sqlite_state("dead").unwrap();
        for (statement, index) in [
            (
                window_statement(&dead, &SqliteText::default()),
                "USING INDEX jobs_dead_by_run_at",
            ),
            (
                super::super::dead::recent_dead_statement(),
                "USING INDEX jobs_dead_by_done_at",
            ),
        ] {
            let plan = plan_of(pool, &statement).await;
            assert!(plan.iter().any(|step| step.contains(index)), "{plan:?}");
            assert!(
                !plan.iter().any(|step| step.contains("TEMP B-TREE")),
                "{plan:?}"
            );
        }
        // The oldest dead job of each queue: a seek per queue; the backlog
        // by its ranges; no step reads every job.
        let plan = plan_of(pool, &super::super::ages::sqlite_oldest_statement()).await;
        assert!(
            plan.iter()
                .any(|step| step
                    .starts_with("SEARCH Jobs USING INDEX jobs_dead_by_queue (job_type=?)")),
            "{plan:?}"
        );
        // The only scan is of the partial index of the jobs still retrying.
        assert!(
            plan.iter()
                .filter(|step| step.starts_with("SCAN Jobs"))
                .all(|step| step == "SCAN Jobs USING INDEX idx_jobs_failed"),
            "{plan:?}"
        );
    }

    #[tokio::test]
    async fn each_state_has_the_age_of_its_oldest_job() {
        let dir = tempfile::tempdir().unwrap();
        let now_ms = chrono::Utc::now().timestamp_millis();
        let pushed = |seconds_ago: i64| {
            ulid::Ulid::from_parts(u64::try_from(now_ms - seconds_ago * 1_000).unwrap(), 1)
                .to_string()
        };
        let (older_dead, dead, killed, retrying, waiting, later) = (
            pushed(500),
            pushed(400),
            pushed(300),
            pushed(200),
            pushed(100),
            pushed(50),
        );
        let far = chrono::Utc::now().timestamp() + 3_600;
        let error = Some(r#"{"Err": "gone"}"#);
        let admin = sqlite_queue(
            &dir,
            &[
                (
                    &older_dead,
                    "media_variants",
                    "Failed",
                    3,
                    0,
                    json!({}),
                    error,
                ),
                (&dead, "media_variants", "Failed", 5, 0, json!({}), error),
                (
                    &killed,
                    "webhook_delivery",
                    "Killed",
                    1,
                    0,
                    json!({}),
                    error,
                ),
                // Failed with an attempt left: waiting for its retry.
                (
                    &retrying,
                    "webhook_delivery",
                    "Failed",
                    1,
                    far,
                    json!({}),
                    error,
                ),
                (&waiting, "media_variants", "Pending", 0, 0, json!({}), None),
                (&later, "media_variants", "Pending", 0, far, json!({}), None),
            ],
        )
        .await;
        let ages = admin.oldest_jobs().await.unwrap();
        let age = |queue: &str, state: &str| {
            ages.iter()
                .find(|age| age.queue == queue && age.state == state)
                .map_or(-1.0, |age| age.age_seconds.round())
        };
        assert_eq!(age("media_variants", "dead"), 500.0);
        assert_eq!(age("webhook_delivery", "dead"), 300.0);
        assert_eq!(age("webhook_delivery", "scheduled"), 200.0);
        assert_eq!(age("media_variants", "pending"), 100.0);
        assert_eq!(age("media_variants", "scheduled"), 50.0);
        assert_eq!(age("media_variants", "running"), 0.0, "none running");
    }
}
