//! The repository API, run identically against SQLite and PostgreSQL.

use std::collections::BTreeMap;

use storage::api_keys::{KeyFormat, KeyStatus, NewApiKey, Scope};
use storage::ids::{AgencyId, ApiKeyId, DeliveryId, EventId, UserId};
use storage::listings::NewListing;
use storage::people::agencies::AgencyKind;
use storage::people::users::{NewUser, Role, UserFilter};
use storage::webhooks::{DeliveryOrdering, EndpointEnvironment, NewEndpoint};
use storage::{Clock, Entity, Environment, MasterKey, StorageError, Store, Tenant, Timestamp};
use tests::{TestDatabase, backend_tests};

async fn store(backend: tests::Backend) -> (Store, TestDatabase) {
    let db = TestDatabase::create(backend).await;
    let store = db
        .store(Clock::manual(Timestamp::from_micros(1_790_000_000_000_000)))
        .await;
    (store, db)
}

fn new_user(role: Role, email: &str, manager: Option<&UserId>) -> NewUser {
    NewUser {
        role,
        email: Some(email.to_owned()),
        name: Some(email.split('@').next().unwrap().to_owned()),
        manager_id: manager.cloned(),
    }
}

/// Creates a listing at `address`, owned and agented by `owner`: the
/// simplest write that commits events.
async fn create_listing(store: &Store, tenant: &Tenant, owner: &UserId, address: String) {
    let listing = NewListing {
        address,
        owner_user_id: owner.to_string(),
        agent_one_id: owner.to_string(),
        ..Default::default()
    };
    store.listings().create(tenant, listing).await.unwrap();
}

fn live(agency: &AgencyId) -> Tenant {
    Tenant::new(agency.clone(), Environment::Live)
}

