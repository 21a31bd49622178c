//! The jobs a console filter finds on the embedded queue (apalis-sqlite's
//! `Jobs`): one window of a state in its index's order, the done jobs' text
//! searches by the text index (`crate::queue::search_index`), the finished
//! states' totals from the kept counts (`crate::queue::state_counts`).

use serde_json::Value;
use sqlx::Arguments;
use sqlx::sqlite::SqliteArguments;

use super::found::{FoundJobs, JobFilter, JobSummary, JobWindow, named_search, redacted};
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

/// Most matches a page of jobs found by an index (done jobs by text or
/// agency, dead jobs by text) counts beyond its own window: such a search
/// streams its matches in push order and stops, where an exact total would
/// read every match (half a million for an agency with half the queue). The
/// console says "more than" when the count stops there; a window of nothing
/// (a bulk action's confirmation) counts every match.
pub(crate) const COUNT_CAP: u64 = 1_000;

/// Which index a filter's jobs are read by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Source {
    /// The state's index, in its order (oldest due first).
    #[default]
    State,
    /// The text index's matches, in push order.
    Text,
    /// The agency's own jobs (`job_agencies`), in push order.
    Agency,
    /// The dead jobs' text index's matches, in push order.
    DeadText,
    /// The jobs naming the one id searched for (`job_names`), streamed in
    /// push order: an endpoint's id may be named by every delivery of a
    /// week.
    Name,
    /// The jobs naming any of the ids a listing number stands for, or a
    /// bare ULID searched for and the job it is the id of, gathered and
    /// sorted into push order: bounded by a listing's jobs or an event's,
    /// not the queue.
    Names,
}

/// How a filter reads SQLite's jobs. Done jobs (a week of them) with a
/// filter an index serves start from that index's matches in push order,
/// each job then looked up by its row id: a text search from the text
/// index, an agency alone from its own jobs, an id's or a listing number's
/// from the ids it stands for (`job_names`); a text search of dead jobs (a
/// month of them) from the dead jobs' text index. Every other filter reads
/// the backlog or the dead (bounded by retention) by the status index and
/// checks them row by row. A long search is looked for in a text index by
/// its tail (`search_index::any_of`), and each match is then checked row by
/// row for the whole text. Placeholders: `$3` the text index's query, `$4` the
/// agency, `$5` the search text in lower case, `$6` the related ids (a JSON
/// array; for [`Source::Names`] the search's names and job,
/// [`super::found::NamedSearch`]).
#[derive(Debug, Default)]
struct SqliteText {
    /// The index the jobs are read by.
    source: Source,
    /// The text index's query, when the index serves the search.
    query: Option<String>,
    /// The agency.
    agency: Option<String>,
    /// The search text in lower case, when checked row by row (no index, or
    /// an index that found the text's tail).
    search: Option<String>,
    /// The ids the search stands for, when checked row by row.
    related: Option<String>,
}

impl SqliteText {
    fn of(filter: &JobFilter) -> Self {
        let done = filter.state == "done";
        let dead = filter.state == "dead";
        // Done jobs found by whole ids (as on Redis): a listing number's,
        // those naming the ids it stands for; an id's, those naming it, and
        // the job it is the id of. Each a seek of the names index. An
        // agency's id goes to the text index: its agency's jobs are half the
        // queue for the largest, which this would read and sort whole.
        if done && let Some(named) = named_search(filter).filter(|named| named.agency.is_none()) {
            let source = if named.names.len() == 1 && named.job.is_none() {
                Source::Name
            } else {
                Source::Names
            };
            return Self {
                source,
                agency: filter.agency.clone(),
                related: Some(serde_json::to_string(&named).unwrap_or_default()),
                ..Self::default()
            };
        }
        let index = filter
            .search
            .as_deref()
            .filter(|_| done || dead)
            .and_then(|search| search_index::any_of(Some(search), &filter.related));
        let source = if index.is_some() {
            if done { Source::Text } else { Source::DeadText }
        } else if done && filter.agency.is_some() {
            Source::Agency
        } else {
            Source::State
        };
        // Checked row by row when no index serves the search, or when the
        // index found candidates by the text's tail.
        let by_row = index.as_ref().is_none_or(|index| index.narrowed);
        Self {
            source,
            query: index.map(|index| index.query),
            agency: filter.agency.clone(),
            search: filter
                .search
                .as_deref()
                .filter(|_| by_row)
                .map(str::to_lowercase),
            related: (by_row && filter.search.is_some() && !filter.related.is_empty())
                .then(|| serde_json::to_string(&filter.related).unwrap_or_default()),
        }
    }

    /// Whether the filter has text at all (so its total is counted).
    fn any(&self) -> bool {
        self.query.is_some()
            || self.agency.is_some()
            || self.search.is_some()
            || matches!(self.source, Source::Name | Source::Names)
    }

    /// Whether the jobs stream from an index in push order, so that a count
    /// can stop at [`COUNT_CAP`].
    fn streams(&self) -> bool {
        self.source != Source::State
    }

