//! Writes paced by the writer's webhook backlog. Every event an agency's
//! write commits becomes one delivery per subscribed endpoint; when the
//! workers delivering them share this process's cores, a burst of writes
//! accepted faster than it can be delivered only builds a queue, and every
//! event in it reaches its receivers seconds late. So before a write (an
//! unsafe method under an API key) runs, it looks at its agency's backlog in
//! its environment (events not yet fanned out, deliveries due and not yet
//! attempted: [`storage::webhooks`]' `delivery_backlog`), and while that is
//! at the limit it waits for the backlog to shrink, at most `max_wait`. The
//! core then goes to delivering what was already accepted: posts are
//! accepted as fast as their events are delivered. Other agencies, and
//! reads, are never held up by one agency's backlog.
//!
//! The backlog is read from the store, so it is right whichever process
//! delivers; a write that finds it under the limit costs one small read
//! (writes arriving while a reading runs share it), and a waiting write
//! reads again when this process records a batch of
//! attempts, or every [`RECHECK`] when another process delivers. One
//! reading runs at a time per agency and environment; the waiters share it.
//! Should the read fail, the write goes ahead: pacing never refuses work.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use platform::Job;
use platform::kinds::DeliverWebhook;
use storage::{Store, Tenant};
use tokio::sync::Notify;

/// How often a waiting write reads the backlog again when no attempt this
/// process records wakes it (deliveries made by other processes).
pub const RECHECK: Duration = Duration::from_millis(50);

/// Tenants remembered before the idle ones are forgotten.
const TENANTS_KEPT: usize = 4096;

/// How writes are paced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacingSettings {
    /// A write waits while its agency has this many events undelivered (not
    /// yet fanned out, or deliveries due and not yet attempted); 0 turns
    /// pacing off.
    pub backlog_limit: u32,
    /// The longest a write waits; after it, it goes ahead.
    pub max_wait: Duration,
}

/// The default backlog limit: 100 waiting deliveries, a few hundredths of a
/// second of one core's deliveries.
pub const DEFAULT_BACKLOG_LIMIT: u32 = 100;

// A paced burst's first attempts fit a process's default first-attempt
// slots (one per delivery slot): the backlog never outgrows them.
const _: () = assert!(
    DEFAULT_BACKLOG_LIMIT as usize <= <DeliverWebhook as Job>::DEFAULT_CONCURRENCY,
    "the default backlog limit outgrows the default delivery slots"
);

impl Default for PacingSettings {
    /// [`DEFAULT_BACKLOG_LIMIT`], at most one second's wait.
    fn default() -> Self {
        Self {
            backlog_limit: DEFAULT_BACKLOG_LIMIT,
            max_wait: Duration::from_secs(1),
        }
    }
}

impl PacingSettings {
    /// Whether the backlog limit is above `delivery_slots` (a process's
    /// `webhook_delivery` concurrency, and so its first-attempt slots): a
    /// paced burst's first attempts beyond them then go through the queue,
    /// a write and a fetch each. Pacing off (a limit or wait of 0) bounds no
    /// backlog and is never reported: turning it off is a choice, not a
    /// mismatch.
    pub fn outgrows(&self, delivery_slots: usize) -> bool {
        if self.backlog_limit == 0 || self.max_wait.is_zero() {
            return false;
        }
        usize::try_from(self.backlog_limit).map_or(true, |limit| limit > delivery_slots)
    }
}

/// What pacing did with one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The backlog was under the limit: the write went ahead at once.
    Open,
    /// The write waited this long for the backlog to shrink under the limit.
    Paced(Duration),
    /// The backlog stayed at the limit for the longest wait; the write went
    /// ahead anyway.
    WaitedOut,
    /// The backlog could not be read; the write went ahead.
    Unread,
}

/// The pacing of writes; cheap to clone.
#[derive(Clone)]
pub struct WritePacing {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    settings: PacingSettings,
    attempts_recorded: Arc<Notify>,
    tenants: Mutex<HashMap<Tenant, Arc<TenantBacklog>>>,
    waiting: AtomicUsize,
    paced: AtomicU64,
    waited_out: AtomicU64,
}

/// The latest reading of one tenant's backlog, and the lock that lets one
/// reading run at a time.
#[derive(Default)]
struct TenantBacklog {
    latest: Mutex<Option<Reading>>,
    reading: tokio::sync::Mutex<()>,
}

#[derive(Clone, Copy)]
struct Reading {
    /// When the read ended.
    ended: Instant,
    backlog: u32,
}

