//! Idempotency records: the reservation that lets exactly one request with a
//! given (agency, key) run, and the stored response every retry within 24 hours
//! gets back. The unique primary key makes the reservation hold across API
//! replicas; a lease, renewed while the request runs, frees a reservation
//! orphaned by a crash.
//!
//! Bookkeeping commits do not wait for the disk: a lost reservation only means
//! a retry runs again after the lease, and creations remember their key on the
//! created row, so even that retry finds the first result.

use std::time::Duration;

use sqlx::types::Json;

use crate::db::bookkeeping_transaction;
use crate::ids::AgencyId;
use crate::retention::PurgeBatch;
use crate::{Result, Store, Timestamp};

/// How long a response is kept for replay.
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// A response as stored for replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status.
    pub status: u16,
    /// The headers that matter (content type, location).
    pub headers: Vec<(String, String)>,
    /// The body, or for errors the error object (code, message, details) as JSON.
    pub body: Vec<u8>,
    /// True when `body` is an error object to be rendered in the envelope.
    pub is_error: bool,
}

/// What a reservation attempt found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reservation {
    /// The key is ours: run the request.
    Proceed,
    /// The same request completed before: send this response again.
    Replay(StoredResponse),
    /// The key was used for a different request.
    Conflict,
    /// The first request with this key is still running.
    InProgress,
    /// (Deferred reservations only.) A request with the same head completed:
    /// its full fingerprint and response, for the caller to compare once it
    /// has read the body.
    Recorded {
        /// The completed request's full fingerprint.
        fingerprint: String,
        /// Its stored response.
        response: StoredResponse,
    },
}

#[derive(sqlx::FromRow)]
struct RecordRow {
    fingerprint: String,
    state: String,
    lease_expires_at: Option<Timestamp>,
    response_status: Option<i32>,
    response_headers: Option<Json<Vec<(String, String)>>>,
    response_body: Option<Vec<u8>>,
    response_is_error: Option<bool>,
    created_at: Timestamp,
}

/// How many times a reservation tries its insert when the record it met is
/// gone by the time it reads it.
const MAX_RESERVE_ATTEMPTS: u32 = 3;

const INSERT_RESERVATION: &str = "insert into idempotency_records
         (agency_id, idempotency_key, fingerprint, state, lease_expires_at, created_at)
     values ($1, $2, $3, 'in_flight', $4, $5)
     on conflict (agency_id, idempotency_key) do nothing";

/// Idempotency repository; see [`Store::idempotency`].
pub struct Idempotency<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Idempotency reservations and stored responses.
    pub fn idempotency(&self) -> Idempotency<'_> {
        Idempotency { store: self }
    }
}

