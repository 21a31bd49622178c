//! Making one delivery attempt: the envelope with a fresh nonce, the
//! signature, the POST with a 10-second limit and no redirects, and what
//! came of it.

use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use serde::Serialize;
use serde_json::Value;
use storage::webhooks::{AttemptOutcome, Delivery, SignatureScheme};

use std::net::SocketAddr;
use std::sync::Arc;

use super::address_policy::{self, AddressPolicy, Lookup, Refused, SystemLookup};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "X-Webhook-Signature";
/// The earlier, service-specific name of the signature header; sent too so
/// receivers written against it keep working.
pub const LEGACY_SIGNATURE_HEADER: &str = "X-MediaAgency-Signature";
/// The signing time header.
pub const TIMESTAMP_HEADER: &str = "X-Webhook-Timestamp";
/// The event type header.
pub const EVENT_TYPE_HEADER: &str = "X-Webhook-Event-Type";
/// The event id header.
pub const EVENT_ID_HEADER: &str = "X-Event-Id";
/// Standard Webhooks: the message id header (the event id, the same on
/// every attempt, for the receiver's idempotency).
pub const STANDARD_ID_HEADER: &str = "webhook-id";
/// Standard Webhooks: the signing time header (Unix seconds).
pub const STANDARD_TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Standard Webhooks: the signature header, `v1,<base64>` for each secret,
/// space-separated.
pub const STANDARD_SIGNATURE_HEADER: &str = "webhook-signature";
/// How long a receiver has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a receiver's answer is kept with the attempt.
pub const EXCERPT_BYTES: usize = 1024;

/// The envelope, in the specification's field order.
#[derive(Serialize)]
struct Envelope<'a> {
    event_id: &'a str,
    event_type: &'a str,
    api_version: &'a str,
    timestamp: i64,
    nonce: &'a str,
    is_sandbox: bool,
    data: &'a Value,
}

/// An event as a delivery carries it, without the nonce each attempt adds.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct EventFields {
    /// `event_id` (also `X-Event-Id`).
    pub event_id: String,
    /// Canonical type.
    pub event_type: String,
    /// Data-shape version.
    pub api_version: String,
    /// When it happened, Unix seconds.
    pub timestamp: i64,
    /// Sandbox activity.
    pub is_sandbox: bool,
    /// The event's data.
    pub data: Value,
}

impl EventFields {
    /// The fields of `delivery`'s event.
    pub fn of(delivery: &Delivery) -> Self {
        Self {
            event_id: delivery.event_id.to_string(),
            event_type: delivery.event_type.clone(),
            api_version: delivery.api_version.clone(),
            timestamp: delivery.occurred_at.as_unix_seconds(),
            is_sandbox: delivery.is_sandbox,
            data: delivery.data.clone(),
        }
    }

    /// The body of an attempt with `nonce`.
    pub fn envelope(&self, nonce: &str) -> Vec<u8> {
        Envelope {
            event_id: &self.event_id,
            event_type: &self.event_type,
            api_version: &self.api_version,
            timestamp: self.timestamp,
            nonce,
            is_sandbox: self.is_sandbox,
            data: &self.data,
        }
        .to_bytes()
    }
}

impl Envelope<'_> {
    fn to_bytes(&self) -> Vec<u8> {
        // Serialising a struct of strings, numbers and a JSON value cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The body of an attempt of `delivery` with `nonce`.
pub fn envelope_body(delivery: &Delivery, nonce: &str) -> Vec<u8> {
    Envelope {
        event_id: delivery.event_id.as_str(),
        event_type: &delivery.event_type,
        api_version: &delivery.api_version,
        timestamp: delivery.occurred_at.as_unix_seconds(),
        nonce,
        is_sandbox: delivery.is_sandbox,
        data: &delivery.data,
    }
    .to_bytes()
}

/// `sha256=<hex HMAC-SHA256 over "<timestamp>.<body>">`, keyed with the
/// secret's bytes as given.
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    format!(
        "sha256={}",
        hex::encode(storage::secrets::hmac_sha256(secret.as_bytes(), &signed))
    )
}

/// `v1,<base64 HMAC-SHA256 over "<id>.<timestamp>.<body>">`, keyed with the
/// bytes the secret encodes (Standard Webhooks).
pub fn standard_signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    use base64::Engine;
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let key = storage::webhooks::standard_webhooks_key(secret);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD
            .encode(storage::secrets::hmac_sha256(&key, &signed))
    )
}

/// One attempt, ready to send.
#[derive(Clone, Debug)]
pub struct SignedRequest {
    /// Where to.
    pub url: String,
    /// The headers, signature included.
    pub headers: HeaderMap,
    /// The raw body.
    pub body: Vec<u8>,
    /// The nonce in the body.
    pub nonce: String,
}

/// How several signatures share the signature header: `sha256=<new>, sha256=<old>`
/// while a rotated secret's overlap runs (the current secret's first).
pub const SIGNATURE_SEPARATOR: &str = ", ";

