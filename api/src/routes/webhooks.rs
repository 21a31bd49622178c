//! Webhooks: the event catalog, endpoint registration and management,
//! delivery history, replay and test fire.

pub mod endpoint_rules;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};
use storage::Tenant;
use storage::event_catalog::{self, CatalogEntry};
use storage::webhooks::{
    AfterAttempt, Attempt, Delivery, DeliveryKind, MANUALLY_DISABLED_REASON, NewEndpoint,
    WebhookEndpoint,
};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use workers::webhooks::AttemptReport;

use self::endpoint_rules::EndpointEdit;
use crate::endpoints;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::middleware::auth::{Principal, guarded};
use crate::pagination::{CursorScope, PageOut, page_limit};
use crate::rate_limit::Bucket;
use crate::state::AppState;

/// The routes of this resource.
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(guarded(
            state,
            &endpoints::GET_WEBHOOK_CATALOG,
            routes!(event_catalog),
        ))
        .routes(guarded(
            state,
            &endpoints::CREATE_WEBHOOK_ENDPOINT,
            routes!(create_endpoint),
        ))
        .routes(guarded(
            state,
            &endpoints::READ_WEBHOOK_ENDPOINTS,
            routes!(list_endpoints),
        ))
        .routes(guarded(
            state,
            &endpoints::READ_WEBHOOK_ENDPOINTS,
            routes!(get_endpoint),
        ))
        .routes(guarded(
            state,
            &endpoints::UPDATE_WEBHOOK_ENDPOINT,
            routes!(update_endpoint, delete_endpoint),
        ))
        .routes(guarded(
            state,
            &endpoints::UPDATE_WEBHOOK_ENDPOINT,
            routes!(disable_endpoint),
        ))
        .routes(guarded(
            state,
            &endpoints::UPDATE_WEBHOOK_ENDPOINT,
            routes!(enable_endpoint),
        ))
        .routes(guarded(
            state,
            &endpoints::UPDATE_WEBHOOK_ENDPOINT,
            routes!(rotate_secret),
        ))
        .routes(guarded(
            state,
            &endpoints::READ_WEBHOOK_DELIVERIES,
            routes!(list_deliveries),
        ))
        .routes(guarded(
            state,
            &endpoints::READ_WEBHOOK_DELIVERIES,
            routes!(get_delivery),
        ))
        .routes(guarded(
            state,
            &endpoints::REPLAY_WEBHOOK_DELIVERY,
            routes!(replay_delivery),
        ))
        .routes(guarded(
            state,
            &endpoints::TEST_WEBHOOK_ENDPOINT,
            routes!(test_fire),
        ))
}

// ---------------------------------------------------------------- catalog

/// One subscribable event type.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogEntryOut {
    /// Canonical name, the one deliveries carry.
    pub event_type: String,
    /// Category (listing, invoice, scheduling, media, user, billing, webhook).
    pub category: String,
    /// What it means.
    pub description: String,
    /// Where it is emitted.
    pub emitted_by: String,
    /// Other names accepted on input for this type.
    pub aliases: Vec<String>,
    /// Whether the service emits it today (others are reserved names).
    pub active: bool,
    /// Sent only by a test fire, to the endpoint being tested.
    pub test_only: bool,
    /// JSON Schema (2020-12) of the envelope's `data`.
    #[schema(value_type = Object)]
    pub data_schema: Value,
    /// A `data` object valid against the schema.
    #[schema(value_type = Object)]
    pub sample: Value,
}

impl From<&CatalogEntry> for CatalogEntryOut {
    fn from(entry: &CatalogEntry) -> Self {
        Self {
            event_type: entry.event_type.to_owned(),
            category: entry.category.to_owned(),
            description: entry.description.to_owned(),
            emitted_by: entry.emitted_by.to_owned(),
            aliases: entry.aliases.iter().map(|a| (*a).to_owned()).collect(),
            active: entry.emitted,
            test_only: entry.test_only,
            data_schema: entry.data_schema(),
            sample: entry.sample(),
        }
    }
}

/// The event catalog.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogOut {
    /// Every subscribable type.
    pub items: Vec<CatalogEntryOut>,
    /// Envelope data-shape version of every type at launch.
    pub api_version: String,
}

