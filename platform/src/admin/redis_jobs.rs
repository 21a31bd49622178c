//! The console's reads of the Redis queue, in id order (the order jobs were
//! pushed: ids are ULIDs).
//!
//! Done jobs, the state that grows with the history, are read from the
//! queue's order index, an agency's, or the ranges of the names index that
//! a search stands for ([`crate::queue::redis_index`]): a window walks the
//! index from its start and keeps the ids the done set holds, so a page
//! costs its offset and window, not the queue. Without a filter their total
//! is the done sets' sizes; an agency filter or a search counts its matches
//! and stops past the window and [`COUNT_CAP`], as on SQLite.
//!
//! A search for an id (text shaped as our ids are) reads the jobs that name
//! it as a value, and the agency's jobs if it is an agency's id; a listing
//! number reads the jobs naming its listing, media, events or deliveries (no
//! job names a listing number itself). Other text has no index here: a page
//! of it checks the done jobs' payloads newest first, inside Redis, up to
//! [`SEARCH_BUDGET`](super::found::SEARCH_BUDGET) jobs, and says how far it read (`searched`); a bulk
//! action's read checks every one.
//!
//! Dead jobs (kept a month) are walked the same way through the queue's
//! dead index in id order ([`crate::queue::redis_dead`], caught up first),
//! an agency or a search checked job by job inside Redis and counted up to
//! the cap; their total without a filter is the dead sets' sizes.
//!
//! The backlog's states (queued, scheduled, retrying, running) are read
//! whole, each job's details fetched in pipelined chunks, and only the
//! window's when nothing in the payload is asked.

use std::collections::{BTreeMap, VecDeque};

use apalis_redis::ConnectionManager;
use redis::AsyncCommands;
use serde_json::Value;

use super::found::{FoundJobs, JobFilter, JobSummary, JobWindow, named_search, redacted};
use super::sqlite_jobs::COUNT_CAP;
use crate::kinds::QUEUES;
use crate::queue::redis_index::{agency_key, names_key, order_key};
use crate::queue::{PARKED_AT, QueueError, redis_dead};

/// Ids read from an index, or jobs' details fetched, per round trip.
const CHUNK: usize = 500;

/// The `window` of the jobs of a Redis queue that `filter` finds, and how
/// many it finds; a page of a free-text search of done jobs reads at most
/// `search_budget` of them.
pub(super) async fn redis_jobs(
    connection: &ConnectionManager,
    filter: &JobFilter,
    window: JobWindow,
    search_budget: u64,
) -> Result<FoundJobs, QueueError> {
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
    let mut connection = connection.clone();
    match filter.state.as_str() {
        "done" => indexed_jobs(&mut connection, &queues, filter, window, search_budget).await,
        "dead" => {
            for queue in &queues {
                redis_dead::catch_up(&connection, queue, false).await?;
            }
            indexed_jobs(&mut connection, &queues, filter, window, search_budget).await
        }
        _ => other_jobs(&mut connection, &queues, filter, window).await,
    }
}

/// Whether the filter asks anything of a job's payload or last error.
fn reads_text(filter: &JobFilter) -> bool {
    filter.search.is_some()
}

