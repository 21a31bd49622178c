//! Webhook delivery: the retry schedule, the address policy that keeps
//! deliveries off internal networks, and the client that signs and sends an
//! attempt, and how released deliveries are offered to the workers. The
//! workers' `webhook_delivery` handler and the API's replay and test fire
//! share them.

pub mod address_policy;
pub mod batches;
pub mod client;
pub mod schedule;

use std::time::Duration;

use storage::webhooks::DueAttempt;

use crate::kinds::DeliverWebhook;
use crate::{JobQueue, PushOptions};
pub use address_policy::{AddressPolicy, Lookup, SystemLookup};
pub use batches::DeliveryBatches;
pub use client::{AttemptReport, SignedRequest, WebhookClient};
use storage::webhooks::{AfterAttempt, Attempt, AttemptOutcome, Delivery, SignatureScheme};
use storage::{Store, Timestamp};

/// Longest kept error text of an attempt.
const ERROR_CHARS: usize = 500;

/// Makes one attempt of `delivery` to `url`, signed with `secret` now, and
/// returns it as recorded (the caller records it with its consequences).
pub async fn attempt(
    store: &Store,
    client: &WebhookClient,
    delivery: &Delivery,
    url: &str,
    secret: &str,
    number: i32,
) -> (Attempt, AttemptReport) {
    let signing = Signing {
        secrets: &[secret.to_owned()],
        scheme: SignatureScheme::Spec,
    };
    attempt_signed_by(store, client, delivery, url, signing, number).await
}

/// How an attempt is signed: with each of `secrets` (the endpoint's current
/// secret, then the one its last rotation replaced while the overlap runs),
/// under the endpoint's scheme.
#[derive(Clone, Copy, Debug)]
pub struct Signing<'a> {
    /// The secrets, current first.
    pub secrets: &'a [String],
    /// The endpoint's scheme.
    pub scheme: SignatureScheme,
}

/// [`attempt`] signed as `signing` says.
pub async fn attempt_signed_by(
    store: &Store,
    client: &WebhookClient,
    delivery: &Delivery,
    url: &str,
    signing: Signing<'_>,
    number: i32,
) -> (Attempt, AttemptReport) {
    let started_at = store.clock().now();
    let request = SignedRequest::signed_by(
        delivery,
        url,
        signing.secrets,
        signing.scheme,
        started_at.as_unix_seconds(),
    );
    let nonce = request.nonce.clone();
    let report = client.send(request).await;
    let attempt = Attempt {
        attempt: number,
        nonce,
        started_at,
        duration_ms: i32::try_from(report.duration.as_millis()).unwrap_or(i32::MAX),
        outcome: report.outcome.as_str().to_owned(),
        status_code: report.status_code.map(i32::from),
        response_excerpt: report.response_excerpt.clone(),
        error: report
            .error
            .as_ref()
            .map(|e| e.chars().take(ERROR_CHARS).collect()),
    };
    (attempt, report)
}

/// Makes the one attempt of a one-off delivery (a replay, a test fire, a
/// recovery's re-send) now, outside the retry schedule, and records it: the
/// delivery succeeds or fails for good on it. Returns what the receiver
/// answered.
pub async fn attempt_once_and_record(
    store: &Store,
    client: &WebhookClient,
    delivery: &Delivery,
    url: &str,
    signing: Signing<'_>,
) -> storage::Result<AttemptReport> {
    let (attempt, report) = attempt_signed_by(store, client, delivery, url, signing, 1).await;
    let after = if report.outcome == AttemptOutcome::Succeeded {
        AfterAttempt::Succeeded
    } else {
        AfterAttempt::Failed
    };
    store
        .webhooks()
        .record_attempt(delivery, &attempt, after)
        .await?;
    Ok(report)
}

/// `at` plus `wait` divided by `speedup` (1 in production).
pub fn later(at: Timestamp, wait: Duration, speedup: u32) -> Timestamp {
    let micros = wait.as_micros() / u128::from(speedup.max(1));
    Timestamp::from_micros(
        at.as_micros()
            .saturating_add(i64::try_from(micros).unwrap_or(i64::MAX)),
    )
}

/// The webhook client and the retry schedule's pace.
#[derive(Clone, Debug)]
pub struct WebhookDelivery {
    /// Signs and sends attempts under the address policy.
    pub client: WebhookClient,
    /// Divides the retry schedule's waits (1 in production).
    pub retry_speedup: u32,
}

impl WebhookDelivery {
    /// The production setting: public addresses only, the public CA roots.
    pub fn strict() -> anyhow::Result<Self> {
        Ok(Self {
            client: WebhookClient::new(
                AddressPolicy {
                    allow_private_networks: false,
                },
                None,
            )?,
            retry_speedup: 1,
        })
    }
}

/// Offers the workers the attempts of deliveries released from an
/// endpoint's hourly budget (its budget changed), due now. Should the queue
/// not take them, they are due in the store and the overdue sweep offers
/// them within minutes: nothing is lost.
pub async fn offer_released(queue: &JobQueue, released: Vec<DueAttempt>) {
    if released.is_empty() {
        return;
    }
    let offer = format!("released:{}", ulid::Ulid::generate());
    let jobs = released
        .into_iter()
        .map(|due| (DeliverWebhook::of(due), PushOptions::offer(offer.clone())))
        .collect::<Vec<_>>();
    let count = jobs.len();
    if let Err(err) = queue.push_many(jobs).await {
        tracing::warn!(%err, count, "could not offer released deliveries; the overdue sweep will");
    }
}
