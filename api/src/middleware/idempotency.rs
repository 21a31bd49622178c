//! Idempotent requests. POST and PATCH must carry `X-Idempotency-Key`; PUT and
//! DELETE honour it when present; safe methods never look at it. The first
//! request with a key reserves it in the database (so every replica sees the
//! reservation) and its response is stored for 24 hours: the same request again
//! gets that response with `X-Idempotent-Replay: true`, a different request
//! with the key gets 409 `idempotency_key_conflict`, and a retry while the first
//! still runs gets 409 `idempotency_key_in_progress` with `Retry-After: 5`.
//!
//! What is stored (docs/decisions.md): 2xx responses and the 4xx the endpoint
//! ran and decided (not found, the listing rules; `ApiError::is_decided`).
//! Not stored, so the key is released: every 5xx, and every request refused
//! before it did anything (validation, budgets, credentials), Stripe's rule.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{OriginalUri, Request};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use serde_json::Value;
use sha2::{Digest, Sha256};
use storage::ids::AgencyId;
use storage::requests::idempotency::{Reservation, StoredResponse};
use storage::{Environment, Store};

use crate::error::{ApiError, ErrorBody};
use crate::middleware::deadline::StopCleanups;

/// The request header.
pub const HEADER: &str = "x-idempotency-key";
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 128;
/// How long a reservation outlives a crash of the request holding it. A
/// running request renews it every [`RENEW_EVERY`], so however long it runs
/// (an upload has 60 seconds to arrive) it is never taken over, while a
/// retry after a crash of its process (on another replica) runs within one
/// lease instead of waiting minutes.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often a running request renews its reservation: a lease outlasts two
/// renewals that fail (the database busy or restarting).
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
/// Largest request body fingerprinted in memory (JSON bodies).
const MAX_BODY: usize = 1024 * 1024;
/// Largest multipart body read through to compare a retry (an upload's limit).
const MAX_MULTIPART_BODY: u64 = 1024 * 1024 * 1024;
/// Largest response body stored for replay.
const MAX_STORED_RESPONSE: usize = 4 * 1024 * 1024;
/// The idempotency key of the current request, for handlers that create
/// resources and remember the key on them.
#[derive(Clone, Debug)]
pub struct IdempotencyKey(pub String);

/// `X-Idempotent-Replay` on a replayed response.
const REPLAY_HEADER: &str = "x-idempotent-replay";

/// The fingerprint of a request: method, path, environment and the canonical
/// body (JSON with sorted keys; other bodies as bytes).
pub fn fingerprint(method: &Method, path: &str, environment: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(method.as_str());
    hasher.update(b"\n");
    hasher.update(path);
    hasher.update(b"\n");
    hasher.update(environment);
    hasher.update(b"\n");
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => hasher.update(canonical_json(&value)),
        Err(_) => hasher.update(body),
    }
    hex::encode(hasher.finalize())
}

/// JSON with object keys sorted at every level, whatever the map type.
fn canonical_json(value: &Value) -> Vec<u8> {
    fn write(value: &Value, out: &mut Vec<u8>) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push(b'{');
                for (i, (key, value)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend(serde_json::to_vec(key).unwrap_or_default());
                    out.push(b':');
                    write(value, out);
                }
                out.push(b'}');
            }
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write(item, out);
                }
                out.push(b']');
            }
            scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
        }
    }
    let mut out = Vec::new();
    write(value, &mut out);
    out
}

/// Gives `key` back, so a retry with it runs again; a failure is logged
/// (the reservation's lease frees the key within seconds anyway).
async fn release(store: &Store, agency: &AgencyId, key: &str) {
    if let Err(err) = store.idempotency().release(agency, key).await {
        tracing::warn!(%err, "could not release an idempotency key");
    }
}