backend_tests! {
    async fn an_agency_is_created_with_its_owner(backend) {
        let (store, _db) = store(backend).await;
        let (agency, owner) = store.agencies().create("  Lens & Light  ", AgencyKind::Broker).await.unwrap();
        assert_eq!(agency.name, "Lens & Light");
        assert_eq!(owner.role, Role::Broker);
        assert_eq!(owner.agency_id, agency.id);
        assert_eq!(store.agencies().get(&agency.id).await.unwrap().kind, AgencyKind::Broker);
        assert_eq!(store.agencies().owner(&agency.id).await.unwrap().id, owner.id);
        for bad in ["", "   ", &"n".repeat(201)] {
            let err = store.agencies().create(bad, AgencyKind::MediaAgency).await.unwrap_err();
            assert!(matches!(err, StorageError::Invalid { field: "name", .. }), "{err}");
        }
        assert!(matches!(
            store.agencies().get(&AgencyId::generate()).await,
            Err(StorageError::NotFound(Entity::Agency))
        ));
    }

    async fn users_keep_their_hierarchy_inside_one_agency(backend) {
        let (store, _db) = store(backend).await;
        let (agency, owner) = store.agencies().create("A", AgencyKind::MediaAgency).await.unwrap();
        let (other, other_owner) = store.agencies().create("B", AgencyKind::MediaAgency).await.unwrap();

        let agent = store.users().create(&agency.id, new_user(Role::Agent, "Ana@Example.com", Some(&owner.id))).await.unwrap();
        assert_eq!(agent.email.as_deref(), Some("ana@example.com"));
        assert_eq!(agent.manager_id.as_ref(), Some(&owner.id));
        assert!(agent.is_active);

        // A manager from another agency violates the hierarchy.
        let err = store
            .users()
            .create(&agency.id, new_user(Role::Agent, "bo@example.com", Some(&other_owner.id)))
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::Invalid { field: "manager_id", .. }), "{err}");

        // Emails are unique across the platform, whatever their case.
        let err = store.users().create(&other.id, new_user(Role::Agent, "ANA@example.com", None)).await.unwrap_err();
        assert!(matches!(err, StorageError::Conflict { field: "email" }), "{err}");

        let err = store.users().create(&agency.id, new_user(Role::Agent, "not-an-email", None)).await.unwrap_err();
        assert!(matches!(err, StorageError::Invalid { field: "email", .. }), "{err}");

        let err = store.users().create(&AgencyId::generate(), new_user(Role::Agent, "cy@example.com", None)).await.unwrap_err();
        assert!(matches!(err, StorageError::Invalid { field: "agency_id", .. }), "{err}");
    }

    async fn a_user_is_visible_only_to_its_own_agency(backend) {
        let (store, _db) = store(backend).await;
        let (agency, _) = store.agencies().create("A", AgencyKind::MediaAgency).await.unwrap();
        let (other, _) = store.agencies().create("B", AgencyKind::MediaAgency).await.unwrap();
        let user = store.users().create(&agency.id, new_user(Role::Viewer, "v@example.com", None)).await.unwrap();
        assert_eq!(store.users().get(&live(&agency.id), &user.id).await.unwrap().id, user.id);
        assert!(matches!(store.users().get(&live(&other.id), &user.id).await, Err(StorageError::NotFound(Entity::User))));
    }

    async fn the_users_listing_is_ordered_filtered_and_paged(backend) {
        let (store, _db) = store(backend).await;
        let (agency, owner) = store.agencies().create("A", AgencyKind::MediaAgency).await.unwrap();
        let mut expected = vec![owner.id.clone()];
        for n in 0..5 {
            store.clock().advance_seconds(1);
            let role = if n % 2 == 0 { Role::Agent } else { Role::Assistant };
            let user = store.users().create(&agency.id, new_user(role, &format!("u{n}@example.com"), None)).await.unwrap();
            expected.push(user.id);
        }
        store.users().create(&agency.id, new_user(Role::Admin, "staff@example.com", None)).await.unwrap();

        let tenant = live(&agency.id);
        let all = UserFilter::default();
        let first = store.users().list(&tenant, &all, None, 4).await.unwrap();
        assert_eq!(first.total, 6, "platform roles are not counted");
        assert_eq!(first.items.len(), 4);
        let rest = store.users().list(&tenant, &all, first.next.as_ref(), 4).await.unwrap();
        assert!(rest.next.is_none());
        let listed: Vec<UserId> = first.items.into_iter().chain(rest.items).map(|u| u.id).collect();
        assert_eq!(listed, expected);

        let agents = UserFilter { role: Some(Role::Agent), active: None };
        assert_eq!(store.users().list(&tenant, &agents, None, 50).await.unwrap().total, 3);
        let inactive = UserFilter { role: None, active: Some(false) };
        assert_eq!(store.users().list(&tenant, &inactive, None, 50).await.unwrap().total, 0);
    }

    async fn keys_are_issued_found_by_hash_and_revoked(backend) {
        let (store, _db) = store(backend).await;
        let (agency, owner) = store.agencies().create("A", AgencyKind::MediaAgency).await.unwrap();
        let (other, _) = store.agencies().create("B", AgencyKind::MediaAgency).await.unwrap();
        let issued = store
            .api_keys()
            .issue(
                &agency.id,
                NewApiKey {
                    name: "CRM sync".into(),
                    scopes: vec![Scope::UsersRead, Scope::ListingsWrite, Scope::UsersRead],
                    environment: Environment::Sandbox,
                    format: KeyFormat::Ma,
                    created_by: Some(owner.id.clone()),
                    rate_limit_overrides: BTreeMap::from([("create_listing".to_owned(), 5)]),
                },
            )
            .await
            .unwrap();
        let plaintext = issued.plaintext.expose().to_owned();
        assert!(plaintext.starts_with("ma_test_ak_"));
        assert!(!format!("{issued:?}").contains(&plaintext), "Debug never shows the plaintext");

        let found = store.api_keys().find_by_plaintext(&plaintext).await.unwrap().unwrap().key;
        assert_eq!(found.id, issued.key.id);
        assert_eq!(found.scopes, vec![Scope::ListingsWrite, Scope::UsersRead]);
        assert_eq!(found.environment, Environment::Sandbox);
        assert_eq!(found.created_by.as_ref(), Some(&owner.id));
        assert_eq!(found.rate_limit_overrides.get("create_listing"), Some(&5));
        assert_eq!(found.status, KeyStatus::Active);
        assert!(found.hint.starts_with("ma_test_ak_…"));
        assert!(store.api_keys().find_by_plaintext(&format!("{plaintext}X")).await.unwrap().is_none());

        let default = store
            .api_keys()
            .issue(&agency.id, NewApiKey {
                name: "reader".into(),
                scopes: vec![],
                environment: Environment::Live,
                format: KeyFormat::Sk,
                created_by: None,
                rate_limit_overrides: BTreeMap::new(),
            })
            .await
            .unwrap();
        assert_eq!(default.key.scopes, vec![Scope::ListingsRead]);

        // Another agency cannot revoke it; its own agency can, twice.
        assert!(matches!(
            store.api_keys().revoke(&other.id, &issued.key.id).await,
            Err(StorageError::NotFound(Entity::ApiKey))
        ));
        let revoked = store.api_keys().revoke(&agency.id, &issued.key.id).await.unwrap();
        assert_eq!(revoked.status, KeyStatus::Revoked);
        let again = store.api_keys().revoke(&agency.id, &issued.key.id).await.unwrap();
        assert_eq!(again.revoked_at, revoked.revoked_at);
        assert!(store.api_keys().revoke(&agency.id, &ApiKeyId::generate()).await.is_err());
    }

    async fn a_different_master_key_is_refused_and_migrations_are_idempotent(backend) {
        let db = TestDatabase::create(backend).await;
        let first = db.store(Clock::System).await;
        first.db().migrate().await.unwrap();
        let err = Store::open(db.connect().await, &MasterKey::generate(), Clock::System).await.unwrap_err();
        assert!(matches!(err, StorageError::MasterKeyMismatch), "{err}");
    }

    async fn each_scheduled_tick_is_claimed_once_across_hosts(backend) {
        let (first_host, db) = store(backend).await;
        let second_host = db.store(Clock::manual(Timestamp::from_micros(1_790_000_000_000_000))).await;
        let base = 1_790_000_000_000_000_i64;
        for tick in 0..5_i64 {
            let tick_at = Timestamp::from_micros(base + tick * 5_000_000);
            let claims = (0..8).map(|attempt| {
                let host = if attempt % 2 == 0 { first_host.clone() } else { second_host.clone() };
                tokio::spawn(async move {
                    host.schedules().claim_tick("outbox_sweep", tick_at, &format!("scheduler-{attempt}")).await.unwrap()
                })
            });
            let won = futures::future::join_all(claims).await.into_iter().filter(|claimed| *claimed.as_ref().unwrap()).count();
            assert_eq!(won, 1, "tick {tick}");
            // Another task's claim of the same instant is its own.
            assert!(first_host.schedules().claim_tick("idempotency_purge", tick_at, "scheduler-0").await.unwrap());
        }
        // Claims older than the retention go; newer ones stay claimed.
        let purged = first_host.schedules().purge_ticks(Timestamp::from_micros(base + 10_000_000)).await.unwrap();
        assert_eq!(purged, 4);
        let kept = Timestamp::from_micros(base + 20_000_000);
        assert!(!second_host.schedules().claim_tick("outbox_sweep", kept, "late").await.unwrap());
    }

    async fn the_sweep_offers_each_missed_event_once_per_interval(backend) {
        let (store, _db) = store(backend).await;
        let (agency, owner) = store.agencies().create("Sweep & Co", AgencyKind::MediaAgency).await.unwrap();
        let tenant = live(&agency.id);
        for n in 0..2 {
            create_listing(&store, &tenant, &owner.id, format!("{n} Sweep Row")).await;
        }
        let events: Vec<EventId> = store.outbox().for_tenant(&tenant, 0, 100).await.unwrap().into_iter().map(|e| e.event_id).collect();
        assert!(events.len() >= 2);
        let clock = store.clock().clone();
        let sweep = |limit: u32| {
            let store = store.clone();
            let now = clock.now();
            async move {
                store.outbox().sweep_missed(now.plus_seconds(-5), now.plus_seconds(-600), limit).await.unwrap()
                    .into_iter().map(|e| e.event_id).collect::<Vec<_>>()
            }
        };
        assert!(sweep(100).await.is_empty(), "the fast path gets five seconds");
        clock.advance_seconds(10);
        assert_eq!(sweep(1).await, events[..1], "oldest first");
        assert_eq!(sweep(100).await, events[1..], "a swept event does not hold back the rest");
        assert!(sweep(100).await.is_empty());
        assert!(store.outbox().mark_dispatched(&events[1]).await.unwrap());
        clock.advance_seconds(601);
        let again: Vec<EventId> = events.iter().filter(|id| **id != events[1]).cloned().collect();
        assert_eq!(sweep(100).await, again, "still undispatched after the interval: offered again");
    }

    async fn a_batch_of_events_fans_out_once_in_commit_order_across_agencies(backend) {
        let (store, _db) = store(backend).await;
        let mut tenants = Vec::new();
        let mut endpoints = Vec::new();
        for (name, event_types) in [("Fan One", Some(vec!["listing.created".to_owned()])), ("Fan Two", None)] {
            let (agency, owner) = store.agencies().create(name, AgencyKind::MediaAgency).await.unwrap();
            let tenant = live(&agency.id);
            let endpoint = NewEndpoint {
                name: None,
                url: "https://hooks.example.com/in".to_owned(),
                event_types,
                environment: EndpointEnvironment::Live,
                created_by: Some(owner.id.clone()),
                ..Default::default()
            };
            let (enabled, _) = store.webhooks().create(&tenant, endpoint.clone()).await.unwrap();
            let (disabled, _) = store.webhooks().create(&tenant, endpoint).await.unwrap();
            store.webhooks().set_enabled(&tenant, &disabled.id, false, "test").await.unwrap();
            endpoints.push((enabled.id, disabled.id));
            tenants.push((tenant, owner));
        }
        // Interleaved commits of the two agencies: one listing (two events) each, twice.
        for round in 0..2 {
            for (tenant, owner) in &tenants {
                create_listing(&store, tenant, &owner.id, format!("{round} Fan Lane")).await;
            }
        }
        let mut events = Vec::new();
        for (tenant, _) in &tenants {
            events.extend(store.outbox().for_tenant(tenant, 0, 100).await.unwrap());
        }
        events.sort_by_key(|event| event.seq);
        assert_eq!(events.len(), 8);
        // Given out of order, with an id of no event and one given twice.
        let mut ids: Vec<EventId> = events.iter().rev().map(|e| e.event_id.clone()).collect();
        let no_such_event = EventId::generate();
        ids.push(no_such_event.clone());
        ids.push(events[0].event_id.clone());

        let fan_out = store.webhooks().fan_out(&ids).await.unwrap();
        assert_eq!(fan_out.targets.len(), fan_out.deliveries.len(), "a target for each");
        fan_out.commit.durable().await.unwrap();
        let dispatched: Vec<&str> = fan_out.dispatched.iter().map(|e| e.event_id.as_str()).collect();
        let in_commit_order: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(dispatched, in_commit_order, "each event once, in commit order");
        assert!(fan_out.dispatched.iter().all(|e| e.dispatched_at.is_some()));
        assert_eq!(fan_out.missing, std::slice::from_ref(&no_such_event));
        // Agency one's endpoint hears listing.created only; agency two's every
        // type; the disabled endpoints get failed records, nothing due.
        assert_eq!(fan_out.deliveries.len(), 2 + 4);
        for (n, (tenant, _)) in tenants.iter().enumerate() {
            let (enabled, disabled) = &endpoints[n];
            let due = store.webhooks().deliveries(enabled, None, 100).await.unwrap();
            let expected = if n == 0 { 2 } else { 4 };
            assert_eq!(due.items.len(), expected, "{tenant:?}");
            let pushed = |d: &storage::webhooks::Delivery| {
                fan_out.deliveries.iter().any(|due| due.delivery_id == d.id && due.endpoint_id == d.endpoint_id && due.attempt == 1)
            };
            assert!(due.items.iter().all(pushed));
            let failed = store.webhooks().deliveries(disabled, None, 100).await.unwrap();
            assert_eq!(failed.items.len(), expected, "disabled endpoints keep a failed record");
            assert!(!failed.items.iter().any(pushed));
        }
        for (tenant, _) in &tenants {
            let stored = store.outbox().for_tenant(tenant, 0, 100).await.unwrap();
            assert!(stored.iter().all(|e| e.dispatched_at.is_some()), "marked dispatched");
        }

        // A second run (the sweep and the fast path both pushed) creates nothing.
        let again = store.webhooks().fan_out(&ids).await.unwrap();
        assert!(again.dispatched.is_empty() && again.deliveries.is_empty(), "{again:?}");
        assert_eq!(again.missing, [no_such_event]);
        let total: usize = {
            let mut total = 0;
            for (enabled, disabled) in &endpoints {
                total += store.webhooks().deliveries(enabled, None, 100).await.unwrap().items.len();
                total += store.webhooks().deliveries(disabled, None, 100).await.unwrap().items.len();
            }
            total
        };
        assert_eq!(total, 12);
        assert!(store.webhooks().fan_out(&[]).await.unwrap().dispatched.is_empty());
    }

    async fn a_fan_out_hands_its_first_attempts_what_the_store_reads_once_committed(backend) {
        let (store, _db) = store(backend).await;
        let (agency, owner) = store.agencies().create("Fan Targets", AgencyKind::MediaAgency).await.unwrap();
        let tenant = live(&agency.id);
        let endpoint = |ordering| NewEndpoint {
            url: "https://hooks.example.com/in".to_owned(),
            event_types: Some(vec!["listing.created".to_owned()]),
            environment: EndpointEnvironment::Live,
            ordering,
            created_by: Some(owner.id.clone()),
            ..Default::default()
        };
        // One endpoint in its secret's overlap (two secrets sign), one ordered
        // by listing (its deliveries carry their place in order).
        let (rotated, _) = store.webhooks().create(&tenant, endpoint(DeliveryOrdering::None)).await.unwrap();
        store.webhooks().rotate_secret(&tenant, &rotated.id, 3_600).await.unwrap().unwrap();
        let (ordered, _) = store.webhooks().create(&tenant, endpoint(DeliveryOrdering::Listing)).await.unwrap();
        for n in 0..2 {
            create_listing(&store, &tenant, &owner.id, format!("{n} Target Row")).await;
        }
        let ids: Vec<EventId> = store.outbox().for_tenant(&tenant, 0, 100).await.unwrap()
            .into_iter().map(|event| event.event_id).collect();

        let fan_out = store.webhooks().fan_out(&ids).await.unwrap();
        fan_out.commit.durable().await.unwrap();
        assert_eq!(fan_out.deliveries.len(), 4, "two listing.created events, two endpoints");
        let delivery_ids: Vec<DeliveryId> =
            fan_out.deliveries.iter().map(|due| due.delivery_id.clone()).collect();
        let stored = store.webhooks().targets(&delivery_ids).await.unwrap();
        assert_eq!(fan_out.targets.len(), stored.len());
        for (id, read) in &stored {
            let handed = &fan_out.targets[id];
            assert_eq!(handed.delivery, read.delivery);
            assert_eq!(handed.endpoint, read.endpoint);
            assert_eq!(handed.secret, read.secret);
            assert_eq!(handed.previous_secret, read.previous_secret);
            assert_eq!(handed.held_until, read.held_until);
            assert_eq!(handed.order_key, read.order_key);
            assert_eq!(handed.event_seq, read.event_seq);
            let endpoint_id = &handed.delivery.endpoint_id;
            assert_eq!(handed.signing_secrets().len(), if *endpoint_id == rotated.id { 2 } else { 1 });
            assert_eq!(handed.order_key.is_some(), *endpoint_id == ordered.id);
        }
    }
}