/// Done jobs from the order index, the agency's or a search's names, or dead
/// jobs from the dead index, in id order.
async fn indexed_jobs(
    connection: &mut ConnectionManager,
    queues: &[&str],
    filter: &JobFilter,
    window: JobWindow,
    search_budget: u64,
) -> Result<FoundJobs, QueueError> {
    let state: &'static str = if filter.state == "dead" {
        "dead"
    } else {
        "done"
    };
    let done = state == "done";
    // The names index serves done jobs (a week of them); dead ones (a month
    // of the failures) are checked by their text, as the SQLite queue's
    // dead jobs' text index finds them.
    let named = named_search(filter).filter(|_| done);
    // Free text of done jobs on a page: read newest first, up to the budget.
    let budget = (done && named.is_none() && reads_text(filter) && window.limit.is_some())
        .then_some(search_budget);
    let mut walks: Vec<IndexWalk> = Vec::new();
    for queue in queues {
        match &named {
            Some(named) => {
                walks.extend(named.names.iter().map(|name| IndexWalk::named(queue, name)));
                if let Some(agency) = &named.agency {
                    walks.push(IndexWalk::all(queue, agency_key(queue, agency), state));
                }
                if let Some(job) = &named.job {
                    walks.push(IndexWalk::given(queue, job));
                }
            }
            None => {
                let index = match (&filter.agency, done) {
                    (Some(agency), true) => agency_key(queue, agency),
                    (None, true) => order_key(queue),
                    (_, false) => redis_dead::dead_order_key(queue),
                };
                let mut walk = IndexWalk::all(queue, index, state);
                walk.newest_first = budget.is_some();
                walks.push(walk);
            }
        }
    }
    let offset = window.offset;
    let end = window.limit.map(|limit| offset.saturating_add(limit));
    if filter.agency.is_none() && !reads_text(filter) {
        // Every job of the state matches: the sets' sizes are the total,
        // and only the window is walked and read.
        let mut total = 0;
        for queue in queues {
            let size: u64 = connection.scard(format!("{queue}:{state}")).await?;
            total += size;
        }
        let mut wanted = Vec::new();
        let mut seen = 0_u64;
        while end.is_none_or(|end| seen < end) {
            let Some(job) = next_job(connection, &mut walks).await? else {
                break;
            };
            if seen >= offset {
                wanted.push(job);
            }
            seen += 1;
        }
        return Ok(FoundJobs {
            jobs: details(connection, &wanted, state).await?,
            total,
            total_capped: false,
            searched: None,
            newest_first: false,
        });
    }
    // What is left to check of each job walked: nothing when the names
    // found it and no agency is asked; the agency alone when the names
    // found it; the text when an agency's index walked it; else the filter.
    let checked = match (&named, &filter.agency) {
        (Some(_), None) => None,
        (Some(_), Some(agency)) => Some(JobFilter {
            agency: Some(agency.clone()),
            ..JobFilter::default()
        }),
        (None, Some(_)) if !done => Some(filter.clone()),
        (None, _) => reads_text(filter).then(|| filter.clone()),
    };
    // A filter's matches are counted as they come, up to the cap when a
    // window is asked for (a bulk action and its confirmation count all).
    let reach = window
        .limit
        .filter(|&limit| limit > 0)
        .map(|limit| COUNT_CAP.max(offset.saturating_add(limit)) + 1);
    let mut found = Vec::new();
    let mut counted = 0_u64;
    let mut read = 0_u64;
    let mut searched = None;
    'walk: while reach.is_none_or(|reach| counted < reach) {
        let room = budget.map_or(CHUNK as u64, |budget| {
            budget.saturating_sub(read).min(CHUNK as u64)
        });
        if room == 0 {
            // The budget is spent: say so if any done job is left unread.
            fill(connection, &mut walks).await?;
            if walks.iter().any(|walk| !walk.ready.is_empty()) {
                searched = Some(read);
            }
            break;
        }
        let mut candidates = Vec::with_capacity(CHUNK);
        while (candidates.len() as u64) < room {
            match next_job(connection, &mut walks).await? {
                Some(job) => candidates.push(job),
                None => break,
            }
        }
        if candidates.is_empty() {
            break;
        }
        read += candidates.len() as u64;
        let matching: Vec<(String, String)> = match &checked {
            Some(checked) => matching(connection, checked, candidates).await?,
            None => candidates,
        };
        for job in matching {
            if reach.is_some_and(|reach| counted >= reach) {
                break 'walk;
            }
            if counted >= offset && end.is_none_or(|end| counted < end) {
                found.push(job);
            }
            counted += 1;
        }
    }
    let total_capped = reach == Some(counted);
    Ok(FoundJobs {
        jobs: details(connection, &found, state).await?,
        total: if total_capped { counted - 1 } else { counted },
        total_capped,
        searched,
        newest_first: budget.is_some(),
    })
}

/// One queue's done or dead jobs, walked through an index in id order:
/// every member of the order index, an agency's or the dead index, or one
/// name's range of the names index (members `"{name} {job_id}"`); or one
/// job given by its id. Each id read is kept if the state's set holds it.
struct IndexWalk {
    queue: String,
    /// The state whose set (`{queue}:{state}`) a job read must be in.
    state: &'static str,
    /// The sorted set walked; empty for a job given.
    index: String,
    /// The job given, until read.
    given: Option<String>,
    /// Walked from the newest member (a budgeted search), not the oldest.
    newest_first: bool,
    /// What precedes the job id in each member walked: nothing, or the
    /// name and a space.
    prefix: String,
    /// The last id read from the index.
    after: Option<String>,
    /// Ids of the state read and not yet taken.
    ready: VecDeque<String>,
    /// The index has no more ids.
    ended: bool,
}

