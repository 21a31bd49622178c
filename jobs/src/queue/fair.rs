//! Fair shares between agencies: start-time fair queuing over each queue
//! whose jobs name a fairness key ([`Job::fairness_key`]: the agency for
//! media and archives).
//!
//! Each job gets a tag when pushed: the larger of the queue's virtual time
//! (the tag at the head, about to be served) and one more than the last tag
//! its key was given. A key with no backlog therefore lines up beside the
//! head of the busiest key's backlog and goes next, and keys with backlogs
//! take turns, one job each. Workers start jobs in tag order:
//!
//! - **SQLite.** The tag is the job's priority (apalis-sqlite fetches the
//!   highest first), below the push's own priority, which still dominates:
//!   `priority << 40 | (2^40 - 1 - tag)`. The virtual time is the smallest
//!   tag still waiting; the last tag of each key lives in `fair_tags`.
//! - **Redis.** apalis-redis serves one list first in, first out, so a fair
//!   job is parked instead (in the scheduled set at a far score no fetch
//!   reaches) and moved at once into the queue's fair set, scored by its tag.
//!   [`feed`] moves the lowest tags into the ready list while it holds fewer
//!   than a lookahead (a worker's concurrency); workers feed on every poll
//!   tick and after each fair job, the pusher after each push. The ready
//!   list stays short, so a new key's job waits behind at most a lookahead
//!   of another key's jobs. The virtual time is the tag last fed (equal
//!   tags leave the fair set by job id, so a new key's job, tagged as the
//!   one just fed, goes before the backlog's next).
//!
//! Jobs that come due later (a `run_at`, a retry) join the ready list in due
//! order, as before: fairness is about backlogs, not schedules.

use std::collections::BTreeMap;

use apalis_redis::ConnectionManager;
use sqlx::SqlitePool;

use super::target::{JobQueue, QueueBackend, QueueError};

/// Tags count below this; the push's own priority sits above it.
pub const FAIR_SPAN: u64 = 1 << 40;

/// The score parked fair jobs wait at in a Redis scheduled set
/// (2100-01-01): no fetch promotes them.
pub const PARKED_AT: u64 = 4_102_444_800;

/// The SQLite table of each key's last tag (the queue's own clock under
/// the empty key).
pub(super) const SQLITE_FAIR_TABLE: &str = "create table if not exists fair_tags (
    queue text not null,
    fairness text not null,
    tag integer not null,
    primary key (queue, fairness)
)";

/// The SQLite priority of a job tagged `tag`, pushed with `priority`.
pub fn sqlite_priority(priority: usize, tag: u64) -> usize {
    let fair = FAIR_SPAN - 1 - tag.min(FAIR_SPAN - 1);
    usize::try_from(((priority as u64) << 40) | fair).unwrap_or(usize::MAX)
}

/// Tags `count` jobs of `fairness` in `queue` on SQLite; returns the first
/// (the others follow it).
pub(super) async fn sqlite_tags(
    pool: &SqlitePool,
    queue: &str,
    fairness: &str,
    count: u64,
) -> Result<u64, QueueError> {
    // The head of the waiting jobs is the one with the highest priority.
    let head: Option<i64> = sqlx::query_scalar(
        "select max(priority) from Jobs where job_type = ?1 and status = 'Pending' and lock_by is null",
    )
    .bind(queue)
    .fetch_one(pool)
    .await?;
    let mask = FAIR_SPAN - 1;
    let virtual_time = match head {
        Some(priority) => {
            let fair = u64::try_from(priority).unwrap_or(0) & mask;
            (mask - fair).saturating_sub(1)
        }
        None => {
            let clock: Option<i64> =
                sqlx::query_scalar("select tag from fair_tags where queue = ?1 and fairness = ''")
                    .bind(queue)
                    .fetch_optional(pool)
                    .await?;
            u64::try_from(clock.unwrap_or(0)).unwrap_or(0)
        }
    };
    let count = i64::try_from(count.max(1)).unwrap_or(1);
    let virtual_time = i64::try_from(virtual_time).unwrap_or(0);
    let last: i64 = sqlx::query_scalar(
        "insert into fair_tags (queue, fairness, tag) values (?1, ?2, ?3 + ?4)
         on conflict (queue, fairness) do update set tag = max(tag, ?3) + ?4
         returning tag",
    )
    .bind(queue)
    .bind(fairness)
    .bind(virtual_time)
    .bind(count)
    .fetch_one(pool)
    .await?;
    sqlx::query(
        "insert into fair_tags (queue, fairness, tag) values (?1, '', ?2)
         on conflict (queue, fairness) do update set tag = max(tag, ?2)",
    )
    .bind(queue)
    .bind(last)
    .execute(pool)
    .await?;
    Ok(u64::try_from(last - count + 1).unwrap_or(1))
}

/// Tags `count` jobs of `fairness` in `queue` on Redis; returns the first.
/// KEYS: the queue's last tags (hash), its virtual time. ARGV: key, count.
const REDIS_TAGS: &str = r"
local now = tonumber(redis.call('GET', KEYS[2]) or '0')
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local first = math.max(now - 1, last) + 1
redis.call('HSET', KEYS[1], ARGV[1], first + tonumber(ARGV[2]) - 1)
return first
";

