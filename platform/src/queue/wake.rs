//! Waking idle workers when work arrives, instead of leaving them to a poll.
//!
//! Every queue has a [`Bell`] in the process. A push from this process rings
//! it at once; pushes from other processes reach it through the backend:
//! on Redis a push publishes the queue's name and each worker process's
//! [`spawn_redis_listener`] rings the bell it names; on SQLite
//! [`spawn_sqlite_watch`] reads the file's `data_version` at the poll
//! interval, which changes only when another connection committed, and rings
//! every bell when it did. A worker waits on [`BellOrInterval`]: its bell, or
//! a fallback interval for what no bell announces (a scheduled job coming
//! due, a notification lost while Redis reconnected).
//!
//! A job pushed with a later `run_at` sets an alarm on its queue's bell in
//! the pushing process ([`Bells::ring_when_due`]): the bell rings when the job
//! comes due, so a retry 30 seconds out runs at its second, not at the next
//! fallback poll after it. Another process's scheduled pushes still reach
//! its workers at the poll.
//!
//! A Redis announcement names the process that pushed, so a process does
//! not hear its own pushes twice; what other processes push also rings the
//! queue's *announced* bell, on which the fair queues' feeder waits (a
//! process's own pushes feed its free slots themselves, `super::fair`).
//!
//! apalis's own `poll_with_interval` re-arms its timer without polling it, so
//! after one empty fetch an idle worker slept until its next heartbeat (ten
//! seconds by default): that was the idle stall.

use std::collections::{BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use apalis_core::backend::ext::poll_strategy::{PollSnapshot, PollStrategy};
use futures::StreamExt;
use sqlx::SqlitePool;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

/// Prefix of the Redis channel a push to a queue is announced on.
pub const WAKE_CHANNEL_PREFIX: &str = "listing-api:queue-pushed:";

/// The channel announcing pushes to `queue`.
pub fn wake_channel(queue: &str) -> String {
    format!("{WAKE_CHANNEL_PREFIX}{queue}")
}

/// How far past a due second an alarm rings: the queues compare a job's
/// `run_at` with the current whole second, so the ring comes just after it.
const ALARM_MARGIN: Duration = Duration::from_millis(5);

/// Alarms closer together than this ring once.
const ALARM_COALESCING: Duration = Duration::from_millis(20);

/// One queue's bell: a count of rings, the wakers of workers waiting on it,
/// and the alarms set for scheduled jobs coming due.
#[derive(Debug, Default)]
pub struct Bell {
    rung: AtomicU64,
    waiting: Mutex<Vec<Waker>>,
    alarms: Mutex<BTreeSet<Instant>>,
    /// Told when an alarm earlier than every other was set, and when the
    /// bell is dropped.
    alarm_moved: Arc<Notify>,
    /// The task ringing the alarms, once one was set (spawned again should
    /// its runtime have ended).
    alarm_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Bell {
    fn drop(&mut self) {
        // Ends the alarm task, should it be waiting for a first alarm.
        self.alarm_moved.notify_one();
    }
}

impl Bell {
    /// Wakes every worker waiting on this bell.
    pub fn ring(&self) {
        self.rung.fetch_add(1, Ordering::AcqRel);
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
        for waker in waiting {
            waker.wake();
        }
    }

    /// Times rung so far.
    pub fn rung(&self) -> u64 {
        self.rung.load(Ordering::Acquire)
    }

    /// Ready once rung since `seen` (then updated), else registers the task
    /// for the next ring.
    pub fn poll_rung(&self, cx: &mut Context<'_>, seen: &mut u64) -> Poll<()> {
        // Listen before looking, so a ring in between is never lost.
        self.listen(cx.waker());
        let rung = self.rung();
        if rung == *seen {
            return Poll::Pending;
        }
        *seen = rung;
        Poll::Ready(())
    }

    /// Rings the bell at `at` (and not again for alarms within a few
    /// milliseconds of it). Outside a Tokio runtime it does nothing: the
    /// workers' fallback poll finds the job.
    pub fn ring_at(self: &Arc<Self>, at: Instant) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let earliest = {
            let mut alarms = self.alarms.lock().unwrap_or_else(|p| p.into_inner());
            let near = alarms
                .range(at.checked_sub(ALARM_COALESCING).unwrap_or(at)..=at + ALARM_COALESCING)
                .next()
                .is_some();
            if near {
                return;
            }
            alarms.insert(at);
            alarms.first() == Some(&at)
        };
        {
            let mut task = self.alarm_task.lock().unwrap_or_else(|p| p.into_inner());
            if task
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished)
            {
                *task = Some(
                    runtime.spawn(ring_alarms(Arc::downgrade(self), self.alarm_moved.clone())),
                );
            }
        }
        if earliest {
            self.alarm_moved.notify_one();
        }
    }

    /// Removes the alarms due by `now`; returns whether there were any, and
    /// the next alarm.
    fn take_due_alarms(&self, now: Instant) -> (bool, Option<Instant>) {
        let mut alarms = self.alarms.lock().unwrap_or_else(|p| p.into_inner());
        let later = alarms.split_off(&(now + Duration::from_nanos(1)));
        let fired = !alarms.is_empty();
        *alarms = later;
        (fired, alarms.first().copied())
    }

    /// Registers `waker` for the next ring.
    fn listen(&self, waker: &Waker) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if !waiting.iter().any(|w| w.will_wake(waker)) {
            waiting.push(waker.clone());
        }
    }
}

