//! The exact total of an endpoint's delivery log, kept rather than counted:
//! one row of `webhook_delivery_counts` per endpoint, changed in the same
//! transaction as every delivery made (fan-out, replay, test fire) or purged.
//! The log's `total` is then one primary-key read, whether the endpoint has
//! had ten deliveries or ten million.

use std::collections::BTreeMap;

use crate::Result;
use crate::db::{Tx, on_tx};
use crate::ids::WebhookEndpointId;

/// Applies `changes` (an endpoint and how many deliveries it gained, or lost
/// when negative) inside the caller's transaction, in one statement.
pub(crate) async fn count<'a>(
    tx: Tx<'_>,
    changes: impl IntoIterator<Item = (&'a WebhookEndpointId, i64)>,
) -> Result<()> {
    let mut deltas: BTreeMap<&str, i64> = BTreeMap::new();
    for (endpoint, delta) in changes {
        *deltas.entry(endpoint.as_str()).or_default() += delta;
    }
    deltas.retain(|_, delta| *delta != 0);
    if deltas.is_empty() {
        return Ok(());
    }
    let rows: Vec<String> = (0..deltas.len())
        .map(|n| format!("(${}, ${})", n * 2 + 1, n * 2 + 2))
        .collect();
    let sql = format!(
        "insert into webhook_delivery_counts (endpoint_id, count) values {}
         on conflict (endpoint_id)
         do update set count = webhook_delivery_counts.count + excluded.count",
        rows.join(", ")
    );
    on_tx!(tx, conn => {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
        for (endpoint, delta) in &deltas {
            query = query.bind(*endpoint).bind(*delta);
        }
        query.execute(&mut *conn).await?;
    });
    Ok(())
}

/// An endpoint's total, read from its counter.
pub(crate) const TOTAL_SQL: &str =
    "select coalesce(max(count), 0) from webhook_delivery_counts where endpoint_id = $1";
