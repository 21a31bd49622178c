//! Fanning committed events out: one delivery per (event, subscribed
//! endpoint registered by the time the event happened), all of a batch in
//! one transaction.
//!
//! The caller goes on before that transaction reached the disk (see
//! [`FanOut::commit`]): a fan-out lost with its process leaves its events
//! undispatched, and the outbox sweep fans them out again, so a first attempt
//! may start at once with what the fan-out read ([`FanOut::targets`]). What
//! tells another process of the deliveries (a pushed job) waits for the
//! commit.

use std::collections::{HashMap, HashSet};

use sqlx::QueryBuilder;
use sqlx::types::Json;

use super::Webhooks;
use super::delivery_record::{
    Delivery, DeliveryKind, DeliveryStatus, DeliveryTarget, DueAttempt, FanOut,
};
use super::endpoint_record::{
    DeliveryOrdering, ENDPOINT_COLUMNS, EndpointStatus, EndpointWithSecret, WebhookEndpoint,
};
use crate::background::outbox::StoredEvent;
use crate::db::deferred_transaction;
use crate::ids::{AgencyId, DeliveryId, EventId};
use crate::{Result, StorageError};

/// Deliveries inserted by one statement: 17 values each, well under either
/// database's limit on bound values.
const DELIVERIES_PER_STATEMENT: usize = 256;

