//! This process's share of the portal's usage figures: when each key last
//! authenticated a request (written at most once a minute per key) and
//! requests per agency, route and status, counted in memory and added to
//! the stored hours a few seconds later (`storage::requests::usage`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use storage::ids::{AgencyId, ApiKeyId};
use storage::requests::usage::{KEY_USE_RESOLUTION_SECONDS, RequestCount, hour_of};
use storage::{Store, Tenant, Timestamp};

/// How long counts wait in memory before they are added to the store.
pub const FLUSH_AFTER: Duration = Duration::from_secs(5);

type CountKey = (AgencyId, bool, String, i32, i64);

/// Key uses and request counts not yet written.
#[derive(Debug, Default)]
pub struct UsageRecorder {
    key_uses: Mutex<HashMap<ApiKeyId, Timestamp>>,
    counts: Mutex<HashMap<CountKey, i64>>,
    flush_scheduled: AtomicBool,
}

impl UsageRecorder {
    /// Records that `key` authenticated a request at `now`: written when the
    /// last recorded use is older than a minute.
    pub fn key_used(&self, store: &Store, key: &ApiKeyId, now: Timestamp) {
        {
            let mut uses = self
                .key_uses
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(last) = uses.get(key)
                && last.as_micros() > now.plus_seconds(-KEY_USE_RESOLUTION_SECONDS).as_micros()
            {
                return;
            }
            uses.insert(key.clone(), now);
        }
        let store = store.clone();
        let key = key.clone();
        tokio::spawn(async move {
            if let Err(err) = store.usage().record_key_use(&key, now).await {
                tracing::warn!(%err, "could not record a key's last use");
            }
        });
    }

    /// Counts one request of `tenant` to `route` answered with `status`; the
    /// count reaches the store within [`FLUSH_AFTER`].
    pub fn request(
        self: &Arc<Self>,
        store: &Store,
        tenant: &Tenant,
        route: String,
        status: u16,
        now: Timestamp,
    ) {
        {
            let mut counts = self
                .counts
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *counts
                .entry((
                    tenant.agency_id.clone(),
                    tenant.environment.is_sandbox(),
                    route,
                    i32::from(status),
                    hour_of(now),
                ))
                .or_default() += 1;
        }
        if !self.flush_scheduled.swap(true, Ordering::AcqRel) {
            let recorder = self.clone();
            let store = store.clone();
            tokio::spawn(async move {
                tokio::time::sleep(FLUSH_AFTER).await;
                recorder.flush(&store).await;
            });
        }
    }

    /// Adds every pending count to the store now (the usage page calls it
    /// so that this process's latest requests show at once).
    pub async fn flush(&self, store: &Store) {
        self.flush_scheduled.store(false, Ordering::Release);
        let pending: Vec<RequestCount> = {
            let mut counts = self
                .counts
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            counts
                .drain()
                .map(
                    |((agency_id, is_sandbox, route, status, hour), requests)| RequestCount {
                        agency_id,
                        is_sandbox,
                        route,
                        status,
                        hour,
                        requests,
                    },
                )
                .collect()
        };
        if let Err(err) = store.usage().add_requests(&pending).await {
            tracing::warn!(%err, count = pending.len(), "could not store request counts; they are put back");
            let mut counts = self
                .counts
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for count in pending {
                *counts
                    .entry((
                        count.agency_id,
                        count.is_sandbox,
                        count.route,
                        count.status,
                        count.hour,
                    ))
                    .or_default() += count.requests;
            }
        }
    }
}
