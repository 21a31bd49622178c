//! The purge of finished jobs: done and dead jobs past their retention go,
//! with their dedupe keys.

use super::queue_admin::{DEAD, QueueAdmin};
use crate::kinds::QUEUES;
use crate::queue::redis_dead::{self, FORGET_DEAD_LUA};
use crate::queue::{QueueBackend, QueueError, redis_index};

impl QueueAdmin {
    /// Forgets finished jobs: done ones that finished before `done_before`,
    /// dead ones before `dead_before` (Unix seconds). Their idempotency keys
    /// go with them. Returns how many were removed.
    pub async fn purge_finished(
        &self,
        done_before: i64,
        dead_before: i64,
    ) -> Result<u64, QueueError> {
        let mut purged = 0;
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => loop {
                // In batches, so the queue's writers never wait long.
                let deleted = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "delete from Jobs where rowid in (
                         select rowid from Jobs
                         where (status = 'Done' and done_at < $1) or ({DEAD} and done_at < $2)
                         limit {PURGE_BATCH})"
                )))
                .bind(done_before)
                .bind(dead_before)
                .execute(pool)
                .await?
                .rows_affected();
                purged += deleted;
                if deleted < PURGE_BATCH {
                    break;
                }
            },
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                for queue in QUEUES {
                    for (set, before) in [("done", done_before), ("dead", dead_before)] {
                        let key = format!("{queue}:{set}");
                        let mut cursor = 0u64;
                        loop {
                            let (next, ids): (u64, Vec<String>) = redis::cmd("SSCAN")
                                .arg(&key)
                                .arg(cursor)
                                .arg("COUNT")
                                .arg(PURGE_BATCH)
                                .query_async(&mut connection)
                                .await?;
                            if !ids.is_empty() {
                                purged +=
                                    redis_forget(&mut connection, queue, set, before, &ids).await?;
                                // The jobs kept, indexed again should a
                                // push have died before indexing them.
                                redis_index::index_jobs(&connection, queue, &ids).await?;
                            }
                            if next == 0 {
                                break;
                            }
                            cursor = next;
                        }
                    }
                    // The dead index compared whole with the dead set, should
                    // something but our scripts have taken a job out of it.
                    redis_dead::catch_up(&connection, queue, true).await?;
                }
            }
        }
        Ok(purged)
    }
}

/// Jobs one purge statement or script removes at most.
const PURGE_BATCH: u64 = 500;

/// Forgets finished jobs of one set that finished before a cutoff, atomically
/// per batch: set membership, meta hash, payload, idempotency claim and the
/// console's index entries ([`crate::queue::redis_index`],
/// [`crate::queue::redis_dead`]).
/// KEYS: the set, the payload hash, the order set, the names set, the dead
/// order set, the dead recent set. ARGV: meta
/// prefix, idempotency prefix, cutoff, agency set prefix, then job ids.
const REDIS_FORGET_BODY: &str = r"
local forgotten = 0
local cutoff = tonumber(ARGV[3])
for i = 5, #ARGV do
    local id = ARGV[i]
    local meta = ARGV[1] .. ':' .. id
    local done_at = tonumber(redis.call('HGET', meta, 'done_at') or '')
    if done_at and done_at < cutoff and redis.call('SREM', KEYS[1], id) == 1 then
        local key = redis.call('HGET', meta, 'idempotency_key')
        if key and #key > 0 then
            local claim = ARGV[2] .. ':' .. key
            if redis.call('GET', claim) == id then redis.call('DEL', claim) end
        end
        forget_indexed(id, redis.call('HGET', KEYS[2], id), KEYS[3], KEYS[4], ARGV[4])
        forget_dead(id, KEYS[5], KEYS[6])
        redis.call('DEL', meta)
        redis.call('HDEL', KEYS[2], id)
        forgotten = forgotten + 1
    end
end
return forgotten
";

/// The script of [`REDIS_FORGET_BODY`].
static REDIS_FORGET: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(&format!(
        "{FORGET_DEAD_LUA}{}",
        redis_index::with_forget(REDIS_FORGET_BODY)
    ))
});

pub(super) async fn redis_forget(
    connection: &mut redis::aio::ConnectionManager,
    queue: &str,
    set: &str,
    before: i64,
    ids: &[String],
) -> Result<u64, QueueError> {
    let mut invocation = REDIS_FORGET.prepare_invoke();
    invocation
        .key(format!("{queue}:{set}"))
        .key(format!("{queue}:data"))
        .key(redis_index::order_key(queue))
        .key(redis_index::names_key(queue))
        .key(redis_dead::dead_order_key(queue))
        .key(redis_dead::dead_recent_key(queue))
        .arg(format!("{queue}:meta"))
        .arg(format!("{queue}:idempotency"))
        .arg(before)
        .arg(redis_index::agency_prefix(queue));
    for id in ids {
        invocation.arg(id);
    }
    Ok(invocation.invoke_async(connection).await?)
}
