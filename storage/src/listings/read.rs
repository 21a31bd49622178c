//! Reading listings: one by number, the detail read (cached; one query, see
//! `detail`) and pages of the tenant's listings.

use std::sync::Arc;

use super::counts;
use super::{ListingFilter, Listings};
use crate::db::on_pool;
use crate::page::{Page, Position};
use crate::records::fetch_listing;
use crate::records::listing::{LISTING_COLUMNS, Listing, ListingRow, found};
use crate::records::numbers::normalise_listing_number;
use crate::rules::listing_status::ListingStatus;
use crate::{Result, Tenant};

use crate::records::listing_detail::ListingDetail;

impl Listings<'_> {
    /// The tenant's listing with this number; another tenant's is `NotFound`.
    pub async fn get(&self, tenant: &Tenant, listing_number: &str) -> Result<Listing> {
        let number = normalise_listing_number(listing_number);
        let row = on_pool!(self.store.db(), pool => fetch_listing!(pool, tenant, &number).await?);
        found(row)
    }

    /// The live listing with this number, whichever agency's it is: what
    /// its public page shows. Sandbox listings are never public.
    pub async fn public(&self, listing_number: &str) -> Result<Option<Listing>> {
        let number = normalise_listing_number(listing_number);
        let sql = format!(
            "select {LISTING_COLUMNS} from listings where listing_number = $1 and is_sandbox = $2"
        );
        let row: Option<ListingRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&number)
                .bind(false)
                .fetch_optional(pool)
                .await?
        });
        row.map(Listing::try_from).transpose()
    }

    /// The tenant's listing with its orders, shoot, people and no-fee cutoff,
    /// in one query.
    pub async fn detail(
        &self,
        tenant: &Tenant,
        listing_number: &str,
    ) -> Result<Arc<ListingDetail>> {
        let number = normalise_listing_number(listing_number);
        let cache = self.store.listing_cache();
        let now = self.store.clock().now();
        if let Some(detail) = cache.get(tenant, &number, now) {
            return Ok(detail);
        }
        let generation = cache.generation();
        let mut detail = super::detail::fetch(self.store.db(), tenant, &number).await?;
        detail.media = self
            .store
            .media()
            .listing_items(tenant, &detail.listing.id)
            .await?;
        let detail = Arc::new(detail);
        cache.put(tenant, &number, detail.clone(), generation, now);
        Ok(detail)
    }

    /// A page of the tenant's listings, oldest first (ties by id), and the
    /// filtered list's exact total. Each filter is served by an index in the
    /// keyset order (`list_sql`) and the total by its counter
    /// (`counts`), so a page costs the same at a million listings as at a
    /// thousand.
    pub async fn list(
        &self,
        tenant: &Tenant,
        filter: &ListingFilter,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<Listing>> {
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let status = filter.status.map(ListingStatus::key);
        let agent = filter.agent_id.as_ref().map(|id| id.as_str());
        let shape = ListShape {
            status: status.is_some(),
            agent: agent.is_some(),
            after: after.is_some(),
        };
        let list_sql = list_sql(shape);
        let (rows, total): (Vec<ListingRow>, i64) = on_pool!(self.store.db(), pool => {
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(list_sql.clone()))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox());
            if let Some(status) = status {
                query = query.bind(status);
            }
            if let Some(agent) = agent {
                query = query.bind(agent);
            }
            if let Some(after) = after {
                query = query.bind(after.created_at).bind(after.id.as_str());
            }
            let rows = query.bind(i64::from(limit) + 1).fetch_all(pool).await?;
            let total = sqlx::query_scalar(counts::TOTAL_SQL)
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(status.unwrap_or(""))
                .bind(agent.unwrap_or(""))
                .fetch_one(pool)
                .await?;
            (rows, total)
        });
        let listings = rows
            .into_iter()
            .map(Listing::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(listings, limit, total, |l| {
            Position::after(l.created_at, l.id.as_str())
        }))
    }
}

/// Which filters a page of listings is asked with: each shape is its own
/// statement, so the planner can pick the index that serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListShape {
    /// Filtered by status.
    pub status: bool,
    /// Filtered by agent.
    pub agent: bool,
    /// After a cursor's position (a page past the first).
    pub after: bool,
}

impl ListShape {
    /// Every shape, for the plan test.
    pub(crate) fn all() -> Vec<Self> {
        let mut shapes = Vec::new();
        for status in [false, true] {
            for agent in [false, true] {
                for after in [false, true] {
                    shapes.push(Self {
                        status,
                        agent,
                        after,
                    });
                }
            }
        }
        shapes
    }
}

/// The statement of a page of listings of `shape`. Its placeholders come in
/// this order: agency, sandbox, then status, agent, the cursor's created_at
/// and id when the shape has them, and last the limit. An agent is agent one
/// or agent two of a listing: each has its index, and the page is the first
/// rows of the two index ranges merged (a listing's two agents differ, so no
/// listing is in both).
pub(crate) fn list_sql(shape: ListShape) -> String {
    let mut next = 2;
    let mut placeholder = || {
        next += 1;
        format!("${next}")
    };
    let status = shape.status.then(&mut placeholder);
    let agent = shape.agent.then(&mut placeholder);
    let after = shape.after.then(|| (placeholder(), placeholder()));
    let limit = placeholder();
    let condition = |agent_column: Option<&str>| {
        let mut condition = "agency_id = $1 and is_sandbox = $2".to_owned();
        if let Some(status) = &status {
            condition.push_str(&format!(" and status = {status}"));
        }
        if let (Some(column), Some(agent)) = (agent_column, &agent) {
            condition.push_str(&format!(" and {column} = {agent}"));
        }
        if let Some((created_at, id)) = &after {
            condition.push_str(&format!(" and (created_at, id) > ({created_at}, {id})"));
        }
        condition
    };
    let select = |agent_column: Option<&str>| {
        format!(
            "select {LISTING_COLUMNS} from listings where {} order by created_at, id limit {limit}",
            condition(agent_column)
        )
    };
    if shape.agent {
        format!(
            "select {LISTING_COLUMNS} from ({}) as agent_one
             union all
             select {LISTING_COLUMNS} from ({}) as agent_two
             order by created_at, id limit {limit}",
            select(Some("agent_one_id")),
            select(Some("agent_two_id")),
        )
    } else {
        select(None)
    }
}
