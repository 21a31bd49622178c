//! `POST /agency/test-console`: the developer settings' test console runs
//! one request as one of the agency's keys, chosen by id (the plaintext is
//! never re-entered, and the service does not keep it), through the whole
//! application: the same middleware, rate limits, tenancy, scopes and
//! idempotency as a request that presented the key. 60 runs per minute per
//! agency.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Extension, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use storage::ids::ApiKeyId;
use tower::ServiceExt;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::ApiJson;
use crate::middleware::guard::ConsoleKey;
use crate::principal::SessionPrincipal;
use crate::rate_limit::Bucket;
use crate::routes::API_PREFIX;
use crate::state::AppState;

/// The longest answer body the console shows.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// The console's own path.
pub const PATH: &str = "/api/v1/agency/test-console";
/// Headers a console request may not set: its credential is the chosen key.
const CREDENTIAL_HEADERS: [&str; 6] = [
    "authorization",
    "x-api-key",
    "cookie",
    "x-csrf-token",
    "host",
    "x-environment",
];

/// The application the console sends its requests into: the whole app,
/// attached to every request by `crate::app`.
#[derive(Clone)]
pub struct ConsoleTarget(pub Router);

/// Body of `POST /agency/test-console`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleIn {
    /// The agency's key to run as (`GET /agency/api-keys`).
    pub key_id: String,
    /// GET, POST, PATCH, PUT or DELETE.
    pub method: String,
    /// A path under `/api/v1`, with its query string.
    pub path: String,
    /// The JSON body, if any.
    pub body: Option<Value>,
    /// Extra request headers (an `X-Idempotency-Key`, say); never a credential.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// What the request answered.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConsoleOut {
    /// The answer's status code.
    pub status: u16,
    /// The answer's headers.
    pub headers: BTreeMap<String, String>,
    /// The answer's body: JSON when it was JSON, else its text.
    pub body: Value,
    /// How long the request took, in milliseconds.
    pub duration_ms: u64,
}