    /// The `from` clause: an index's matches driving, joined to their jobs
    /// by row id (a cross join, so the planner never walks every job of a
    /// state checking each against the matches), or the jobs alone.
    fn from(&self) -> &'static str {
        match self.source {
            Source::State => "Jobs",
            Source::Text => "job_text cross join Jobs on Jobs.rowid = job_text.rowid",
            Source::Agency => {
                "job_agencies indexed by job_agencies_by_agency
                 cross join Jobs on Jobs.rowid = job_agencies.job"
            }
            Source::DeadText => "dead_job_text cross join Jobs on Jobs.rowid = dead_job_text.rowid",
            Source::Name => "job_names cross join Jobs on Jobs.rowid = job_names.job",
            Source::Names => {
                "(select job from job_names
                      where name in (select value from json_each($6, '$.names'))
                  union select rowid from Jobs where id = json_extract($6, '$.job'))
                     as named cross join Jobs on Jobs.rowid = named.job"
            }
        }
    }

    /// The order of the window: the driving index's own.
    fn order(&self) -> &'static str {
        match self.source {
            Source::State => "run_at, Jobs.rowid",
            Source::Text => "job_text.rowid",
            Source::Agency => "job_agencies.job",
            Source::DeadText => "dead_job_text.rowid",
            Source::Name => "job_names.job",
            Source::Names => "named.job",
        }
    }

    /// The conditions on the text, each with a leading `and`.
    fn conditions(&self) -> String {
        let mut conditions = String::new();
        if self.source == Source::Name {
            conditions.push_str(" and job_names.name = json_extract($6, '$.names[0]')");
        }
        if self.query.is_some() {
            conditions.push_str(if self.source == Source::DeadText {
                " and dead_job_text match $3"
            } else {
                " and job_text match $3"
            });
        }
        if self.agency.is_some() {
            conditions.push_str(match self.source {
                Source::Agency => " and job_agencies.agency_id = $4",
                Source::Text | Source::Name | Source::Names => {
                    " and (select agency_id from job_agencies where job = Jobs.rowid) = $4"
                }
                // The backlog and the dead are not in the agencies' index
                // yet (or no longer need it): the payload names the agency.
                Source::State | Source::DeadText => {
                    " and instr(cast(Jobs.job as text), '\"' || $4 || '\"') > 0"
                }
            });
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
    if state == DEAD && text.source == Source::State {
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
/// the order of the index that reads them (`$7` the limit, `$8` the offset).
fn window_statement(state: &str, text: &SqliteText) -> String {
    format!(
        "select Jobs.id, job_type, attempts, Jobs.last_result, Jobs.job from {}
         where {} order by {} limit $7 offset $8",
        from_of(state, text),
        conditions_of(state, text),
        text.order()
    )
}

/// How many jobs a state's condition and a filter's text find, at most
/// `$7` (a count that streams stops there), or every one.
fn count_statement(state: &str, text: &SqliteText, capped: bool) -> String {
    let (from, conditions) = (from_of(state, text), conditions_of(state, text));
    if capped {
        format!("select count(*) from (select 1 from {from} where {conditions} limit $7)")
    } else {
        format!("select count(*) from {from} where {conditions}")
    }
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
    if matches!(
        text.source,
        Source::Text | Source::Agency | Source::Name | Source::Names
    ) {
        // The jobs pushed since the maintenance schedule last indexed.
        search_index::catch_up(pool).await?;
    }
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
    // A window that came back short is the last one: the filter finds what
    // precedes it and what it holds, and no count reads the matches again
    // (a search that finds few ran its text query once, not twice).
    let read = rows.len() as u64;
    let ends_here = window.limit.is_some_and(|limit| limit > 0 && read < limit)
        && (read > 0 || window.offset == 0);
    let jobs = rows
        .into_iter()
        .map(|(id, queue, attempts, result, job)| JobSummary {
            id,
            queue,
            state: filter.state.clone(),
            attempts: u64::try_from(attempts).unwrap_or(0),
            last_error: super::found::error_of(result.as_deref()),
            payload: redacted(serde_json::from_slice(&job).unwrap_or(Value::Null)),
        })
        .collect();
    let kept = match filter.state.as_str() {
        "done" => Some("Done"),
        "dead" => Some("dead"),
        "retrying" => Some("Failed"),
        _ => None,
    };
    // A count that streams stops past the window and [`COUNT_CAP`]; a bulk
    // action (no limit) and its confirmation (a window of nothing) count
    // every job.
    let reach = window
        .limit
        .filter(|&limit| limit > 0 && text.streams())
        .map(|limit| {
            let reach = COUNT_CAP.max(window.offset.saturating_add(limit));
            i64::try_from(reach).unwrap_or(i64::MAX - 1) + 1
        });
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
        _ if ends_here => i64::try_from(window.offset + read).unwrap_or(i64::MAX),
        // The waiting and running states are the backlog; a search counts
        // what it found.
        _ => {
            let mut counted = counted;
            if let Some(reach) = reach {
                bind(&mut counted, reach)?;
            }
            sqlx::query_scalar_with(
                sqlx::AssertSqlSafe(count_statement(&state, &text, reach.is_some())),
                counted,
            )
            .fetch_one(pool)
            .await?
        }
    };
    // Reaching the cap means more than one less.
    let total_capped = reach == Some(total);
    Ok(FoundJobs {
        jobs,
        total: u64::try_from(if total_capped { total - 1 } else { total }).unwrap_or(0),
        total_capped,
        searched: None,
        newest_first: false,
    })
}

#[cfg(test)]
mod tests;