pub(super) async fn redis_tags(
    connection: &ConnectionManager,
    queue: &str,
    fairness: &str,
    count: u64,
) -> Result<u64, QueueError> {
    let mut connection = connection.clone();
    let first: u64 = redis::Script::new(REDIS_TAGS)
        .key(format!("{queue}:fair:tags"))
        .key(format!("{queue}:fair:clock"))
        .arg(fairness)
        .arg(count.max(1))
        .invoke_async(&mut connection)
        .await?;
    Ok(first)
}

/// Moves parked jobs into the fair set under their tags. KEYS: scheduled
/// set, fair set. ARGV: pairs of job id and tag.
const REDIS_ENTER: &str = r"
local entered = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[2], tonumber(ARGV[i + 1]), ARGV[i])
    entered = entered + 1
  end
end
return entered
";

/// Moves the just-pushed parked jobs (`id → tag`) of `queue` into its fair set.
pub(super) async fn redis_enter(
    connection: &ConnectionManager,
    queue: &str,
    tags: &BTreeMap<String, u64>,
) -> Result<u64, QueueError> {
    if tags.is_empty() {
        return Ok(0);
    }
    let mut connection = connection.clone();
    let script = redis::Script::new(REDIS_ENTER);
    let mut invocation = script.prepare_invoke();
    invocation
        .key(format!("{queue}:scheduled"))
        .key(format!("{queue}:fair"));
    for (id, tag) in tags {
        invocation.arg(id).arg(*tag);
    }
    Ok(invocation.invoke_async(&mut connection).await?)
}

/// Tops the ready list up to ARGV[1] from the lowest tags of the fair set,
/// first rescuing parked jobs a pusher left behind (it stopped between its
/// two steps) at the virtual time. KEYS: fair set, ready list, virtual time,
/// signal list, scheduled set. ARGV: lookahead, the parked score.
const REDIS_FEED: &str = r"
local parked = redis.call('ZRANGEBYSCORE', KEYS[5], ARGV[2], ARGV[2], 'LIMIT', 0, 1000)
if #parked > 0 then
  local now = tonumber(redis.call('GET', KEYS[3]) or '0')
  for _, id in ipairs(parked) do
    redis.call('ZREM', KEYS[5], id)
    redis.call('ZADD', KEYS[1], now + 1, id)
  end
end
local room = tonumber(ARGV[1]) - redis.call('LLEN', KEYS[2])
local moved = 0
while room > 0 do
  local head = redis.call('ZPOPMIN', KEYS[1])
  if #head == 0 then break end
  redis.call('RPUSH', KEYS[2], head[1])
  local tag = tonumber(head[2])
  if tag > tonumber(redis.call('GET', KEYS[3]) or '0') then
    redis.call('SET', KEYS[3], tag)
  end
  room = room - 1
  moved = moved + 1
end
if moved > 0 then
  redis.call('DEL', KEYS[4])
  redis.call('LPUSH', KEYS[4], 1)
end
return moved
";

/// Tops `queue`'s ready list up to `lookahead` jobs from its fair set, in
/// tag order; returns how many moved.
pub async fn feed(
    connection: &ConnectionManager,
    queue: &str,
    lookahead: usize,
) -> Result<u64, QueueError> {
    let mut connection = connection.clone();
    Ok(redis::Script::new(REDIS_FEED)
        .key(format!("{queue}:fair"))
        .key(format!("{queue}:active"))
        .key(format!("{queue}:fair:clock"))
        .key(format!("{queue}:signal"))
        .key(format!("{queue}:scheduled"))
        .arg(lookahead.max(1))
        .arg(PARKED_AT)
        .invoke_async(&mut connection)
        .await?)
}

impl JobQueue {
    /// Sets how many jobs `queue`'s ready list holds on Redis (the worker's
    /// concurrency for it).
    pub fn set_lookahead(&self, queue: &str, lookahead: usize) {
        self.lookaheads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(queue.to_owned(), lookahead.max(1));
    }

    /// How many jobs `queue`'s ready list holds on Redis.
    pub fn lookahead(&self, queue: &str) -> usize {
        self.lookaheads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(queue)
            .copied()
            .unwrap_or_else(|| crate::kinds::default_concurrency(queue))
    }

    /// Tops `queue`'s ready list up from its fair set (Redis; nothing to do
    /// on SQLite, whose fetch takes tags in order); returns how many moved.
    pub async fn feed_fair(&self, queue: &str) -> Result<u64, QueueError> {
        match &self.backend {
            QueueBackend::Redis(connection) => feed(connection, queue, self.lookahead(queue)).await,
            QueueBackend::Sqlite(_) => Ok(0),
        }
    }

    /// After a fair job ran: the freed slot takes the next tag at once.
    /// A failure is logged: the workers' poll tick feeds too.
    pub async fn after_fair_job(&self, queue: &str) {
        match self.feed_fair(queue).await {
            Ok(0) => {}
            Ok(_) => self.bells.ring(queue),
            Err(err) => tracing::warn!(%err, queue, "could not feed the fair queue"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_tag_is_a_higher_priority_below_the_pushs_own() {
        assert!(sqlite_priority(0, 1) > sqlite_priority(0, 2));
        assert!(sqlite_priority(1, 1_000_000) > sqlite_priority(0, 1));
        assert_eq!(sqlite_priority(0, 0), (FAIR_SPAN - 1) as usize);
        // Tags past the span saturate rather than wrap into the push's priority.
        assert_eq!(sqlite_priority(0, u64::MAX), 0);
        assert!(i64::try_from(sqlite_priority(10, 5)).is_ok());
    }
}
