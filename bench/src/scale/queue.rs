//! The queue beside a seeded database: finished jobs pushed through the
//! queue as the platform pushes them, then marked done or dead.

use std::time::Instant;

use serde_json::json;
use storage::volume::Seeded;

/// Agencies the queue's jobs are spread over beside the large one (which
/// has half of them).
const QUEUE_AGENCIES: u64 = 100;

/// Fills the queue with `count` finished jobs: probes pushed through the
/// queue in batches, as the platform pushes, then marked done as a worker's
/// acknowledgement marks them (one in a hundred dead, with an error). Half name the large agency; the rest are spread over a hundred
/// others, and one agency has exactly 25 at every size. Returns a probe's
/// operation id (which one job names) and the 25-job agency.
pub(super) async fn seed_queue(
    platform: &platform::Platform,
    seeded: &Seeded,
    count: u64,
) -> anyhow::Result<(String, String)> {
    use storage::ids::{AgencyId, OperationId};
    let others: Vec<AgencyId> = (0..QUEUE_AGENCIES).map(|_| AgencyId::generate()).collect();
    let few = AgencyId::generate();
    let mut one_operation = String::new();
    let mut pushed = 0;
    while pushed < count {
        let batch: Vec<(platform::kinds::Probe, platform::PushOptions)> = (pushed
            ..(pushed + 1_000).min(count))
            .map(|i| {
                let agency_id = if i < 25 {
                    few.clone()
                } else if i % 2 == 0 {
                    seeded.agency_id.clone()
                } else {
                    others[(i % QUEUE_AGENCIES) as usize].clone()
                };
                let probe = platform::kinds::Probe {
                    operation_id: OperationId::generate(),
                    agency_id,
                    is_sandbox: false,
                    steps: 1,
                    step_ms: 1,
                    fail: i % 100 == 42,
                };
                (probe, platform::PushOptions::default())
            })
            .collect();
        if pushed == 0 {
            one_operation = batch[30.min(batch.len() - 1)].0.operation_id.to_string();
        }
        pushed += batch.len() as u64;
        let failing: Vec<bool> = batch.iter().map(|(probe, _)| probe.fail).collect();
        let ids = platform.queue.push_many(batch).await?;
        if let platform::queue::QueueBackend::Redis(connection) = platform.queue.backend() {
            redis_finish(connection, &ids, &failing).await?;
        }
    }
    let platform::queue::QueueBackend::Sqlite(pool) = platform.queue.backend() else {
        return Ok((one_operation, few.to_string()));
    };
    // Done, as an acknowledgement leaves a job; dead, as a last failed
    // attempt does. In batches, as workers acknowledge.
    loop {
        let marked = sqlx::query(
            "update Jobs set attempts = 1, done_at = run_at,
                 status = case when instr(cast(job as text), '\"fail\":true') > 0 then 'Failed' else 'Done' end,
                 max_attempts = case when instr(cast(job as text), '\"fail\":true') > 0 then 1 else max_attempts end,
                 last_result = case when instr(cast(job as text), '\"fail\":true') > 0
                     then '{\"Err\":\"the probe failed on purpose\"}' else '{\"Ok\":null}' end
             where rowid in (select rowid from Jobs where status = 'Pending' limit 10000)",
        )
        .execute(pool)
        .await?
        .rows_affected();
        if marked == 0 {
            break;
        }
    }
    // What the maintenance schedule's text index task does behind the
    // pushes, all at once.
    let started = Instant::now();
    let indexed = platform::admin::QueueAdmin::new(platform.queue.clone())
        .index_job_text()
        .await?;
    println!(
        "{}",
        json!({"queue_jobs_indexed": indexed, "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0})
    );
    Ok((one_operation, few.to_string()))
}

/// Takes pushed probes out of the Redis queue's waiting places and leaves
/// them finished, as apalis-redis's acknowledgement leaves them: done, or
/// dead with an error. KEYS: active list, fair set, scheduled set, done set,
/// dead set. ARGV: meta prefix, done_at, then pairs of id and 1 for dead.
const REDIS_FINISH: &str = r#"
for i = 3, #ARGV, 2 do
    local id = ARGV[i]
    redis.call('LREM', KEYS[1], 0, id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    local meta = ARGV[1] .. ':' .. id
    if ARGV[i + 1] == '1' then
        redis.call('SADD', KEYS[5], id)
        redis.call('HSET', meta, 'status', 'Killed', 'attempts', 1, 'done_at', ARGV[2],
            'result', '{"Err":"the probe failed on purpose"}')
    else
        redis.call('SADD', KEYS[4], id)
        redis.call('HSET', meta, 'status', 'Done', 'attempts', 1, 'done_at', ARGV[2],
            'result', '{"Ok":null}')
    end
end
return (#ARGV - 2) / 2
"#;

/// Leaves the probes `ids` finished on Redis (`REDIS_FINISH`).
async fn redis_finish(
    connection: &apalis_redis::ConnectionManager,
    ids: &[String],
    failing: &[bool],
) -> anyhow::Result<()> {
    use platform::Job;
    let queue = platform::kinds::Probe::KIND;
    let mut connection = connection.clone();
    let script = redis::Script::new(REDIS_FINISH);
    let mut invocation = script.prepare_invoke();
    invocation
        .key(format!("{queue}:active"))
        .key(format!("{queue}:fair"))
        .key(format!("{queue}:scheduled"))
        .key(format!("{queue}:done"))
        .key(format!("{queue}:dead"))
        .arg(format!("{queue}:meta"))
        .arg(chrono::Utc::now().timestamp());
    for (id, fail) in ids.iter().zip(failing) {
        invocation.arg(id).arg(if *fail { "1" } else { "0" });
    }
    invocation.invoke_async::<()>(&mut connection).await?;
    Ok(())
}
