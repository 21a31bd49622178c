//! How old the oldest job of each queue is in each waiting or kept state:
//! `pending` (ready, or fed to workers), `scheduled` (a later `run_at` or
//! retry), `running` (in a worker's hands) and `dead`. A job's age counts
//! from its push: every id the queue gives is a ULID, whose first 48 bits
//! are the push's millisecond, so the oldest job is the smallest id.

use std::collections::BTreeMap;

use serde::Serialize;

use super::queue_admin::{DEAD, QueueAdmin};
use crate::kinds::QUEUES;
use crate::queue::{PARKED_AT, QueueBackend, QueueError, redis_dead};

/// The states an oldest age is reported for.
pub const AGE_STATES: [&str; 4] = ["pending", "scheduled", "running", "dead"];

/// The oldest job of a queue in one state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OldestJob {
    /// Queue name.
    pub queue: String,
    /// pending, scheduled, running or dead.
    pub state: &'static str,
    /// Seconds since it was pushed; 0 when the state holds no job.
    pub age_seconds: f64,
}

/// The smallest id per state of one Redis queue, in [`AGE_STATES`] order
/// (false where a state is empty). KEYS: active list, fair set, scheduled
/// set, workers set, the dead index in id order
/// ([`crate::queue::redis_dead`], caught up first: the month of dead jobs
/// is never read). ARGV: the parked score, the in-flight prefix.
const REDIS_OLDEST: &str = r"
local function lowest(ids, current)
  for _, id in ipairs(ids) do
    if current == false or id < current then current = id end
  end
  return current
end
local pending = lowest(redis.call('lrange', KEYS[1], 0, -1), false)
pending = lowest(redis.call('zrange', KEYS[2], 0, -1), pending)
pending = lowest(redis.call('zrangebyscore', KEYS[3], ARGV[1], '+inf'), pending)
local scheduled = lowest(redis.call('zrangebyscore', KEYS[3], '-inf', '(' .. ARGV[1]), false)
local running = false
for _, worker in ipairs(redis.call('zrange', KEYS[4], 0, -1)) do
  running = lowest(redis.call('smembers', ARGV[2] .. ':' .. worker), running)
end
local dead = redis.call('zrange', KEYS[5], 0, 0)[1] or false
return {pending, scheduled, running, dead}
";

/// The smallest id per queue and state on SQLite (`$1` now, `$2` the
/// queues as a JSON array): the backlog by its statuses' ranges (the failed
/// jobs still retrying by apalis-sqlite's partial index of them, pinned
/// with the crate), the dead by one seek per queue into theirs, so the
/// month of dead jobs is never read.
pub(super) fn sqlite_oldest_statement() -> String {
    format!(
        "select job_type,
            case when status in ('Queued', 'Running') then 'running'
                 when run_at > $1 then 'scheduled'
                 else 'pending' end,
            min(id)
         from Jobs where status in ('Pending', 'Queued', 'Running')
         group by 1, 2
         union all
         select job_type, case when run_at > $1 then 'scheduled' else 'pending' end, min(id)
         from Jobs indexed by idx_jobs_failed where status = 'Failed' and attempts < max_attempts
         group by 1, 2
         union all
         select queue.value, 'dead',
            (select min(id) from Jobs indexed by jobs_dead_by_queue
             where job_type = queue.value and {DEAD})
         from json_each($2) as queue"
    )
}

/// Seconds between the push of the job with id `id` and `now_ms`; none for
/// an id that is not a ULID.
fn age_of(id: &str, now_ms: u64) -> Option<f64> {
    let pushed = ulid::Ulid::from_string(id).ok()?.timestamp_ms();
    Some(now_ms.saturating_sub(pushed) as f64 / 1000.0)
}

impl QueueAdmin {
    /// The oldest job's age of every queue in every state of [`AGE_STATES`].
    pub async fn oldest_jobs(&self) -> Result<Vec<OldestJob>, QueueError> {
        let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
        let mut lowest: BTreeMap<(String, &'static str), String> = BTreeMap::new();
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let now = chrono::Utc::now().timestamp();
                let rows: Vec<(String, String, Option<String>)> =
                    sqlx::query_as(sqlx::AssertSqlSafe(sqlite_oldest_statement()))
                        .bind(now)
                        .bind(serde_json::to_string(&QUEUES).unwrap_or_default())
                        .fetch_all(pool)
                        .await?;
                for (queue, state, id) in rows {
                    let (Some(state), Some(id)) = (AGE_STATES.iter().find(|s| **s == state), id)
                    else {
                        continue;
                    };
                    let key = (queue, *state);
                    if lowest.get(&key).is_none_or(|known| id < *known) {
                        lowest.insert(key, id);
                    }
                }
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in QUEUES {
                    redis_dead::catch_up(&connection, queue, false).await?;
                    let ids: Vec<Option<String>> = redis::Script::new(REDIS_OLDEST)
                        .key(format!("{queue}:active"))
                        .key(format!("{queue}:fair"))
                        .key(format!("{queue}:scheduled"))
                        .key(format!("{queue}:workers"))
                        .key(redis_dead::dead_order_key(queue))
                        .arg(PARKED_AT)
                        .arg(format!("{queue}:inflight"))
                        .invoke_async(&mut connection)
                        .await?;
                    for (state, id) in AGE_STATES.iter().zip(ids) {
                        if let Some(id) = id {
                            lowest.insert(((*queue).to_owned(), state), id);
                        }
                    }
                }
            }
        }
        Ok(QUEUES
            .iter()
            .flat_map(|queue| {
                let lowest = &lowest;
                AGE_STATES.iter().map(move |state| OldestJob {
                    queue: (*queue).to_owned(),
                    state,
                    age_seconds: lowest
                        .get(&((*queue).to_owned(), *state))
                        .and_then(|id| age_of(id, now_ms))
                        .unwrap_or(0.0),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_age_counts_from_the_millisecond_in_its_id() {
        let id = ulid::Ulid::from_parts(1_000_000, 7).to_string();
        assert_eq!(age_of(&id, 1_002_500), Some(2.5));
        assert_eq!(age_of(&id, 999_000), Some(0.0), "never negative");
        assert_eq!(age_of("not-a-ulid", 5), None);
    }
}