/// The embedded profile's SQLite file: WAL, foreign keys enforced, a busy
/// timeout, and full fsync on commit, on every pooled connection.
#[tokio::test]
async fn sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout() {
    let (store, _db) = store(tests::Backend::Sqlite).await;
    let storage::db::Database::Sqlite(sqlite) = store.db() else {
        panic!("an SQLite store");
    };
    // Several connections at once, so more than the first one is checked.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut connection = sqlite.pool().acquire().await.unwrap();
        let journal: String = sqlx::query_scalar("pragma journal_mode")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        assert_eq!(journal, "wal");
        let foreign_keys: i64 = sqlx::query_scalar("pragma foreign_keys")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        assert_eq!(foreign_keys, 1);
        let busy_timeout: i64 = sqlx::query_scalar("pragma busy_timeout")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        assert!(busy_timeout >= 1000, "busy timeout {busy_timeout} ms");
        let synchronous: i64 = sqlx::query_scalar("pragma synchronous")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        assert_eq!(synchronous, 2, "FULL");
        let checkpoint_pages: i64 = sqlx::query_scalar("pragma wal_autocheckpoint")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        assert_eq!(
            checkpoint_pages,
            i64::from(storage::db::WAL_AUTOCHECKPOINT_PAGES)
        );
        held.push(connection);
    }
}

