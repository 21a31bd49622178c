//! `Store`: the handle every caller holds, a database, the clock that stamps
//! rows and the secrets derived from the master key. Each repository adds
//! its own accessor (`store.listings()`, `store.webhooks()`, …) in its own
//! module, so the handle knows none of them.

use std::sync::Arc;

use crate::Result;
use crate::background::outbox_listener::{ListenerSlot, OutboxListener};
use crate::clock::Clock;
use crate::db::Database;
use crate::ids::EventId;
use crate::listings::cache::ListingCache;
use crate::secrets::{self, DerivedKeys, MasterKey};

/// The handle every caller holds: a database, the clock that stamps rows and the
/// secrets derived from the master key. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    db: Database,
    bookkeeping: Database,
    listing_cache: Arc<ListingCache>,
    outbox_listener: Arc<ListenerSlot>,
    clock: Clock,
    secrets: Arc<DerivedKeys>,
}

impl Store {
    /// Opens a store over a migrated database and checks that `master_key` is the
    /// key this database was first used with, so a misconfigured replica refuses
    /// to start instead of rejecting every API key.
    pub async fn open(db: Database, master_key: &MasterKey, clock: Clock) -> Result<Self> {
        secrets::check_master_key(&db, master_key).await?;
        let bookkeeping = db.bookkeeping_twin().await?;
        Ok(Self {
            db,
            bookkeeping,
            listing_cache: Arc::default(),
            outbox_listener: Arc::default(),
            clock,
            secrets: Arc::new(master_key.derive()),
        })
    }

    /// The underlying database.
    pub fn db(&self) -> &Database {
        &self.db
    }

    /// Announces committed events to whoever dispatches them (every clone of
    /// this store shares the listener).
    pub fn set_outbox_listener(&self, listener: Arc<dyn OutboxListener>) {
        self.outbox_listener.set(listener);
    }

    /// Tells the listener that `event_ids` committed.
    pub(crate) fn announce(&self, event_ids: &[EventId]) {
        self.outbox_listener.announce(event_ids);
    }

    /// The cache of single-listing reads.
    pub(crate) fn listing_cache(&self) -> &ListingCache {
        &self.listing_cache
    }

    /// The pool for bookkeeping writes that need not be durable on commit.
    pub(crate) fn bookkeeping(&self) -> &Database {
        &self.bookkeeping
    }

    /// Closes both pools.
    pub async fn close(&self) {
        self.bookkeeping.close().await;
        self.db.close().await;
    }

    /// The clock that stamps rows.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Keys derived from the master key for purposes outside storage (cursor
    /// signing, for example).
    pub fn derived_keys(&self) -> &DerivedKeys {
        &self.secrets
    }
}
