//! The OpenAPI document: generated from the handlers' annotations, completed
//! with the servers, the security schemes and the error envelope, and served at
//! `/api/openapi.json` on every host.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::server::Server;
use utoipa::openapi::{OpenApi, ServerBuilder};
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
    components(schemas(ErrorEnvelope, ErrorObject)),
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

/// Adds the public servers (base and legacy host) to the finished document.
pub fn with_servers(mut doc: OpenApi, urls: &PublicUrls) -> OpenApi {
    let mut servers: Vec<Server> = vec![
        ServerBuilder::new()
            .url(format!("{}/api/v1", urls.base_url))
            .description(Some("Production"))
            .build(),
    ];
    if let Some(legacy) = &urls.legacy_base_url {
        servers.push(
            ServerBuilder::new()
                .url(format!("{legacy}/api/v1"))
                .description(Some("Legacy alias host (scheduled for retirement)"))
                .build(),
        );
    }
    doc.servers = Some(servers);
    doc
}
