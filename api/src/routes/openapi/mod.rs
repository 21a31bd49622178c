//! The OpenAPI document: generated from the route table's handlers and their
//! wire types (whose limits are on their fields), completed with the
//! servers, the security schemes and the error envelope, and served at
//! `/api/openapi.json` on every host.
//!
//! What no attribute can say is added to the JSON once, when the routes are
//! built ([`complete`]): the domain's enumerations (`enums`), what the shared
//! layers add to every operation (`shared_layers`), the bodies no type
//! describes (`bodies`) and the catalog of tags, links and webhooks
//! (`catalog`). The schemathesis test of the suite holds the document and
//! the service to each other.

mod bodies;
mod catalog;
mod enums;
mod json;
mod shared_layers;

use serde_json::Value;

use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Required, ResponseBuilder, ServerBuilder};
use utoipa::{Modify, OpenApi as _};

use crate::error::{ErrorEnvelope, ErrorObject};
use crate::state::PublicUrls;

/// The document's fixed part; paths come from the routers.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Media Agency Listing API",
        description = "Multi-tenant API for real-estate media agencies and brokers. \
            Every error is the envelope {error: {code, message, request_id, details}}.",
        version = "2026-05-29"
    ),
    components(schemas(
        ErrorEnvelope,
        ErrorObject,
        crate::routes::media::resumable::protocol::TusResumable
    )),
    modifiers(&SecuritySchemes),
    tags(
        (name = "listings", description = "Listings (tours): lifecycle, cancellation, sections, orders"),
        (name = "users", description = "The people of the caller's agency"),
        (name = "sessions", description = "Signing in to the developer settings, and impersonation"),
        (name = "developer", description = "Developer settings: API keys, the changelog, the sandbox")
    )
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "sk_live_…/sk_test_… or ma_live_ak_…/ma_test_ak_… key",
            ))),
        );
        components.add_security_scheme(
            "session_cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                crate::middleware::session::SESSION_COOKIE,
                "The developer settings' session, from POST /api/v1/session",
            ))),
        );
        components.add_security_scheme(
            "csrf_token",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-CSRF-Token",
                "The session's csrf_token; required with the session on every change and on GET /agency/changelog",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The same API key as a Bearer token"))
                    .build(),
            ),
        );
    }
}

/// The base document before the routers add their paths; `info.version` is
/// the changelog's surface version.
pub fn base() -> OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = crate::changelog::surface_version().to_owned();
    doc
}

/// Marks the operations of deprecated routes (from the changelog) deprecated.
pub fn with_deprecations(mut doc: OpenApi) -> OpenApi {
    let deprecated = crate::changelog::ENTRIES
        .iter()
        .filter(|entry| entry.change_type == crate::changelog::ChangeType::Deprecated)
        .flat_map(|entry| entry.routes.iter());
    for route in deprecated {
        let Some((method, path)) = route.split_once(' ') else {
            continue;
        };
        let Some(item) = doc.paths.paths.get_mut(path) else {
            continue;
        };
        let operation = match method {
            "GET" => item.get.as_mut(),
            "POST" => item.post.as_mut(),
            "PUT" => item.put.as_mut(),
            "PATCH" => item.patch.as_mut(),
            "DELETE" => item.delete.as_mut(),
            _ => None,
        };
        if let Some(operation) = operation {
            operation.deprecated = Some(utoipa::openapi::Deprecated::True);
        }
    }
    doc
}

/// Whether an operation is reached with an API key, and so through the shared
/// guard: rate limits on every method, idempotency on the unsafe ones.
fn takes_api_key(operation: &Operation) -> bool {
    operation.security.iter().flatten().any(|requirement| {
        serde_json::to_value(requirement)
            .ok()
            .and_then(|value| value.as_object().map(|o| o.contains_key("api_key")))
            .unwrap_or(false)
    })
}

/// Adds `description` as the response for `status`, or appends it to the one
/// the handler already documents.
fn add_error(operation: &mut Operation, status: &str, description: &str) {
    match operation.responses.responses.get_mut(status) {
        Some(RefOr::T(response)) => {
            if !response.description.contains(description) {
                response.description = format!("{}; {description}", response.description);
            }
        }
        Some(RefOr::Ref(_)) => {}
        None => {
            let response = ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    Content::new(Some(Ref::from_schema_name("ErrorEnvelope"))),
                )
                .build();
            operation
                .responses
                .responses
                .insert(status.to_owned(), RefOr::T(response));
        }
    }
}

/// Documents what the shared guard adds to every key-authenticated operation:
/// the `X-Idempotency-Key` header (required on POST and PATCH, honoured on PUT
/// and DELETE) with its 400 and 409 outcomes, and the 429 of the rate limits.
pub fn with_request_guarantees(mut doc: OpenApi) -> OpenApi {
    for (path, item) in doc.paths.paths.iter_mut() {
        // The resumable uploads' clients (tus) send no key: optional there.
        let writes = if path.starts_with("/api/v1/uploads") {
            Required::False
        } else {
            Required::True
        };
        let operations = [
            (&mut item.get, None),
            (&mut item.post, Some(writes.clone())),
            (&mut item.patch, Some(writes)),
            (&mut item.put, Some(Required::False)),
            (&mut item.delete, Some(Required::False)),
        ];
        for (operation, idempotency) in operations {
            let Some(operation) = operation.as_mut().filter(|o| takes_api_key(o)) else {
                continue;
            };
            add_error(
                operation,
                "429",
                "rate_limit.exceeded: a budget is spent; Retry-After gives the seconds to wait",
            );
            let Some(required) = idempotency else {
                continue;
            };
            let header = ParameterBuilder::new()
                .name("X-Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(required.clone())
                .description(Some(
                    "At most 128 characters. The same key with the same request within 24 \
                     hours replays the first response (X-Idempotent-Replay: true).",
                ))
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(1))
                        .max_length(Some(crate::middleware::idempotency::MAX_KEY_LEN)),
                ))
                .build();
            operation
                .parameters
                .get_or_insert_with(Vec::new)
                .push(RefOr::T(header));
            if required == Required::True {
                add_error(
                    operation,
                    "400",
                    "idempotency.missing: no X-Idempotency-Key",
                );
            }
            add_error(
                operation,
                "409",
                "idempotency_key_conflict: the key was used for another request; \
                 idempotency_key_in_progress: its first request still runs (Retry-After: 5)",
            );
        }
    }
    doc
}

/// Adds the public servers (base and legacy host) to the finished document.
/// The paths carry the `/api/v1` prefix, so a server is the host alone: a
/// client joins the two.
pub fn with_servers(mut doc: OpenApi, urls: &PublicUrls) -> OpenApi {
    let mut servers: Vec<Server> = vec![
        ServerBuilder::new()
            .url(urls.base_url.clone())
            .description(Some("Production"))
            .build(),
    ];
    if let Some(legacy) = &urls.legacy_base_url {
        servers.push(
            ServerBuilder::new()
                .url(legacy.clone())
                .description(Some("Legacy alias host (scheduled for retirement)"))
                .build(),
        );
    }
    doc.servers = Some(servers);
    doc
}

/// Completes the document (see the module's description).
pub fn complete(doc: &mut Value) {
    enums::apply(doc);
    shared_layers::require_path_segments(doc);
    shared_layers::close_request_schemas(doc);
    bodies::describe_upload(doc);
    bodies::describe_progress_stream(doc);
    shared_layers::document_session_environment(doc);
    shared_layers::complete_responses(doc);
    catalog::declare_tags(doc);
    catalog::add_links(doc);
    catalog::add_webhooks(doc);
}
