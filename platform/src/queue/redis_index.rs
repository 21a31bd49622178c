//! The Redis queue's own indexes of its jobs, for the ops console.
//!
//! apalis-redis keeps a queue's finished jobs in unordered sets (`:done`,
//! `:dead`) and every payload in one hash (`:data`), so a list of done jobs
//! in any order, or of one agency's, would read every job of the state. Two
//! sorted sets of job ids (all scores 0, so they are ordered by the id, a
//! ULID: the order jobs were pushed) sit beside them:
//!
//! - `{queue}:order`, every job the queue holds;
//! - `{queue}:agency:{agency_id}`, the jobs whose payload names that agency
//!   (its `agency_id`, as the SQLite queue's agency index reads it).
//!
//! A push indexes the jobs it created (a dedupe-dropped push created none)
//! right after apalis-redis's push script; the purge and a discard remove a
//! job from both with its data. A job pushed by a process that died between
//! the two calls is indexed again by the next purge, which visits every
//! finished job, and a queue that held jobs before the indexes existed is
//! indexed once when a process connects.

use apalis_redis::ConnectionManager;

use crate::kinds::QUEUES;

/// The sorted set of every job of `queue`, in push order.
pub fn order_key(queue: &str) -> String {
    format!("{queue}:order")
}

/// The sorted set of the jobs of `queue` that work for `agency`.
pub fn agency_key(queue: &str, agency: &str) -> String {
    format!("{queue}:agency:{agency}")
}

/// The prefix of a queue's agency sets (the agency id follows a colon).
pub(crate) fn agency_prefix(queue: &str) -> String {
    format!("{queue}:agency")
}

/// Indexes the jobs named in ARGV[2..] that the data hash holds and the order
/// set does not yet: the order set, and the agency's set when the payload
/// names one. KEYS: the data hash, the order set. ARGV: the agency prefix,
/// then ids. Returns how many were newly indexed.
pub(crate) const REDIS_INDEX: &str = r"
local indexed = 0
for i = 2, #ARGV do
    local id = ARGV[i]
    if not redis.call('ZSCORE', KEYS[2], id) then
        local data = redis.call('HGET', KEYS[1], id)
        if data then
            redis.call('ZADD', KEYS[2], 0, id)
            local ok, job = pcall(cjson.decode, data)
            if ok and type(job) == 'table' and type(job.agency_id) == 'string' then
                redis.call('ZADD', ARGV[1] .. ':' .. job.agency_id, 0, id)
            end
            indexed = indexed + 1
        end
    end
end
return indexed
";

/// Ids indexed by one call of [`REDIS_INDEX`].
const INDEX_CHUNK: usize = 500;

/// Indexes `ids` of `queue` (those the queue holds and the index lacks);
/// returns how many were newly indexed.
pub async fn index_jobs(
    connection: &ConnectionManager,
    queue: &str,
    ids: &[String],
) -> Result<u64, redis::RedisError> {
    let mut connection = connection.clone();
    let script = redis::Script::new(REDIS_INDEX);
    let mut indexed = 0;
    for chunk in ids.chunks(INDEX_CHUNK) {
        let mut invocation = script.prepare_invoke();
        invocation
            .key(format!("{queue}:data"))
            .key(order_key(queue))
            .arg(agency_prefix(queue));
        for id in chunk {
            invocation.arg(id);
        }
        let count: u64 = invocation.invoke_async(&mut connection).await?;
        indexed += count;
    }
    Ok(indexed)
}

/// Marks that a queue's every job has been indexed once.
fn built_key(queue: &str) -> String {
    format!("{queue}:order:built")
}

/// Indexes, once per Redis, the jobs every queue held before its indexes
/// existed: walks each queue's data hash a chunk at a time. Processes that
/// start together may both walk it; indexing is idempotent. Returns how many
/// jobs were indexed.
pub async fn build_once(connection: &ConnectionManager) -> Result<u64, redis::RedisError> {
    let mut redis = connection.clone();
    let mut indexed = 0;
    for queue in QUEUES {
        let built: bool = redis::cmd("EXISTS")
            .arg(built_key(queue))
            .query_async(&mut redis)
            .await?;
        if built {
            continue;
        }
        let mut cursor = 0_u64;
        loop {
            // HSCAN answers field and value pairs; only the fields are kept.
            let (next, pairs): (u64, Vec<Vec<u8>>) = redis::cmd("HSCAN")
                .arg(format!("{queue}:data"))
                .arg(cursor)
                .arg("COUNT")
                .arg(INDEX_CHUNK)
                .query_async(&mut redis)
                .await?;
            let ids: Vec<String> = pairs
                .chunks(2)
                .filter_map(|pair| String::from_utf8(pair[0].clone()).ok())
                .collect();
            indexed += index_jobs(connection, queue, &ids).await?;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        redis::cmd("SET")
            .arg(built_key(queue))
            .arg(1)
            .query_async::<()>(&mut redis)
            .await?;
    }
    Ok(indexed)
}