impl Webhooks<'_> {
    /// Fans a batch of events out, in one transaction: each event not yet
    /// dispatched is marked dispatched and gets one delivery per subscribed,
    /// enabled endpoint of its agency. Events dispatched before are left out,
    /// so a second run creates nothing. One claim statement and one endpoint
    /// read per agency serve the whole batch, whatever its size.
    ///
    /// Returns before the transaction is on disk: await [`FanOut::commit`]
    /// before telling another process of the deliveries.
    pub async fn fan_out(&self, event_ids: &[EventId]) -> Result<FanOut> {
        if event_ids.is_empty() {
            return Ok(FanOut::default());
        }
        let now = self.store.clock().now();
        let ids = serde_json::to_string(event_ids)
            .map_err(|err| StorageError::Corrupt(format!("event ids: {err}")))?;
        let backend = self.store.db().backend();
        let id_list = |placeholder: &str| backend.id_list(placeholder);
        let claim_sql = format!(
            "update events set dispatched_at = $1
             where event_id in ({}) and dispatched_at is null
             returning {}",
            id_list("$2"),
            crate::background::outbox::EVENT_COLUMNS
        );
        let known_sql = format!(
            "select event_id from events where event_id in ({})",
            id_list("$1")
        );
        let earlier_sql = format!(
            "update events set dispatched_at = $1
             where agency_id = $2 and dispatched_at is null and seq < $3
             returning {}",
            crate::background::outbox::EVENT_COLUMNS
        );
        let endpoints_sql = format!(
            "select {ENDPOINT_COLUMNS}, secret_sealed, previous_secret_sealed from webhook_endpoints
             where agency_id = $1 and deleted_at is null"
        );
        let ((mut fan_out, sealed_secrets), commit) =
            deferred_transaction!(self.store.db(), |tx| {
                let claimed: Vec<crate::background::outbox::EventRow> =
                    sqlx::query_as(sqlx::AssertSqlSafe(claim_sql.clone()))
                        .bind(now)
                        .bind(&ids)
                        .fetch_all(&mut *tx)
                        .await?;
                let mut dispatched: Vec<StoredEvent> =
                    claimed.into_iter().map(StoredEvent::from).collect();
                // An agency with an ordered endpoint has its earlier events that
                // no dispatcher took yet fanned out here too, before these: a
                // later event's delivery must never exist without the earlier
                // one's, or it could not wait for it.
                let mut latest_of: HashMap<AgencyId, i64> = HashMap::new();
                for event in &dispatched {
                    let latest = latest_of
                        .entry(event.agency_id.clone())
                        .or_insert(event.seq);
                    *latest = (*latest).max(event.seq);
                }
                let mut endpoints_of: HashMap<AgencyId, Vec<WebhookEndpoint>> = HashMap::new();
                let mut sealed_secrets = Vec::new();
                for (agency_id, latest) in latest_of {
                    let rows: Vec<EndpointWithSecret> =
                        sqlx::query_as(sqlx::AssertSqlSafe(endpoints_sql.clone()))
                            .bind(&agency_id)
                            .fetch_all(&mut *tx)
                            .await?;
                    let mut endpoints = Vec::with_capacity(rows.len());
                    for row in rows {
                        let endpoint = WebhookEndpoint::try_from(row.endpoint)?;
                        if endpoint.status == EndpointStatus::Enabled {
                            sealed_secrets.push((
                                endpoint.clone(),
                                row.secret_sealed,
                                row.previous_secret_sealed,
                            ));
                        }
                        endpoints.push(endpoint);
                    }
                    if endpoints
                        .iter()
                        .any(|e| e.ordering != DeliveryOrdering::None)
                    {
                        let earlier: Vec<crate::background::outbox::EventRow> =
                            sqlx::query_as(sqlx::AssertSqlSafe(earlier_sql.clone()))
                                .bind(now)
                                .bind(&agency_id)
                                .bind(latest)
                                .fetch_all(&mut *tx)
                                .await?;
                        dispatched.extend(earlier.into_iter().map(StoredEvent::from));
                    }
                    endpoints_of.insert(agency_id, endpoints);
                }
                dispatched.sort_by_key(|event| event.seq);
                let missing = if dispatched.len() < event_ids.len() {
                    // Some were dispatched before (a sweep and the fast path both
                    // pushed them), or do not exist at all.
                    let known: Vec<EventId> =
                        sqlx::query_scalar(sqlx::AssertSqlSafe(known_sql.clone()))
                            .bind(&ids)
                            .fetch_all(&mut *tx)
                            .await?;
                    event_ids
                        .iter()
                        .filter(|id| !known.contains(id))
                        .cloned()
                        .collect()
                } else {
                    Vec::new()
                };
                let mut rows = Vec::new();
                for event in &dispatched {
                    let endpoints = endpoints_of
                        .get(&event.agency_id)
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    for endpoint in endpoints {
                        // An endpoint receives what happened after it was
                        // registered, not a backlog of events committed before
                        // (whose dispatch merely came later).
                        let registered_after = endpoint.created_at > event.occurred_at;
                        // An endpoint is not told of its own health.
                        if registered_after
                            || !endpoint.subscribes_to(&event.event_type, event.environment)
                            || super::health::is_about(&event.event_type, &event.data, &endpoint.id)
                        {
                            continue;
                        }
                        rows.push((DeliveryId::generate(), endpoint, event));
                    }
                }
                // Many deliveries to a statement: each statement is a round trip
                // to the database, and a burst fans out thousands.
                let mut inserted: HashSet<DeliveryId> = HashSet::with_capacity(rows.len());
                for chunk in rows.chunks(DELIVERIES_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                    "insert into webhook_deliveries (id, endpoint_id, agency_id, kind, event_id,
                         event_type, api_version, occurred_at, is_sandbox, data, status, attempts,
                         next_attempt_at, created_at, completed_at, order_key, event_seq) ",
                );
                    insert.push_values(chunk, |mut row, (id, endpoint, event)| {
                        // A disabled endpoint gets its delivery failed at once,
                        // without an attempt: a record its owner can replay after
                        // re-enabling.
                        let enabled = endpoint.status == EndpointStatus::Enabled;
                        row.push_bind(id)
                            .push_bind(&endpoint.id)
                            .push_bind(&event.agency_id)
                            .push_bind("event")
                            .push_bind(&event.event_id)
                            .push_bind(&event.event_type)
                            .push_bind(&event.api_version)
                            .push_bind(event.occurred_at)
                            .push_bind(event.environment.is_sandbox())
                            .push_bind(Json(&event.data))
                            .push_bind(if enabled { "pending" } else { "failed" })
                            .push_bind(0_i32)
                            .push_bind(enabled.then_some(now))
                            .push_bind(now)
                            .push_bind((!enabled).then_some(now))
                            .push_bind(endpoint.ordering.key_of(&event.data))
                            .push_bind(event.seq);
                    });
                    insert.push(" on conflict do nothing returning id");
                    let ids: Vec<DeliveryId> =
                        insert.build_query_scalar().fetch_all(&mut *tx).await?;
                    inserted.extend(ids);
                }
                super::delivery_counts::count(
                    (&mut *tx).into(),
                    rows.iter()
                        .filter(|(id, _, _)| inserted.contains(id))
                        .map(|(_, endpoint, _)| (&endpoint.id, 1)),
                )
                .await?;
                let mut deliveries = Vec::with_capacity(inserted.len());
                let mut targets = HashMap::with_capacity(inserted.len());
                for (id, endpoint, event) in rows {
                    if endpoint.status != EndpointStatus::Enabled || !inserted.contains(&id) {
                        continue;
                    }
                    deliveries.push(DueAttempt {
                        delivery_id: id.clone(),
                        endpoint_id: endpoint.id.clone(),
                        attempt: 1,
                    });
                    let target = first_attempt_target(&id, endpoint, event, now);
                    targets.insert(id, target);
                }
                (
                    FanOut {
                        dispatched,
                        missing,
                        deliveries,
                        targets,
                        commit: crate::db::Commit::done(),
                    },
                    sealed_secrets,
                )
            });
        // The secrets are opened out of the writer's turn. One that does not
        // open leaves its deliveries without a target: their attempts read
        // it from the store and fail there, as any attempt would.
        let mut secrets = HashMap::with_capacity(sealed_secrets.len());
        for (endpoint, sealed, previous_sealed) in &sealed_secrets {
            if let Some(opened) =
                self.open_secrets(endpoint, sealed, previous_sealed.as_deref(), now)
            {
                secrets.insert(endpoint.id.clone(), opened);
            }
        }
        fan_out.targets.retain(|_, target| {
            let Some((secret, previous)) = secrets.get(&target.delivery.endpoint_id) else {
                return false;
            };
            target.secret = Some(secret.clone());
            target.previous_secret.clone_from(previous);
            true
        });
        fan_out.commit = commit;
        Ok(fan_out)
    }
}

/// What the first attempt of new delivery `id` of `event` to `endpoint`
/// needs, as the store holds it once the fan-out is committed; its secrets
/// are opened later, out of the writer's turn.
fn first_attempt_target(
    id: &DeliveryId,
    endpoint: &WebhookEndpoint,
    event: &StoredEvent,
    now: crate::Timestamp,
) -> DeliveryTarget {
    DeliveryTarget {
        delivery: Delivery {
            id: id.clone(),
            endpoint_id: endpoint.id.clone(),
            agency_id: event.agency_id.clone(),
            kind: DeliveryKind::Event,
            replay_of: None,
            event_id: event.event_id.clone(),
            event_type: event.event_type.clone(),
            api_version: event.api_version.clone(),
            occurred_at: event.occurred_at,
            is_sandbox: event.environment.is_sandbox(),
            data: event.data.clone(),
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: Some(now),
            created_at: now,
            completed_at: None,
        },
        endpoint: Some(endpoint.clone()),
        secret: None,
        previous_secret: None,
        held_until: None,
        order_key: endpoint.ordering.key_of(&event.data),
        event_seq: Some(event.seq),
    }
}
