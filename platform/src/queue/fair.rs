//! Fair shares between agencies: start-time fair queuing over each queue
//! whose jobs name a fairness key ([`Job::fairness_key`]: the agency for
//! media and archives, the endpoint for webhook deliveries).
//!
//! Each job gets a tag when pushed, and workers start jobs in tag order.
//! A key with a backlog gets one more than the last tag it was given, so
//! keys with backlogs take turns, one job each. A key with no backlog lines
//! up just before the head of the waiting jobs and goes next:
//!
//! - **SQLite.** The tag is the job's priority (apalis-sqlite fetches the
//!   highest first), below the push's own priority, which still dominates:
//!   `priority << 40 | (2^40 - 1 - tag)`. A key with nothing waiting (its
//!   last tag below the smallest tag still waiting) is tagged one below that
//!   head, whatever its history (ties would go to the older job, the head);
//!   the last tag of each key lives in `fair_tags`.
//! - **Redis.** apalis-redis serves one list first in, first out, so a fair
//!   job is parked instead, in the scheduled set at a far score no fetch
//!   reaches that also names its tag (`PARKED_AT + tag`), and moved at once
//!   into the queue's fair set, scored by its tag. [`feed`] moves the lowest
//!   tags into the ready list, but only into this process's free worker
//!   slots (its concurrency, plus what a fetch batch beyond one claims
//!   ahead, less the fair jobs it is running, less what the ready list
//!   already holds): a new key's job then waits for the next free
//!   slot, not behind jobs fed ahead of it. Worker processes feed on every
//!   poll tick, when a push is announced, and after each fair job; a pusher
//!   feeds only when it runs workers of the queue itself. A key with nothing
//!   waiting (its last tag below the fair set's lowest) is tagged one below
//!   that head; a key with a backlog one past its last. Whoever moves parked jobs (the pusher, or a feed after a pusher
//!   stopped between its two steps) gives each the tag its score names.
//!
//! Jobs that come due later (a `run_at`, a retry) join the ready list in due
//! order, as before: fairness is about backlogs, not schedules.

use apalis_redis::ConnectionManager;
use sqlx::SqlitePool;

use super::slots::FairSlot;
use super::target::{JobQueue, QueueBackend, QueueError};

/// Tags count below this; the push's own priority sits above it.
pub const FAIR_SPAN: u64 = 1 << 40;

/// The score parked fair jobs wait at in a Redis scheduled set
/// (2100-01-01): no fetch promotes them.
pub const PARKED_AT: u64 = 4_102_444_800;

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
    // The head's tag: every waiting job's tag is at least this.
    let head_tag = head.map(|priority| {
        let fair = u64::try_from(priority).unwrap_or(0) & mask;
        i64::try_from(mask - fair).unwrap_or(i64::MAX)
    });
    let virtual_time = match head_tag {
        Some(tag) => (tag - 1).max(0),
        None => {
            let clock: Option<i64> =
                sqlx::query_scalar("select tag from fair_tags where queue = ?1 and fairness = ''")
                    .bind(queue)
                    .fetch_optional(pool)
                    .await?;
            // Tags start at one, so the first key's backlog leaves room
            // below its head.
            clock.unwrap_or(1).max(0)
        }
    };
    let count = i64::try_from(count.max(1)).unwrap_or(1);
    // First tag: a key with nothing waiting (its last tag below the head's,
    // or nothing waits at all) lines up one below the head and goes next,
    // whatever it had before; a key with a backlog follows its last.
    let last: i64 = sqlx::query_scalar(
        "insert into fair_tags (queue, fairness, tag) values (?1, ?2, ?3 + ?4 - 1)
         on conflict (queue, fairness) do update set tag =
           (case when ?5 is null or tag < ?5 then ?3 else tag + 1 end) + ?4 - 1
         returning tag",
    )
    .bind(queue)
    .bind(fairness)
    .bind(virtual_time)
    .bind(count)
    .bind(head_tag)
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
/// A key with nothing waiting (its last tag below the fair set's lowest) is
/// tagged one below that head, whatever its history; otherwise one past the
/// larger of its last tag and the tag before the one last fed.
/// KEYS: the queue's last tags (hash), its virtual time, its fair set.
/// ARGV: key, count.
const REDIS_TAGS: &str = r"
local now = tonumber(redis.call('GET', KEYS[2]) or '0')
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local head = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
local first
if #head > 0 and last < tonumber(head[2]) then
  first = math.max(tonumber(head[2]) - 1, 0)
else
  first = math.max(now - 1, last) + 1
end
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
        .key(format!("{queue}:fair"))
        .arg(fairness)
        .arg(count.max(1))
        .invoke_async(&mut connection)
        .await?;
    Ok(first)
}

