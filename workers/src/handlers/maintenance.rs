//! Scheduled maintenance. Every worker process runs the schedules; apalis-cron
//! fires each tick in every one of them, so a tick is first claimed in the
//! database (one claim per task and tick) and only the claimant runs it. Each
//! task is idempotent besides.

use std::str::FromStr;
use std::time::Instant;

use apalis::prelude::{Data, WorkerContext};
use apalis_cron::Tick;
use platform::admin::QueueAdmin;
use platform::dispatch::dispatch_jobs;
use platform::kinds::{DeliverWebhook, ProcessMedia, RenderOutputs, RenderScope, SendNotification};
use platform::{Platform, PushOptions};
use storage::Timestamp;
use storage::retention::PurgeBatch;

use super::{JobError, WorkerState, observe};

/// A maintenance task and when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maintenance {
    /// Deactivate keys whose rotation overlap ended.
    ExpireRotatedKeys,
    /// Delete idempotency records older than 24 hours.
    PurgeIdempotency,
    /// Re-dispatch outbox events the fast path missed.
    SweepOutbox,
    /// Forget old tick claims.
    PurgeTickClaims,
    /// Forget finished jobs: done ones after a week, dead ones after a month.
    PurgeFinishedJobs,
    /// Push webhook delivery attempts that are overdue (their push was lost).
    SweepDeliveries,
    /// Delete finished webhook deliveries and their attempts after 30 days.
    PurgeDeliveries,
    /// Delete sessions a week after they ended or expired.
    PurgeSessions,
    /// Push media items still queued a while after their upload (their push was lost).
    SweepMedia,
    /// Push the first batch of delivery profile sweeps that never finished
    /// (their push was lost; one still held by the queue is not pushed twice).
    SweepProfiles,
    /// Delete the history of progress states after a week (the latest state stays).
    PurgeProgressHistory,
    /// E-mail the owners of agencies calling a deprecated route before its removal.
    RemovalNotices,
    /// Roll finished job runs up into the console's per-minute and per-hour
    /// history, and forget runs and worker processes past keeping.
    RollUpJobHistory,
    /// Index the text of the jobs pushed since the last run, for the
    /// console's searches of done jobs (embedded queue).
    IndexJobText,
    /// End resumable uploads abandoned past their expiry and delete their
    /// bytes; forget ended uploads past their keeping.
    ExpireUploads,
}

/// A delivery attempt this far past due is pushed again by the sweep.
pub const DELIVERY_OVERDUE_SECONDS: i64 = 60;
/// How long an operation's progress states stay for streams that resume.
pub const PROGRESS_HISTORY_RETENTION_SECONDS: i64 = 7 * 86_400;
/// How long finished deliveries and their attempts stay readable.
pub const DELIVERY_RETENTION_SECONDS: i64 = 30 * 86_400;

/// Events older than this and still undispatched are swept.
pub const SWEEP_AFTER_SECONDS: i64 = 5;
/// A swept event still undispatched is swept again after this long (its
/// dispatch job deduplicates the push while it is queued or dead).
pub const RESWEEP_AFTER_SECONDS: i64 = 600;
/// Most events one sweep re-dispatches.
pub const SWEEP_BATCH: u32 = 500;
/// How long a done job stays visible (dashboard, idempotent re-push).
pub const DONE_JOB_RETENTION_SECONDS: i64 = 7 * 86_400;
/// How long a dead job waits for an operator before it is forgotten.
pub const DEAD_JOB_RETENTION_SECONDS: i64 = 30 * 86_400;

impl Maintenance {
    /// Every task.
    pub const ALL: [Maintenance; 15] = [
        Self::ExpireRotatedKeys,
        Self::PurgeIdempotency,
        Self::SweepOutbox,
        Self::PurgeTickClaims,
        Self::PurgeFinishedJobs,
        Self::SweepDeliveries,
        Self::PurgeDeliveries,
        Self::PurgeSessions,
        Self::SweepMedia,
        Self::SweepProfiles,
        Self::PurgeProgressHistory,
        Self::RemovalNotices,
        Self::RollUpJobHistory,
        Self::IndexJobText,
        Self::ExpireUploads,
    ];