/// A reservation that meets a record released before it reads it takes the
/// key (PostgreSQL reads each statement of the transaction afresh). A
/// trigger holds the reservation between its insert and its read on an
/// advisory lock the test holds while the record is released.
#[tokio::test]
async fn a_reservation_whose_record_is_released_meanwhile_takes_the_key() {
    use storage::requests::idempotency::Reservation;

    let (store, _db) = store(tests::Backend::Postgres).await;
    let storage::db::Database::Postgres(pool) = store.db() else {
        panic!("a PostgreSQL store");
    };
    let pool = pool.clone();
    let (agency, _) = store
        .agencies()
        .create("Race & Retry", AgencyKind::Broker)
        .await
        .unwrap();
    let lease = std::time::Duration::from_secs(15);
    let first = store
        .idempotency()
        .reserve(&agency.id, "contested", "fingerprint", lease)
        .await
        .unwrap();
    assert_eq!(first, Reservation::Proceed);

    // From here, every insert into the records waits, after its conflict
    // check, for the advisory lock the test holds.
    for statement in [
        "create function hold_after_reservation() returns trigger language plpgsql as $$
         begin perform pg_advisory_lock(4242); perform pg_advisory_unlock(4242); return null; end $$",
        "create trigger hold_after_reservation after insert on idempotency_records
         for each statement execute function hold_after_reservation()",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let mut holder = pool.acquire().await.unwrap();
    sqlx::query("select pg_advisory_lock(4242)")
        .execute(&mut *holder)
        .await
        .unwrap();

    let retry = tokio::spawn({
        let store = store.clone();
        let agency = agency.id.clone();
        async move {
            store
                .idempotency()
                .reserve(&agency, "contested", "fingerprint", lease)
                .await
        }
    });
    // The retry's insert has met the record and waits in its trigger.
    tests::deployment::eventually(
        std::time::Duration::from_secs(30),
        "the retry to wait in its trigger",
        || async {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from pg_stat_activity
                 where wait_event_type = 'Lock' and wait_event = 'advisory'
                   and datname = current_database()",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            (waiting == 1).then_some(())
        },
    )
    .await;
    assert!(!retry.is_finished());
    // The first request gives the key back (it failed with a 5xx).
    store
        .idempotency()
        .release(&agency.id, "contested")
        .await
        .unwrap();
    sqlx::query("select pg_advisory_unlock(4242)")
        .execute(&mut *holder)
        .await
        .unwrap();

    let taken = retry.await.unwrap().expect("the retry's reservation");
    assert_eq!(taken, Reservation::Proceed);
    let state: String = sqlx::query_scalar(
        "select state from idempotency_records where idempotency_key = 'contested'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(state, "in_flight");
}