/// Lists every subscribable event type with its schema and a sample.
#[utoipa::path(
    get,
    path = "/webhooks/events",
    tag = "webhooks",
    operation_id = "get_webhook_catalog",
    responses(
        (status = 200, description = "The catalog; may be cached 5 minutes", body = CatalogOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn event_catalog() -> Response {
    let catalog = CatalogOut {
        items: event_catalog::entries()
            .iter()
            .map(CatalogEntryOut::from)
            .collect(),
        api_version: storage::events::API_VERSION.to_owned(),
    };
    (
        [(header::CACHE_CONTROL, "private, max-age=300")],
        Json(catalog),
    )
        .into_response()
}

// ---------------------------------------------------------------- endpoints

/// A webhook endpoint (never its secret).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EndpointOut {
    /// `whe_…`.
    pub id: String,
    /// Optional label.
    pub name: Option<String>,
    /// HTTPS URL deliveries go to.
    pub url: String,
    /// Canonical event types it receives; `null` receives every type,
    /// including types added later.
    pub event_types: Option<Vec<String>>,
    /// `live`, `sandbox` or `both`: which events it receives.
    pub environment: String,
    /// `enabled` or `disabled`.
    pub status: String,
    /// Why it is disabled: `auto_disabled_consecutive_failures` or `disabled_by_owner`.
    pub disabled_reason: Option<String>,
    /// When it was disabled.
    pub disabled_at: Option<String>,
    /// Deliveries that failed for good in a row; 50 disables the endpoint.
    pub consecutive_failures: i32,
    /// Registration time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

impl From<WebhookEndpoint> for EndpointOut {
    fn from(endpoint: WebhookEndpoint) -> Self {
        Self {
            id: endpoint.id,
            name: endpoint.name,
            url: endpoint.url,
            event_types: endpoint.event_types,
            environment: endpoint.environment.as_str().to_owned(),
            status: endpoint.status.as_str().to_owned(),
            disabled_reason: endpoint.disabled_reason,
            disabled_at: endpoint.disabled_at.map(|t| t.to_rfc3339()),
            consecutive_failures: endpoint.consecutive_failures,
            created_at: endpoint.created_at.to_rfc3339(),
            updated_at: endpoint.updated_at.to_rfc3339(),
        }
    }
}

/// An endpoint with its signing secret, shown once (registration, rotation).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EndpointWithSecretOut {
    /// The endpoint.
    #[serde(flatten)]
    pub endpoint: EndpointOut,
    /// The signing secret (`whsec_…`): HMAC-SHA256 key of the signature
    /// header. Shown only in this response.
    pub secret: String,
}

/// Body of `POST /webhooks/endpoints`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointIn {
    /// HTTPS URL, public address.
    url: String,
    /// Event types (canonical names or aliases); omit for every type.
    event_types: Option<Vec<String>>,
    /// Optional label, at most 200 characters.
    name: Option<String>,
    /// `live`, `sandbox` or `both` (or "Live events only", "Sandbox events
    /// only", "Both"). Default: the key's own environment.
    environment: Option<String>,
}

/// Body of `PATCH /webhooks/endpoints/{endpoint_id}`: any subset.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointPatch {
    /// New HTTPS URL.
    url: Option<String>,
    /// New types; `null` for every type.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<String>>)]
    event_types: Option<Option<Vec<String>>>,
    /// New label; `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    name: Option<Option<String>>,
    /// New environment.
    environment: Option<String>,
}

impl From<EndpointPatch> for EndpointEdit {
    fn from(patch: EndpointPatch) -> Self {
        Self {
            url: patch.url,
            event_types: patch.event_types,
            name: patch.name,
            environment: patch.environment,
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
fn address_policy(state: &AppState) -> workers::webhooks::AddressPolicy {
    state.platform().webhooks.client.policy()
}

async fn endpoint_of(
    state: &AppState,
    tenant: &Tenant,
    endpoint_id: &str,
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
    security(("api_key" = []), ("bearer" = []))
)]
async fn create_endpoint(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<EndpointIn>,
) -> Result<(StatusCode, Json<EndpointWithSecretOut>), ApiError> {
    let tenant = principal.tenant();
    let name = endpoint_rules::name(body.name)?;
    let event_types = endpoint_rules::event_types(body.event_types)?;
    let environment = endpoint_rules::environment(&tenant, body.environment.as_deref())?
        .unwrap_or_else(|| endpoint_rules::default_environment(&tenant));
    let url = endpoint_rules::url(address_policy(&state), &body.url).await?;
    let new = NewEndpoint {
        name,
        url,
        event_types,
        environment,
        created_by: principal.acting_user.clone(),
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

/// Query of the list routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1–200, default 50.
    limit: Option<i64>,
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
    security(("api_key" = []), ("bearer" = []))
)]
async fn list_endpoints(
    State(state): State<AppState>,
    principal: Principal,
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
    security(("api_key" = []), ("bearer" = []))
)]
async fn get_endpoint(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    let endpoint = endpoint_of(&state, &principal.tenant(), &endpoint_id).await?;
    Ok(Json(endpoint.into()))
}

/// Changes an endpoint's URL, types, name or environment.
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
    security(("api_key" = []), ("bearer" = []))
)]
async fn update_endpoint(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
    ApiJson(body): ApiJson<EndpointPatch>,
) -> Result<Json<EndpointOut>, ApiError> {
    let tenant = principal.tenant();
    // A missing endpoint is 404 before any validation of the body's values.
    endpoint_of(&state, &tenant, &endpoint_id).await?;
    let changes = EndpointEdit::from(body)
        .check(address_policy(&state), &tenant)
        .await?;
    let endpoint = state
        .store()
        .webhooks()
        .update(&tenant, &endpoint_id, changes)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
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
    security(("api_key" = []), ("bearer" = []))
)]
async fn delete_endpoint(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    if state
        .store()
        .webhooks()
        .delete(&principal.tenant(), &endpoint_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound(Resource::WebhookEndpoint))
    }
}

