//! The transactional outbox: events are written in the transaction of the
//! change they describe (`insert_event!`), and read back in insertion order by
//! the dispatcher and by tests.

use serde_json::Value;
use sqlx::types::Json;

use crate::db::on_pool;
use crate::ids::AgencyId;
use crate::{Environment, Result, Store, Tenant, Timestamp};

/// Writes one `NewEvent` for `tenant` at `now` with the given executor (a
/// transaction), returning the sqlx result.
macro_rules! insert_event {
    ($executor:expr, $tenant:expr, $now:expr, $event:expr) => {{
        let tenant: &$crate::Tenant = $tenant;
        let event: $crate::events::NewEvent = $event;
        let now: $crate::Timestamp = $now;
        sqlx::query(
            "insert into events (event_id, agency_id, is_sandbox, event_type, api_version, occurred_at, data)
             values ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(ulid::Ulid::generate().to_string())
        .bind(&tenant.agency_id)
        .bind(tenant.environment.is_sandbox())
        .bind(event.event_type.as_str())
        .bind($crate::events::API_VERSION)
        .bind(now)
        .bind(sqlx::types::Json(event.data))
        .execute($executor)
    }};
}
pub(crate) use insert_event;

/// Writes several `NewEvent`s for `tenant` at `now` in one statement, in order.
macro_rules! insert_events {
    ($executor:expr, $tenant:expr, $now:expr, $events:expr) => {{
        let tenant: &$crate::Tenant = $tenant;
        let now: $crate::Timestamp = $now;
        let events: Vec<$crate::events::NewEvent> = $events.into_iter().collect();
        let tuples: Vec<String> = (0..events.len())
            .map(|i| {
                let p = i * 7;
                format!("(${}, ${}, ${}, ${}, ${}, ${}, ${})", p + 1, p + 2, p + 3, p + 4, p + 5, p + 6, p + 7)
            })
            .collect();
        let sql = format!(
            "insert into events (event_id, agency_id, is_sandbox, event_type, api_version, occurred_at, data) values {}",
            tuples.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for event in events {
            query = query
                .bind(ulid::Ulid::generate().to_string())
                .bind(tenant.agency_id.clone())
                .bind(tenant.environment.is_sandbox())
                .bind(event.event_type.as_str())
                .bind($crate::events::API_VERSION)
                .bind(now)
                .bind(sqlx::types::Json(event.data));
        }
        query.execute($executor)
    }};
}
pub(crate) use insert_events;

/// An event as stored.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    /// Insertion order.
    pub seq: i64,
    /// The ULID clients see as `event_id` and `X-Event-Id`.
    pub event_id: String,
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
struct EventRow {
    seq: i64,
    event_id: String,
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

const EVENT_COLUMNS: &str = "seq, event_id, agency_id, is_sandbox, event_type, api_version, occurred_at, data, dispatched_at";

/// Outbox repository; see [`Store::outbox`].
pub struct Outbox<'a> {
    pub(crate) store: &'a Store,
}

impl Outbox<'_> {
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