impl WritePacing {
    /// Pacing by `store`'s backlogs, woken by `attempts_recorded` (this
    /// process's delivery batches).
    pub fn new(store: Store, settings: PacingSettings, attempts_recorded: Arc<Notify>) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                settings,
                attempts_recorded,
                tenants: Mutex::default(),
                waiting: AtomicUsize::new(0),
                paced: AtomicU64::new(0),
                waited_out: AtomicU64::new(0),
            }),
        }
    }

    /// The settings.
    pub fn settings(&self) -> PacingSettings {
        self.inner.settings
    }

    /// Writes waiting now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.load(Ordering::SeqCst)
    }

    /// Writes that waited and then went ahead under the limit, since start.
    pub fn paced(&self) -> u64 {
        self.inner.paced.load(Ordering::SeqCst)
    }

    /// Writes that waited the longest wait and went ahead over the limit.
    pub fn waited_out(&self) -> u64 {
        self.inner.waited_out.load(Ordering::SeqCst)
    }

    /// Waits until `tenant`'s backlog is under the limit, or the longest
    /// wait has passed.
    pub async fn admit(&self, tenant: &Tenant) -> Admission {
        let inner = &*self.inner;
        let PacingSettings {
            backlog_limit,
            max_wait,
        } = inner.settings;
        if backlog_limit == 0 || max_wait.is_zero() {
            return Admission::Open;
        }
        let started = Instant::now();
        let backlog = self.backlog_of(tenant);
        // A write takes a reading that ended after it arrived (or woke): the
        // writes arriving (or woken together) while one reading runs share
        // it. One begun before the attempts that woke it were recorded may
        // count them still: the write then waits for the next batch.
        let mut since = started;
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            // Listening before reading: a batch recorded during the read
            // still wakes this write.
            let recorded = inner.attempts_recorded.notified();
            tokio::pin!(recorded);
            recorded.as_mut().enable();
            let count = match backlog
                .read(&inner.store, tenant, backlog_limit, since)
                .await
            {
                Ok(count) => count,
                Err(err) => {
                    tracing::warn!(%err, agency_id = %tenant.agency_id, "could not read the webhook backlog; the write goes ahead");
                    return Admission::Unread;
                }
            };
            if count < backlog_limit {
                return match waiting {
                    None => Admission::Open,
                    Some(_) => {
                        let waited = started.elapsed();
                        inner.paced.fetch_add(1, Ordering::SeqCst);
                        metrics::counter!("api_writes_paced_total", "outcome" => "under_limit")
                            .increment(1);
                        metrics::histogram!("api_write_pacing_seconds")
                            .record(waited.as_secs_f64());
                        Admission::Paced(waited)
                    }
                };
            }
            let remaining = max_wait.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                inner.waited_out.fetch_add(1, Ordering::SeqCst);
                metrics::counter!("api_writes_paced_total", "outcome" => "max_wait").increment(1);
                metrics::histogram!("api_write_pacing_seconds")
                    .record(started.elapsed().as_secs_f64());
                tracing::debug!(agency_id = %tenant.agency_id, backlog = count, "a write waited the longest wait for its webhook backlog");
                return Admission::WaitedOut;
            }
            waiting.get_or_insert_with(|| Waiting::new(&inner.waiting));
            tokio::select! {
                () = &mut recorded => {}
                () = tokio::time::sleep(remaining.min(RECHECK)) => {}
            }
            since = Instant::now();
        }
    }

    /// The backlog record of `tenant`, made on first use; idle tenants are
    /// forgotten once many are remembered.
    fn backlog_of(&self, tenant: &Tenant) -> Arc<TenantBacklog> {
        let mut tenants = self
            .inner
            .tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(backlog) = tenants.get(tenant) {
            return backlog.clone();
        }
        if tenants.len() >= TENANTS_KEPT {
            tenants.retain(|_, backlog| Arc::strong_count(backlog) > 1);
        }
        tenants.entry(tenant.clone()).or_default().clone()
    }
}

impl TenantBacklog {
    /// The backlog: the latest reading if it ended after `since`, else a
    /// new one (one at a time; whoever waited for the lock takes the reading
    /// made meanwhile).
    async fn read(
        &self,
        store: &Store,
        tenant: &Tenant,
        limit: u32,
        since: Instant,
    ) -> storage::Result<u32> {
        if let Some(count) = self.latest(since) {
            return Ok(count);
        }
        let _one_reading = self.reading.lock().await;
        if let Some(count) = self.latest(since) {
            return Ok(count);
        }
        let backlog = store.webhooks().delivery_backlog(tenant, limit).await?;
        let ended = Instant::now();
        *self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Reading { ended, backlog });
        Ok(backlog)
    }

    fn latest(&self, since: Instant) -> Option<u32> {
        self.latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .filter(|reading| reading.ended >= since)
            .map(|reading| reading.backlog)
    }
}

/// Counts a waiting write for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        metrics::gauge!("api_writes_waiting").increment(1.0);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
        metrics::gauge!("api_writes_waiting").decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_outgrows_fewer_delivery_slots_than_its_limit() {
        let default = PacingSettings::default();
        let limit = DEFAULT_BACKLOG_LIMIT as usize;
        assert!(!default.outgrows(<DeliverWebhook as Job>::DEFAULT_CONCURRENCY));
        assert!(!default.outgrows(limit));
        assert!(default.outgrows(limit - 1));
        let off = PacingSettings {
            backlog_limit: 0,
            ..default
        };
        assert!(!off.outgrows(1));
        let no_wait = PacingSettings {
            max_wait: Duration::ZERO,
            ..default
        };
        assert!(!no_wait.outgrows(1));
    }
}
