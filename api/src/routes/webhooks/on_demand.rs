//! What replays and test fires share: each spends a per-endpoint budget and
//! makes one attempt at once, outside the retry schedule, recording it like
//! any other so it shows in the delivery history.

use platform::webhooks::AttemptReport;
use storage::webhooks::{Attempt, Delivery, WebhookEndpoint};

use crate::error::{ApiError, Resource};
use crate::rate_limit::Bucket;
use crate::state::AppState;

/// Spends one of a webhook endpoint's own per-minute budgets.
pub(super) async fn spend_endpoint_budget(
    state: &AppState,
    endpoint: &WebhookEndpoint,
    action: &str,
    limit: u32,
) -> Result<(), ApiError> {
    let bucket = Bucket {
        key: format!("webhook_endpoint:{}:{action}", endpoint.id),
        name: format!("{action}_per_endpoint"),
        limit,
    };
    state.rate_limiter().check(&[bucket]).await.map(|_| ())
}

/// Makes one attempt of a one-off delivery now and records it.
pub(super) async fn deliver_now(
    state: &AppState,
    endpoint: &WebhookEndpoint,
    delivery: Delivery,
) -> Result<(Delivery, Vec<Attempt>, AttemptReport), ApiError> {
    let webhooks = state.store().webhooks();
    let target = webhooks
        .target(&delivery.id)
        .await?
        .ok_or_else(|| ApiError::internal("a delivery just created is gone"))?;
    if target.secret.is_none() {
        return Err(ApiError::NotFound(Resource::WebhookEndpoint));
    }
    let report = platform::webhooks::attempt_once_and_record(
        state.store(),
        &state.platform().webhooks.client,
        &delivery,
        &endpoint.url,
        platform::webhooks::Signing {
            secrets: &target.signing_secrets(),
            scheme: endpoint.signature_scheme,
        },
    )
    .await?;
    let delivery = webhooks
        .target(&delivery.id)
        .await?
        .map(|t| t.delivery)
        .ok_or_else(|| ApiError::internal("a delivery just made is gone"))?;
    let attempts = webhooks.attempts(&delivery.id).await?;
    Ok((delivery, attempts, report))
}
