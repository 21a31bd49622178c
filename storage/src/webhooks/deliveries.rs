//! Deliveries read and made by hand: replays and test fires, one delivery,
//! an endpoint's deliveries, a delivery's attempts, and what a worker needs
//! to make the next attempt.

use std::collections::HashMap;

use sqlx::types::Json;

use super::Webhooks;
use super::delivery_record::{
    Attempt, DELIVERY_COLUMNS, Delivery, DeliveryKind, DeliveryRow, DeliveryStatus, DeliveryTarget,
};
use super::endpoint_record::{ENDPOINT_COLUMNS, EndpointWithSecret, WebhookEndpoint};
use crate::db::{in_transaction, on_pool};
use crate::ids::{DeliveryId, WebhookEndpointId};
use crate::page::{Page, Position};
use crate::{Result, StorageError, Tenant, Timestamp};

impl Webhooks<'_> {
    /// A one-off delivery to the tenant's endpoint (a replay or a test fire),
    /// due now.
    pub async fn create_manual(
        &self,
        endpoint: &WebhookEndpoint,
        kind: DeliveryKind,
        template: &Delivery,
    ) -> Result<Delivery> {
        let now = self.store.clock().now();
        let id = DeliveryId::generate();
        let sql = format!(
            "insert into webhook_deliveries (id, endpoint_id, agency_id, kind, replay_of, event_id,
                 event_type, api_version, occurred_at, is_sandbox, data, status, attempts,
                 next_attempt_at, created_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', 0, $12, $12)
             returning {}",
            DELIVERY_COLUMNS.replace("d.", "")
        );
        let row: DeliveryRow = in_transaction!(self.store.db(), |tx| {
            let row: DeliveryRow = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&id)
                .bind(&endpoint.id)
                .bind(&endpoint.agency_id)
                .bind(kind.as_str())
                .bind(&template.replay_of)
                .bind(&template.event_id)
                .bind(&template.event_type)
                .bind(&template.api_version)
                .bind(template.occurred_at)
                .bind(template.is_sandbox)
                .bind(Json(&template.data))
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
            super::delivery_counts::count((&mut *tx).into(), [(&endpoint.id, 1)]).await?;
            row
        });
        row.try_into()
    }

    /// A delivery of one of the tenant's endpoints.
    pub async fn delivery(&self, tenant: &Tenant, id: &DeliveryId) -> Result<Option<Delivery>> {
        let sql = format!(
            "select {DELIVERY_COLUMNS} from webhook_deliveries d
             join webhook_endpoints e on e.id = d.endpoint_id
             where d.id = $1 and e.agency_id = $2 and e.is_sandbox = $3 and e.deleted_at is null"
        );
        let row: Option<DeliveryRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_optional(pool)
                .await?
        });
        row.map(Delivery::try_from).transpose()
    }

    /// An endpoint's deliveries, newest first.
    pub async fn deliveries(
        &self,
        endpoint_id: &WebhookEndpointId,
        before: Option<&Position>,
        limit: u32,
    ) -> Result<Page<Delivery>> {
        let list_sql = deliveries_page_sql(before.is_some());
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let (rows, total): (Vec<DeliveryRow>, i64) = on_pool!(self.store.db(), pool => {
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(list_sql.clone())).bind(endpoint_id);
            if let Some(before) = before {
                query = query.bind(before.created_at).bind(before.id.as_str());
            }
            let rows = query.bind(i64::from(limit) + 1).fetch_all(pool).await?;
            let total = sqlx::query_scalar(super::delivery_counts::TOTAL_SQL)
                .bind(endpoint_id)
                .fetch_one(pool)
                .await?;
            (rows, total)
        });
        let deliveries = rows
            .into_iter()
            .map(Delivery::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(deliveries, limit, total, |d| {
            Position::after(d.created_at, d.id.as_str())
        }))
    }

    /// An endpoint's latest `limit` deliveries, newest first, of one status
    /// and one event type when given (the portal's filtered delivery log).
    pub async fn recent_deliveries(
        &self,
        endpoint_id: &WebhookEndpointId,
        status: Option<DeliveryStatus>,
        event_type: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Delivery>> {
        let sql = recent_deliveries_sql(status.is_some(), event_type.is_some());
        let rows: Vec<DeliveryRow> = on_pool!(self.store.db(), pool => {
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(endpoint_id);
            if let Some(status) = status {
                query = query.bind(status.as_str());
            }
            if let Some(event_type) = event_type {
                query = query.bind(event_type);
            }
            query
                .bind(i64::from(limit.min(crate::page::MAX_PAGE_SIZE)))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Delivery::try_from).collect()
    }

    /// A delivery's attempts, in order.
    pub async fn attempts(&self, delivery_id: &DeliveryId) -> Result<Vec<Attempt>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select attempt, nonce, started_at, duration_ms, outcome, status_code,
                        response_excerpt, error
                 from webhook_attempts where delivery_id = $1 order by attempt",
            )
            .bind(delivery_id)
            .fetch_all(pool)
            .await?)
        })
    }

    /// The attempts of each of `deliveries` (a page of them, already read
    /// for their tenant), in order, in one statement: a delivery with none
    /// is absent.
    pub async fn attempts_of(
        &self,
        deliveries: &[DeliveryId],
    ) -> Result<HashMap<DeliveryId, Vec<Attempt>>> {
        if deliveries.is_empty() {
            return Ok(HashMap::new());
        }
        let ids = serde_json::to_string(deliveries)
            .map_err(|err| StorageError::Corrupt(format!("delivery ids: {err}")))?;
        let sql = attempts_of_sql(self.store.db().backend());
        let rows: Vec<AttemptOf> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&ids)
                .fetch_all(pool)
                .await?
        });
        let mut attempts: HashMap<DeliveryId, Vec<Attempt>> = HashMap::new();
        for row in rows {
            let id = DeliveryId::parse(&row.delivery_id)
                .ok_or_else(|| StorageError::Corrupt(format!("delivery id {}", row.delivery_id)))?;
            attempts.entry(id).or_default().push(row.attempt);
        }
        Ok(attempts)
    }

    /// A delivery with its endpoint and secret, whoever's it is (workers).
    pub async fn target(&self, delivery_id: &DeliveryId) -> Result<Option<DeliveryTarget>> {
        let mut found = self.targets(std::slice::from_ref(delivery_id)).await?;
        Ok(found.remove(delivery_id))
    }

    /// [`Self::target`] of many deliveries in two statements, whatever their
    /// number: deliveries purged by retention are left out.
    pub async fn targets(
        &self,
        delivery_ids: &[DeliveryId],
    ) -> Result<HashMap<DeliveryId, DeliveryTarget>> {
        #[derive(sqlx::FromRow)]
        struct HeldDeliveryRow {
            #[sqlx(flatten)]
            delivery: DeliveryRow,
            held_until: Option<Timestamp>,
            order_key: Option<String>,
            event_seq: Option<i64>,
        }
        if delivery_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let backend = self.store.db().backend();
        let delivery_sql = format!(
            "select {DELIVERY_COLUMNS}, d.held_until, d.order_key, d.event_seq
             from webhook_deliveries d where d.id in ({})",
            backend.id_list("$1")
        );
        let endpoint_sql = format!(
            "select {ENDPOINT_COLUMNS}, secret_sealed, previous_secret_sealed from webhook_endpoints
             where id in ({}) and deleted_at is null",
            backend.id_list("$1")
        );
        let ids = json_ids(delivery_ids)?;
        let (deliveries, endpoints): (Vec<HeldDeliveryRow>, Vec<EndpointWithSecret>) = on_pool!(self.store.db(), pool => {
            let deliveries: Vec<HeldDeliveryRow> = sqlx::query_as(sqlx::AssertSqlSafe(delivery_sql))
                .bind(&ids)
                .fetch_all(pool)
                .await?;
            let mut endpoint_ids: Vec<&str> = deliveries
                .iter()
                .map(|row| row.delivery.endpoint_id.as_str())
                .collect();
            endpoint_ids.sort_unstable();
            endpoint_ids.dedup();
            let endpoints: Vec<EndpointWithSecret> = if endpoint_ids.is_empty() {
                Vec::new()
            } else {
                sqlx::query_as(sqlx::AssertSqlSafe(endpoint_sql))
                    .bind(json_ids(&endpoint_ids)?)
                    .fetch_all(pool)
                    .await?
            };
            (deliveries, endpoints)
        });
        let now = self.store.clock().now();
        let mut opened: HashMap<String, (WebhookEndpoint, String, Option<String>)> = HashMap::new();
        for row in endpoints {
            let endpoint = WebhookEndpoint::try_from(row.endpoint)?;
            let Some((secret, previous)) = self.open_secrets(
                &endpoint,
                &row.secret_sealed,
                row.previous_secret_sealed.as_deref(),
                now,
            ) else {
                return Err(StorageError::Corrupt(format!(
                    "the signing secret of {} does not open",
                    endpoint.id
                )));
            };
            opened.insert(endpoint.id.to_string(), (endpoint, secret, previous));
        }
        let mut targets = HashMap::with_capacity(deliveries.len());
        for row in deliveries {
            let (held_until, order_key, event_seq) = (row.held_until, row.order_key, row.event_seq);
            let delivery = Delivery::try_from(row.delivery)?;
            let (endpoint, secret, previous_secret) =
                match opened.get(delivery.endpoint_id.as_str()) {
                    Some((endpoint, secret, previous)) => (
                        Some(endpoint.clone()),
                        Some(secret.clone()),
                        previous.clone(),
                    ),
                    None => (None, None, None),
                };
            targets.insert(
                delivery.id.clone(),
                DeliveryTarget {
                    delivery,
                    endpoint,
                    secret,
                    previous_secret,
                    held_until,
                    order_key,
                    event_seq,
                },
            );
        }
        Ok(targets)
    }
}