/// Rings `bell` at each of its alarms, sleeping until the earliest or until
/// an earlier one is set; ends once the bell is gone (its drop wakes it).
async fn ring_alarms(bell: Weak<Bell>, moved: Arc<Notify>) {
    loop {
        let next = {
            let Some(bell) = bell.upgrade() else { return };
            let (fired, next) = bell.take_due_alarms(Instant::now());
            if fired {
                bell.ring();
            }
            next
        };
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = moved.notified() => {}
                }
            }
            None => moved.notified().await,
        }
    }
}

/// The bells of every queue in this process. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Bells {
    bells: Arc<Mutex<HashMap<String, Arc<Bell>>>>,
    /// Rung for pushes other processes announced.
    announced: Arc<Mutex<HashMap<String, Arc<Bell>>>>,
    /// This process's name in its announcements.
    origin: Arc<str>,
}

impl Default for Bells {
    fn default() -> Self {
        Self {
            bells: Arc::default(),
            announced: Arc::default(),
            origin: ulid::Ulid::generate().to_string().into(),
        }
    }
}

/// `queue`'s bell in `bells`.
fn bell_in(bells: &Mutex<HashMap<String, Arc<Bell>>>, queue: &str) -> Arc<Bell> {
    bells
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(queue.to_owned())
        .or_default()
        .clone()
}

impl Bells {
    /// `queue`'s bell.
    pub fn bell(&self, queue: &str) -> Arc<Bell> {
        bell_in(&self.bells, queue)
    }

    /// The bell rung when another process announces a push to `queue`.
    pub fn announced(&self, queue: &str) -> Arc<Bell> {
        bell_in(&self.announced, queue)
    }

    /// This process's name in its announcements.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Rings `queue`'s bell.
    pub fn ring(&self, queue: &str) {
        self.bell(queue).ring();
    }

    /// Rings `queue`'s bell just after the Unix second `due`, when a job
    /// scheduled for it becomes visible to a fetch; at once when that has
    /// passed (it may have while the job was being pushed).
    pub fn ring_when_due(&self, queue: &str, due: u64) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let wait = (Duration::from_secs(due) + ALARM_MARGIN).saturating_sub(now);
        if wait.is_zero() {
            self.ring(queue);
        } else {
            self.bell(queue).ring_at(Instant::now() + wait);
        }
    }

    /// Another process pushed to `queue`: rings its announced bell, and its
    /// workers' bell unless it is a fair queue. A fair queue's push waits in
    /// its fair set until a feed moves it to the ready list, and the feed
    /// rings the workers then: rung now, they would fetch before the job is
    /// there, and a ring during that fetch would be spent on its empty answer.
    fn ring_announced(&self, queue: &str) {
        self.announced(queue).ring();
        if !crate::kinds::FAIR_QUEUES.contains(&queue) {
            self.ring(queue);
        }
    }

    /// Rings every bell.
    pub fn ring_all(&self) {
        let bells: Vec<_> = self
            .bells
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for bell in bells {
            bell.ring();
        }
    }
}

/// An apalis poll strategy: the worker looks for work when its queue's bell
/// rings, and at the latest every `interval`.
#[derive(Debug)]
pub struct BellOrInterval {
    bell: Arc<Bell>,
    seen: u64,
    interval: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    idle: Arc<AtomicBool>,
}

impl Clone for BellOrInterval {
    fn clone(&self) -> Self {
        Self::new(self.bell.clone(), self.interval).sharing_idle(self.idle.clone())
    }
}

impl BellOrInterval {
    /// Waits on `bell`, or `interval` at most.
    pub fn new(bell: Arc<Bell>, interval: Duration) -> Self {
        Self {
            seen: bell.rung(),
            bell,
            interval,
            timer: None,
            idle: Arc::default(),
        }
    }

