//! Recoveries: re-sending, in one job, every delivery of an endpoint that
//! failed for good since a time. A recovery records how many it will re-send
//! and how many it has, so its progress can be read while it runs; each
//! re-send is a replay (a new delivery with `replay_of`), so the delivery log
//! shows it, and a re-run of the job after a crash skips what it re-sent.

use super::Webhooks;
use super::delivery_record::{DELIVERY_COLUMNS, Delivery, DeliveryRow};
use super::endpoint_record::WebhookEndpoint;
use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, RecoveryId, WebhookEndpointId};
use crate::{Result, StorageError, Tenant, Timestamp};

/// Where a recovery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryStatus {
    /// Waiting for a worker.
    Queued,
    /// Re-sending.
    Running,
    /// Every delivery was re-sent once (each succeeded or failed).
    Completed,
    /// Stopped before the end (the endpoint was disabled or deleted).
    Failed,
}

impl RecoveryStatus {
    /// The wire and column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "queued" => Some(Self::Queued),
            "running" => Some(Self::Running),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }

    /// Whether it is over.
    pub const fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed)
    }
}

/// A recovery of an endpoint's failed deliveries.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    /// `whr_…`.
    pub id: RecoveryId,
    /// The endpoint.
    pub endpoint_id: WebhookEndpointId,
    /// Its agency.
    pub agency_id: AgencyId,
    /// Deliveries that failed for good at or after this time are re-sent.
    pub since: Timestamp,
    /// Where it stands.
    pub status: RecoveryStatus,
    /// Deliveries it re-sends.
    pub total: i32,
    /// Re-sent so far.
    pub resent: i32,
    /// Of those, received (2xx).
    pub succeeded: i32,
    /// Of those, failed again.
    pub failed: i32,
    /// Why it stopped early.
    pub error: Option<String>,
    /// When it was asked for.
    pub created_at: Timestamp,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
}

#[derive(sqlx::FromRow)]
struct RecoveryRow {
    id: RecoveryId,
    endpoint_id: WebhookEndpointId,
    agency_id: AgencyId,
    since: Timestamp,
    status: String,
    total: i32,
    resent: i32,
    succeeded: i32,
    failed: i32,
    error: Option<String>,
    created_at: Timestamp,
    finished_at: Option<Timestamp>,
}

const RECOVERY_COLUMNS: &str = "r.id, r.endpoint_id, r.agency_id, r.since, r.status, r.total, \
     r.resent, r.succeeded, r.failed, r.error, r.created_at, r.finished_at";

impl TryFrom<RecoveryRow> for Recovery {
    type Error = StorageError;

    fn try_from(row: RecoveryRow) -> Result<Self> {
        let status = RecoveryStatus::parse(&row.status)
            .ok_or_else(|| StorageError::Corrupt(format!("recovery status {}", row.status)))?;
        Ok(Self {
            id: row.id,
            endpoint_id: row.endpoint_id,
            agency_id: row.agency_id,
            since: row.since,
            status,
            total: row.total,
            resent: row.resent,
            succeeded: row.succeeded,
            failed: row.failed,
            error: row.error,
            created_at: row.created_at,
            finished_at: row.finished_at,
        })
    }
}

/// Where a failed delivery counts for a recovery: an event's delivery that
/// failed for good between `since` and when the recovery was asked for.
pub(crate) const FAILED_SINCE: &str =
    "d.endpoint_id = $1 and d.kind = 'event' and d.status = 'failed'
     and d.completed_at >= $2 and d.completed_at <= $3";