    /// Its stable name (metrics, tick claims).
    pub const fn name(self) -> &'static str {
        match self {
            Self::ExpireRotatedKeys => "key_rotation_expiry",
            Self::PurgeIdempotency => "idempotency_purge",
            Self::SweepOutbox => "outbox_sweep",
            Self::PurgeTickClaims => "tick_claim_purge",
            Self::PurgeFinishedJobs => "finished_job_purge",
            Self::SweepDeliveries => "webhook_delivery_sweep",
            Self::PurgeDeliveries => "webhook_delivery_purge",
            Self::PurgeSessions => "session_purge",
            Self::SweepMedia => "media_sweep",
            Self::SweepProfiles => "delivery_profile_sweep",
            Self::PurgeProgressHistory => "progress_history_purge",
            Self::RemovalNotices => "route_removal_notices",
            Self::RollUpJobHistory => "job_history_rollup",
            Self::IndexJobText => "job_text_index",
            Self::ExpireUploads => "upload_expiry",
        }
    }

    /// Its schedule (seconds first).
    pub const fn cron(self) -> &'static str {
        match self {
            Self::ExpireRotatedKeys => "0 * * * * *",
            Self::PurgeIdempotency => "30 */10 * * * *",
            Self::SweepOutbox => "*/5 * * * * *",
            Self::PurgeTickClaims => "15 7 * * * *",
            Self::PurgeFinishedJobs => "45 20 * * * *",
            Self::SweepDeliveries => "20/30 * * * * *",
            Self::PurgeDeliveries => "50 35 * * * *",
            Self::PurgeSessions => "40 50 * * * *",
            Self::SweepMedia => "10 * * * * *",
            Self::SweepProfiles => "40 * * * * *",
            Self::PurgeProgressHistory => "25 42 * * * *",
            Self::RemovalNotices => "5 17 * * * *",
            Self::RollUpJobHistory => "3 * * * * *",
            Self::IndexJobText => "7/15 * * * * *",
            Self::ExpireUploads => "37 * * * * *",
        }
    }

    /// The parsed schedule.
    pub fn schedule(self) -> cron::Schedule {
        // The expressions above are constants, checked by a test.
        cron::Schedule::from_str(self.cron())
            .unwrap_or_else(|_| unreachable!("valid cron expression"))
    }

    /// Runs the task once, now.
    pub async fn run(self, platform: &Platform) -> Result<u64, JobError> {
        let store = &platform.store;
        let now = store.clock().now();
        Ok(match self {
            Self::ExpireRotatedKeys => store.api_keys().expire_rotated().await?,
            Self::PurgeSessions => store.sessions().purge().await?,
            Self::SweepMedia => {
                let stale = store
                    .media()
                    .queued_before(
                        now.plus_seconds(-ProcessMedia::LOST_PUSH_AFTER_SECONDS),
                        SWEEP_BATCH,
                    )
                    .await?;
                let count = stale.len() as u64;
                if count > 0 {
                    tracing::info!(count, "pushing media items whose job was lost");
                    // The same dedupe key as the upload's push: a job still
                    // in the queue is not pushed twice.
                    let jobs = stale
                        .into_iter()
                        .map(|queued| {
                            let job = ProcessMedia::new(
                                &queued.tenant,
                                &queued.operation_id,
                                &queued.media_id,
                            );
                            (job, PushOptions::default())
                        })
                        .collect();
                    platform.queue.push_many(jobs).await?;
                }
                count
            }
            Self::SweepProfiles => {
                let unswept = store
                    .media()
                    .unswept_profiles(
                        now.plus_seconds(-RenderOutputs::LOST_PUSH_AFTER_SECONDS),
                        SWEEP_BATCH,
                    )
                    .await?;
                // The sweep's first batch under its own dedupe key: a sweep
                // the queue still holds (waiting, running, or run and kept)
                // is not started twice.
                let jobs: Vec<_> = unswept
                    .into_iter()
                    .map(|profile| {
                        let job = RenderOutputs::new(
                            &profile.tenant,
                            RenderScope::Profile {
                                profile_id: profile.profile_id,
                                revision: profile.revision,
                                round: profile.sweep_round,
                                after: None,
                                rendered: 0,
                                total: None,
                            },
                        );
                        (job, PushOptions::default())
                    })
                    .collect();
                let count = jobs.len() as u64;
                if count > 0 {
                    platform.queue.push_many(jobs).await?;
                }
                count
            }
            Self::PurgeIdempotency | Self::PurgeProgressHistory | Self::PurgeDeliveries => self
                .purge(platform, PURGE_BATCH)
                .await?
                .map_or(0, |purged| purged.rows),
            Self::RemovalNotices => {
                let written = store.deprecations().write_due_notices().await?;
                let count = written.len() as u64;
                if count > 0 {
                    tracing::info!(count, "route removal notices written");
                }
                if platform.mailer.is_some() && !written.is_empty() {
                    let jobs = written
                        .into_iter()
                        .map(|notification_id| {
                            (SendNotification { notification_id }, PushOptions::default())
                        })
                        .collect();
                    // Recorded: should the push fail, the delivery sweep
                    // e-mails unsent notifications.
                    if let Err(err) = platform.queue.push_many(jobs).await {
                        tracing::warn!(%err, "could not push removal notices; the sweep will");
                    }
                }
                count
            }
            Self::SweepOutbox => {
                let missed = store
                    .outbox()
                    .sweep_missed(
                        now.plus_seconds(-SWEEP_AFTER_SECONDS),
                        now.plus_seconds(-RESWEEP_AFTER_SECONDS),
                        SWEEP_BATCH,
                    )
                    .await?;
                let count = missed.len() as u64;
                if count > 0 {
                    tracing::info!(count, "re-dispatching events the fast path missed");
                    let event_ids: Vec<_> =
                        missed.into_iter().map(|event| event.event_id).collect();
                    if let Err(err) = platform
                        .queue
                        .push_many(dispatch_jobs(event_ids.clone()))
                        .await
                    {
                        // Unmarked, the next sweep offers them again at once
                        // rather than after the resweep interval.
                        store.outbox().release_swept(&event_ids).await?;
                        return Err(err.into());
                    }
                }
                count
            }
            Self::ExpireUploads => expire_uploads(platform, now).await?,
            Self::RollUpJobHistory => {
                let written = store.job_history().roll_up(now).await?;
                if now.as_unix_seconds() % 3_600 < 60 {
                    in_batches(PURGE_BATCH, |batch| async move {
                        store.job_attempts().purge(now, batch).await
                    })
                    .await?;
                    store.worker_processes().purge(now).await?;
                }
                written
            }
            Self::PurgeTickClaims => {
                store
                    .schedules()
                    .purge_ticks(now.plus_seconds(-86_400))
                    .await?
            }
            Self::IndexJobText => {
                QueueAdmin::new(platform.queue.clone())
                    .index_job_text()
                    .await?
            }
            Self::PurgeFinishedJobs => {
                let now = now.as_unix_seconds();
                QueueAdmin::new(platform.queue.clone())
                    .purge_finished(
                        now - DONE_JOB_RETENTION_SECONDS,
                        now - DEAD_JOB_RETENTION_SECONDS,
                    )
                    .await?
            }
            Self::SweepDeliveries => {
                let overdue_before = now.plus_seconds(-DELIVERY_OVERDUE_SECONDS);
                let offered_again_at = now.plus_seconds(RESWEEP_AFTER_SECONDS);
                let overdue = store
                    .webhooks()
                    .sweep_overdue(overdue_before, offered_again_at, SWEEP_BATCH)
                    .await?;
                let mut count = overdue.len() as u64;
                if platform.mailer.is_some() {
                    let unsent = store
                        .webhooks()
                        .unsent_notifications(
                            now.plus_seconds(-DELIVERY_OVERDUE_SECONDS),
                            SWEEP_BATCH,
                        )
                        .await?;
                    count += unsent.len() as u64;
                    let jobs: Vec<_> = unsent
                        .into_iter()
                        .map(|notification_id| {
                            // One offer per resweep interval.
                            let options = PushOptions::offer(
                                (now.as_unix_seconds() / RESWEEP_AFTER_SECONDS).to_string(),
                            );
                            (SendNotification { notification_id }, options)
                        })
                        .collect();
                    if !jobs.is_empty() {
                        platform.queue.push_many(jobs).await?;
                    }
                }
                if !overdue.is_empty() {
                    tracing::info!(
                        count = overdue.len(),
                        "pushing overdue webhook delivery attempts"
                    );
                    let jobs = overdue
                        .iter()
                        .cloned()
                        .map(|due| {
                            // Keyed by the offer: the attempt's first push,
                            // kept by the queue for days once done or dead,
                            // never swallows a later one.
                            let options =
                                PushOptions::offer(format!("swept:{}", now.as_unix_seconds()));
                            (DeliverWebhook::of(due), options)
                        })
                        .collect();
                    if let Err(err) = platform.queue.push_many(jobs).await {
                        // Due again, the next sweep offers them at once
                        // rather than after the resweep interval.
                        store
                            .webhooks()
                            .release_overdue(&overdue, overdue_before, offered_again_at)
                            .await?;
                        return Err(err.into());
                    }
                }
                count
            }
        })
    }
}

