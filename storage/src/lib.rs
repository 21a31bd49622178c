#![doc = include_str!("../README.md")]

pub mod accounts;
pub mod agencies;
pub mod api_keys;
pub mod appointments;
pub mod availability;
pub mod cancellation;
pub mod clock;
pub mod db;
pub mod error;
pub mod event_catalog;
pub mod events;
pub mod idempotency;
pub mod ids;
pub mod listing_cache;
pub mod listing_status;
pub mod listings;
pub mod media;
pub mod objects;
pub mod orders;
pub mod outbox;
pub mod packages;
pub mod page;
pub mod preferences;
pub mod progress;
pub mod records;
pub mod sandbox;
pub mod schedules;
pub mod secrets;
pub mod sections;
pub mod sessions;
pub mod tenancy;
pub mod users;
pub mod webhooks;

use std::sync::Arc;

pub use clock::{Clock, Timestamp};
pub use db::{Backend, Database, DatabaseTarget};
pub use error::{Entity, Rule, StorageError};
pub use secrets::MasterKey;
pub use tenancy::{Environment, Tenant};

/// Result type of every repository call.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// The handle every caller holds: a database, the clock that stamps rows and the
/// secrets derived from the master key. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    db: Database,
    bookkeeping: Database,
    listing_cache: Arc<listing_cache::ListingCache>,
    outbox_listener: Arc<outbox::ListenerSlot>,
    clock: Clock,
    secrets: Arc<secrets::DerivedKeys>,
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
    pub fn set_outbox_listener(&self, listener: Arc<dyn outbox::OutboxListener>) {
        self.outbox_listener.set(listener);
    }

    /// Tells the listener that `event_ids` committed.
    pub(crate) fn announce(&self, event_ids: &[ids::EventId]) {
        self.outbox_listener.announce(event_ids);
    }

    /// The cache of single-listing reads.
    pub(crate) fn listing_cache(&self) -> &listing_cache::ListingCache {
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
    pub fn derived_keys(&self) -> &secrets::DerivedKeys {
        &self.secrets
    }

    /// Agencies and their owners.
    pub fn agencies(&self) -> agencies::Agencies<'_> {
        agencies::Agencies { store: self }
    }

    /// The people of an agency.
    pub fn users(&self) -> users::Users<'_> {
        users::Users { store: self }
    }

    /// API keys: issuing and authenticating.
    pub fn api_keys(&self) -> api_keys::ApiKeys<'_> {
        api_keys::ApiKeys { store: self }
    }

    /// Listings, their status lifecycle and sections.
    pub fn listings(&self) -> listings::Listings<'_> {
        listings::Listings { store: self }
    }

    /// Orders and invoices of listings.
    pub fn orders(&self) -> orders::Orders<'_> {
        orders::Orders { store: self }
    }

    /// Uploads, their media items and variants.
    pub fn media(&self) -> media::Media<'_> {
        media::Media { store: self }
    }

    /// The sandbox pool's fixtures and recorded side effects.
    pub fn sandbox(&self) -> sandbox::Sandbox<'_> {
        sandbox::Sandbox { store: self }
    }

    /// Sessions of the developer settings: login, impersonation, logout.
    pub fn sessions(&self) -> sessions::Sessions<'_> {
        sessions::Sessions { store: self }
    }

    /// Accounts created through the API.
    pub fn accounts(&self) -> accounts::Accounts<'_> {
        accounts::Accounts { store: self }
    }

    /// Users' display preferences.
    pub fn preferences(&self) -> preferences::UserPreferences<'_> {
        preferences::UserPreferences { store: self }
    }

    /// Webhook endpoints, deliveries and their attempts.
    pub fn webhooks(&self) -> webhooks::Webhooks<'_> {
        webhooks::Webhooks { store: self }
    }

    /// Shoot appointments.
    pub fn appointments(&self) -> appointments::Appointments<'_> {
        appointments::Appointments { store: self }
    }

    /// Photographers' working hours and the free shoot slots they leave.
    pub fn availability(&self) -> availability::Availability<'_> {
        availability::Availability { store: self }
    }

    /// Owners' cancellation fee tiers.
    pub fn cancellation_fees(&self) -> cancellation::CancellationFees<'_> {
        cancellation::CancellationFees { store: self }
    }

    /// The latest progress of long-running operations.
    pub fn progress(&self) -> progress::Progress<'_> {
        progress::Progress { store: self }
    }

    /// Scheduled-tick claims and paused queues.
    pub fn schedules(&self) -> schedules::Schedules<'_> {
        schedules::Schedules { store: self }
    }

    /// Idempotency reservations and stored responses.
    pub fn idempotency(&self) -> idempotency::Idempotency<'_> {
        idempotency::Idempotency { store: self }
    }

    /// The transactional outbox of events.
    pub fn outbox(&self) -> outbox::Outbox<'_> {
        outbox::Outbox { store: self }
    }
}