impl Webhooks<'_> {
    /// `endpoint`'s signing secrets, opened: its current one, and the one its
    /// last rotation replaced while the overlap runs (it signs too). `None`
    /// when the current one does not open.
    pub(super) fn open_secrets(
        &self,
        endpoint: &WebhookEndpoint,
        sealed: &str,
        previous_sealed: Option<&str>,
        now: Timestamp,
    ) -> Option<(String, Option<String>)> {
        let keys = self.store.derived_keys();
        let secret = keys.open(sealed, endpoint.id.as_str())?;
        let previous = match (previous_sealed, endpoint.overlap_until(now)) {
            (Some(sealed), Some(_)) => keys.open(sealed, endpoint.id.as_str()),
            _ => None,
        };
        Some((secret, previous))
    }
}

/// Ids bound as one JSON array (see `Backend::id_list`).
fn json_ids<T: serde::Serialize>(ids: &[T]) -> Result<String> {
    serde_json::to_string(ids).map_err(|err| StorageError::Corrupt(format!("ids: {err}")))
}

/// The statement of an endpoint's latest deliveries with the filters given
/// (`$1` the endpoint, then the status, then the event type, then the
/// limit): each filter in the statement only when it is given, so that the
/// index that leads with it serves the statement in the log's order.
pub(crate) fn recent_deliveries_sql(status: bool, event_type: bool) -> String {
    let mut sql =
        format!("select {DELIVERY_COLUMNS} from webhook_deliveries d where d.endpoint_id = $1");
    let mut next = 2;
    if status {
        sql.push_str(&format!(" and d.status = ${next}"));
        next += 1;
    }
    if event_type {
        sql.push_str(&format!(" and d.event_type = ${next}"));
        next += 1;
    }
    sql.push_str(&format!(
        " order by d.created_at desc, d.id desc limit ${next}"
    ));
    sql
}

/// An attempt with the delivery it belongs to.
#[derive(sqlx::FromRow)]
struct AttemptOf {
    delivery_id: String,
    #[sqlx(flatten)]
    attempt: Attempt,
}

/// The attempts of the deliveries whose ids are the JSON array `$1`, each
/// delivery's in order, by the attempts' key.
pub(crate) fn attempts_of_sql(backend: crate::db::Backend) -> String {
    format!(
        "select delivery_id, attempt, nonce, started_at, duration_ms, outcome, status_code,
                response_excerpt, error
         from webhook_attempts where delivery_id {} order by delivery_id, attempt",
        backend.in_id_list("$1")
    )
}

/// The statement of an endpoint's deliveries page, newest first: `$1` the
/// endpoint, then (a later page) the position before which it starts, then
/// the limit. A later page seeks its position, never reading the pages
/// before it.
pub(crate) fn deliveries_page_sql(before: bool) -> String {
    let (position, limit) = if before {
        (" and (d.created_at, d.id) < ($2, $3)", "$4")
    } else {
        ("", "$2")
    };
    format!(
        "select {DELIVERY_COLUMNS} from webhook_deliveries d where d.endpoint_id = $1{position}
         order by d.created_at desc, d.id desc limit {limit}"
    )
}
