//! Reading listings: one by number, the detail read (cached; one query, see
//! `detail`) and pages of the tenant's listings.

use std::sync::Arc;

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

    /// A page of the tenant's listings, oldest first (ties by id).
    pub async fn list(
        &self,
        tenant: &Tenant,
        filter: &ListingFilter,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<Listing>> {
        const WHERE: &str = "agency_id = $1 and is_sandbox = $2
             and ($3 is null or status = $3)
             and ($4 is null or agent_one_id = $4 or agent_two_id = $4)";
        let list_sql = format!(
            "select {LISTING_COLUMNS} from listings where {WHERE}
             and ($5 is null or (created_at, id) > ($5, $6))
             order by created_at, id limit $7"
        );
        let count_sql = format!("select count(*) from listings where {WHERE}");
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let status = filter.status.map(ListingStatus::key);
        let (rows, total): (Vec<ListingRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(list_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(status)
                .bind(&filter.agent_id)
                .bind(after.map(|p| p.created_at))
                .bind(after.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(status)
                .bind(&filter.agent_id)
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
