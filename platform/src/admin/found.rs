//! What the console's filters are made of, shared by both queues' readers:
//! the filter, a job as a list shows it, the window of a list and what a
//! filter finds, and the redaction of secrets in payloads.

use serde::Serialize;
use serde_json::Value;

use crate::queue::job_names::as_name;

/// Most done jobs a page of a free-text search of the Redis queue reads
/// (newest first; those jobs have no text index): about half a second of
/// Redis's time, where every job of a week can be a million.
pub const SEARCH_BUDGET: u64 = 50_000;

/// The states a job can be found in.
pub const JOB_STATES: [&str; 6] = ["queued", "scheduled", "running", "retrying", "dead", "done"];

/// Extracts the error text from apalis's `{"Err": "..."}` result encoding
/// (without the wrapper name of a last attempt's failure).
pub(super) fn error_of(result: Option<&str>) -> Option<String> {
    let result = result?;
    let text = match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) => map
            .get("Err")
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))?,
        _ => result.to_owned(),
    };
    Some(
        text.strip_prefix("AbortError: ")
            .map_or_else(|| text.clone(), str::to_owned),
    )
}

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

/// What a search of done jobs reads by the names index (both queues'): the
/// names, the agency whose jobs it also stands for (an agency's id is
/// indexed by its agency set, not as a name), and the job it is the id of,
/// if any.
#[derive(Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct NamedSearch {
    /// The whole ids ([`as_name`]), in lower case.
    pub(crate) names: Vec<String>,
    /// The agency the search is the id of, as payloads name it.
    pub(crate) agency: Option<String>,
    /// The job the search is the id of (a bare ULID), as queues name it.
    pub(crate) job: Option<String>,
}

/// The names a done jobs' search stands for: the id searched for, or the
/// ids a listing number stands for (its `related`). None when some of it is
/// not shaped as an id ([`as_name`]).
pub(crate) fn named_search(filter: &JobFilter) -> Option<NamedSearch> {
    let search = filter.search.as_deref()?;
    if filter.related.is_empty() {
        let name = as_name(search)?;
        // An agency's id as the queue keeps it: the ULID in upper case.
        let agency = name
            .strip_prefix("agc_")
            .map(|ulid| format!("agc_{}", ulid.to_ascii_uppercase()));
        // A job's own id is a bare ULID in upper case.
        let job = (!name.contains('_')).then(|| name.to_ascii_uppercase());
        return Some(NamedSearch {
            names: vec![name],
            agency,
            job,
        });
    }
    let names = filter
        .related
        .iter()
        .map(|id| as_name(id))
        .collect::<Option<Vec<_>>>()?;
    Some(NamedSearch {
        names,
        agency: None,
        job: None,
    })
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

/// Which of a filter's jobs to read, in the order a list shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobWindow {
    /// How many to skip.
    pub offset: u64,
    /// How many to read at most; None for every one (a bulk action).
    pub limit: Option<u64>,
}

impl JobWindow {
    /// Every job the filter finds.
    pub const ALL: Self = Self {
        offset: 0,
        limit: None,
    };
}

/// A window of the jobs a filter finds, and how many it finds in all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FoundJobs {
    /// The window's jobs.
    pub jobs: Vec<JobSummary>,
    /// Every job the filter finds; with `total_capped`, how many it counted
    /// before it stopped (a done jobs' search or agency filter stops past
    /// the window and a thousand).
    pub total: u64,
    /// Whether the filter finds more than `total`.
    pub total_capped: bool,
    /// When a search of free text stopped before reading every job it could
    /// match (the Redis queue's done jobs have no text index, so such a
    /// search reads them, newest first, up to a budget): how many it read.
    /// `jobs` and `total` are then what it found among those.
    pub searched: Option<u64>,
    /// Whether `jobs` come newest first (a page of such a search), not in
    /// the order they were pushed.
    pub newest_first: bool,
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
}
