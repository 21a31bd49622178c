//! How many jobs of each queue are in each state.

use std::collections::BTreeMap;

use redis::AsyncCommands;
use serde::Serialize;

use super::queue_admin::QueueAdmin;
use crate::kinds::QUEUES;
use crate::queue::{PARKED_AT, QueueBackend, QueueError};

/// How many jobs of a queue are in each state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    /// Queue name.
    pub queue: String,
    /// Ready to run.
    pub pending: u64,
    /// Waiting for their `run_at`.
    pub scheduled: u64,
    /// Failed, waiting for their next attempt.
    pub retrying: u64,
    /// Taken by a worker.
    pub running: u64,
    /// Finished.
    pub done: u64,
    /// Out of attempts (or aborted): only an operator brings them back.
    pub dead: u64,
}

/// Jobs in the hands of a queue's workers: the sizes of the in-flight sets
/// of the workers registered in its workers set. apalis names a worker's
/// in-flight set after it and removes a worker from the set only when it
/// hands its jobs back, so this reads one set per registered worker, never
/// the keyspace (`KEYS` would block Redis in proportion to every key it
/// holds, on every scrape).
const REDIS_RUNNING: &str = r"
local running = 0
for _, worker in ipairs(redis.call('zrange', KEYS[1], 0, -1)) do
    running = running + redis.call('scard', ARGV[1] .. ':' .. worker)
end
return running
";

/// Jobs of a queue's scheduled set (not parked) that failed and wait for a
/// retry. KEYS: the scheduled set. ARGV: `PARKED_AT`, the meta key prefix.
const REDIS_RETRYING: &str = r"
local retrying = 0
for _, id in ipairs(redis.call('zrangebyscore', KEYS[1], '-inf', '(' .. ARGV[1])) do
    if redis.call('hget', ARGV[2] .. id, 'status') == 'Failed' then
        retrying = retrying + 1
    end
end
return retrying
";

/// The depth of `queue` in `depths`, added if missing.
fn depth_of(depths: &mut BTreeMap<String, QueueDepth>, queue: String) -> &mut QueueDepth {
    depths.entry(queue.clone()).or_insert_with(|| QueueDepth {
        queue,
        ..QueueDepth::default()
    })
}

impl QueueAdmin {
    /// Depth of every queue by state.
    pub async fn depths(&self) -> Result<Vec<QueueDepth>, QueueError> {
        match self.queue.backend() {
            QueueBackend::Sqlite(pool) => {
                let now = chrono::Utc::now().timestamp();
                let (counts, scheduled) = crate::queue::state_counts::read(pool, now).await?;
                let mut depths: BTreeMap<String, QueueDepth> = QUEUES
                    .iter()
                    .map(|q| {
                        (
                            (*q).to_owned(),
                            QueueDepth {
                                queue: (*q).to_owned(),
                                ..QueueDepth::default()
                            },
                        )
                    })
                    .collect();
                for (queue, state, count) in counts {
                    let depth = depth_of(&mut depths, queue);
                    let count = u64::try_from(count).unwrap_or(0);
                    match state.as_str() {
                        "dead" => depth.dead += count,
                        "Done" => depth.done += count,
                        "Queued" | "Running" => depth.running += count,
                        "Failed" => depth.retrying += count,
                        _ => depth.pending += count,
                    }
                }
                // Of the pending, those due later are scheduled.
                for (queue, count) in scheduled {
                    let depth = depth_of(&mut depths, queue);
                    let count = u64::try_from(count).unwrap_or(0).min(depth.pending);
                    depth.pending -= count;
                    depth.scheduled += count;
                }
                Ok(depths.into_values().collect())
            }
            QueueBackend::Redis(connection) => {
                let mut connection = connection.clone();
                let mut depths = Vec::new();
                for queue in QUEUES {
                    // A fair queue's waiting jobs are in its ready list, its
                    // fair set, and (for a moment after a push) parked in its
                    // scheduled set (`crate::queue` fair shares).
                    let ready: u64 = connection.llen(format!("{queue}:active")).await?;
                    let fair: u64 = connection.zcard(format!("{queue}:fair")).await?;
                    let parked: u64 = connection
                        .zcount(format!("{queue}:scheduled"), PARKED_AT, "+inf")
                        .await?;
                    let pending = ready + fair + parked;
                    let retrying: u64 = redis::Script::new(REDIS_RETRYING)
                        .key(format!("{queue}:scheduled"))
                        .arg(PARKED_AT)
                        .arg(format!("{queue}:meta:"))
                        .invoke_async(&mut connection)
                        .await?;
                    let scheduled = connection
                        .zcard::<_, u64>(format!("{queue}:scheduled"))
                        .await?
                        .saturating_sub(parked)
                        .saturating_sub(retrying);
                    let done: u64 = connection.scard(format!("{queue}:done")).await?;
                    let dead: u64 = connection.scard(format!("{queue}:dead")).await?;
                    let running: u64 = redis::Script::new(REDIS_RUNNING)
                        .key(format!("{queue}:workers"))
                        .arg(format!("{queue}:inflight"))
                        .invoke_async(&mut connection)
                        .await?;
                    depths.push(QueueDepth {
                        queue: queue.to_owned(),
                        pending,
                        scheduled,
                        retrying,
                        running,
                        done,
                        dead,
                    });
                }
                Ok(depths)
            }
        }
    }
}
