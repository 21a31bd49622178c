//! Jobs as operators look for them: by state, queue, agency and free text
//! (job id, event id, listing number, error text, anywhere in the payload),
//! on both queues, oldest first. What a filter finds is what a bulk action
//! by that filter touches, so "retry every dead probe" means every one, not
//! one page's worth.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde::Serialize;
use serde_json::Value;

use super::queue_admin::{DEAD, QueueAdmin};
use crate::kinds::QUEUES;
use crate::queue::{PARKED_AT, QueueBackend, QueueError};

/// The states a job can be found in.
pub const JOB_STATES: [&str; 6] = ["queued", "scheduled", "running", "retrying", "dead", "done"];

/// What to look for.
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    /// One of [`JOB_STATES`].
    pub state: String,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only jobs whose payload names this agency.
    pub agency: Option<String>,
    /// Only jobs whose id, payload or last error contains this text (or,
    /// when `related` is not empty, whose payload names one of those ids).
    pub search: Option<String>,
    /// Ids the search text stands for (a listing number stands for its
    /// listing, media, events and deliveries): a job naming any matches.
    pub related: Vec<String>,
}

/// A job as an operator sees it in a list.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobSummary {
    /// Task id (a ULID).
    pub id: String,
    /// Queue.
    pub queue: String,
    /// One of [`JOB_STATES`].
    pub state: String,
    /// Runs so far.
    pub attempts: u64,
    /// The last error the handler returned.
    pub last_error: Option<String>,
    /// Its payload, with anything named like a secret redacted.
    pub payload: Value,
}

/// Field names whose values a list never shows.
const SECRET_NAMES: [&str; 5] = ["secret", "token", "password", "key", "signature"];

/// `payload` with the value of every field named like a secret replaced.
pub fn redacted(payload: Value) -> Value {
    match payload {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(name, value)| {
                    let lower = name.to_ascii_lowercase();
                    if SECRET_NAMES.iter().any(|secret| lower.contains(secret)) {
                        (name, Value::String("[redacted]".to_owned()))
                    } else {
                        (name, redacted(value))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(redacted).collect()),
        other => other,
    }
}

/// Whether a job matches the filter's agency and text.
fn matches(filter: &JobFilter, id: &str, payload: &Value, last_error: Option<&str>) -> bool {
    let text = payload.to_string();
    let agency = filter
        .agency
        .as_deref()
        .is_none_or(|agency| text.contains(&format!("\"{agency}\"")));
    let search = filter.search.as_deref().is_none_or(|search| {
        let search = search.to_lowercase();
        id.to_lowercase().contains(&search)
            || text.to_lowercase().contains(&search)
            || last_error.is_some_and(|error| error.to_lowercase().contains(&search))
            || filter
                .related
                .iter()
                .any(|related| text.contains(&format!("\"{related}\"")))
    });
    agency && search
}

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

impl QueueAdmin {
    /// Every job the filter finds, oldest first.
    pub async fn find_jobs(&self, filter: &JobFilter) -> Result<Vec<JobSummary>, QueueError> {
        let queues: Vec<&str> = QUEUES
            .iter()
            .copied()
            .filter(|queue| {
                filter
                    .queue
                    .as_deref()
                    .is_none_or(|wanted| wanted == *queue)
            })
            .collect();
        let mut found = Vec::new();
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let Some(condition) = sqlite_state(&filter.state) else {
                    return Ok(Vec::new());
                };
                let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "select id, job_type, attempts, last_result, job from Jobs
                     where ({condition}) and ($2 is null or job_type = $2) order by id"
                )))
                .bind(chrono::Utc::now().timestamp())
                .bind(filter.queue.as_deref())
                .fetch_all(pool)
                .await?;
                for (id, queue, attempts, result, job) in rows {
                    let payload: Value = serde_json::from_slice(&job).unwrap_or(Value::Null);
                    let last_error = super::dead::error_of(result.as_deref());
                    if matches(filter, &id, &payload, last_error.as_deref()) {
                        found.push(JobSummary {
                            id,
                            queue,
                            state: filter.state.clone(),
                            attempts: u64::try_from(attempts).unwrap_or(0),
                            last_error,
                            payload: redacted(payload),
                        });
                    }
                }
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in queues {
                    let ids = redis_ids(&mut connection, queue, &filter.state).await?;
                    for id in ids {
                        let meta: BTreeMap<String, String> =
                            connection.hgetall(format!("{queue}:meta:{id}")).await?;
                        let retrying = meta.get("status").is_some_and(|s| s == "Failed");
                        let wanted = match filter.state.as_str() {
                            "scheduled" => !retrying,
                            "retrying" => retrying,
                            _ => true,
                        };
                        if !wanted {
                            continue;
                        }
                        let payload: Option<Vec<u8>> =
                            connection.hget(format!("{queue}:data"), &id).await?;
                        let payload: Value = payload
                            .and_then(|p| serde_json::from_slice(&p).ok())
                            .unwrap_or(Value::Null);
                        let last_error =
                            super::dead::error_of(meta.get("result").map(String::as_str));
                        if matches(filter, &id, &payload, last_error.as_deref()) {
                            found.push(JobSummary {
                                attempts: meta
                                    .get("attempts")
                                    .and_then(|a| a.parse().ok())
                                    .unwrap_or(0),
                                id,
                                queue: queue.to_owned(),
                                state: filter.state.clone(),
                                last_error,
                                payload: redacted(payload),
                            });
                        }
                    }
                }
                found.sort_by(|a, b| a.id.cmp(&b.id));
            }
        }
        Ok(found)
    }
}