/// How long an ended resumable upload's row stays, so its URL answers
/// 410 (ended) rather than 404 to a client that comes back late.
pub const ENDED_UPLOAD_KEPT_SECONDS: i64 = 86_400;

/// Ends the resumable uploads abandoned past their expiry (a batch whose
/// last open upload this was may complete), deletes their bytes, and
/// forgets ended uploads past their keeping (deleting any bytes left).
/// Returns the uploads expired and forgotten.
async fn expire_uploads(platform: &Platform, now: Timestamp) -> Result<u64, JobError> {
    let media = platform.store.media();
    let expired = media.expired_uploads(now, SWEEP_BATCH).await?;
    let mut count = 0;
    for upload in &expired {
        // Every byte arrived, but the request that sent the last ones
        // stopped before it completed the upload: complete it now.
        let current = media.resumable(&upload.tenant, &upload.id).await?;
        if current.offset == current.length {
            if let Err(err) =
                platform::resumable::complete(platform, &upload.tenant, &current).await
            {
                tracing::warn!(%err, upload = %upload.id, "a fully received upload could not be completed");
            } else {
                continue;
            }
        }
        let ended = media
            .end_resumable(
                &upload.tenant,
                &upload.id,
                storage::media::UploadState::Expired,
                now.plus_seconds(ENDED_UPLOAD_KEPT_SECONDS),
            )
            .await?;
        if !ended {
            continue;
        }
        count += 1;
        if let Some(stores) = &platform.media {
            stores
                .delete_upload_parts(
                    &upload.tenant,
                    &upload.id,
                    upload.store_upload_id.as_deref(),
                )
                .await
                .map_err(|err| JobError(format!("deleting an expired upload's bytes: {err}")))?;
        }
        media
            .complete_upload_if_done(&upload.tenant, &upload.operation_id)
            .await?;
    }
    if count > 0 {
        tracing::info!(count, "abandoned uploads expired and their bytes deleted");
    }
    let forgettable = media.forgettable_uploads(now, SWEEP_BATCH).await?;
    if let Some(stores) = &platform.media {
        for upload in &forgettable {
            stores
                .delete_upload_parts(
                    &upload.tenant,
                    &upload.id,
                    upload.store_upload_id.as_deref(),
                )
                .await
                .map_err(|err| JobError(format!("deleting an ended upload's bytes: {err}")))?;
        }
    }
    let ids: Vec<_> = forgettable.into_iter().map(|upload| upload.id).collect();
    count += media.forget_uploads(&ids).await?;
    Ok(count)
}

