//! Promoting due jobs of a Redis queue: scheduled retries and `run_at`
//! jobs move to the ready list in bounded chunks.

use apalis_redis::ConnectionManager;

use super::target::QueueError;

/// Jobs moved from a Redis queue's scheduled set to its active list per call.
pub(super) const PROMOTE_CHUNK: usize = 1_000;

/// Moves up to ARGV[2] due jobs from the scheduled set to the active list and
/// signals the workers. KEYS: scheduled set, active list, signal list. ARGV:
/// now (Unix seconds), most to move.
const REDIS_PROMOTE: &str = r"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
redis.call('RPUSH', KEYS[2], unpack(due))
redis.call('ZREM', KEYS[1], unpack(due))
redis.call('DEL', KEYS[3])
redis.call('LPUSH', KEYS[3], 1)
return #due
";

/// Moves every due job of a Redis queue from its scheduled set to its active
/// list, a chunk at a time; returns how many moved.
///
/// apalis-redis 1.0 pushes every job into the scheduled set (due at once when
/// it has no `run_at`) and lets each fetch promote all due jobs in one Lua
/// call, whose `unpack` fails beyond about 8,000 ids: a backlog that large
/// would stop the queue for good. The push side promotes after each chunk it
/// pushes and the workers promote on every poll, so fetches only ever see a
/// short due list.
pub async fn promote_due(connection: &ConnectionManager, queue: &str) -> Result<u64, QueueError> {
    let mut connection = connection.clone();
    let script = redis::Script::new(REDIS_PROMOTE);
    let mut moved = 0;
    loop {
        let now = chrono::Utc::now().timestamp();
        let count: u64 = script
            .key(format!("{queue}:scheduled"))
            .key(format!("{queue}:active"))
            .key(format!("{queue}:signal"))
            .arg(now)
            .arg(PROMOTE_CHUNK)
            .invoke_async(&mut connection)
            .await?;
        moved += count;
        if count < PROMOTE_CHUNK as u64 {
            return Ok(moved);
        }
    }
}