    /// The same, telling `idle` whether its worker waits for the bell or the
    /// interval (true) or is fetching (false): a worker that waits holds
    /// nothing, and can be left waiting by whoever stops it taking jobs.
    #[must_use]
    pub fn sharing_idle(mut self, idle: Arc<AtomicBool>) -> Self {
        self.idle = idle;
        self
    }
}

impl PollStrategy for BellOrInterval {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        let mut due = self.bell.poll_rung(cx, &mut self.seen).is_ready();
        let interval = self.interval;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(interval)));
        // A timer that fired is re-armed and polled again, so it wakes the
        // worker next time too (apalis's interval strategy skipped this).
        while timer.as_mut().poll(cx).is_ready() {
            timer.as_mut().reset(Instant::now() + interval);
            due = true;
        }
        self.idle.store(!due, Ordering::Release);
        if due {
            Poll::Ready(Some(()))
        } else {
            Poll::Pending
        }
    }
}

/// Rings the bells of `queues` whenever a push to one of them is announced on
/// Redis, until aborted. Every (re)connection rings them all once, for pushes
/// announced while this process was not listening.
pub fn spawn_redis_listener(
    redis_url: String,
    bells: Bells,
    queues: Vec<&'static str>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(err) = listen_once(&redis_url, &bells, &queues).await {
                tracing::warn!(%err, "queue wake-ups lost Redis; reconnecting");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

async fn listen_once(
    redis_url: &str,
    bells: &Bells,
    queues: &[&'static str],
) -> Result<(), redis::RedisError> {
    let client = redis::Client::open(redis_url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    for queue in queues {
        pubsub.subscribe(wake_channel(queue)).await?;
    }
    for queue in queues {
        bells.ring_announced(queue);
    }
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        let Some(queue) = message.get_channel_name().strip_prefix(WAKE_CHANNEL_PREFIX) else {
            continue;
        };
        // This process rang its own bell when it pushed.
        let origin: Option<String> = message.get_payload().ok();
        if origin.as_deref() != Some(bells.origin()) {
            bells.ring_announced(queue);
        }
    }
    Ok(())
}

/// Every `interval`, reads the SQLite queue file's `data_version` on a
/// connection of its own and rings every bell when another connection (of
/// this process or another) committed since. Runs until aborted.
pub fn spawn_sqlite_watch(
    pool: SqlitePool,
    bells: Bells,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(err) = watch_once(&pool, &bells, interval).await {
                tracing::warn!(%err, "could not watch the queue file; retrying");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

async fn watch_once(
    pool: &SqlitePool,
    bells: &Bells,
    interval: Duration,
) -> Result<(), sqlx::Error> {
    let mut connection = pool.acquire().await?.detach();
    let mut last: Option<i64> = None;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (version,): (i64,) = sqlx::query_as("pragma data_version")
            .fetch_one(&mut connection)
            .await?;
        if last.is_some_and(|last| last != version) {
            bells.ring_all();
        }
        last = Some(version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker_ref;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn drive(strategy: &mut BellOrInterval, waker: &Waker) -> Poll<Option<()>> {
        strategy.poll_drive(&mut Context::from_waker(waker), &PollSnapshot::default())
    }

    #[tokio::test(start_paused = true)]
    async fn a_ring_wakes_the_waiting_worker_after_any_idle_time() {
        let bells = Bells::default();
        let mut strategy = BellOrInterval::new(bells.bell("probe"), Duration::from_secs(3600));
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        assert!(drive(&mut strategy, &waker).is_pending());
        // An hour of idle time, less a second: the timer has not fired yet.
        tokio::time::advance(Duration::from_secs(3599)).await;
        assert!(drive(&mut strategy, &waker).is_pending());
        bells.ring("probe");
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            1,
            "the ring woke the worker"
        );
        assert!(drive(&mut strategy, &waker).is_ready());
        assert!(
            drive(&mut strategy, &waker).is_pending(),
            "one ring, one wake"
        );
        // Another queue's bell is not ours.
        bells.ring("deliver_webhook");
        assert!(drive(&mut strategy, &waker).is_pending());
    }

    #[tokio::test(start_paused = true)]
    async fn the_interval_keeps_waking_an_idle_worker() {
        let bells = Bells::default();
        let mut strategy = BellOrInterval::new(bells.bell("probe"), Duration::from_millis(50));
        let waker = noop_waker_ref();
        assert!(drive(&mut strategy, waker).is_pending());
        // Each interval, not just the first (apalis's interval strategy
        // armed its next timer without polling it).
        for _ in 0..5 {
            tokio::time::advance(Duration::from_millis(50)).await;
            assert!(drive(&mut strategy, waker).is_ready());
            assert!(drive(&mut strategy, waker).is_pending());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_fired_interval_timer_is_armed_to_wake_again() {
        let bells = Bells::default();
        let mut strategy = BellOrInterval::new(bells.bell("probe"), Duration::from_millis(50));
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        assert!(drive(&mut strategy, &waker).is_pending());
        tokio::time::advance(Duration::from_millis(50)).await;
        assert!(drive(&mut strategy, &waker).is_ready());
        let before = counter.0.load(Ordering::SeqCst);
        // Nothing polls the strategy now; the re-armed timer must still wake it.
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(
            counter.0.load(Ordering::SeqCst) > before,
            "the re-armed timer woke the worker without being polled again"
        );
    }

    /// Lets the alarm task run at the paused clock's current instant.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// Moves the paused clock on by `by` and lets the alarm task run.
    async fn advance(by: Duration) {
        tokio::time::advance(by).await;
        settle().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_alarm_rings_the_bell_when_it_is_due_and_not_before() {
        let bells = Bells::default();
        let bell = bells.bell("deliver_webhook");
        let start = Instant::now();
        bell.ring_at(start + Duration::from_secs(30));
        settle().await;
        advance(Duration::from_millis(29_990)).await;
        assert_eq!(bell.rung(), 0, "not before its time");
        advance(Duration::from_millis(20)).await;
        assert_eq!(bell.rung(), 1, "rung when due");
        advance(Duration::from_secs(3600)).await;
        assert_eq!(bell.rung(), 1, "once");
    }

    #[tokio::test(start_paused = true)]
    async fn alarms_ring_in_time_order_whatever_order_they_were_set_in() {
        let bells = Bells::default();
        let bell = bells.bell("deliver_webhook");
        let start = Instant::now();
        bell.ring_at(start + Duration::from_secs(300));
        settle().await;
        // Set after the task went to sleep until the later one.
        bell.ring_at(start + Duration::from_secs(30));
        // Within the coalescing window of the one before: no ring of its own.
        bell.ring_at(start + Duration::from_millis(30_005));
        settle().await;
        advance(Duration::from_millis(30_010)).await;
        assert_eq!(bell.rung(), 1, "the earlier alarm rang at its time");
        advance(Duration::from_secs(200)).await;
        assert_eq!(bell.rung(), 1, "the later one waits for its own");
        advance(Duration::from_secs(70)).await;
        assert_eq!(bell.rung(), 2, "and rings then");
    }

    #[tokio::test(start_paused = true)]
    async fn an_alarm_wakes_a_worker_waiting_past_its_fallback_poll() {
        let bells = Bells::default();
        let mut strategy =
            BellOrInterval::new(bells.bell("deliver_webhook"), Duration::from_secs(3600));
        let counter = Arc::new(CountingWaker::default());
        let waker = Waker::from(counter.clone());
        assert!(drive(&mut strategy, &waker).is_pending());
        bells
            .bell("deliver_webhook")
            .ring_at(Instant::now() + Duration::from_secs(30));
        settle().await;
        advance(Duration::from_millis(30_001)).await;
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "the alarm woke it");
        assert!(drive(&mut strategy, &waker).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_due_by_the_time_it_was_pushed_rings_at_once() {
        let bells = Bells::default();
        bells.ring_when_due("deliver_webhook", 1);
        let bell = bells.bell("deliver_webhook");
        assert_eq!(bell.rung(), 1);
        assert!(bell.alarms.lock().unwrap().is_empty(), "no alarm left");
    }

    #[test]
    fn outside_a_runtime_no_alarm_is_kept() {
        let bells = Bells::default();
        let bell = bells.bell("deliver_webhook");
        bell.ring_at(Instant::now() + Duration::from_secs(30));
        assert!(bell.alarms.lock().unwrap().is_empty());
        assert!(bell.alarm_task.lock().unwrap().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_alarm_task_ends_with_its_bell() {
        let bell = Arc::new(Bell::default());
        bell.ring_at(Instant::now() + Duration::from_secs(30));
        settle().await;
        advance(Duration::from_secs(31)).await;
        assert_eq!(bell.rung(), 1);
        // No alarm left: the task waits for the next one, or for the drop.
        let task = bell.alarm_task.lock().unwrap().take().unwrap();
        assert!(!task.is_finished());
        drop(bell);
        settle().await;
        assert!(task.is_finished(), "the drop ended it");
    }
}