/// Gives the reservation back if the request ends without recording an
/// outcome: stopped at its deadline, its client gone, or (through
/// [`Self::release_spawned`]) a panic.
struct ReleaseOnDrop {
    store: Store,
    agency: AgencyId,
    key: String,
    /// Where a request stopped at its deadline registers the release, so
    /// its 503 goes out once the key is free.
    cleanups: Option<StopCleanups>,
    armed: bool,
}

impl ReleaseOnDrop {
    fn armed(store: &Store, agency: &AgencyId, key: &str, request: &Request) -> Self {
        Self {
            store: store.clone(),
            agency: agency.clone(),
            key: key.to_owned(),
            cleanups: request.extensions().get::<StopCleanups>().cloned(),
            armed: true,
        }
    }

    /// Disarms the guard and releases the key in a task of its own,
    /// registered with the request's clean-ups; the receiver hears when it
    /// is done. Once only: `None` when disarmed already (or outside a
    /// runtime). A task, so the release completes even if whoever waits
    /// for it is dropped, and is never made twice.
    fn release_spawned(&mut self) -> Option<tokio::sync::oneshot::Receiver<()>> {
        if !std::mem::replace(&mut self.armed, false) {
            return None;
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (store, agency, key) = (
            self.store.clone(),
            self.agency.clone(),
            std::mem::take(&mut self.key),
        );
        let (done, finished) = tokio::sync::oneshot::channel();
        let task = runtime.spawn(async move {
            release(&store, &agency, &key).await;
            let _ = done.send(());
        });
        if let Some(cleanups) = &self.cleanups {
            cleanups.register(task);
        }
        Some(finished)
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let _ = self.release_spawned();
    }
}

/// The key a request carries, `None` when the method does not use one.
fn key_of(request: &Request) -> Result<Option<String>, ApiError> {
    let required = matches!(*request.method(), Method::POST | Method::PATCH);
    let honoured = required || matches!(*request.method(), Method::PUT | Method::DELETE);
    if !honoured {
        return Ok(None);
    }
    let Some(value) = request.headers().get(HEADER) else {
        return if required {
            Err(ApiError::IdempotencyMissing)
        } else {
            Ok(None)
        };
    };
    let invalid = |reason: &str| ApiError::InvalidHeader {
        name: "X-Idempotency-Key",
        reason: reason.to_owned(),
    };
    let key = value
        .to_str()
        .map_err(|_| invalid("must be visible ASCII text"))?
        .trim();
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(invalid(&format!("must be 1 to {MAX_KEY_LEN} characters")));
    }
    Ok(Some(key.to_owned()))
}

fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = if stored.is_error {
        let mut response = status.into_response();
        match serde_json::from_slice::<ErrorBody>(&stored.body) {
            Ok(body) => {
                response.extensions_mut().insert(body);
            }
            Err(err) => tracing::warn!(%err, "stored error body does not parse"),
        }
        response
    } else {
        let mut response = (status, stored.body).into_response();
        for (name, value) in &stored.headers {
            if let (Ok(name), Ok(value)) = (
                header::HeaderName::try_from(name.as_str()),
                HeaderValue::from_str(value),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
        response
    };
    response
        .headers_mut()
        .insert(REPLAY_HEADER, HeaderValue::from_static("true"));
    response
}

/// Records the outcome of the request that held the reservation and returns
/// the response to send.
async fn record(
    store: &Store,
    agency: &AgencyId,
    key: &str,
    fingerprint: Option<&str>,
    response: Response,
) -> Response {
    let status = response.status();
    let error = response.extensions().get::<ErrorBody>().cloned();
    // Only what the endpoint ran and decided is kept (ApiError::is_decided).
    let kept = match &error {
        Some(error) => error.decided,
        None => !status.is_client_error() && !status.is_server_error(),
    };
    if !kept {
        release(store, agency, key).await;
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes: Bytes = match to_bytes(body, MAX_STORED_RESPONSE).await {
        Ok(bytes) => bytes,
        Err(err) => {
            release(store, agency, key).await;
            return ApiError::internal(format!("response body unreadable: {err}")).into_response();
        }
    };
    let stored = match &error {
        Some(error) => StoredResponse {
            status: status.as_u16(),
            headers: Vec::new(),
            body: serde_json::to_vec(error).unwrap_or_default(),
            is_error: true,
        },
        None => StoredResponse {
            status: status.as_u16(),
            headers: [header::CONTENT_TYPE, header::LOCATION]
                .iter()
                .chain(crate::routes::media::resumable::protocol::REPLAYED_HEADERS.iter())
                .filter_map(|name| {
                    let value = parts.headers.get(name)?.to_str().ok()?;
                    Some((name.as_str().to_owned(), value.to_owned()))
                })
                .collect(),
            body: bytes.to_vec(),
            is_error: false,
        },
    };
    let completed = match fingerprint {
        Some(fingerprint) => {
            store
                .idempotency()
                .complete_with_fingerprint(agency, key, fingerprint, &stored)
                .await
        }
        None => store.idempotency().complete(agency, key, &stored).await,
    };
    if let Err(err) = completed {
        // The response is still correct; a retry will run again after the lease.
        tracing::warn!(%err, "could not store an idempotent response");
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Whether the request body is multipart (streamed, never buffered here).
fn is_multipart(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
}

/// The path the client sent (routers nested under /api/v1 see a stripped one).
/// [`sent_path`] of a whole request.
fn sent_path_of(request: &Request) -> String {
    request.extensions().get::<OriginalUri>().map_or_else(
        || request.uri().path().to_owned(),
        |uri| uri.path().to_owned(),
    )
}

fn sent_path(parts: &axum::http::request::Parts) -> String {
    parts
        .extensions
        .get::<OriginalUri>()
        .map_or_else(|| parts.uri.path().to_owned(), |uri| uri.path().to_owned())
}

/// Runs `work`, renewing the key's reservation every [`RENEW_EVERY`] until
/// it finishes. A renewal that fails is logged; the next one may succeed
/// before the lease runs out. Should `work` panic, the key is given back
/// (by `guard`, once) before the panic goes on to the panic guard, so
/// the client's 500 goes out with the key free and a retry runs again
/// instead of meeting `idempotency_key_in_progress`.
async fn holding_the_lease(
    store: &Store,
    agency: &AgencyId,
    key: &str,
    guard: &mut ReleaseOnDrop,
    work: impl Future<Output = Response>,
) -> Response {
    let renewals = async {
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            if let Err(err) = store.idempotency().renew(agency, key, LEASE).await {
                tracing::warn!(%err, "could not renew an idempotency reservation");
            }
        }
    };
    let outcome = tokio::select! {
        outcome = AssertUnwindSafe(work).catch_unwind() => outcome,
        never = renewals => never,
    };
    match outcome {
        Ok(response) => response,
        Err(panic) => {
            if let Some(finished) = guard.release_spawned() {
                let _ = finished.await;
            }
            std::panic::resume_unwind(panic)
        }
    }
}

/// Runs a multipart request under its key. Its body is streamed by the
/// handler, which reports the body's fingerprint; a retry after completion
/// is read through (hashing only) and compared before it is replayed.
async fn run_multipart(
    store: &Store,
    (agency, environment): (&AgencyId, Environment),
    key: String,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let head = fingerprint(
        &parts.method,
        &sent_path(&parts),
        environment.as_str(),
        b"multipart/form-data",
    );
    match store
        .idempotency()
        .reserve_deferred(agency, &key, &head, LEASE)
        .await
    {
        Err(err) => ApiError::from(err).into_response(),
        Ok(Reservation::Conflict) => ApiError::IdempotencyKeyConflict.into_response(),
        Ok(Reservation::InProgress) => ApiError::IdempotencyKeyInProgress.into_response(),
        Ok(Reservation::Recorded {
            fingerprint: recorded,
            response,
        }) => {
            let request = Request::from_parts(parts, body);
            match crate::multipart::fingerprint_request(request, MAX_MULTIPART_BODY).await {
                Ok(body) if format!("{head}:{body}") == recorded => replay(response),
                Ok(_) => ApiError::IdempotencyKeyConflict.into_response(),
                Err(err) => err.into_response(),
            }
        }
        Ok(Reservation::Replay(response)) => replay(response),
        Ok(Reservation::Proceed) => {
            let mut request = Request::from_parts(parts, body);
            let mut guard = ReleaseOnDrop::armed(store, agency, &key, &request);
            request.extensions_mut().insert(IdempotencyKey(key.clone()));
            let response =
                holding_the_lease(store, agency, &key, &mut guard, next.run(request)).await;
            let full = response
                .extensions()
                .get::<crate::multipart::BodyFingerprint>()
                .map(|body| format!("{head}:{}", body.0));
            let response = match full {
                Some(full) => record(store, agency, &key, Some(&full), response).await,
                // Refused before the body was read through: nothing to replay.
                None => {
                    release(store, agency, &key).await;
                    response
                }
            };
            guard.armed = false;
            response
        }
    }
}

/// Runs the request under its idempotency key (or without, for methods that
/// do not use one), the key scoped to the agency and environment the caller
/// acts in.
///
/// A request without a key goes straight on. A keyed one runs in a future
/// of its own on the heap: its reservation, body and record make it some
/// 18 KB, which every request (reads included) would otherwise carry and
/// move through the guard's future.
pub async fn run(
    store: &Store,
    agency: &AgencyId,
    environment: Environment,
    request: Request,
    next: Next,
) -> Response {
    match key_of(&request) {
        Ok(Some(key)) => Box::pin(run_keyed(store, agency, environment, key, request, next)).await,
        Ok(None) => next.run(request).await,
        Err(err) => err.into_response(),
    }
}

/// Runs a request of the resumable uploads (tus), whose clients send no
/// key: a key is optional on every method and its form checked when sent.
/// A creation (`POST`) with one reserves it over its method, path,
/// environment and creation headers (`Upload-Length`, `Upload-Metadata`),
/// its bytes streaming through unread, so a retried creation answers the
/// same upload (`Location`) and a different one under the key is a
/// conflict. Bytes (`PATCH`) need no record: a resent request names an
/// offset the upload has passed and is refused, so it never lands twice.
pub async fn run_resumable(
    store: &Store,
    agency: &AgencyId,
    environment: Environment,
    request: Request,
    next: Next,
) -> Response {
    let key = match request.headers().get(HEADER) {
        None => None,
        Some(value) => match value.to_str().map(str::trim) {
            Ok(key) if !key.is_empty() && key.len() <= MAX_KEY_LEN => Some(key.to_owned()),
            _ => {
                return ApiError::InvalidHeader {
                    name: "X-Idempotency-Key",
                    reason: format!("must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
                }
                .into_response();
            }
        },
    };
    // A creation the protocol refuses (no version, no length) does nothing:
    // it is answered without touching the key, as a validation error is.
    let creation = *request.method() == Method::POST
        && request
            .headers()
            .get("tus-resumable")
            .is_some_and(|version| version == "1.0.0")
        && request
            .headers()
            .get("upload-length")
            .and_then(|length| length.to_str().ok())
            .is_some_and(|length| length.parse::<u64>().is_ok());
    match key {
        Some(key) if creation => {
            Box::pin(run_keyed_creation(
                store,
                agency,
                environment,
                key,
                request,
                next,
            ))
            .await
        }
        _ => next.run(request).await,
    }
}

/// A resumable upload's creation under `key`.
async fn run_keyed_creation(
    store: &Store,
    agency: &AgencyId,
    environment: Environment,
    key: String,
    request: Request,
    next: Next,
) -> Response {
    let mut described = Vec::new();
    for name in ["upload-length", "upload-metadata", "upload-defer-length"] {
        described.extend_from_slice(name.as_bytes());
        described.push(b'=');
        if let Some(value) = request.headers().get(name) {
            described.extend_from_slice(value.as_bytes());
        }
        described.push(b'\n');
    }
    let path = sent_path_of(&request);
    let fingerprint = fingerprint(request.method(), &path, environment.as_str(), &described);
    reserved(store, agency, &key, &fingerprint, request, next).await
}

/// Reserves `key` for the request of `fingerprint` and answers from the
/// reservation: the recorded answer replayed, a refusal, or the request
/// run under the key's lease and its answer recorded.
async fn reserved(
    store: &Store,
    agency: &AgencyId,
    key: &str,
    fingerprint: &str,
    mut request: Request,
    next: Next,
) -> Response {
    match store
        .idempotency()
        .reserve(agency, key, fingerprint, LEASE)
        .await
    {
        Err(err) => ApiError::from(err).into_response(),
        Ok(Reservation::Conflict) => ApiError::IdempotencyKeyConflict.into_response(),
        Ok(Reservation::InProgress) => ApiError::IdempotencyKeyInProgress.into_response(),
        Ok(Reservation::Replay(stored)) => replay(stored),
        // Only deferred reservations answer this; an ordinary one never does.
        Ok(Reservation::Recorded { .. }) => ApiError::IdempotencyKeyConflict.into_response(),
        Ok(Reservation::Proceed) => {
            let mut guard = ReleaseOnDrop::armed(store, agency, key, &request);
            request
                .extensions_mut()
                .insert(IdempotencyKey(key.to_owned()));
            let response =
                holding_the_lease(store, agency, key, &mut guard, next.run(request)).await;
            let response = record(store, agency, key, None, response).await;
            guard.armed = false;
            response
        }
    }
}

/// The request under `key`: replayed, refused, or run and recorded.
async fn run_keyed(
    store: &Store,
    agency: &AgencyId,
    environment: Environment,
    key: String,
    request: Request,
    next: Next,
) -> Response {
    if is_multipart(&request) {
        return run_multipart(store, (agency, environment), key, request, next).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => return ApiError::PayloadTooLarge.into_response(),
    };
    let path = sent_path(&parts);
    let fingerprint = fingerprint(&parts.method, &path, environment.as_str(), &bytes);
    if rand::random_ratio(1, 256) {
        // Until a scheduled job does it, old records are purged now and then.
        let store = store.clone();
        tokio::spawn(async move {
            if let Err(err) = store.idempotency().purge_expired(1000).await {
                tracing::warn!(%err, "idempotency purge failed");
            }
        });
    }
    let request = Request::from_parts(parts, Body::from(bytes));
    reserved(store, agency, &key, &fingerprint, request, next).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_whitespace_do_not_change_the_fingerprint() {
        let a = fingerprint(
            &Method::POST,
            "/api/v1/listings",
            "live",
            br#"{"a":1,"b":{"y":2,"x":[1,{"q":1,"p":2}]}}"#,
        );
        let b = fingerprint(
            &Method::POST,
            "/api/v1/listings",
            "live",
            b"{ \"b\": {\"x\": [1, {\"p\": 2, \"q\": 1}], \"y\": 2}, \"a\": 1 }",
        );
        assert_eq!(a, b);
    }

    #[test]
    fn method_path_environment_and_values_do() {
        let base = fingerprint(&Method::POST, "/p", "live", br#"{"a":1}"#);
        assert_ne!(
            base,
            fingerprint(&Method::PATCH, "/p", "live", br#"{"a":1}"#)
        );
        assert_ne!(
            base,
            fingerprint(&Method::POST, "/q", "live", br#"{"a":1}"#)
        );
        assert_ne!(
            base,
            fingerprint(&Method::POST, "/p", "sandbox", br#"{"a":1}"#)
        );
        assert_ne!(
            base,
            fingerprint(&Method::POST, "/p", "live", br#"{"a":2}"#)
        );
        assert_ne!(
            fingerprint(&Method::POST, "/p", "live", b"not json"),
            fingerprint(&Method::POST, "/p", "live", b"not json!")
        );
    }
}
