//! Registering and managing endpoints: `POST` and `GET /webhooks/endpoints`,
//! and `GET`, `PATCH` and `DELETE /webhooks/endpoints/{endpoint_id}`. The
//! fields obey [`super::endpoint_rules`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer};
use storage::Tenant;
use storage::ids::WebhookEndpointId;
use storage::webhooks::{NewEndpoint, WebhookEndpoint};
use utoipa::ToSchema;

use super::endpoint_rules::{self, EndpointEdit};
use super::wire::{EndpointOut, EndpointWithSecretOut, PageQuery};
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit};
use crate::principal::Credential;
use crate::state::AppState;

/// Body of `POST /webhooks/endpoints`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointIn {
    /// HTTPS URL, public address.
    #[schema(format = "uri", pattern = "^https://", max_length = 2048)]
    url: String,
    /// Event types (canonical names or aliases); omit for every type.
    event_types: Option<Vec<String>>,
    /// Optional label, at most 200 characters.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// `live`, `sandbox` or `both` (or "Live events only", "Sandbox events
    /// only", "Both"). Default: the key's own environment.
    environment: Option<String>,
    /// How deliveries are signed: `spec` (default; `X-Webhook-Signature`) or
    /// `standard_webhooks` (`webhook-id`, `webhook-timestamp`,
    /// `webhook-signature`, for the Standard Webhooks libraries).
    signature_scheme: Option<String>,
    /// Deliveries per hour, 1 to 1,000,000, spent evenly with bursts of up
    /// to the whole budget; more are held back, not dropped. Default 1000;
    /// `null`: no budget.
    #[serde(default = "default_hourly_budget", deserialize_with = "present")]
    #[schema(value_type = Option<i64>, required = false, minimum = 1, maximum = 1000000)]
    hourly_budget: Option<Option<serde_json::Number>>,
    /// `none` (default): each delivery goes as soon as it can. `listing`:
    /// deliveries of events about the same listing arrive in commit order (a
    /// later one waits while an earlier one is pending or retrying; one that
    /// fails for good lets the next go); other listings are not held up.
    ordering: Option<String>,
}

/// An endpoint registered without `hourly_budget` gets the specification's.
#[allow(clippy::unnecessary_wraps)]
fn default_hourly_budget() -> Option<Option<serde_json::Number>> {
    Some(Some(serde_json::Number::from(
        storage::webhooks::DEFAULT_HOURLY_BUDGET,
    )))
}

/// Body of `PATCH /webhooks/endpoints/{endpoint_id}`: any subset.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointPatch {
    /// New HTTPS URL.
    #[schema(format = "uri", pattern = "^https://", max_length = 2048)]
    url: Option<String>,
    /// New types; `null` for every type.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    event_types: Option<Option<Vec<String>>>,
    /// New label; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 200)]
    name: Option<Option<String>>,
    /// New environment.
    environment: Option<String>,
    /// New signature scheme: `spec` or `standard_webhooks`.
    signature_scheme: Option<String>,
    /// New hourly budget (1 to 1,000,000); `null`: no budget. A change
    /// releases what the old budget held back.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1000000)]
    hourly_budget: Option<Option<serde_json::Number>>,
    /// New ordering: `none` or `listing`.
    ordering: Option<String>,
}

impl From<EndpointPatch> for EndpointEdit {
    fn from(patch: EndpointPatch) -> Self {
        Self {
            url: patch.url,
            event_types: patch.event_types,
            name: patch.name,
            environment: patch.environment,
            signature_scheme: patch.signature_scheme,
            hourly_budget: patch.hourly_budget,
            ordering: patch.ordering,
        }
    }
}

/// Tells a field sent as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The address policy deliveries go out under: registration checks the
/// same one.
fn address_policy(state: &AppState) -> platform::webhooks::AddressPolicy {
    state.platform().webhooks.client.policy()
}

/// The endpoint id a path names; text that cannot be one names no endpoint.
pub(super) fn parse_endpoint_id(text: &str) -> Result<WebhookEndpointId, ApiError> {
    WebhookEndpointId::parse(text).ok_or(ApiError::NotFound(Resource::WebhookEndpoint))
}

/// The caller's endpoint; another tenant's is not found, as a missing one.
pub(super) async fn endpoint_of(
    state: &AppState,
    tenant: &Tenant,
    endpoint_id: &WebhookEndpointId,
) -> Result<WebhookEndpoint, ApiError> {
    state
        .store()
        .webhooks()
        .get(tenant, endpoint_id)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))
}