impl Idempotency<'_> {
    /// Tries to reserve `key` for a request with `fingerprint`, holding it for
    /// `lease` unless completed or released first.
    pub async fn reserve(
        &self,
        agency: &AgencyId,
        key: &str,
        fingerprint: &str,
        lease: Duration,
    ) -> Result<Reservation> {
        self.reserve_inner(agency, key, fingerprint, lease, false)
            .await
    }

    /// Reserves `key` for a streamed request whose body cannot be read before
    /// it runs (a multipart upload): `head` fingerprints method, path and
    /// environment; the full fingerprint (`head:` + the body's) is stored on
    /// completion with [`Self::complete_with_fingerprint`]. A completed
    /// request with the same head comes back as [`Reservation::Recorded`].
    pub async fn reserve_deferred(
        &self,
        agency: &AgencyId,
        key: &str,
        head: &str,
        lease: Duration,
    ) -> Result<Reservation> {
        self.reserve_inner(agency, key, head, lease, true).await
    }

    async fn reserve_inner(
        &self,
        agency: &AgencyId,
        key: &str,
        fingerprint: &str,
        lease: Duration,
        deferred: bool,
    ) -> Result<Reservation> {
        let now = self.store.clock().now();
        let lease_expires_at = now.plus_seconds(lease.as_secs().max(1) as i64);
        let expired_before = now.plus_seconds(-(RETENTION.as_secs() as i64));
        let reservation = bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            let mut attempts = 0;
            loop {
                attempts += 1;
                let inserted = sqlx::query(INSERT_RESERVATION)
                    .bind(agency)
                    .bind(key)
                    .bind(fingerprint)
                    .bind(lease_expires_at)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if inserted == 1 {
                    break Reservation::Proceed;
                }
                let row: Option<RecordRow> = sqlx::query_as(
                    "select fingerprint, state, lease_expires_at, response_status, response_headers, response_body,
                         response_is_error, created_at
                     from idempotency_records where agency_id = $1 and idempotency_key = $2",
                )
                .bind(agency)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    // Released between the insert and the read (PostgreSQL
                    // reads each statement afresh): the key is free again, so
                    // the insert is tried again. A key taken and released over
                    // and over meanwhile is in use, as far as this retry knows.
                    if attempts < MAX_RESERVE_ATTEMPTS {
                        continue;
                    }
                    break Reservation::InProgress;
                };
                let orphaned =
                    row.state == "in_flight" && row.lease_expires_at.is_none_or(|at| at <= now);
                let same_request = if deferred {
                    row.fingerprint == fingerprint
                        || row.fingerprint.starts_with(&format!("{fingerprint}:"))
                } else {
                    row.fingerprint == fingerprint
                };
                let reservation = if row.created_at <= expired_before || orphaned {
                    // A record past its 24 hours is gone as far as clients are
                    // concerned; an orphaned reservation is taken over by
                    // whatever comes next (the crashed request never answered,
                    // so no client holds a result the key must protect).
                    sqlx::query(
                        "update idempotency_records
                         set fingerprint = $3, state = 'in_flight', lease_expires_at = $4, created_at = $5,
                             response_status = null, response_headers = null, response_body = null,
                             response_is_error = null, completed_at = null
                         where agency_id = $1 and idempotency_key = $2",
                    )
                    .bind(agency)
                    .bind(key)
                    .bind(fingerprint)
                    .bind(lease_expires_at)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    Reservation::Proceed
                } else if !same_request {
                    Reservation::Conflict
                } else if row.state == "completed" {
                    let response = StoredResponse {
                        status: row
                            .response_status
                            .and_then(|s| u16::try_from(s).ok())
                            .unwrap_or(200),
                        headers: row.response_headers.map(|h| h.0).unwrap_or_default(),
                        body: row
                            .response_body
                            .map(|body| self.open_body(agency, key, body))
                            .unwrap_or_default(),
                        is_error: row.response_is_error.unwrap_or(false),
                    };
                    if deferred {
                        Reservation::Recorded {
                            fingerprint: row.fingerprint,
                            response,
                        }
                    } else {
                        Reservation::Replay(response)
                    }
                } else {
                    Reservation::InProgress
                };
                break reservation;
            }
        });
        Ok(reservation)
    }

    /// What a stored body is sealed for: its agency and key.
    fn context(agency: &AgencyId, key: &str) -> String {
        format!("idempotency/{agency}/{key}")
    }

    /// A stored body, opened. Responses are sealed at rest because some carry
    /// a secret shown once (a webhook signing secret); a body that does not
    /// open is replayed empty rather than wrongly.
    fn open_body(&self, agency: &AgencyId, key: &str, sealed: Vec<u8>) -> Vec<u8> {
        if !crate::secrets::is_sealed_bytes(&sealed) {
            // Stored before responses were sealed.
            return sealed;
        }
        let opened = self
            .store
            .derived_keys()
            .open_bytes(&sealed, &Self::context(agency, key));
        if opened.is_none() {
            tracing::warn!(%agency, "a stored idempotent response does not open");
        }
        opened.unwrap_or_default()
    }

    /// Stores the response of the request that holds the reservation.
    pub async fn complete(
        &self,
        agency: &AgencyId,
        key: &str,
        response: &StoredResponse,
    ) -> Result<()> {
        self.complete_inner(agency, key, None, response).await
    }

    /// Stores the response of a deferred reservation with the request's full
    /// fingerprint.
    pub async fn complete_with_fingerprint(
        &self,
        agency: &AgencyId,
        key: &str,
        fingerprint: &str,
        response: &StoredResponse,
    ) -> Result<()> {
        self.complete_inner(agency, key, Some(fingerprint), response)
            .await
    }

    async fn complete_inner(
        &self,
        agency: &AgencyId,
        key: &str,
        fingerprint: Option<&str>,
        response: &StoredResponse,
    ) -> Result<()> {
        let now = self.store.clock().now();
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            sqlx::query(
                "update idempotency_records
                 set state = 'completed', lease_expires_at = null, response_status = $3, response_headers = $4,
                     response_body = $5, response_is_error = $6, completed_at = $7,
                     fingerprint = coalesce($8, fingerprint)
                 where agency_id = $1 and idempotency_key = $2 and state = 'in_flight'",
            )
            .bind(agency)
            .bind(key)
            .bind(i32::from(response.status))
            .bind(Json(&response.headers))
            .bind(self.store.derived_keys().seal_bytes(&response.body, &Self::context(agency, key)))
            .bind(response.is_error)
            .bind(now)
            .bind(fingerprint)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Extends the reservation of a request still running to `lease` from
    /// now. The request's process renews it while it runs, so the lease can
    /// be short: a reservation orphaned by a crash is free within one lease.
    pub async fn renew(&self, agency: &AgencyId, key: &str, lease: Duration) -> Result<()> {
        let lease_expires_at = self
            .store
            .clock()
            .now()
            .plus_seconds(lease.as_secs().max(1) as i64);
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            sqlx::query(
                "update idempotency_records set lease_expires_at = $3
                 where agency_id = $1 and idempotency_key = $2 and state = 'in_flight'",
            )
            .bind(agency)
            .bind(key)
            .bind(lease_expires_at)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Gives the key back (the request failed with a 5xx or was never run), so
    /// a retry with the same key runs again.
    pub async fn release(&self, agency: &AgencyId, key: &str) -> Result<()> {
        bookkeeping_transaction!(self.store.bookkeeping(), |tx| {
            sqlx::query(
                "delete from idempotency_records where agency_id = $1 and idempotency_key = $2 and state = 'in_flight'",
            )
            .bind(agency)
            .bind(key)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Deletes records older than the retention, at most `limit` of them.
    pub async fn purge_expired(&self, limit: u32) -> Result<PurgeBatch> {
        let cutoff = self
            .store
            .clock()
            .now()
            .plus_seconds(-(RETENTION.as_secs() as i64));
        self.store
            .purge_before(PURGE_EXPIRED_SQL, cutoff, limit)
            .await
    }
}

/// One batch of the idempotency purge: records created at or before `$1`,
/// the oldest first, at most `$2`, found by their age's index.
pub(crate) const PURGE_EXPIRED_SQL: &str =
    "delete from idempotency_records where (agency_id, idempotency_key) in (
         select agency_id, idempotency_key from idempotency_records
         where created_at <= $1 order by created_at limit $2)";
