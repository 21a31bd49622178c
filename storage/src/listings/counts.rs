//! The exact totals of a tenant's listings list, kept rather than counted:
//! one row of `listing_counts` per filter the list takes (every listing, a
//! status, an agent, an agent with a status), changed in the same
//! transaction as every listing created, moved to another status, cancelled
//! or reseeded. A list's `total` is then one primary-key read, whether the
//! tenant holds a thousand listings or a million.
//!
//! Every change to the listings table that creates a listing or changes
//! its status or agents goes through [`count`]; the tests hold the totals
//! to `count(*)` after every kind of change.

use std::collections::BTreeMap;

use crate::db::{Tx, on_tx};
use crate::records::listing::Listing;
use crate::{Result, Tenant};

/// A listing as the totals count it: its status and its agents.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted<'a> {
    /// The status's key (`coming_soon`).
    pub status: &'a str,
    /// Agent one.
    pub agent_one: &'a str,
    /// Agent two, if any.
    pub agent_two: Option<&'a str>,
}

impl<'a> Counted<'a> {
    /// How `listing` counts.
    pub(crate) fn of(listing: &'a Listing) -> Self {
        Self {
            status: listing.status.key(),
            agent_one: listing.agent_one_id.as_str(),
            agent_two: listing.agent_two_id.as_ref().map(|id| id.as_str()),
        }
    }

    /// The totals this listing counts under: every listing, its status, each
    /// agent, each agent with its status (`''` stands for "any").
    fn keys(&self) -> Vec<(&str, &str)> {
        let mut keys = vec![("", ""), (self.status, "")];
        for agent in std::iter::once(self.agent_one).chain(self.agent_two) {
            keys.push(("", agent));
            keys.push((self.status, agent));
        }
        keys
    }
}

/// Applies `changes` (a listing counted, +1, or no longer counted, -1) to
/// the tenant's totals, inside the caller's transaction, in one statement.
pub(crate) async fn count(
    tx: Tx<'_>,
    tenant: &Tenant,
    changes: &[(Counted<'_>, i64)],
) -> Result<()> {
    let mut deltas: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for (counted, delta) in changes {
        for key in counted.keys() {
            *deltas.entry(key).or_default() += delta;
        }
    }
    deltas.retain(|_, delta| *delta != 0);
    if deltas.is_empty() {
        return Ok(());
    }
    let rows: Vec<String> = (0..deltas.len())
        .map(|n| {
            let at = 3 + n * 3;
            format!("($1, $2, ${at}, ${}, ${})", at + 1, at + 2)
        })
        .collect();
    let sql = format!(
        "insert into listing_counts (agency_id, is_sandbox, status, agent_id, count)
         values {}
         on conflict (agency_id, is_sandbox, status, agent_id)
         do update set count = listing_counts.count + excluded.count",
        rows.join(", ")
    );
    on_tx!(tx, conn => {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox());
        for ((status, agent), delta) in &deltas {
            query = query.bind(*status).bind(*agent).bind(*delta);
        }
        query.execute(&mut *conn).await?;
    });
    Ok(())
}

/// The tenant's total for a list filtered by `status` and `agent` (none:
/// any), read from its counter.
pub(crate) const TOTAL_SQL: &str = "select coalesce(max(count), 0) from listing_counts
     where agency_id = $1 and is_sandbox = $2 and status = $3 and agent_id = $4";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_counts_under_every_filter_it_matches() {
        let two_agents = Counted {
            status: "active",
            agent_one: "usr_a",
            agent_two: Some("usr_b"),
        };
        assert_eq!(
            two_agents.keys(),
            [
                ("", ""),
                ("active", ""),
                ("", "usr_a"),
                ("active", "usr_a"),
                ("", "usr_b"),
                ("active", "usr_b"),
            ]
        );
        let one_agent = Counted {
            agent_two: None,
            ..two_agents
        };
        assert_eq!(one_agent.keys().len(), 4);
    }
}
