//! The receiver rules, in order: signature, timestamp, envelope, event id, nonce, duplicate.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{StoreError, VerifyError};
use crate::headers::{
    EVENT_ID_HEADER, HeaderLookup, LEGACY_SIGNATURE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use crate::rules::TIMESTAMP_TOLERANCE_SECS;
use crate::signature::{SigningKey, parse_signatures};
use crate::store::{MemoryReplayStore, ReplayStore, Seen};

/// The JSON body of every delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// ULID, stable across retries and replays; equals `X-Event-Id`.
    pub event_id: String,
    /// For example `listing.created`. Route on this, not on the unsigned header.
    pub event_type: String,
    /// Date-form version of the `data` shape, for example `2026-05-29`.
    pub api_version: String,
    /// When the event happened, Unix seconds (not the signing time; retries keep it).
    pub timestamp: i64,
    /// ULID, new for every delivery attempt.
    pub nonce: String,
    /// Whether the event comes from sandbox activity.
    pub is_sandbox: bool,
    /// Event-specific payload.
    pub data: serde_json::Value,
}

/// An authentic, timely delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedDelivery {
    /// The parsed body.
    pub envelope: Envelope,
    /// The signing time from `X-Webhook-Timestamp`, Unix seconds.
    pub signed_at: i64,
    /// Which configured secret matched (0 = the first). During a rotation, once no
    /// delivery matches the old secret's index any more, that secret can be dropped.
    pub secret_index: usize,
}

/// The outcome of an authentic delivery.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a duplicate must be answered 2xx without processing it again"]
pub enum Verdict {
    /// First delivery of this event: process it, then answer 2xx.
    Accepted(VerifiedDelivery),
    /// This event was accepted before (this is a retry or a replay): answer 2xx and do
    /// not process it again.
    Duplicate(VerifiedDelivery),
}

impl Verdict {
    /// The delivery, whether it is new or a duplicate.
    pub fn delivery(&self) -> &VerifiedDelivery {
        match self {
            Self::Accepted(delivery) | Self::Duplicate(delivery) => delivery,
        }
    }

    /// Whether the event was accepted before.
    pub fn is_duplicate(&self) -> bool {
        matches!(self, Self::Duplicate(_))
    }
}

/// Checks deliveries against one or more signing secrets and remembers nonces and
/// accepted event ids in a [`ReplayStore`].
///
/// Share one `Verifier` between request handlers (it is `Sync`; wrap it in an `Arc`):
/// a verifier per request would forget every nonce.
pub struct Verifier<S = MemoryReplayStore> {
    keys: Vec<SigningKey>,
    store: S,
}

impl Verifier {
    /// A verifier for one endpoint signing secret (`whsec_…`, used as given), with an
    /// in-process [`MemoryReplayStore`].
    pub fn new(secret: &str) -> Self {
        Self::with_secrets([secret])
    }

    /// A verifier that accepts a signature by any of `secrets`, for a secret rotation:
    /// configure the new secret next to the old one until deliveries stop matching the
    /// old one. With no secrets at all, every delivery is a [`VerifyError::SignatureMismatch`].
    pub fn with_secrets<I>(secrets: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Self {
            keys: secrets
                .into_iter()
                .map(|s| SigningKey::new(s.as_ref()))
                .collect(),
            store: MemoryReplayStore::new(),
        }
    }
}

impl<S> Verifier<S> {
    /// The same secrets with another store, for example one shared by several instances.
    pub fn with_store<T: ReplayStore>(self, store: T) -> Verifier<T> {
        Verifier {
            keys: self.keys,
            store,
        }
    }

    /// The store that remembers nonces and event ids.
    pub fn store(&self) -> &S {
        &self.store
    }
}