/// Moves up to 1,000 parked jobs into the fair set, each under the tag its
/// parked score names. A Lua fragment of [`REDIS_ENTER`] and [`REDIS_FEED`]:
/// KEYS[1] is the fair set, KEYS[5] the scheduled set, ARGV[2] `PARKED_AT`.
const REDIS_ENTER_PARKED: &str = r"
local parked = redis.call('ZRANGEBYSCORE', KEYS[5], ARGV[2], '+inf', 'WITHSCORES', 'LIMIT', 0, 1000)
local entered = 0
for i = 1, #parked, 2 do
  redis.call('ZREM', KEYS[5], parked[i])
  redis.call('ZADD', KEYS[1], tonumber(parked[i + 1]) - tonumber(ARGV[2]), parked[i])
  entered = entered + 1
end
";

/// The score a job tagged `tag` is parked at.
pub(super) fn parked_score(tag: u64) -> u64 {
    PARKED_AT.saturating_add(tag)
}

/// [`REDIS_ENTER_PARKED`] alone; returns how many entered. KEYS and ARGV as
/// [`REDIS_FEED`]'s (the lookahead unused).
fn redis_enter_script() -> String {
    format!("{REDIS_ENTER_PARKED}\nreturn entered\n")
}

/// Moves `queue`'s parked jobs into its fair set under their tags (after a
/// push); returns how many moved.
pub(super) async fn redis_enter(
    connection: &ConnectionManager,
    queue: &str,
) -> Result<u64, QueueError> {
    let mut connection = connection.clone();
    let script = redis::Script::new(&redis_enter_script());
    let mut entered = 0;
    loop {
        let count: u64 = fair_keys(&script, queue)
            .arg(0)
            .arg(PARKED_AT)
            .invoke_async(&mut connection)
            .await?;
        entered += count;
        if count < 1_000 {
            return Ok(entered);
        }
    }
}

/// A fair script's keys for `queue`, in the order the scripts name them.
fn fair_keys<'a>(script: &'a redis::Script, queue: &str) -> redis::ScriptInvocation<'a> {
    let mut invocation = script.prepare_invoke();
    invocation
        .key(format!("{queue}:fair"))
        .key(format!("{queue}:active"))
        .key(format!("{queue}:fair:clock"))
        .key(format!("{queue}:signal"))
        .key(format!("{queue}:scheduled"));
    invocation
}

/// Enters parked jobs a pusher left behind (it stopped between its two
/// steps, or has not reached the second yet), then tops the ready list up to
/// ARGV[1] from the lowest tags of the fair set. KEYS: fair set, ready list,
/// virtual time, signal list, scheduled set. ARGV: free slots, `PARKED_AT`.
const REDIS_FEED: &str = r"
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

/// Tops `queue`'s ready list up to `free_slots` jobs from its fair set, in
/// tag order, after entering any parked jobs; returns how many moved.
pub async fn feed(
    connection: &ConnectionManager,
    queue: &str,
    free_slots: usize,
) -> Result<u64, QueueError> {
    let mut connection = connection.clone();
    let script = redis::Script::new(&format!("{REDIS_ENTER_PARKED}\n{REDIS_FEED}"));
    Ok(fair_keys(&script, queue)
        .arg(free_slots)
        .arg(PARKED_AT)
        .invoke_async(&mut connection)
        .await?)
}

impl JobQueue {
    /// Declares that this process runs workers of `queue` holding at most
    /// `holding` jobs at once: on Redis it then feeds the queue's ready list
    /// into the free ones.
    pub fn set_worker_slots(&self, queue: &str, holding: usize) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry(queue.to_owned())
            .or_default()
            .set_holding(holding);
    }

    /// Counts a fair job of `queue` as running here until the slot is
    /// dropped; `None` when this process runs no workers of `queue`.
    pub fn start_fair_job(&self, queue: &str) -> Option<FairSlot> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        Some(slots.get(queue)?.start())
    }

    /// This process's free worker slots for `queue`; `None` when it runs no
    /// workers of it.
    pub fn free_slots(&self, queue: &str) -> Option<usize> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        Some(slots.get(queue)?.free())
    }

    /// Tops `queue`'s ready list up from its fair set into this process's
    /// free worker slots (Redis, in a process that runs workers of `queue`;
    /// nothing to do on SQLite, whose fetch takes tags in order); returns how
    /// many moved.
    pub async fn feed_fair(&self, queue: &str) -> Result<u64, QueueError> {
        match (&self.backend, self.free_slots(queue)) {
            (QueueBackend::Redis(connection), Some(free)) => feed(connection, queue, free).await,
            _ => Ok(0),
        }
    }

    /// After a fair job ran (its slot dropped): the freed slot takes the
    /// next tag at once. A failure is logged: the workers' poll tick feeds too.
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