impl Webhooks<'_> {
    /// Records a recovery of `endpoint`'s deliveries that failed since
    /// `since`, counting them. `Err` carries the recovery of the endpoint
    /// still queued or running: one at a time.
    pub async fn start_recovery(
        &self,
        endpoint: &WebhookEndpoint,
        since: Timestamp,
    ) -> Result<std::result::Result<Recovery, Recovery>> {
        let now = self.store.clock().now();
        let id = RecoveryId::generate();
        let running_sql = format!(
            "select {RECOVERY_COLUMNS} from webhook_recoveries r
             where r.endpoint_id = $1 and r.status in ('queued', 'running')
             order by r.created_at limit 1"
        );
        let count_sql = format!("select count(*) from webhook_deliveries d where {FAILED_SINCE}");
        let insert_sql = format!(
            "insert into webhook_recoveries (id, endpoint_id, agency_id, since, status, total, created_at)
             values ($1, $2, $3, $4, 'queued', $5, $6)
             returning {}",
            RECOVERY_COLUMNS.replace("r.", "")
        );
        let started: std::result::Result<RecoveryRow, RecoveryRow> =
            in_transaction!(self.store.db(), |tx| {
                let running: Option<RecoveryRow> = sqlx::query_as(sqlx::AssertSqlSafe(running_sql))
                    .bind(&endpoint.id)
                    .fetch_optional(&mut *tx)
                    .await?;
                match running {
                    Some(running) => Err(running),
                    None => {
                        let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql))
                            .bind(&endpoint.id)
                            .bind(since)
                            .bind(now)
                            .fetch_one(&mut *tx)
                            .await?;
                        let row: RecoveryRow = sqlx::query_as(sqlx::AssertSqlSafe(insert_sql))
                            .bind(&id)
                            .bind(&endpoint.id)
                            .bind(&endpoint.agency_id)
                            .bind(since)
                            .bind(i32::try_from(total).unwrap_or(i32::MAX))
                            .bind(now)
                            .fetch_one(&mut *tx)
                            .await?;
                        Ok(row)
                    }
                }
            });
        Ok(match started {
            Ok(row) => Ok(row.try_into()?),
            Err(row) => Err(row.try_into()?),
        })
    }

    /// One of the tenant's recoveries of `endpoint_id`.
    pub async fn recovery(
        &self,
        tenant: &Tenant,
        endpoint_id: &WebhookEndpointId,
        id: &RecoveryId,
    ) -> Result<Option<Recovery>> {
        let sql = format!(
            "select {RECOVERY_COLUMNS} from webhook_recoveries r
             join webhook_endpoints e on e.id = r.endpoint_id
             where r.id = $1 and r.endpoint_id = $2 and e.agency_id = $3 and e.is_sandbox = $4
               and e.deleted_at is null"
        );
        let row: Option<RecoveryRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .bind(endpoint_id)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .fetch_optional(pool)
                .await?
        });
        row.map(Recovery::try_from).transpose()
    }

    /// A recovery, whoever's it is (its worker).
    pub async fn recovery_to_run(&self, id: &RecoveryId) -> Result<Option<Recovery>> {
        let sql = format!("select {RECOVERY_COLUMNS} from webhook_recoveries r where r.id = $1");
        let row: Option<RecoveryRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        row.map(Recovery::try_from).transpose()
    }

    /// The next `limit` deliveries `recovery` still has to re-send, oldest
    /// first: failed in its window and not re-sent by it yet.
    pub async fn deliveries_to_recover(
        &self,
        recovery: &Recovery,
        limit: u32,
    ) -> Result<Vec<Delivery>> {
        let sql = format!(
            "select {DELIVERY_COLUMNS} from webhook_deliveries d where {FAILED_SINCE}
               and not exists (select 1 from webhook_deliveries r
                   where r.replay_of = d.id and r.created_at >= $3)
             order by d.created_at, d.id limit $4"
        );
        let rows: Vec<DeliveryRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&recovery.endpoint_id)
                .bind(recovery.since)
                .bind(recovery.created_at)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Delivery::try_from).collect()
    }

    /// Records where a recovery stands; a final status stamps its end.
    pub async fn record_recovery(&self, recovery: &Recovery) -> Result<()> {
        let now = self.store.clock().now();
        let finished_at = recovery.status.is_final().then_some(now);
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "update webhook_recoveries set status = $2, resent = $3, succeeded = $4, failed = $5,
                     error = $6, finished_at = $7
                 where id = $1",
            )
            .bind(&recovery.id)
            .bind(recovery.status.as_str())
            .bind(recovery.resent)
            .bind(recovery.succeeded)
            .bind(recovery.failed)
            .bind(&recovery.error)
            .bind(finished_at)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }
}