impl IndexWalk {
    /// Every member of `index`, a set of job ids, that is in `state`.
    fn all(queue: &str, index: String, state: &'static str) -> Self {
        Self::new(queue, index, String::new(), state)
    }

    /// The done jobs of `queue` that name `name`.
    fn named(queue: &str, name: &str) -> Self {
        Self::new(queue, names_key(queue), format!("{name} "), "done")
    }

    /// The job `id` of `queue`, if it is there and done.
    fn given(queue: &str, id: &str) -> Self {
        Self {
            given: Some(id.to_owned()),
            ..Self::new(queue, String::new(), String::new(), "done")
        }
    }

    fn new(queue: &str, index: String, prefix: String, state: &'static str) -> Self {
        Self {
            queue: queue.to_owned(),
            state,
            index,
            given: None,
            newest_first: false,
            prefix,
            after: None,
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// Whether the walk needs to read its index before a job is ready.
    fn wants(&self) -> bool {
        self.ready.is_empty() && !self.ended
    }

    /// The command and its bounds that read the members not yet read.
    fn range(&self) -> (&'static str, String, String) {
        if self.newest_first {
            // Only walks of every member go newest first.
            let from = match &self.after {
                Some(after) => format!("({after}"),
                None => "+".to_owned(),
            };
            return ("ZREVRANGEBYLEX", from, "-".to_owned());
        }
        let from = match (&self.after, self.prefix.is_empty()) {
            (Some(after), _) => format!("({}{after}", self.prefix),
            (None, true) => "-".to_owned(),
            (None, false) => format!("[{}", self.prefix),
        };
        // Past every member starting with the name and a space: the space
        // is followed, in byte order, by `!`.
        let to = match self.prefix.strip_suffix(' ') {
            Some(name) => format!("({name}!"),
            None => "+".to_owned(),
        };
        ("ZRANGEBYLEX", from, to)
    }
}

/// Reads the indexes of the walks that have no job ready until each has
/// one or has ended: each round reads every such walk's next chunk in one
/// pipeline and checks them against their states' sets in another, so a search
/// of many names costs two round trips a round, not two a name.
async fn fill(
    connection: &mut ConnectionManager,
    walks: &mut [IndexWalk],
) -> Result<(), QueueError> {
    loop {
        let wanting: Vec<usize> = (0..walks.len()).filter(|&i| walks[i].wants()).collect();
        if wanting.is_empty() {
            return Ok(());
        }
        let mut read = Vec::with_capacity(wanting.len());
        let mut ranged = Vec::with_capacity(wanting.len());
        let mut pipe = redis::pipe();
        for &i in &wanting {
            if walks[i].index.is_empty() {
                walks[i].ended = true;
                read.extend(walks[i].given.take().map(|id| (i, vec![id])));
                continue;
            }
            let (command, from, to) = walks[i].range();
            pipe.cmd(command)
                .arg(&walks[i].index)
                .arg(from)
                .arg(to)
                .arg("LIMIT")
                .arg(0)
                .arg(CHUNK);
            ranged.push(i);
        }
        let chunks: Vec<Vec<String>> = if ranged.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(connection).await?
        };
        for (&i, members) in ranged.iter().zip(chunks) {
            let walk = &mut walks[i];
            walk.ended = members.len() < CHUNK;
            let ids: Vec<String> = members
                .iter()
                .filter_map(|member| member.strip_prefix(walk.prefix.as_str()))
                .map(str::to_owned)
                .collect();
            if let Some(last) = ids.last() {
                walk.after = Some(last.clone());
                read.push((i, ids));
            }
        }
        if read.is_empty() {
            continue;
        }
        let mut pipe = redis::pipe();
        for (i, ids) in &read {
            pipe.cmd("SMISMEMBER")
                .arg(format!("{}:{}", walks[*i].queue, walks[*i].state))
                .arg(ids);
        }
        let held: Vec<Vec<i64>> = pipe.query_async(connection).await?;
        for ((i, ids), held) in read.into_iter().zip(held) {
            walks[i].ready.extend(
                ids.into_iter()
                    .zip(held)
                    .filter(|(_, held)| *held == 1)
                    .map(|(id, _)| id),
            );
        }
    }
}

/// The next job of any walk, in id order (newest first when the walks go
/// so): (queue, id). A job that several walks hold (one naming two of the
/// ids searched for) is taken from each of them and given once.
async fn next_job(
    connection: &mut ConnectionManager,
    walks: &mut [IndexWalk],
) -> Result<Option<(String, String)>, QueueError> {
    fill(connection, walks).await?;
    let fronts = walks
        .iter()
        .filter_map(|walk| Some((walk.ready.front()?, &walk.queue)));
    let newest_first = walks.first().is_some_and(|walk| walk.newest_first);
    let next = if newest_first {
        fronts.max()
    } else {
        fronts.min()
    };
    let Some(first) = next.map(|(id, queue)| (queue.clone(), id.clone())) else {
        return Ok(None);
    };
    for walk in walks.iter_mut() {
        if walk.queue == first.0 && walk.ready.front() == Some(&first.1) {
            walk.ready.pop_front();
        }
    }
    Ok(Some(first))
}

/// The backlog's states: every id of the state, in id order.
async fn other_jobs(
    connection: &mut ConnectionManager,
    queues: &[&str],
    filter: &JobFilter,
    window: JobWindow,
) -> Result<FoundJobs, QueueError> {
    let mut ids = Vec::new();
    for queue in queues {
        let of_queue = state_ids(connection, queue, &filter.state).await?;
        ids.extend(of_queue.into_iter().map(|id| ((*queue).to_owned(), id)));
    }
    // Scheduled and retrying share a set: told apart by the job's status.
    if matches!(filter.state.as_str(), "scheduled" | "retrying") {
        let retrying = filter.state == "retrying";
        let mut kept = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for (queue, id) in chunk {
                pipe.hget(format!("{queue}:meta:{id}"), "status");
            }
            let statuses: Vec<Option<String>> = pipe.query_async(connection).await?;
            for (job, status) in chunk.iter().zip(statuses) {
                if status.as_deref().is_some_and(|s| s == "Failed") == retrying {
                    kept.push(job.clone());
                }
            }
        }
        ids = kept;
    }
    ids.sort_by(|a, b| a.1.cmp(&b.1));
    let offset = usize::try_from(window.offset).unwrap_or(usize::MAX);
    let cut = |mut jobs: Vec<(String, String)>| {
        jobs.drain(..offset.min(jobs.len()));
        if let Some(limit) = window.limit {
            jobs.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        jobs
    };
    if filter.agency.is_none() && !reads_text(filter) {
        let total = ids.len() as u64;
        let mut wanted: Vec<(String, String)> = ids.into_iter().skip(offset).collect();
        if let Some(limit) = window.limit {
            wanted.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
        return Ok(FoundJobs {
            jobs: details(connection, &wanted, &filter.state).await?,
            total,
            total_capped: false,
            searched: None,
            newest_first: false,
        });
    }
    let mut found = Vec::new();
    for chunk in ids.chunks(CHUNK) {
        found.extend(matching(connection, filter, chunk.to_vec()).await?);
    }
    let total = found.len() as u64;
    let wanted = cut(found);
    Ok(FoundJobs {
        jobs: details(connection, &wanted, &filter.state).await?,
        total,
        total_capped: false,
        searched: None,
        newest_first: false,
    })
}

/// The ids of a Redis queue's jobs in `state` (scheduled and retrying share
/// the scheduled set; the caller tells them apart by status).
async fn state_ids(
    connection: &mut ConnectionManager,
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
        _ => Vec::new(),
    })
}

