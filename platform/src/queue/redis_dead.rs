//! The Redis queue's index of its dead jobs, for the console, the ops API's
//! recent dead and `/metrics`.
//!
//! apalis-redis keeps a queue's dead jobs in an unordered set (`:dead`), so
//! a page of them, the most recent, or the oldest read the month of dead
//! jobs whole. Two sorted sets of the same ids sit beside it:
//!
//! - `{queue}:dead:order`, scores all 0, so ordered by id: the order jobs
//!   were pushed, the console's order, and the oldest first;
//! - `{queue}:dead:recent`, scored by the time the job died (its meta's
//!   `done_at`, Unix seconds), for the most recent dead.
//!
//! Jobs die inside apalis-redis's acknowledgement script (and in the
//! console's cancel), which know nothing of these sets, so the index is
//! caught up when it is read: [`CATCH_UP_LUA`] compares the dead set's size
//! with the index's, an O(1) check that finds nothing to do unless a job
//! died or left meanwhile, and then adds the difference (`ZDIFF`, inside
//! Redis: no id crosses the network). Every way a dead job leaves (a retry,
//! a discard, the purge) takes it out of both sets in the same script, so
//! equal sizes mean equal sets; the purge compares them whole as well, in
//! case something else took a job out of the dead set.

use apalis_redis::ConnectionManager;

/// The sorted set of the dead jobs of `queue`, in id order.
pub fn dead_order_key(queue: &str) -> String {
    format!("{queue}:dead:order")
}

/// The sorted set of the dead jobs of `queue`, scored by when they died.
pub fn dead_recent_key(queue: &str) -> String {
    format!("{queue}:dead:recent")
}

/// Brings the index up to the dead set. KEYS: the dead set, the order set,
/// the recent set. ARGV: the meta hashes' prefix, then `whole` to compare
/// the sets even when their sizes agree. Returns how many jobs it added.
const CATCH_UP_LUA: &str = r"
local dead, order, recent = KEYS[1], KEYS[2], KEYS[3]
if ARGV[2] ~= 'whole' and redis.call('SCARD', dead) == redis.call('ZCARD', order) then
    return 0
end
local added = 0
for _, id in ipairs(redis.call('ZDIFF', 2, dead, order)) do
    local died = tonumber(redis.call('HGET', ARGV[1] .. ':' .. id, 'done_at') or '') or 0
    redis.call('ZADD', order, 0, id)
    redis.call('ZADD', recent, died, id)
    added = added + 1
end
for _, id in ipairs(redis.call('ZDIFF', 2, order, dead)) do
    redis.call('ZREM', order, id)
    redis.call('ZREM', recent, id)
end
return added
";

/// The script of [`CATCH_UP_LUA`].
static CATCH_UP: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(CATCH_UP_LUA));

/// Lua that takes the job `id` out of the dead index of a queue whose order
/// and recent sets are `order` and `recent`; for the scripts a dead job
/// leaves by.
pub(crate) const FORGET_DEAD_LUA: &str = r"
local function forget_dead(id, order, recent)
    redis.call('ZREM', order, id)
    redis.call('ZREM', recent, id)
end
";

/// Brings the dead index of `queue` up to its dead set: at once when their
/// sizes agree, unless `whole`. Returns how many jobs it added.
pub async fn catch_up(
    connection: &ConnectionManager,
    queue: &str,
    whole: bool,
) -> Result<u64, redis::RedisError> {
    let mut connection = connection.clone();
    CATCH_UP
        .key(format!("{queue}:dead"))
        .key(dead_order_key(queue))
        .key(dead_recent_key(queue))
        .arg(format!("{queue}:meta"))
        .arg(if whole { "whole" } else { "sizes" })
        .invoke_async(&mut connection)
        .await
}