impl<S: ReplayStore> Verifier<S> {
    /// Applies the receiver rules to a delivery received at `now_unix` (Unix seconds).
    ///
    /// `raw_body` must be the bytes as received, before any JSON parsing. The checks run
    /// in this order, and the first that fails is returned: a signature header (either
    /// name), a timestamp header, the signature under any secret, the 300-second
    /// tolerance, the envelope, `X-Event-Id` equal to `event_id`, the nonce not seen in
    /// the last 600 seconds. Only then is the delivery remembered, and it is
    /// [`Verdict::Duplicate`] if its event id was accepted before.
    pub fn verify<H>(
        &self,
        headers: &H,
        raw_body: &[u8],
        now_unix: i64,
    ) -> Result<Verdict, VerifyError>
    where
        H: HeaderLookup + ?Sized,
    {
        let signature = present(headers, SIGNATURE_HEADER)
            .or_else(|| present(headers, LEGACY_SIGNATURE_HEADER))
            .ok_or(VerifyError::MissingSignature)?;
        // Several during a secret rotation's overlap: any one that verifies will do.
        let tags = parse_signatures(signature)?;
        let timestamp_text =
            present(headers, TIMESTAMP_HEADER).ok_or(VerifyError::MissingTimestamp)?;
        let signed_at = parse_timestamp(timestamp_text)?;

        let secret_index = self
            .keys
            .iter()
            .position(|key| {
                tags.iter()
                    .any(|tag| key.matches(timestamp_text, raw_body, tag))
            })
            .ok_or(VerifyError::SignatureMismatch)?;
        // Checked after the signature, so that a clock problem is reported as such only
        // for deliveries that are otherwise authentic.
        if signed_at.abs_diff(now_unix) > TIMESTAMP_TOLERANCE_SECS.unsigned_abs() {
            return Err(VerifyError::TimestampOutOfTolerance {
                timestamp: signed_at,
                now: now_unix,
            });
        }

        let envelope: Envelope = serde_json::from_slice(raw_body)
            .map_err(|error| VerifyError::MalformedBody(error.to_string()))?;
        if envelope.event_id.is_empty() || envelope.nonce.is_empty() {
            return Err(VerifyError::MalformedBody(
                "empty event_id or nonce".to_owned(),
            ));
        }
        // The header is not signed; the body is. Requiring equality lets receivers that
        // de-duplicate on the header (as the specification says) trust it.
        let header_id = present(headers, EVENT_ID_HEADER).ok_or(VerifyError::MissingEventId)?;
        if header_id != envelope.event_id {
            return Err(VerifyError::EventIdMismatch {
                header: header_id.to_owned(),
                body: envelope.event_id,
            });
        }

        let delivery = VerifiedDelivery {
            envelope,
            signed_at,
            secret_index,
        };
        let seen = self.store.check_and_record(
            &delivery.envelope.nonce,
            &delivery.envelope.event_id,
            now_unix,
        )?;
        match seen {
            Seen::New => Ok(Verdict::Accepted(delivery)),
            Seen::DuplicateEvent => Ok(Verdict::Duplicate(delivery)),
            Seen::ReplayedNonce => Err(VerifyError::NonceReplayed),
        }
    }

    /// [`Verifier::verify`] at the current system time.
    pub fn verify_now<H>(&self, headers: &H, raw_body: &[u8]) -> Result<Verdict, VerifyError>
    where
        H: HeaderLookup + ?Sized,
    {
        self.verify(headers, raw_body, unix_now())
    }

    /// Forgets an accepted event id, for a receiver whose processing failed after
    /// [`Verdict::Accepted`]: the sender's retry is then accepted rather than a duplicate.
    pub fn forget_event(&self, event_id: &str) -> Result<(), StoreError> {
        self.store.forget_event(event_id)
    }
}

impl<S: fmt::Debug> fmt::Debug for Verifier<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keyed HMAC state is as good as the secret: never print it.
        f.debug_struct("Verifier")
            .field("secrets", &self.keys.len())
            .field("store", &self.store)
            .finish()
    }
}

/// A header's value without surrounding whitespace, if present and not empty.
fn present<'h, H: HeaderLookup + ?Sized>(headers: &'h H, name: &str) -> Option<&'h str> {
    headers
        .header(name)
        .map(str::trim)
        .filter(|value| !value.is_empty())
}

/// 1 to 15 ASCII digits: no sign, no spaces, and small enough for any language's numbers.
fn parse_timestamp(text: &str) -> Result<i64, VerifyError> {
    if text.is_empty() || text.len() > 15 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::MalformedTimestamp);
    }
    text.parse().map_err(|_| VerifyError::MalformedTimestamp)
}

fn unix_now() -> i64 {
    // A clock before 1970 is treated as 0, which then fails the tolerance check.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests;