/// A Redis job as read for its summary: its meta hash and its payload.
pub(super) type JobRead = (BTreeMap<String, String>, Option<Vec<u8>>);

/// Each job's (queue, id) meta hash and payload, in the order given, read in
/// pipelined chunks: two answers a job, never a round trip each. A job gone
/// meanwhile reads an empty hash and no payload.
pub(super) async fn read_jobs(
    connection: &mut ConnectionManager,
    jobs: &[(String, String)],
) -> Result<Vec<JobRead>, QueueError> {
    let mut read = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(CHUNK) {
        let mut pipe = redis::pipe();
        for (queue, id) in chunk {
            pipe.hgetall(format!("{queue}:meta:{id}"))
                .hget(format!("{queue}:data"), id);
        }
        let answers: Vec<redis::Value> = pipe.query_async(connection).await?;
        let mut answers = answers.into_iter();
        while let (Some(meta), Some(payload)) = (answers.next(), answers.next()) {
            read.push((
                redis::from_redis_value(meta).map_err(redis::RedisError::from)?,
                redis::from_redis_value(payload).map_err(redis::RedisError::from)?,
            ));
        }
    }
    Ok(read)
}

/// Each job's summary in `state`, fetched in pipelined chunks; a job gone
/// meanwhile is left out.
async fn details(
    connection: &mut ConnectionManager,
    jobs: &[(String, String)],
    state: &str,
) -> Result<Vec<JobSummary>, QueueError> {
    let read = read_jobs(connection, jobs).await?;
    Ok(jobs
        .iter()
        .zip(read)
        .filter_map(|((queue, id), (meta, payload))| {
            let payload: Value = serde_json::from_slice(&payload?).unwrap_or(Value::Null);
            Some(JobSummary {
                attempts: meta
                    .get("attempts")
                    .and_then(|a| a.parse().ok())
                    .unwrap_or(0),
                id: id.clone(),
                queue: queue.clone(),
                state: state.to_owned(),
                last_error: super::found::error_of(meta.get("result").map(String::as_str)),
                payload: redacted(payload),
            })
        })
        .collect())
}