/// Runs one request as one of the agency's keys and shows its answer.
#[utoipa::path(
    post,
    path = "/agency/test-console",
    tag = "developer",
    operation_id = "run_test_console",
    request_body = ConsoleIn,
    responses(
        (status = 200, description = "The request ran; its answer (whatever its status)", body = ConsoleOut),
        (status = 403, description = "permission_denied: only an agency administrator runs the console", body = ErrorEnvelope),
        (status = 404, description = "api_key_not_found: no key of the agency has this id", body = ErrorEnvelope),
        (status = 422, description = "validation.failed or validation.invalid_value: the method, the path (under /api/v1, not the console), a header, or a key that no longer authenticates", body = ErrorEnvelope),
        (status = 429, description = "rate_limit_exceeded: 60 runs per minute per agency", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn run(
    State(state): State<AppState>,
    caller: SessionPrincipal,
    target: Option<Extension<ConsoleTarget>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    outer_headers: HeaderMap,
    ApiJson(body): ApiJson<ConsoleIn>,
) -> Result<Response, ApiError> {
    let user = caller.user();
    if !user.role.is_administrator() {
        return Err(ApiError::Forbidden(
            "Only an agency administrator runs the test console.".to_owned(),
        ));
    }
    let method = match body.method.to_ascii_uppercase().as_str() {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PATCH" => Method::PATCH,
        "PUT" => Method::PUT,
        "DELETE" => Method::DELETE,
        _ => {
            return Err(ApiError::field(
                "method",
                "must be GET, POST, PATCH, PUT or DELETE",
            ));
        }
    };
    let path = body.path.trim();
    let under_api = path.starts_with(&format!("{API_PREFIX}/"));
    let bare_path = path.split(['?', '#']).next().unwrap_or_default();
    if !under_api || path.contains('#') || path.len() > 2048 {
        return Err(ApiError::field(
            "path",
            format!("must be a path under {API_PREFIX}/, at most 2048 characters"),
        ));
    }
    if bare_path.trim_end_matches('/') == PATH {
        return Err(ApiError::field(
            "path",
            "the test console does not run itself",
        ));
    }
    let uri: axum::http::Uri = path
        .parse()
        .map_err(|_| ApiError::field("path", "is not a valid URL path"))?;
    let mut headers = HeaderMap::new();
    for (name, value) in &body.headers {
        let lower = name.to_ascii_lowercase();
        if CREDENTIAL_HEADERS.contains(&lower.as_str()) {
            return Err(ApiError::field(
                "headers",
                format!("{name} is not allowed: the chosen key is the request's credential"),
            ));
        }
        let name = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| ApiError::field("headers", format!("{name} is not a header name")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| ApiError::field("headers", format!("the value of {name} is not valid")))?;
        headers.insert(name, value);
    }
    let Some(Extension(ConsoleTarget(app))) = target else {
        return Err(ApiError::field(
            "path",
            "the test console does not run itself",
        ));
    };
    let key_id = ApiKeyId::parse(&body.key_id).ok_or(ApiError::NotFound(Resource::ApiKey))?;
    let store = state.store();
    let key = store.api_keys().get(&user.agency_id, &key_id).await?;
    if let Err(why) = key.check_usable(store.clock().now()) {
        return Err(ApiError::field(
            "key_id",
            format!(
                "the key is {}; choose a key that still authenticates",
                match why {
                    storage::api_keys::KeyUnusable::Revoked => "revoked",
                    storage::api_keys::KeyUnusable::Expired => "expired",
                }
            ),
        ));
    }
    let agency_budget = Bucket {
        key: format!("agency:{}:test_console", user.agency_id),
        name: "agency_test_console".to_owned(),
        limit: crate::endpoints::RUNS_PER_MINUTE,
    };
    let limits = state.rate_limiter().check(&[agency_budget]).await?;
    let credential = storage::api_keys::Credential {
        agency_rate_limit_overrides: store
            .agencies()
            .rate_limit_overrides(&user.agency_id)
            .await?,
        key,
        creator_role: None,
    };
    let request_body = match &body.body {
        Some(json) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    // The console's request reaches the transport rule as the outer one did,
    // with every line of what the proxy forwarded.
    for forwarded in ["x-forwarded-proto", "x-forwarded-for", "forwarded"] {
        headers.remove(forwarded);
        for value in outer_headers.get_all(forwarded) {
            headers.append(forwarded, value.clone());
        }
    }
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .body(request_body)
        .map_err(|_| ApiError::field("path", "is not a valid URL path"))?;
    *request.headers_mut() = headers;
    request.extensions_mut().insert(ConsoleKey(credential));
    if let Some(Extension(peer)) = peer {
        request.extensions_mut().insert(peer);
    }
    tracing::info!(key_id = %key_id, user_id = %user.id, "test console run");
    let started = Instant::now();
    let answer: Response = match app.oneshot(request).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    let out = read_answer(answer, started).await;
    let mut response = Json(out).into_response();
    limits.apply(response.headers_mut());
    Ok(response)
}

/// The answer as the console shows it; a stream is described, not read.
async fn read_answer(answer: Response, started: Instant) -> ConsoleOut {
    let status = answer.status().as_u16();
    let headers: BTreeMap<String, String> = answer
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let content_type = headers.get("content-type").cloned().unwrap_or_default();
    let body = if content_type.starts_with("text/event-stream") {
        Value::String(
            "An event stream: follow it with EventSource or curl -N; the console shows only its headers."
                .to_owned(),
        )
    } else {
        match axum::body::to_bytes(answer.into_body(), MAX_ANSWER_BYTES).await {
            Ok(bytes) if bytes.is_empty() => Value::Null,
            Ok(bytes) => serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
            Err(_) => Value::String(format!(
                "The answer is larger than {MAX_ANSWER_BYTES} bytes; run it with curl to see it whole."
            )),
        }
    };
    ConsoleOut {
        status,
        headers,
        body,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}
