//! What operators did to jobs, queues and workers, from the console or the
//! command line: who, what, on which job or filter, and how many it touched.

use crate::db::{in_transaction, on_pool};
use crate::{Result, Store, Timestamp};

/// One operator action.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditEntry {
    /// `opa_…`.
    pub id: String,
    /// When.
    pub at: Timestamp,
    /// Who: the operator account, the platform key, or the command line's user and host.
    pub actor: String,
    /// What: `retry`, `discard`, `run_now`, `cancel`, `pause`, `resume`, `quiet`, `stop`.
    pub action: String,
    /// On what: the job, queue or worker, or the filter, as JSON.
    pub target: String,
    /// How many jobs (or workers) it touched.
    pub count: i64,
}

/// The operators' audit log.
pub struct OpsAudit<'a> {
    store: &'a Store,
}

impl Store {
    /// The operators' audit log.
    pub fn ops_audit(&self) -> OpsAudit<'_> {
        OpsAudit { store: self }
    }
}

impl OpsAudit<'_> {
    /// Records an action (durably: an acknowledged action is on record).
    pub async fn record(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        count: u64,
    ) -> Result<AuditEntry> {
        let entry = AuditEntry {
            id: format!("opa_{}", ulid::Ulid::generate()),
            at: self.store.clock().now(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target: target.to_owned(),
            count: i64::try_from(count).unwrap_or(i64::MAX),
        };
        in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into ops_audit (id, at, actor, action, target, count) values ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&entry.id)
            .bind(entry.at)
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.target)
            .bind(entry.count)
            .execute(&mut *tx)
            .await?;
        });
        Ok(entry)
    }

    /// The latest `limit` actions, newest first.
    pub async fn recent(&self, limit: u32) -> Result<Vec<AuditEntry>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select id, at, actor, action, target, count from ops_audit order by at desc, id desc limit $1",
            )
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?)
        })
    }
}