/// The jobs named in ARGV[5 + n..] (n = ARGV[4]) that the filter finds,
/// checked where they are kept, so no payload crosses the network: the
/// agency (ARGV[2]) named as a JSON string, and the search text (ARGV[3],
/// lower case) in the id, the payload or the last error (`Err` of the last
/// result), or one of the n related ids (ARGV[5..]) named as a JSON string.
/// An empty agency or search asks nothing. KEYS: the data hash. ARGV[1]: the
/// meta prefix. Returns the matches in the order given.
const REDIS_MATCH_LUA: &str = r#"
local agency = ARGV[2]
local search = ARGV[3]
local first = 5 + tonumber(ARGV[4])
local function has(text, part) return string.find(text, part, 1, true) ~= nil end
local function last_error(id)
    local result = redis.call('HGET', ARGV[1] .. ':' .. id, 'result')
    if not result then return nil end
    local ok, decoded = pcall(cjson.decode, result)
    if not ok or type(decoded) ~= 'table' then return result end
    if type(decoded.Err) == 'string' then return decoded.Err end
    return nil
end
local found = {}
for i = first, #ARGV do
    local id = ARGV[i]
    local data = redis.call('HGET', KEYS[1], id)
    if data then
        local wanted = #agency == 0 or has(data, '"' .. agency .. '"')
        if wanted and #search > 0 then
            wanted = has(string.lower(id), search) or has(string.lower(data), search)
            if not wanted then
                local error = last_error(id)
                wanted = error ~= nil and has(string.lower(error), search)
            end
            for r = 5, first - 1 do
                if wanted then break end
                wanted = has(data, '"' .. ARGV[r] .. '"')
            end
        end
        if wanted then found[#found + 1] = id end
    end
end
return found
"#;

/// The script of [`REDIS_MATCH_LUA`].
static REDIS_MATCH: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(REDIS_MATCH_LUA));

/// The `jobs` (queue, id) that the filter's agency and search find, in the
/// order given, checked by [`REDIS_MATCH`] a queue at a time.
async fn matching(
    connection: &mut ConnectionManager,
    filter: &JobFilter,
    jobs: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, QueueError> {
    let mut by_queue: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (queue, id) in &jobs {
        by_queue.entry(queue.clone()).or_default().push(id.clone());
    }
    let mut found = std::collections::BTreeSet::new();
    for (queue, ids) in by_queue {
        let mut invocation = REDIS_MATCH.prepare_invoke();
        invocation
            .key(format!("{queue}:data"))
            .arg(format!("{queue}:meta"))
            .arg(filter.agency.as_deref().unwrap_or(""))
            .arg(
                filter
                    .search
                    .as_deref()
                    .map(str::to_lowercase)
                    .unwrap_or_default(),
            )
            .arg(filter.related.len())
            .arg(&filter.related)
            .arg(&ids);
        let matched: Vec<String> = invocation.invoke_async(connection).await?;
        found.extend(matched.into_iter().map(|id| (queue.clone(), id)));
    }
    Ok(jobs.into_iter().filter(|job| found.contains(job)).collect())
}
