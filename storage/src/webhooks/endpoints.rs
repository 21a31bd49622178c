//! Managing an agency's endpoints: register, read, list, update, enable or
//! disable, rotate the signing secret, delete; and opening a sealed secret.

use sqlx::types::Json;

use super::Webhooks;
use super::delivery_record::DueAttempt;
use super::endpoint_record::{
    DeliveryOrdering, ENDPOINT_COLUMNS, EndpointChanges, EndpointEnvironment, EndpointRow,
    NewEndpoint, SignatureScheme, WebhookEndpoint, generate_secret,
};
use crate::db::{in_transaction, on_pool};
use crate::ids::{DeliveryId, WebhookEndpointId};
use crate::page::{Page, Position};
use crate::{Result, Tenant};

impl Webhooks<'_> {
    /// Registers an endpoint; returns it and its signing secret (shown once).
    pub async fn create(
        &self,
        tenant: &Tenant,
        new: NewEndpoint,
    ) -> Result<(WebhookEndpoint, String)> {
        let id = WebhookEndpointId::generate();
        let secret = generate_secret();
        let sealed = self.store.derived_keys().seal(&secret, id.as_str());
        let now = self.store.clock().now();
        let sql = format!(
            "insert into webhook_endpoints (id, agency_id, is_sandbox, name, url, event_types,
                 environment, secret_sealed, status, consecutive_failures, created_by, created_at, updated_at,
                 signature_scheme, hourly_budget, ordering)
             values ($1, $2, $3, $4, $5, $6, $7, $8, 'enabled', 0, $9, $10, $10, $11, $12, $13)
             returning {ENDPOINT_COLUMNS}"
        );
        let row: EndpointRow = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&new.name)
                .bind(&new.url)
                .bind(new.event_types.as_ref().map(Json))
                .bind(new.environment.as_str())
                .bind(&sealed)
                .bind(&new.created_by)
                .bind(now)
                .bind(new.signature_scheme.as_str())
                .bind(new.hourly_budget)
                .bind(new.ordering.as_str())
                .fetch_one(&mut *tx)
                .await?
        });
        Ok((row.try_into()?, secret))
    }

    /// The tenant's endpoint.
    pub async fn get(
        &self,
        tenant: &Tenant,
        id: &WebhookEndpointId,
    ) -> Result<Option<WebhookEndpoint>> {
        let sql = format!(
            "select {ENDPOINT_COLUMNS} from webhook_endpoints
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null"
        );
        let row: Option<EndpointRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_optional(pool)
                .await?
        });
        self.with_held_back(row.map(WebhookEndpoint::try_from).transpose()?)
            .await
    }

    /// `endpoint` with what its budget holds back now.
    async fn with_held_back(
        &self,
        endpoint: Option<WebhookEndpoint>,
    ) -> Result<Option<WebhookEndpoint>> {
        let Some(mut endpoint) = endpoint else {
            return Ok(None);
        };
        endpoint.held_back = self.held_back(&endpoint.id).await?;
        Ok(Some(endpoint))
    }

    /// The tenant's endpoints, oldest first.
    pub async fn list(
        &self,
        tenant: &Tenant,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<WebhookEndpoint>> {
        const WHERE: &str = "agency_id = $1 and is_sandbox = $2 and deleted_at is null";
        let list_sql = format!(
            "select {ENDPOINT_COLUMNS} from webhook_endpoints where {WHERE}
             and ($3 is null or (created_at, id) > ($3, $4))
             order by created_at, id limit $5"
        );
        let count_sql = format!("select count(*) from webhook_endpoints where {WHERE}");
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let (rows, total): (Vec<EndpointRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(list_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(after.map(|p| p.created_at))
                .bind(after.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_one(pool)
                .await?;
            (rows, total)
        });
        let mut endpoints = rows
            .into_iter()
            .map(WebhookEndpoint::try_from)
            .collect::<Result<Vec<_>>>()?;
        let held_back = self
            .held_back_by_endpoint(&tenant.agency_id, tenant.environment)
            .await?;
        for endpoint in &mut endpoints {
            if let Some((_, held)) = held_back.iter().find(|(id, _)| *id == endpoint.id) {
                endpoint.held_back = *held;
            }
        }
        Ok(Page::from_overfetch(endpoints, limit, total, |e| {
            Position::after(e.created_at, e.id.as_str())
        }))
    }

    /// Applies a partial update; `None` when the tenant has no such endpoint.
    /// A changed hourly budget starts afresh: the deliveries the old one
    /// held back are released, due now, and returned for the caller to
    /// offer to the workers (their attempts spend the new budget). A changed
    /// ordering releases the deliveries waiting for their turn the same way.
    pub async fn update(
        &self,
        tenant: &Tenant,
        id: &WebhookEndpointId,
        changes: EndpointChanges,
    ) -> Result<Option<(WebhookEndpoint, Vec<DueAttempt>)>> {
        let now = self.store.clock().now();
        let sql = format!(
            "update webhook_endpoints set
                 name = case when $4 then $5 else name end,
                 url = coalesce($6, url),
                 event_types = case when $7 then $8 else event_types end,
                 environment = coalesce($9, environment),
                 signature_scheme = coalesce($11, signature_scheme),
                 hourly_budget = case when $12 then $13 else hourly_budget end,
                 budget_tat = case when $12 then null else budget_tat end,
                 ordering = coalesce($14, ordering),
                 updated_at = $10
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null
             returning {ENDPOINT_COLUMNS}"
        );
        let budget_changed = changes.hourly_budget.is_some();
        let ordering_changed = changes.ordering.is_some();
        let updated: Option<(EndpointRow, Vec<DueAttempt>)> =
            in_transaction!(self.store.db(), |tx| {
                let row: Option<EndpointRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .bind(&tenant.agency_id)
                    .bind(tenant.environment.is_sandbox())
                    .bind(changes.name.is_some())
                    .bind(changes.name.clone().flatten())
                    .bind(&changes.url)
                    .bind(changes.event_types.is_some())
                    .bind(changes.event_types.clone().flatten().map(Json))
                    .bind(changes.environment.map(EndpointEnvironment::as_str))
                    .bind(now)
                    .bind(changes.signature_scheme.map(SignatureScheme::as_str))
                    .bind(budget_changed)
                    .bind(changes.hourly_budget.flatten())
                    .bind(changes.ordering.map(DeliveryOrdering::as_str))
                    .fetch_optional(&mut *tx)
                    .await?;
                match row {
                    Some(row) if budget_changed || ordering_changed => {
                        let released: Vec<(DeliveryId, WebhookEndpointId, i32)> = sqlx::query_as(
                            "update webhook_deliveries set held_until = null, next_attempt_at = $2
                         where endpoint_id = $1 and held_until is not null
                           and status in ('pending', 'retrying')
                         returning id, endpoint_id, attempts + 1",
                        )
                        .bind(id)
                        .bind(now)
                        .fetch_all(&mut *tx)
                        .await?;
                        let released = released
                            .into_iter()
                            .map(|(delivery_id, endpoint_id, attempt)| DueAttempt {
                                delivery_id,
                                endpoint_id,
                                attempt,
                            })
                            .collect();
                        Some((row, released))
                    }
                    Some(row) => Some((row, Vec::new())),
                    None => None,
                }
            });
        let Some((row, released)) = updated else {
            return Ok(None);
        };
        let endpoint = self
            .with_held_back(Some(WebhookEndpoint::try_from(row)?))
            .await?;
        Ok(endpoint.map(|endpoint| (endpoint, released)))
    }

    /// Disables (with `reason`) or re-enables an endpoint. Re-enabling
    /// clears the reason and the failure count.
    pub async fn set_enabled(
        &self,
        tenant: &Tenant,
        id: &WebhookEndpointId,
        enabled: bool,
        reason: &str,
    ) -> Result<Option<WebhookEndpoint>> {
        let now = self.store.clock().now();
        let sql = format!(
            "update webhook_endpoints set
                 status = case when $4 then 'enabled' else 'disabled' end,
                 disabled_reason = case when $4 then null
                     when status = 'disabled' then disabled_reason else $5 end,
                 disabled_at = case when $4 then null
                     when status = 'disabled' then disabled_at else $6 end,
                 consecutive_failures = case when $4 then 0 else consecutive_failures end,
                 updated_at = $6
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null
             returning {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(enabled)
                .bind(reason)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
        });
        self.with_held_back(row.map(WebhookEndpoint::try_from).transpose()?)
            .await
    }

    /// Replaces the signing secret; returns the new one (shown once). The
    /// replaced secret keeps signing deliveries alongside the new one for
    /// `overlap_seconds` (none when 0); a rotation during an overlap ends
    /// the older one.
    pub async fn rotate_secret(
        &self,
        tenant: &Tenant,
        id: &WebhookEndpointId,
        overlap_seconds: i64,
    ) -> Result<Option<(WebhookEndpoint, String)>> {
        let secret = generate_secret();
        let sealed = self.store.derived_keys().seal(&secret, id.as_str());
        let now = self.store.clock().now();
        let overlap_until = (overlap_seconds > 0).then(|| now.plus_seconds(overlap_seconds));
        let sql = format!(
            "update webhook_endpoints set
                 previous_secret_sealed = case when $6 is null then null else secret_sealed end,
                 previous_secret_expires_at = $6,
                 secret_sealed = $4, updated_at = $5
             where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null
             returning {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&sealed)
                .bind(now)
                .bind(overlap_until)
                .fetch_optional(&mut *tx)
                .await?
        });
        let endpoint = self
            .with_held_back(row.map(WebhookEndpoint::try_from).transpose()?)
            .await?;
        Ok(endpoint.map(|endpoint| (endpoint, secret)))
    }

    /// Deletes an endpoint: it disappears from the API and receives nothing
    /// more; its deliveries and attempts stay for the record until retention
    /// purges them.
    pub async fn delete(&self, tenant: &Tenant, id: &WebhookEndpointId) -> Result<bool> {
        let now = self.store.clock().now();
        let deleted = in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_endpoints set deleted_at = $4, updated_at = $4
                 where id = $1 and agency_id = $2 and is_sandbox = $3 and deleted_at is null",
            )
            .bind(id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(deleted == 1)
    }

    /// The sealed secret as stored (for checks that it is not plaintext).
    pub async fn sealed_secret(&self, id: &WebhookEndpointId) -> Result<Option<String>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar("select secret_sealed from webhook_endpoints where id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?)
        })
    }
}
