//! Jobs as operators look for them: by state, queue, agency and free text
//! (job id, event id, listing number, error text, anywhere in the payload),
//! on both queues, oldest first. What a filter finds is what a bulk action
//! by that filter touches, so "retry every dead probe" means every one, not
//! one page's worth.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde_json::Value;

use super::found::{FoundJobs, JobFilter, JobSummary, JobWindow, redacted};
use super::queue_admin::QueueAdmin;
use crate::kinds::QUEUES;
use crate::queue::{PARKED_AT, QueueBackend, QueueError, search_index};

/// Whether a Redis job matches the filter's agency and text.
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

impl QueueAdmin {
    /// Every job the filter finds, in the order of [`Self::find_jobs_in`].
    pub async fn find_jobs(&self, filter: &JobFilter) -> Result<Vec<JobSummary>, QueueError> {
        Ok(self.find_jobs_in(filter, JobWindow::ALL).await?.jobs)
    }

    /// Indexes the text of the jobs pushed since the text index last caught
    /// up (SQLite; Redis has no such index); returns how many.
    pub async fn index_job_text(&self) -> Result<u64, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => Ok(search_index::catch_up(pool).await?),
            QueueBackend::Redis(_) => Ok(0),
        }
    }

    /// The `window` of the jobs the filter finds, and how many it finds.
    /// On SQLite they come oldest due first (`run_at`, then the order they
    /// were pushed), read by the index of their state; done jobs found by a
    /// search or an agency come in the order they were pushed, streamed from
    /// the text index or the agency's own jobs
    /// ([`crate::queue::search_index`]), and their count stops past the
    /// window and a thousand (`total_capped`). The total of a state without
    /// search is the count the queue keeps ([`crate::queue::state_counts`]).
    /// On Redis, whose finished jobs are in unordered sets, every job of the
    /// state is read and they come in id order.
    pub async fn find_jobs_in(
        &self,
        filter: &JobFilter,
        window: JobWindow,
    ) -> Result<FoundJobs, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                super::sqlite_jobs::sqlite_jobs(pool, filter, window).await
            }
            QueueBackend::Redis(connection) => {
                let mut found = redis_jobs(connection, filter).await?;
                let total = found.len() as u64;
                let offset = usize::try_from(window.offset).unwrap_or(usize::MAX);
                found.drain(..offset.min(found.len()));
                if let Some(limit) = window.limit {
                    found.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
                }
                Ok(FoundJobs {
                    jobs: found,
                    total,
                    total_capped: false,
                })
            }
        }
    }
}

/// Every job of a Redis queue that the filter finds, in id order.
async fn redis_jobs(
    connection: &apalis_redis::ConnectionManager,
    filter: &JobFilter,
) -> Result<Vec<JobSummary>, QueueError> {
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
            let payload: Option<Vec<u8>> = connection.hget(format!("{queue}:data"), &id).await?;
            let payload: Value = payload
                .and_then(|p| serde_json::from_slice(&p).ok())
                .unwrap_or(Value::Null);
            let last_error = super::dead::error_of(meta.get("result").map(String::as_str));
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
    Ok(found)
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