impl SignedRequest {
    /// Signs an attempt of `delivery` to `url` with `secret` at `now_unix`
    /// under the specification's scheme.
    pub fn new(delivery: &Delivery, url: &str, secret: &str, now_unix: i64) -> Self {
        Self::signed_by(
            delivery,
            url,
            &[secret.to_owned()],
            SignatureScheme::Spec,
            now_unix,
        )
    }

    /// Signs an attempt with each of `secrets` (the current one first, then a
    /// rotated one whose overlap runs) under `scheme`: one signature each in
    /// the scheme's signature header.
    pub fn signed_by(
        delivery: &Delivery,
        url: &str,
        secrets: &[String],
        scheme: SignatureScheme,
        now_unix: i64,
    ) -> Self {
        let nonce = ulid::Ulid::generate().to_string();
        let body = envelope_body(delivery, &nonce);
        let mut headers = HeaderMap::new();
        let mut put = |name: &'static str, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        match scheme {
            SignatureScheme::Spec => {
                let signature = secrets
                    .iter()
                    .map(|secret| signature(secret, now_unix, &body))
                    .collect::<Vec<_>>()
                    .join(SIGNATURE_SEPARATOR);
                put(SIGNATURE_HEADER, &signature);
                put(LEGACY_SIGNATURE_HEADER, &signature);
                put(TIMESTAMP_HEADER, &now_unix.to_string());
            }
            SignatureScheme::StandardWebhooks => {
                let id = delivery.event_id.as_str();
                let signature = secrets
                    .iter()
                    .map(|secret| standard_signature(secret, id, now_unix, &body))
                    .collect::<Vec<_>>()
                    .join(" ");
                put(STANDARD_ID_HEADER, id);
                put(STANDARD_TIMESTAMP_HEADER, &now_unix.to_string());
                put(STANDARD_SIGNATURE_HEADER, &signature);
            }
        }
        put(EVENT_TYPE_HEADER, &delivery.event_type);
        put(EVENT_ID_HEADER, delivery.event_id.as_str());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static("MediaAgencyListingAPI-Webhooks/1"),
        );
        Self {
            url: url.to_owned(),
            headers,
            body,
            nonce,
        }
    }
}

/// What an attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptReport {
    /// Succeeded, HTTP error, timeout, no connection, refused.
    pub outcome: AttemptOutcome,
    /// The receiver's status.
    pub status_code: Option<u16>,
    /// Time taken.
    pub duration: Duration,
    /// The start of the receiver's answer (UTF-8, lossy).
    pub response_excerpt: Option<String>,
    /// What went wrong without an answer.
    pub error: Option<String>,
}

/// Sends deliveries under the address policy.
#[derive(Clone, Debug)]
pub struct WebhookClient {
    http: reqwest::Client,
    policy: AddressPolicy,
    lookup: Arc<dyn Lookup>,
}

impl WebhookClient {
    /// A client under `policy`, trusting `extra_ca_pem` besides the public
    /// roots, looking names up with the system resolver.
    pub fn new(policy: AddressPolicy, extra_ca_pem: Option<&[u8]>) -> anyhow::Result<Self> {
        Self::with_lookup(policy, extra_ca_pem, Arc::new(SystemLookup))
    }

    /// [`Self::new`] with names looked up by `lookup` (every connection's
    /// addresses still pass the policy first).
    pub fn with_lookup(
        policy: AddressPolicy,
        extra_ca_pem: Option<&[u8]>,
        lookup: Arc<dyn Lookup>,
    ) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would connect on our behalf and bypass the address policy.
            .no_proxy()
            .pool_max_idle_per_host(32)
            .dns_resolver(address_policy::resolver(policy, Arc::clone(&lookup)));
        if let Some(pem) = extra_ca_pem {
            for certificate in reqwest::Certificate::from_pem_bundle(pem)? {
                builder = builder.add_root_certificate(certificate);
            }
        }
        Ok(Self {
            http: builder.build()?,
            policy,
            lookup,
        })
    }

    /// The address policy in force.
    pub fn policy(&self) -> AddressPolicy {
        self.policy
    }

    /// Resolves `host` as this client's connections do and checks every
    /// address under its policy: the check registration makes, with the
    /// same resolver.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        self.policy.resolve_with(&*self.lookup, host, port).await
    }

    /// Sends one signed attempt and reports what came of it. Never fails:
    /// every way a delivery can go wrong is an outcome.
    pub async fn send(&self, request: SignedRequest) -> AttemptReport {
        let started = Instant::now();
        let refused = |reason: String, started: Instant| AttemptReport {
            outcome: AttemptOutcome::Refused,
            status_code: None,
            duration: started.elapsed(),
            response_excerpt: None,
            error: Some(reason),
        };
        let url = match reqwest::Url::parse(&request.url) {
            Ok(url) if url.scheme() == "https" => url,
            Ok(_) => return refused("only https URLs receive deliveries".into(), started),
            Err(err) => return refused(format!("invalid URL: {err}"), started),
        };
        // The resolver is not asked about literal addresses: judge them here.
        if let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = url.host() {
            let host = url.host_str().unwrap_or_default();
            if let Err(reason) = self.policy.resolve(host, 443).await {
                return refused(reason, started);
            }
        }
        let sent = self
            .http
            .post(url)
            .headers(request.headers)
            .body(request.body)
            .send()
            .await;
        match sent {
            Ok(mut response) => {
                let status = response.status();
                let mut excerpt = Vec::new();
                while excerpt.len() < EXCERPT_BYTES {
                    match response.chunk().await {
                        Ok(Some(chunk)) => excerpt.extend_from_slice(&chunk),
                        Ok(None) | Err(_) => break,
                    }
                }
                let excerpt = excerpt_text(&excerpt);
                AttemptReport {
                    outcome: if status.is_success() {
                        AttemptOutcome::Succeeded
                    } else {
                        AttemptOutcome::HttpError
                    },
                    status_code: Some(status.as_u16()),
                    duration: started.elapsed(),
                    response_excerpt: (!excerpt.is_empty()).then_some(excerpt),
                    error: None,
                }
            }
            Err(err) => {
                let outcome = if let Some(reason) = refused_reason(&err) {
                    return refused(reason, started);
                } else if err.is_timeout() {
                    AttemptOutcome::Timeout
                } else {
                    AttemptOutcome::ConnectionFailed
                };
                AttemptReport {
                    outcome,
                    status_code: None,
                    duration: started.elapsed(),
                    response_excerpt: None,
                    error: Some(error_chain(&err)),
                }
            }
        }
    }
}

