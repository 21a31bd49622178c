//! The transactional outbox: events are written in the transaction of the
//! change they describe ([`insert_events`]), and read back in insertion order
//! by the dispatcher and by tests. Who is told of committed events is
//! `outbox_listener`.

pub use crate::background::outbox_listener::OutboxListener;

use serde_json::Value;
use sqlx::types::Json;

use crate::db::{Tx, in_transaction, on_pool, on_tx, write_on_pool};
use crate::ids::{AgencyId, EventId};
use crate::rules::events::{API_VERSION, NewEvent};
use crate::{Environment, Result, StorageError, Store, Tenant, Timestamp};

/// Writes `events` for `tenant` at `now` in the lender's transaction, in
/// order and in one statement, and returns their ids, which the lender
/// announces once it committed ([`Store::announce`]).
pub(crate) async fn insert_events<'c>(
    tx: impl Into<Tx<'c>>,
    tenant: &Tenant,
    now: Timestamp,
    events: impl IntoIterator<Item = NewEvent>,
) -> Result<Vec<EventId>> {
    let events: Vec<NewEvent> = events.into_iter().collect();
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let tuples: Vec<String> = (0..events.len())
        .map(|i| {
            let p = i * 7;
            format!(
                "(${}, ${}, ${}, ${}, ${}, ${}, ${})",
                p + 1,
                p + 2,
                p + 3,
                p + 4,
                p + 5,
                p + 6,
                p + 7
            )
        })
        .collect();
    let sql = format!(
        "insert into events (event_id, agency_id, is_sandbox, event_type, api_version, occurred_at, data) values {}",
        tuples.join(", ")
    );
    let ids: Vec<EventId> = events.iter().map(|_| EventId::generate()).collect();
    on_tx!(tx.into(), conn => {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (id, event) in ids.iter().zip(events) {
            query = query
                .bind(id.clone())
                .bind(tenant.agency_id.clone())
                .bind(tenant.environment.is_sandbox())
                .bind(event.event_type.as_str())
                .bind(API_VERSION)
                .bind(now)
                .bind(Json(event.data));
        }
        query.execute(&mut *conn).await?;
    });
    Ok(ids)
}

/// Writes one event in the lender's transaction; see [`insert_events`].
pub(crate) async fn insert_event<'c>(
    tx: impl Into<Tx<'c>>,
    tenant: &Tenant,
    now: Timestamp,
    event: NewEvent,
) -> Result<EventId> {
    let mut ids = insert_events(tx, tenant, now, [event]).await?;
    ids.pop()
        .ok_or_else(|| crate::StorageError::Corrupt("an inserted event has no id".to_owned()))
}

/// An event as stored.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    /// Insertion order.
    pub seq: i64,
    /// The ULID clients see as `event_id` and `X-Event-Id`.
    pub event_id: EventId,
    /// Whose event it is.
    pub agency_id: AgencyId,
    /// Live or sandbox activity.
    pub environment: Environment,
    /// Canonical type name.
    pub event_type: String,
    /// Data-shape version.
    pub api_version: String,
    /// When the change happened.
    pub occurred_at: Timestamp,
    /// Event-specific data.
    pub data: Value,
    /// When the dispatcher fanned it out.
    pub dispatched_at: Option<Timestamp>,
}

#[derive(sqlx::FromRow)]
pub(crate) struct EventRow {
    seq: i64,
    event_id: EventId,
    agency_id: AgencyId,
    is_sandbox: bool,
    event_type: String,
    api_version: String,
    occurred_at: Timestamp,
    data: Json<Value>,
    dispatched_at: Option<Timestamp>,
}

impl From<EventRow> for StoredEvent {
    fn from(row: EventRow) -> Self {
        Self {
            seq: row.seq,
            event_id: row.event_id,
            agency_id: row.agency_id,
            environment: Environment::from_sandbox_flag(row.is_sandbox),
            event_type: row.event_type,
            api_version: row.api_version,
            occurred_at: row.occurred_at,
            data: row.data.0,
            dispatched_at: row.dispatched_at,
        }
    }
}

pub(crate) const EVENT_COLUMNS: &str = "seq, event_id, agency_id, is_sandbox, event_type, api_version, occurred_at, data, dispatched_at";

/// Outbox repository; see [`Store::outbox`].
pub struct Outbox<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// The transactional outbox of events.
    pub fn outbox(&self) -> Outbox<'_> {
        Outbox { store: self }
    }
}