/// Rows one purge transaction deletes at most. Within it the batch is
/// sized by time ([`BATCH_TIME`]): a `POST /listings` arriving while a batch
/// holds the SQLite file's writer (the group commit every write of the
/// process takes turns at) waits for that batch and its commit, so a batch
/// of 30 ms (a thousand deliveries with their attempts) put 40 ms on the
/// creates' p99 (`bench purge`).
pub const PURGE_BATCH: u32 = 1_000;

/// How long one purge transaction should hold the writer: batches grow
/// while they take less than half of it and shrink while they take more
/// than twice it. A purge's commit does not wait for the disk (its batches
/// are expendable: a batch lost in a crash is purged again), so a batch is
/// its deletes; a create that meets one waits up to about twice this long
/// (a batch shrinks only past that), and the next create's sync carries
/// that batch's pages. Batches of 0.5 ms
/// rather than 2 ms put the creates' p99 during a purge at 1.55–1.61 of
/// their p99 between purge windows instead of 1.99–2.12 (300,000 expired
/// deliveries; a million: 1.64 instead of 1.96), for a purge 0.47–0.69 as
/// fast (`bench purge`, BENCHMARKS.md); on PostgreSQL 1.17 instead of 1.21.
pub const BATCH_TIME: std::time::Duration = std::time::Duration::from_micros(500);

