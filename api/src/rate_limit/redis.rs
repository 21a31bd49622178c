//! The shared limiter of the distributed profile: one Lua script evaluates and
//! commits every bucket of a request atomically in Redis, with Redis's own
//! clock, so all API replicas spend one budget.

use redis::Script;
use redis::aio::ConnectionManager;

use super::Bucket;
use super::gcra::Outcome;

/// GCRA over N buckets; KEYS are the buckets, ARGV their limits. Returns, per
/// bucket, allowed, new TAT, remaining, reset, retry-after and the time until
/// reset (microseconds).
const SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local window = 60000000
local all_allowed = true
local results = {}
for i, key in ipairs(KEYS) do
  local limit = math.max(tonumber(ARGV[i]), 1)
  local interval = math.max(math.floor(window / limit), 1)
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new_tat = tat + interval
  local allow_at = new_tat - window
  if allow_at > now then
    all_allowed = false
    results[#results + 1] = {0, tat, 0, tat, allow_at - now, tat - now}
  else
    results[#results + 1] = {1, new_tat, math.floor((now - allow_at) / interval), new_tat, 0, new_tat - now}
  end
end
if all_allowed then
  for i, key in ipairs(KEYS) do
    local new_tat = results[i][2]
    redis.call('SET', key, string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
  end
end
return results
";

/// Gives back one request to each bucket (KEYS, limits in ARGV), as
/// `gcra::refunded` does.
const REFUND_SCRIPT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
for i, key in ipairs(KEYS) do
  local tat = tonumber(redis.call('GET', key))
  if tat then
    local interval = math.max(math.floor(60000000 / math.max(tonumber(ARGV[i]), 1)), 1)
    local new_tat = tat - interval
    if new_tat > now then
      redis.call('SET', key, string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
    else
      redis.call('DEL', key)
    end
  end
end
return 0
";

/// Buckets kept in Redis.
#[derive(Clone)]
pub struct RedisLimiter {
    connection: ConnectionManager,
    script: Script,
    refund_script: Script,
    prefix: String,
}

impl std::fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl RedisLimiter {
    /// Connects to `url`; bucket keys start with `prefix`.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let connection = ConnectionManager::new(client).await?;
        Ok(Self {
            connection,
            script: Script::new(SCRIPT),
            refund_script: Script::new(REFUND_SCRIPT),
            prefix: prefix.to_owned(),
        })
    }

    /// Evaluates every bucket and, if all admit, commits them.
    pub async fn check(&self, buckets: &[Bucket]) -> Result<Vec<Outcome>, redis::RedisError> {
        let mut invocation = self.script.prepare_invoke();
        for bucket in buckets {
            invocation.key(format!("{}{}", self.prefix, bucket.key));
        }
        for bucket in buckets {
            invocation.arg(bucket.limit);
        }
        let mut connection = self.connection.clone();
        let rows: Vec<(i64, i64, i64, i64, i64, i64)> =
            invocation.invoke_async(&mut connection).await?;
        Ok(rows
            .into_iter()
            .map(
                |(allowed, new_tat, remaining, reset_at, retry_after, reset_in)| Outcome {
                    allowed: allowed == 1,
                    new_tat,
                    remaining: u32::try_from(remaining).unwrap_or(0),
                    reset_in,
                    reset_at,
                    retry_after,
                },
            )
            .collect())
    }

    /// Gives back one request to each bucket, atomically.
    pub async fn refund(&self, buckets: &[Bucket]) -> Result<(), redis::RedisError> {
        let mut invocation = self.refund_script.prepare_invoke();
        for bucket in buckets {
            invocation.key(format!("{}{}", self.prefix, bucket.key));
        }
        for bucket in buckets {
            invocation.arg(bucket.limit);
        }
        let mut connection = self.connection.clone();
        invocation
            .invoke_async::<i64>(&mut connection)
            .await
            .map(|_| ())
    }

    /// Each bucket's TAT and Redis's clock, read without spending.
    async fn tats(&self, buckets: &[Bucket]) -> Result<(i64, Vec<Option<i64>>), redis::RedisError> {
        let mut connection = self.connection.clone();
        let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut connection).await?;
        let now = seconds * 1_000_000 + micros;
        let keys: Vec<String> = buckets
            .iter()
            .map(|bucket| format!("{}{}", self.prefix, bucket.key))
            .collect();
        let tats: Vec<Option<i64>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut connection)
            .await?;
        Ok((now, tats))
    }

    /// Each bucket evaluated now as `check` would, committing nothing.
    pub async fn peek(&self, buckets: &[Bucket]) -> Result<Vec<Outcome>, redis::RedisError> {
        if buckets.is_empty() {
            return Ok(Vec::new());
        }
        let (now, tats) = self.tats(buckets).await?;
        Ok(buckets
            .iter()
            .zip(tats)
            .map(|(bucket, tat)| super::gcra::evaluate(tat, now, bucket.limit))
            .collect())
    }

    /// What each bucket would admit now, spending nothing (Redis's clock).
    pub async fn headroom(&self, buckets: &[Bucket]) -> Result<Vec<u32>, redis::RedisError> {
        Ok(self
            .peek(buckets)
            .await?
            .iter()
            .map(super::gcra::admits)
            .collect())
    }
}
