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
        (name = "users", description = "The people of the caller's agency")
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

/// The base document before the routers add their paths.
pub fn base() -> OpenApi {
    ApiDoc::openapi()
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
