//! What the developer portal shows of an agency's traffic: when each API key
//! last authenticated a request, and requests per route and status by hour.
//! Both are bookkeeping: a process records a key's use at most once a
//! minute and adds its request counts every few seconds, so a crash loses
//! at most those seconds of counts, never an acknowledged write.

use crate::db::{bookkeeping_transaction, in_transaction, on_pool};
use crate::ids::{AgencyId, ApiKeyId};
use crate::{Result, Store, Tenant, Timestamp};

/// How stale a key's recorded last use may be before a request records it again.
pub const KEY_USE_RESOLUTION_SECONDS: i64 = 60;
/// How long hourly request counts are kept.
pub const REQUEST_USAGE_RETENTION_SECONDS: i64 = 8 * 86_400;

/// Requests of one agency and environment to one route with one status, in
/// one hour.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct RequestCount {
    /// The agency.
    pub agency_id: AgencyId,
    /// The sandbox pool, or live.
    pub is_sandbox: bool,
    /// The route's template, e.g. `/api/v1/listings/{listing_number}`, with its method.
    pub route: String,
    /// The response status.
    pub status: i32,
    /// The hour's start, in seconds since the Unix epoch.
    pub hour: i64,
    /// Requests.
    pub requests: i64,
}

/// The hour `at` falls in, in seconds since the Unix epoch.
pub fn hour_of(at: Timestamp) -> i64 {
    at.as_unix_seconds().div_euclid(3_600) * 3_600
}

/// Key use and request counts.
pub struct Usage<'a> {
    store: &'a Store,
}

impl Store {
    /// Key use and request counts.
    pub fn usage(&self) -> Usage<'_> {
        Usage { store: self }
    }
}

impl Usage<'_> {
    /// Records that `key` authenticated a request at `at`, unless a use
    /// within [`KEY_USE_RESOLUTION_SECONDS`] is already recorded.
    pub async fn record_key_use(&self, key: &ApiKeyId, at: Timestamp) -> Result<()> {
        let stale = at.plus_seconds(-KEY_USE_RESOLUTION_SECONDS);
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            sqlx::query(
                "update api_keys set last_used_at = $2
                 where id = $1 and (last_used_at is null or last_used_at < $3)",
            )
            .bind(key)
            .bind(at)
            .bind(stale)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Adds `counts` (each a number of requests) to the stored hours.
    pub async fn add_requests(&self, counts: &[RequestCount]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        // Durable: the usage page adds this process's counts and reads them back.
        in_transaction!(self.store.db(), |tx| {
            for count in counts {
                sqlx::query(
                    "insert into request_usage (agency_id, is_sandbox, route, status, hour, requests)
                     values ($1, $2, $3, $4, $5, $6)
                     on conflict (agency_id, is_sandbox, route, status, hour)
                     do update set requests = request_usage.requests + excluded.requests",
                )
                .bind(&count.agency_id)
                .bind(count.is_sandbox)
                .bind(&count.route)
                .bind(count.status)
                .bind(count.hour)
                .bind(count.requests)
                .execute(&mut *tx)
                .await?;
            }
        });
        Ok(())
    }

    /// The tenant's request counts from the hour of `since` on, oldest hour first.
    pub async fn requests_since(
        &self,
        tenant: &Tenant,
        since: Timestamp,
    ) -> Result<Vec<RequestCount>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select agency_id, is_sandbox, route, status, hour, requests from request_usage
                 where agency_id = $1 and is_sandbox = $2 and hour >= $3
                 order by hour, route, status",
            )
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(hour_of(since))
            .fetch_all(pool)
            .await?)
        })
    }

    /// Deletes hours older than [`REQUEST_USAGE_RETENTION_SECONDS`] before `now`.
    pub async fn purge(&self, now: Timestamp) -> Result<u64> {
        let before = hour_of(now.plus_seconds(-REQUEST_USAGE_RETENTION_SECONDS));
        let mut deleted = 0;
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            deleted = sqlx::query("delete from request_usage where hour < $1")
                .bind(before)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        });
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_falls_in_the_hour_that_starts_before_it() {
        let at = Timestamp::from_micros(7_199_999_999);
        assert_eq!(hour_of(at), 3_600);
        assert_eq!(hour_of(Timestamp::from_micros(7_200_000_000)), 7_200);
    }
}