/// The first batch's rows (or the largest allowed, if smaller).
const FIRST_BATCH: u32 = 64;

/// The fewest rows a batch shrinks to (or the largest allowed, if smaller):
/// below it a batch is mostly its commit.
const SMALLEST_BATCH: u32 = 32;

/// Most rows one run of a purge deletes; the next run goes on where it
/// stopped.
pub const PURGE_ROWS_PER_RUN: u64 = 1_000_000;

/// The next batch's rows after one of `rows` took `took`: doubled while
/// well under [`BATCH_TIME`], halved while well over it, within
/// [`SMALLEST_BATCH`] and `largest`.
fn next_batch(rows: u32, took: std::time::Duration, largest: u32) -> u32 {
    let largest = largest.max(1);
    let next = if took < BATCH_TIME / 2 {
        rows.saturating_mul(2)
    } else if took > BATCH_TIME * 2 {
        rows / 2
    } else {
        rows
    };
    next.clamp(SMALLEST_BATCH.min(largest), largest)
}

/// What one run of a purge did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// Rows deleted.
    pub rows: u64,
    /// Transactions they were deleted in.
    pub batches: u32,
}

impl Maintenance {
    /// Runs a retention purge in transactions of at most `batch` rows, one
    /// after another, until nothing past retention is left (or
    /// [`PURGE_ROWS_PER_RUN`] went), then gives the space freed back to
    /// the file system where the database allows (SQLite's incremental
    /// vacuum). `None` for a task that is not such a purge.
    pub async fn purge(self, platform: &Platform, batch: u32) -> Result<Option<Purged>, JobError> {
        let store = &platform.store;
        let now = store.clock().now();
        let purged = match self {
            Self::PurgeIdempotency => {
                in_batches(batch, |batch| async move {
                    store.idempotency().purge_expired(batch).await
                })
                .await?
            }
            Self::PurgeProgressHistory => {
                let before = now.plus_seconds(-PROGRESS_HISTORY_RETENTION_SECONDS);
                in_batches(batch, |batch| async move {
                    store.progress().purge_steps(before, batch).await
                })
                .await?
            }
            Self::PurgeDeliveries => {
                let before = now.plus_seconds(-DELIVERY_RETENTION_SECONDS);
                in_batches(batch, |batch| async move {
                    store.webhooks().purge_finished(before, batch).await
                })
                .await?
            }
            _ => return Ok(None),
        };
        if purged.rows > 0 {
            store.reclaim_space().await?;
        }
        Ok(Some(purged))
    }
}

