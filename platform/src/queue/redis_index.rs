//! The Redis queue's own indexes of its jobs, for the ops console.
//!
//! apalis-redis keeps a queue's finished jobs in unordered sets (`:done`,
//! `:dead`) and every payload in one hash (`:data`), so a list of done jobs
//! in any order, or of one agency's, would read every job of the state. Three
//! sorted sets of job ids (all scores 0, so they are ordered by member: a
//! job id is a ULID, so the order jobs were pushed) sit beside them:
//!
//! - `{queue}:order`, every job the queue holds;
//! - `{queue}:agency:{agency_id}`, the jobs whose payload names that agency
//!   (its `agency_id`, as the SQLite queue's agency index reads it);
//! - `{queue}:names`, one member `"{name} {job_id}"` for each id a job's
//!   payload names as a value anywhere but its `agency_id` (a string shaped
//!   as our ids are, [`as_name`], in lower case), so the jobs naming an id
//!   are one range of it, in push order: the console's search by an id,
//!   and by a listing number (whose media, events and deliveries the jobs
//!   name), reads that range where a search of free text reads every job.
//!
//! A push indexes the jobs it created (a dedupe-dropped push created none)
//! right after apalis-redis's push script; the purge and a discard remove a
//! job from all three with its data ([`FORGET_LUA`]). A job pushed by a
//! process that died between the two calls is indexed again by the next
//! purge, which visits every finished job, and a queue that held jobs before
//! the indexes existed (or before the names were indexed) is indexed once
//! when a process connects.

use apalis_redis::ConnectionManager;

pub use super::job_names::as_name;

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

/// The sorted set of `"{name} {job_id}"` of `queue`: the ids its jobs name.
pub fn names_key(queue: &str) -> String {
    format!("{queue}:names")
}

/// `names_of(job)`: the names ([`as_name`]) a decoded payload holds as
/// values, at any depth up to four, except its top-level `agency_id` (the
/// agency sets index that), each once; the Lua of
/// [`super::job_names::names_of`].
const NAMES_OF_LUA: &str = r"
local function name_of(value)
    if #value < 26 or #value > 39 then return nil end
    local name = string.lower(value)
    local ulid = name
    local cut = string.find(name, '_', 1, true)
    if cut then
        if cut < 2 or cut > 13 or not string.match(string.sub(name, 1, cut - 1), '^%l+$') then
            return nil
        end
        ulid = string.sub(name, cut + 1)
    end
    if #ulid == 26 and string.match(ulid, '^[%l%d]+$') and string.find(ulid, '%d') then
        return name
    end
    return nil
end
local function names_of(job)
    local names, seen = {}, {}
    local function visit(value, depth, key)
        if type(value) == 'string' then
            local name = key ~= 'agency_id' and name_of(value)
            if name and not seen[name] then
                seen[name] = true
                names[#names + 1] = name
            end
        elseif type(value) == 'table' and depth < 4 then
            for k, v in pairs(value) do
                visit(v, depth + 1, depth == 0 and k or nil)
            end
        end
    end
    visit(job, 0, nil)
    return names
end
";

/// Indexes the jobs named in ARGV[3..] that the data hash holds and the
/// order set does not yet (every one held when ARGV[2] is `1`): the order
/// set, the agency's set when the payload names one, and the names it
/// holds. KEYS: the data hash, the order set, the names set. ARGV: the
/// agency prefix, whether to index jobs already in the order set, then ids.
/// Returns how many were newly in the order set.
const REDIS_INDEX_BODY: &str = r"
local indexed = 0
local again = ARGV[2] == '1'
for i = 3, #ARGV do
    local id = ARGV[i]
    local known = redis.call('ZSCORE', KEYS[2], id)
    if again or not known then
        local data = redis.call('HGET', KEYS[1], id)
        if data then
            redis.call('ZADD', KEYS[2], 0, id)
            local ok, job = pcall(cjson.decode, data)
            if ok and type(job) == 'table' then
                if type(job.agency_id) == 'string' then
                    redis.call('ZADD', ARGV[1] .. ':' .. job.agency_id, 0, id)
                end
                for _, name in ipairs(names_of(job)) do
                    redis.call('ZADD', KEYS[3], 0, name .. ' ' .. id)
                end
            end
            if not known then indexed = indexed + 1 end
        end
    end
end
return indexed
";

/// The script of [`REDIS_INDEX_BODY`].
static REDIS_INDEX: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(&format!("{NAMES_OF_LUA}{REDIS_INDEX_BODY}")));

/// Lua that removes the job `id` whose payload is `data` (or nil) from the
/// indexes of its queue: `order`, the names set `names` and the agency sets
/// under `agency_prefix`. A script that forgets jobs defines it with
/// [`NAMES_OF_LUA`] ahead of its own body (see [`with_forget`]).
const FORGET_LUA: &str = r"
local function forget_indexed(id, data, order, names, agency_prefix)
    if data then
        local ok, job = pcall(cjson.decode, data)
        if ok and type(job) == 'table' then
            if type(job.agency_id) == 'string' then
                redis.call('ZREM', agency_prefix .. ':' .. job.agency_id, id)
            end
            for _, name in ipairs(names_of(job)) do
                redis.call('ZREM', names, name .. ' ' .. id)
            end
        end
    end
    redis.call('ZREM', order, id)
end
";

/// `body`, a script that calls `forget_indexed(id, data, order, names,
/// agency_prefix)`, with that function defined ahead of it.
pub(crate) fn with_forget(body: &str) -> String {
    format!("{NAMES_OF_LUA}{FORGET_LUA}{body}")
}

/// Ids indexed by one call of [`REDIS_INDEX`].
const INDEX_CHUNK: usize = 500;

/// Indexes `ids` of `queue` (those the queue holds and the index lacks, or
/// every one it holds when `again`); returns how many were newly indexed.
async fn index_chunks(
    connection: &ConnectionManager,
    queue: &str,
    ids: &[String],
    again: bool,
) -> Result<u64, redis::RedisError> {
    let mut connection = connection.clone();
    let mut indexed = 0;
    for chunk in ids.chunks(INDEX_CHUNK) {
        let mut invocation = REDIS_INDEX.prepare_invoke();
        invocation
            .key(format!("{queue}:data"))
            .key(order_key(queue))
            .key(names_key(queue))
            .arg(agency_prefix(queue))
            .arg(if again { "1" } else { "0" });
        for id in chunk {
            invocation.arg(id);
        }
        let count: u64 = invocation.invoke_async(&mut connection).await?;
        indexed += count;
    }
    Ok(indexed)
}

/// Indexes `ids` of `queue` (those the queue holds and the index lacks);
/// returns how many were newly indexed.
pub async fn index_jobs(
    connection: &ConnectionManager,
    queue: &str,
    ids: &[String],
) -> Result<u64, redis::RedisError> {
    index_chunks(connection, queue, ids, false).await
}

/// Marks that a queue's every job has been indexed once, names included
/// (`{queue}:order:built` marked a queue indexed before the names were).
fn built_key(queue: &str) -> String {
    format!("{queue}:index:built")
}

/// Indexes, once per Redis, the jobs every queue held before its indexes
/// (or its names) existed: walks each queue's data hash a chunk at a time,
/// indexing every job again (adding a member is idempotent). Processes that
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
            indexed += index_chunks(connection, queue, &ids, true).await?;
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