/// The first [`EXCERPT_BYTES`] of an answer as text, a prefix of it when it
/// is UTF-8: a character the cut splits is dropped, not replaced (a
/// replacement character would outgrow the limit and match nothing sent).
fn excerpt_text(bytes: &[u8]) -> String {
    let bytes = &bytes[..bytes.len().min(EXCERPT_BYTES)];
    let whole = match std::str::from_utf8(bytes) {
        Err(err) if err.error_len().is_none() => err.valid_up_to(),
        _ => bytes.len(),
    };
    let mut text = String::from_utf8_lossy(&bytes[..whole]).into_owned();
    // Other invalid bytes were replaced, three bytes each: cut again.
    let mut end = text.len().min(EXCERPT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

fn refused_reason(err: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if let Some(refused) = current.downcast_ref::<Refused>() {
            return Some(refused.0.clone());
        }
        source = current.source();
    }
    None
}

fn error_chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(current) = source {
        text.push_str(": ");
        text.push_str(&current.to_string());
        source = current.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_covers_timestamp_and_body() {
        // The receiver crate, written apart from this sender, agrees.
        let expected = webhook_verify::sign("whsec_test", 1_700_000_000, b"{}");
        assert_eq!(signature("whsec_test", 1_700_000_000, b"{}"), expected);
        assert_ne!(signature("whsec_test", 1_700_000_001, b"{}"), expected);
        assert_ne!(signature("whsec_other", 1_700_000_000, b"{}"), expected);
        assert!(expected.starts_with("sha256=") && expected.len() == 7 + 64);
    }

    #[test]
    fn the_standard_webhooks_signature_matches_the_specification_vector() {
        // The example of the Standard Webhooks specification and its libraries.
        let signature = standard_signature(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_standard_webhooks_key_is_the_secrets_base64_in_either_alphabet() {
        use base64::Engine;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let bytes = [0xfb_u8, 0xff, 0x3e, 0x01, 0x02];
        let standard = format!("whsec_{}", STANDARD.encode(bytes));
        let url_safe = format!("whsec_{}", URL_SAFE_NO_PAD.encode(bytes));
        assert_ne!(standard, url_safe);
        assert_eq!(storage::webhooks::standard_webhooks_key(&standard), bytes);
        assert_eq!(storage::webhooks::standard_webhooks_key(&url_safe), bytes);
        // Not base64 at all: the text's own bytes.
        assert_eq!(
            storage::webhooks::standard_webhooks_key("whsec_not base64!"),
            b"whsec_not base64!"
        );
        let generated = storage::webhooks::generate_secret();
        let encoded = generated.strip_prefix("whsec_").unwrap();
        assert_eq!(STANDARD.decode(encoded).unwrap().len(), 32);
    }

    #[test]
    fn an_excerpt_is_a_whole_character_prefix_within_the_limit() {
        let ascii = "a".repeat(2000);
        assert_eq!(excerpt_text(ascii.as_bytes()), "a".repeat(EXCERPT_BYTES));
        let split = format!("{}é", "a".repeat(EXCERPT_BYTES - 1));
        assert_eq!(
            excerpt_text(split.as_bytes()),
            "a".repeat(EXCERPT_BYTES - 1)
        );
        let binary = vec![0xff; 2000];
        assert!(excerpt_text(&binary).len() <= EXCERPT_BYTES);
        assert_eq!(excerpt_text(b"ok"), "ok");
    }
}