/// Runs `purge` (one transaction deleting at most its argument's rows) until
/// a batch comes back short, with batches of at most `largest` rows sized
/// by [`BATCH_TIME`]. Between two batches it waits
/// [`storage::retention::REST_PER_HELD`] times as long as the last one held
/// the writer: the writes queued behind a batch go before the next, and the
/// disk writes its pages between them.
async fn in_batches<F, Fut>(largest: u32, mut purge: F) -> Result<Purged, JobError>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = storage::Result<PurgeBatch>>,
{
    let largest = largest.max(1);
    let mut batch = FIRST_BATCH.min(largest);
    let mut purged = Purged::default();
    while purged.rows < PURGE_ROWS_PER_RUN {
        let done = purge(batch).await?;
        purged.rows += done.rows;
        purged.batches += 1;
        if done.rows < u64::from(batch) {
            break;
        }
        batch = next_batch(batch, done.held, largest);
        tokio::time::sleep(done.held * storage::retention::REST_PER_HELD).await;
    }
    Ok(purged)
}

/// A tick of a maintenance schedule: claim it, then run the task.
pub async fn run_maintenance(
    tick: Tick,
    task: Data<Maintenance>,
    state: Data<WorkerState>,
    worker: WorkerContext,
) -> Result<(), JobError> {
    let started = Instant::now();
    let tick_at = Timestamp::from_micros(
        i64::try_from(tick.get_timestamp())
            .unwrap_or(0)
            .saturating_mul(1_000_000),
    );
    let claimed = state
        .platform
        .store
        .schedules()
        .claim_tick(task.name(), tick_at, worker.name())
        .await?;
    tracing::debug!(
        task = task.name(),
        tick = tick.get_timestamp(),
        claimed,
        "maintenance tick"
    );
    if !claimed {
        return Ok(());
    }
    let result = task.run(&state.platform).await;
    if let Ok(affected) = &result
        && *affected > 0
    {
        tracing::info!(task = task.name(), affected, "maintenance ran");
    }
    observe(task.name(), started, &result);
    result.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_sized_by_the_time_the_last_one_took() {
        let ms = std::time::Duration::from_millis;
        let quick = BATCH_TIME / 4;
        assert_eq!(next_batch(64, quick, 1_000), 128, "quick: doubled");
        assert_eq!(
            next_batch(800, quick, 1_000),
            1_000,
            "never over the largest"
        );
        assert_eq!(next_batch(64, BATCH_TIME, 1_000), 64, "on time: kept");
        assert_eq!(next_batch(128, BATCH_TIME * 3, 1_000), 64, "slow: halved");
        assert_eq!(
            next_batch(SMALLEST_BATCH, ms(500), 1_000),
            SMALLEST_BATCH,
            "never under the floor"
        );
        assert_eq!(
            next_batch(20, ms(500), 20),
            20,
            "a floor over the largest is the largest"
        );
        assert_eq!(next_batch(64, quick, 0), 1, "a largest of 0 is one row");
    }

    #[tokio::test]
    async fn a_purge_goes_on_in_bounded_batches_until_one_comes_back_short() {
        let left = std::sync::Mutex::new(1_000_u64);
        let asked = std::sync::Mutex::new(Vec::new());
        let purged = in_batches(300, |batch| {
            let deleted = {
                let mut left = left.lock().unwrap();
                let deleted = u64::from(batch).min(*left);
                *left -= deleted;
                deleted
            };
            asked.lock().unwrap().push(batch);
            // Each batch held the writer briefly: the next one doubles.
            let held = BATCH_TIME / 4;
            async move {
                Ok(PurgeBatch {
                    rows: deleted,
                    held,
                })
            }
        })
        .await
        .unwrap();
        let asked = asked.into_inner().unwrap();
        assert_eq!(purged.rows, 1_000);
        assert_eq!(purged.batches as usize, asked.len());
        assert_eq!(asked[..3], [FIRST_BATCH, FIRST_BATCH * 2, FIRST_BATCH * 4]);
        assert!(asked.iter().all(|&batch| batch <= 300), "{asked:?}");
        assert_eq!(*left.lock().unwrap(), 0);
    }

    #[test]
    fn every_schedule_parses_and_fires() {
        for task in Maintenance::ALL {
            let schedule = cron::Schedule::from_str(task.cron())
                .unwrap_or_else(|error| panic!("{}: {error}", task.name()));
            assert!(
                schedule.upcoming(chrono::Utc).next().is_some(),
                "{}",
                task.name()
            );
        }
    }
}