/// Disables an endpoint (reason `disabled_by_owner`).
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/disable",
    tag = "webhooks",
    operation_id = "disable_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn disable_endpoint(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    set_enabled(&state, &principal, &endpoint_id, false).await
}

/// Re-enables an endpoint and resets its failure count.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/enable",
    tag = "webhooks",
    operation_id = "enable_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn enable_endpoint(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointOut>, ApiError> {
    set_enabled(&state, &principal, &endpoint_id, true).await
}

async fn set_enabled(
    state: &AppState,
    principal: &Principal,
    endpoint_id: &str,
    enabled: bool,
) -> Result<Json<EndpointOut>, ApiError> {
    let endpoint = state
        .store()
        .webhooks()
        .set_enabled(
            &principal.tenant(),
            endpoint_id,
            enabled,
            MANUALLY_DISABLED_REASON,
        )
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
    Ok(Json(endpoint.into()))
}

/// Replaces the signing secret at once; the new one is shown once.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/rotate-secret",
    tag = "webhooks",
    operation_id = "rotate_webhook_secret",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint and its new secret", body = EndpointWithSecretOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn rotate_secret(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<EndpointWithSecretOut>, ApiError> {
    let (endpoint, secret) = state
        .store()
        .webhooks()
        .rotate_secret(&principal.tenant(), &endpoint_id)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
    Ok(Json(EndpointWithSecretOut {
        endpoint: endpoint.into(),
        secret,
    }))
}

// ---------------------------------------------------------------- deliveries

/// One attempt of a delivery.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AttemptOut {
    /// 1 for the first.
    pub attempt: i32,
    /// When it started.
    pub started_at: String,
    /// How long it took.
    pub duration_ms: i32,
    /// `succeeded`, `http_error`, `timeout`, `connection_failed` or `refused`.
    pub outcome: String,
    /// The receiver's status code.
    pub status_code: Option<i32>,
    /// The start of the receiver's answer (at most 1 KiB).
    pub response_excerpt: Option<String>,
    /// What went wrong when no answer came.
    pub error: Option<String>,
    /// The envelope nonce of this attempt.
    pub nonce: String,
}

impl From<Attempt> for AttemptOut {
    fn from(attempt: Attempt) -> Self {
        Self {
            attempt: attempt.attempt,
            started_at: attempt.started_at.to_rfc3339(),
            duration_ms: attempt.duration_ms,
            outcome: attempt.outcome,
            status_code: attempt.status_code,
            response_excerpt: attempt.response_excerpt,
            error: attempt.error,
            nonce: attempt.nonce,
        }
    }
}

/// A delivery of an event to an endpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DeliveryOut {
    /// `whd_…`.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// `event`, `replay` or `test_fire`.
    pub kind: String,
    /// The delivery a replay repeats.
    pub replay_of: Option<String>,
    /// `event_id` of the envelope (`X-Event-Id`).
    pub event_id: String,
    /// Event type.
    pub event_type: String,
    /// Sandbox activity.
    pub is_sandbox: bool,
    /// `pending`, `retrying`, `succeeded` or `failed`.
    pub status: String,
    /// Attempts made (at most 5).
    pub attempts: i32,
    /// When the next attempt is due.
    pub next_attempt_at: Option<String>,
    /// Creation time.
    pub created_at: String,
    /// When it succeeded or failed for good.
    pub completed_at: Option<String>,
    /// The attempts, oldest first (single-delivery reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<Vec<AttemptOut>>,
}