/// Registers an endpoint. The response carries its signing secret, once.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints",
    tag = "webhooks",
    operation_id = "create_webhook_endpoint",
    request_body = EndpointIn,
    responses(
        (status = 201, description = "The endpoint and its signing secret", body = EndpointWithSecretOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: URL not HTTPS or not public, unknown event type, bad environment", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn create_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiJson(body): ApiJson<EndpointIn>,
) -> Result<(StatusCode, Json<EndpointWithSecretOut>), ApiError> {
    let tenant = principal.tenant();
    let name = endpoint_rules::name(body.name)?;
    let event_types = endpoint_rules::event_types(body.event_types)?;
    let environment = endpoint_rules::environment(&tenant, body.environment.as_deref())?
        .unwrap_or_else(|| endpoint_rules::default_environment(&tenant));
    let signature_scheme =
        endpoint_rules::signature_scheme(body.signature_scheme.as_deref())?.unwrap_or_default();
    let hourly_budget = endpoint_rules::hourly_budget(body.hourly_budget.flatten().as_ref())?;
    let ordering = endpoint_rules::ordering(body.ordering.as_deref())?.unwrap_or_default();
    let url = endpoint_rules::url(address_policy(&state), &body.url).await?;
    let new = NewEndpoint {
        name,
        url,
        event_types,
        environment,
        signature_scheme,
        hourly_budget,
        ordering,
        created_by: principal.acting_user(),
    };
    let (endpoint, secret) = state.store().webhooks().create(&tenant, new).await?;
    Ok((
        StatusCode::CREATED,
        Json(EndpointWithSecretOut {
            endpoint: endpoint.into(),
            secret,
        }),
    ))
}

/// Lists the caller's endpoints, oldest first.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints",
    tag = "webhooks",
    operation_id = "list_webhook_endpoints",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of endpoints", body = PageOut<EndpointOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 422, description = "Invalid limit or cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn list_endpoints(
    State(state): State<AppState>,
    principal: Credential,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<PageOut<EndpointOut>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let scope = CursorScope {
        collection: "webhook_endpoints",
        tenant: principal.tenant(),
        filters: String::new(),
    };
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .webhooks()
        .list(&scope.tenant, after.as_ref(), limit)
        .await?;
    Ok(Json(state.cursors().envelope(
        &scope,
        page,
        EndpointOut::from,
    )))
}

/// Reads one endpoint.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{endpoint_id}",
    tag = "webhooks",
    operation_id = "get_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = []))
)]
pub(crate) async fn get_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    let endpoint = endpoint_of(
        &state,
        &principal.tenant(),
        &parse_endpoint_id(&endpoint_id)?,
    )
    .await?;
    Ok(Json(endpoint.into()))
}

/// Changes an endpoint's URL, types, name, environment, signature scheme or
/// hourly budget (a changed budget releases what the old one held back).
#[utoipa::path(
    patch,
    path = "/webhooks/endpoints/{endpoint_id}",
    tag = "webhooks",
    operation_id = "update_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    request_body = EndpointPatch,
    responses(
        (status = 200, description = "The endpoint", body = EndpointOut),
        (status = 400, description = "Unparseable body", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn update_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
    ApiJson(body): ApiJson<EndpointPatch>,
) -> Result<Json<EndpointOut>, ApiError> {
    let tenant = principal.tenant();
    // A missing endpoint is 404 before any validation of the body's values.
    let endpoint_id = parse_endpoint_id(&endpoint_id)?;
    endpoint_of(&state, &tenant, &endpoint_id).await?;
    let changes = EndpointEdit::from(body)
        .check(address_policy(&state), &tenant)
        .await?;
    let (endpoint, released) = state
        .store()
        .webhooks()
        .update(&tenant, &endpoint_id, changes)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
    platform::webhooks::offer_released(&state.platform().queue, released).await;
    Ok(Json(endpoint.into()))
}

/// Deletes an endpoint: it receives nothing more.
#[utoipa::path(
    delete,
    path = "/webhooks/endpoints/{endpoint_id}",
    tag = "webhooks",
    operation_id = "delete_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []), ("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn delete_endpoint(
    State(state): State<AppState>,
    principal: Credential,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    if state
        .store()
        .webhooks()
        .delete(&principal.tenant(), &parse_endpoint_id(&endpoint_id)?)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(Resource::WebhookEndpoint))
    }
}