impl Outbox<'_> {
    /// The event with this id, whoever's it is (dispatch works across tenants).
    pub async fn get(&self, event_id: &EventId) -> Result<Option<StoredEvent>> {
        let sql = format!("select {EVENT_COLUMNS} from events where event_id = $1");
        let row: Option<EventRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(event_id).fetch_optional(pool).await?
        });
        Ok(row.map(StoredEvent::from))
    }

    /// Marks an event dispatched; false when it already was (another
    /// dispatcher got there first), so a dispatch runs its fan-out once.
    pub async fn mark_dispatched(&self, event_id: &EventId) -> Result<bool> {
        let now = self.store.clock().now();
        let updated = write_on_pool!(self.store.db(), pool => {
            sqlx::query("update events set dispatched_at = $1 where event_id = $2 and dispatched_at is null")
                .bind(now)
                .bind(event_id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(updated == 1)
    }

    /// What the sweep re-dispatches: up to `limit` events of every tenant,
    /// oldest first, not dispatched yet, that occurred before `before` and
    /// were not swept since `resweep_before`. They are marked swept now, so an
    /// event whose dispatch is stuck (a dead job waiting for an operator) is
    /// offered again only after the resweep interval and never holds back the
    /// events behind it.
    pub async fn sweep_missed(
        &self,
        before: Timestamp,
        resweep_before: Timestamp,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        let now = self.store.clock().now();
        let sql = format!(
            "update events set swept_at = $3
             where seq in (
                 select seq from events
                 where dispatched_at is null and occurred_at < $1
                   and (swept_at is null or swept_at < $2)
                 order by seq limit $4)
             returning {EVENT_COLUMNS}"
        );
        let rows: Vec<EventRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(before)
                .bind(resweep_before)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await?
        });
        let mut events: Vec<StoredEvent> = rows.into_iter().map(StoredEvent::from).collect();
        events.sort_by_key(|event| event.seq);
        Ok(events)
    }

    /// Gives back events [`Self::sweep_missed`] marked but whose dispatch
    /// could not be pushed (the queue was away): the next sweep offers them
    /// again, rather than the one after the resweep interval. Events
    /// dispatched meanwhile are left alone. Returns how many were given back.
    pub async fn release_swept(&self, event_ids: &[EventId]) -> Result<u64> {
        if event_ids.is_empty() {
            return Ok(0);
        }
        let ids = serde_json::to_string(event_ids)
            .map_err(|err| StorageError::Corrupt(format!("event ids: {err}")))?;
        let sql = format!(
            "update events set swept_at = null
             where event_id in ({}) and dispatched_at is null",
            self.store.db().backend().id_list("$1")
        );
        let released = write_on_pool!(self.store.db(), pool => {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(ids)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(released)
    }

    /// The position of the tenant's latest event (0 when it has none): a
    /// reader starting now reads what comes after it.
    pub async fn latest_seq(&self, tenant: &Tenant) -> Result<i64> {
        let seq: Option<i64> = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar(
                "select max(seq) from events where agency_id = $1 and is_sandbox = $2",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .fetch_one(pool)
            .await?
        });
        Ok(seq.unwrap_or(0))
    }

    /// Emits `event_type` with `data` for the tenant, as if its change had
    /// happened (`api trigger`: a catalog sample into the sandbox), and
    /// announces it to the dispatcher.
    pub async fn emit(
        &self,
        tenant: &Tenant,
        event_type: crate::rules::events::EventType,
        data: Value,
    ) -> Result<EventId> {
        let now = self.store.clock().now();
        let id = in_transaction!(self.store.db(), |tx| {
            insert_event(
                &mut *tx,
                tenant,
                now,
                NewEvent::new(event_type, data.clone()),
            )
            .await?
        });
        self.store.announce(std::slice::from_ref(&id));
        Ok(id)
    }

    /// The tenant's events after `after_seq`, oldest first.
    pub async fn for_tenant(
        &self,
        tenant: &Tenant,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>> {
        let sql = format!(
            "select {EVENT_COLUMNS} from events
             where agency_id = $1 and is_sandbox = $2 and seq > $3
             order by seq limit $4"
        );
        let rows: Vec<EventRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(after_seq)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(StoredEvent::from).collect())
    }
}