impl DeliveryOut {
    fn new(delivery: Delivery, attempts: Option<Vec<Attempt>>) -> Self {
        Self {
            id: delivery.id,
            endpoint_id: delivery.endpoint_id,
            kind: delivery.kind.as_str().to_owned(),
            replay_of: delivery.replay_of,
            event_id: delivery.event_id,
            event_type: delivery.event_type,
            is_sandbox: delivery.is_sandbox,
            status: delivery.status.as_str().to_owned(),
            attempts: delivery.attempts,
            next_attempt_at: delivery.next_attempt_at.map(|t| t.to_rfc3339()),
            created_at: delivery.created_at.to_rfc3339(),
            completed_at: delivery.completed_at.map(|t| t.to_rfc3339()),
            attempt_log: attempts.map(|a| a.into_iter().map(AttemptOut::from).collect()),
        }
    }
}

/// Lists an endpoint's deliveries, newest first.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{endpoint_id}/deliveries",
    tag = "webhooks",
    operation_id = "list_webhook_deliveries",
    params(("endpoint_id" = String, Path, description = "The endpoint's id"), PageQuery),
    responses(
        (status = 200, description = "A page of deliveries", body = PageOut<DeliveryOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 422, description = "Invalid limit or cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn list_deliveries(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<PageOut<DeliveryOut>>, ApiError> {
    let tenant = principal.tenant();
    let endpoint = endpoint_of(&state, &tenant, &endpoint_id).await?;
    let limit = page_limit(query.limit)?;
    let scope = CursorScope {
        collection: "webhook_deliveries",
        tenant,
        filters: format!("endpoint={}", endpoint.id),
    };
    let before = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .webhooks()
        .deliveries(&endpoint.id, before.as_ref(), limit)
        .await?;
    Ok(Json(
        state
            .cursors()
            .envelope(&scope, page, |d| DeliveryOut::new(d, None)),
    ))
}

/// Reads one delivery with its attempts.
#[utoipa::path(
    get,
    path = "/webhooks/deliveries/{delivery_id}",
    tag = "webhooks",
    operation_id = "get_webhook_delivery",
    params(("delivery_id" = String, Path, description = "The delivery's id")),
    responses(
        (status = 200, description = "The delivery and its attempts", body = DeliveryOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:read", body = ErrorEnvelope),
        (status = 404, description = "webhook_delivery_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn get_delivery(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(delivery_id): ApiPath<String>,
) -> Result<Json<DeliveryOut>, ApiError> {
    let webhooks = state.store().webhooks();
    let delivery = webhooks
        .delivery(&principal.tenant(), &delivery_id)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookDelivery))?;
    let attempts = webhooks.attempts(&delivery.id).await?;
    Ok(Json(DeliveryOut::new(delivery, Some(attempts))))
}

/// Spends one of a webhook endpoint's own per-minute budgets.
async fn spend_endpoint_budget(
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
async fn deliver_now(
    state: &AppState,
    endpoint: &WebhookEndpoint,
    delivery: Delivery,
) -> Result<(Delivery, Vec<Attempt>, AttemptReport), ApiError> {
    let webhooks = state.store().webhooks();
    let target = webhooks
        .target(&delivery.id)
        .await?
        .ok_or_else(|| ApiError::internal("a delivery just created is gone"))?;
    let secret = target
        .secret
        .ok_or(ApiError::NotFound(Resource::WebhookEndpoint))?;
    let (attempt, report) = workers::webhooks::attempt(
        state.store(),
        &state.platform().webhooks.client,
        &delivery,
        &endpoint.url,
        &secret,
        1,
    )
    .await;
    let after = if report.outcome == storage::webhooks::AttemptOutcome::Succeeded {
        AfterAttempt::Succeeded
    } else {
        AfterAttempt::Failed
    };
    webhooks.record_attempt(&delivery, &attempt, after).await?;
    let delivery = webhooks
        .target(&delivery.id)
        .await?
        .map(|t| t.delivery)
        .ok_or_else(|| ApiError::internal("a delivery just made is gone"))?;
    let attempts = webhooks.attempts(&delivery.id).await?;
    Ok((delivery, attempts, report))
}

/// Replays a past delivery now: the same event (same `X-Event-Id` and
/// data), a new nonce, signed with the endpoint's current secret, one
/// attempt without backoff. 10 per minute per endpoint.
#[utoipa::path(
    post,
    path = "/webhooks/deliveries/{delivery_id}/replay",
    tag = "webhooks",
    operation_id = "replay_webhook_delivery",
    params(("delivery_id" = String, Path, description = "The delivery to replay")),
    responses(
        (status = 201, description = "The replay delivery with its attempt", body = DeliveryOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_delivery_not_found", body = ErrorEnvelope),
        (status = 429, description = "Over 10 replays per minute for this endpoint", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn replay_delivery(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(delivery_id): ApiPath<String>,
) -> Result<(StatusCode, Json<DeliveryOut>), ApiError> {
    let tenant = principal.tenant();
    let webhooks = state.store().webhooks();
    let original = webhooks
        .delivery(&tenant, &delivery_id)
        .await?
        .ok_or(ApiError::NotFound(Resource::WebhookDelivery))?;
    let endpoint = endpoint_of(&state, &tenant, &original.endpoint_id).await?;
    spend_endpoint_budget(&state, &endpoint, "replay", endpoints::REPLAYS_PER_ENDPOINT).await?;
    let mut template = original.clone();
    template.replay_of = Some(original.id.clone());
    let replay = webhooks
        .create_manual(&endpoint, DeliveryKind::Replay, &template)
        .await?;
    let (delivery, attempts, _) = deliver_now(&state, &endpoint, replay).await?;
    Ok((
        StatusCode::CREATED,
        Json(DeliveryOut::new(delivery, Some(attempts))),
    ))
}

/// What a test fire found.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TestFireOut {
    /// `Verified` (2xx), `Signature rejected` (401 or 403), `Handler error`
    /// (any other status), `Connection failed` or `Timeout` (10 seconds).
    pub verdict: String,
    /// The test delivery with its attempt.
    pub delivery: DeliveryOut,
}

/// The verdict of a test fire's attempt.
pub fn verdict(report: &AttemptReport) -> &'static str {
    use storage::webhooks::AttemptOutcome;
    match report.outcome {
        AttemptOutcome::Succeeded => "Verified",
        AttemptOutcome::HttpError if matches!(report.status_code, Some(401 | 403)) => {
            "Signature rejected"
        }
        AttemptOutcome::HttpError => "Handler error",
        AttemptOutcome::Timeout => "Timeout",
        AttemptOutcome::ConnectionFailed | AttemptOutcome::Refused => "Connection failed",
    }
}

/// Sends a signed `webhook.test_fire` delivery to the endpoint now and
/// reports the verdict. 5 per minute per endpoint.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpoint_id}/test",
    tag = "webhooks",
    operation_id = "test_webhook_endpoint",
    params(("endpoint_id" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The verdict and the test delivery", body = TestFireOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks webhooks:write", body = ErrorEnvelope),
        (status = 404, description = "webhook_endpoint_not_found", body = ErrorEnvelope),
        (status = 429, description = "Over 5 test fires per minute for this endpoint", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
async fn test_fire(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(endpoint_id): ApiPath<String>,
) -> Result<Json<TestFireOut>, ApiError> {
    let tenant = principal.tenant();
    let endpoint = endpoint_of(&state, &tenant, &endpoint_id).await?;
    spend_endpoint_budget(
        &state,
        &endpoint,
        "test_fire",
        endpoints::TEST_FIRES_PER_ENDPOINT,
    )
    .await?;
    let now = state.store().clock().now();
    let template = Delivery {
        id: String::new(),
        endpoint_id: endpoint.id.clone(),
        agency_id: endpoint.agency_id.clone(),
        kind: DeliveryKind::TestFire,
        replay_of: None,
        event_id: ulid::Ulid::generate().to_string(),
        event_type: "webhook.test_fire".to_owned(),
        api_version: storage::events::API_VERSION.to_owned(),
        occurred_at: now,
        is_sandbox: tenant.environment.is_sandbox(),
        data: json!({
            "endpoint_id": endpoint.id,
            "message": "Test delivery from the Media Agency Listing API",
        }),
        status: storage::webhooks::DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now,
        completed_at: None,
    };
    let delivery = state
        .store()
        .webhooks()
        .create_manual(&endpoint, DeliveryKind::TestFire, &template)
        .await?;
    let (delivery, attempts, report) = deliver_now(&state, &endpoint, delivery).await?;
    Ok(Json(TestFireOut {
        verdict: verdict(&report).to_owned(),
        delivery: DeliveryOut::new(delivery, Some(attempts)),
    }))
}