/// The ids of a Redis queue's jobs in `state` (scheduled and retrying share
/// the scheduled set; the caller tells them apart by status).
async fn redis_ids(
    connection: &mut apalis_redis::ConnectionManager,
    queue: &str,
    state: &str,
) -> Result<Vec<String>, QueueError> {
    Ok(match state {
        "queued" => {
            let mut ids: Vec<String> = connection.lrange(format!("{queue}:active"), 0, -1).await?;
            let fair: Vec<String> = connection.zrange(format!("{queue}:fair"), 0, -1).await?;
            let parked: Vec<String> = connection
                .zrangebyscore(format!("{queue}:scheduled"), PARKED_AT, "+inf")
                .await?;
            ids.extend(fair);
            ids.extend(parked);
            ids
        }
        "scheduled" | "retrying" => {
            connection
                .zrangebyscore(
                    format!("{queue}:scheduled"),
                    "-inf",
                    format!("({PARKED_AT}"),
                )
                .await?
        }
        "running" => {
            let workers: Vec<String> = connection.zrange(format!("{queue}:workers"), 0, -1).await?;
            let mut ids = Vec::new();
            for worker in workers {
                let held: Vec<String> = connection
                    .smembers(format!("{queue}:inflight:{worker}"))
                    .await?;
                ids.extend(held);
            }
            ids
        }
        "dead" => connection.smembers(format!("{queue}:dead")).await?,
        "done" => connection.smembers(format!("{queue}:done")).await?,
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_never_show() {
        let payload = json!({"endpoint_id": "whe_1", "signing_secret": "whsec_x", "nested": [{"api_key": "sk"}]});
        assert_eq!(
            redacted(payload),
            json!({"endpoint_id": "whe_1", "signing_secret": "[redacted]", "nested": [{"api_key": "[redacted]"}]})
        );
    }

    #[test]
    fn filters_match_agency_and_text() {
        let payload = json!({"agency_id": "agc_1", "listing_number": "AB12CD"});
        let filter = |agency: Option<&str>, search: Option<&str>| JobFilter {
            state: "dead".into(),
            queue: None,
            agency: agency.map(str::to_owned),
            search: search.map(str::to_owned),
            related: Vec::new(),
        };
        assert!(matches(&filter(Some("agc_1"), None), "01J", &payload, None));
        assert!(!matches(
            &filter(Some("agc_2"), None),
            "01J",
            &payload,
            None
        ));
        assert!(matches(
            &filter(None, Some("ab12cd")),
            "01J",
            &payload,
            None
        ));
        assert!(matches(
            &filter(None, Some("boom")),
            "01J",
            &payload,
            Some("it went BOOM")
        ));
        assert!(!matches(
            &filter(None, Some("nothing")),
            "01J",
            &payload,
            None
        ));
        let dispatch = json!({"event_ids": ["evt_1", "evt_2"]});
        let by_listing = JobFilter {
            related: vec!["evt_2".into()],
            ..filter(None, Some("QX7ABC"))
        };
        assert!(matches(&by_listing, "01J", &dispatch, None));
        assert!(!matches(
            &by_listing,
            "01J",
            &json!({"event_ids": ["evt_20"]}),
            None
        ));
    }
}
