//! The route table: every route of the public listener, one row each, with
//! its method, its path as the specification writes it, who may call it
//! under which policy, and the handler that serves it.
//!
//! Reading a row:
//! - The path is under `/api/v1` for the documented API; the handler's
//!   `#[utoipa::path]` repeats it for the OpenAPI document, and building the
//!   table checks that both say the same method and path (a mismatch stops
//!   the service at start, and every test with it).
//! - The access names the credential and the policy (`crate::endpoints`, one
//!   line each): `Key(&E)` an API key holding `E`'s scope, spending `E`'s
//!   agency and per-key budgets; `KeyOrSession` the same, or the developer
//!   settings' session cookie with its CSRF token (the uploads);
//!   `KeyOrAdministratorSession` a key, or an agency administrator's session
//!   (the webhook routes the portal manages); `Session(&S)` the session only,
//!   with `S`'s CSRF rule and per-user budget; `KeyOrProgressToken` a
//!   progress URL's token or a key; `Open` no credential (signing in).
//! - Idempotency follows the access (`Access::idempotent`): every route a key
//!   may call takes `X-Idempotency-Key`, required on POST and PATCH, honoured
//!   on PUT and DELETE; session-only and open routes take none.
//! - The handler's signature names its wire types; their limits are on their
//!   fields (`#[schema(max_length = …)]`, literals that `routes/wire_limits.rs`
//!   holds to the constants validation uses).
//!
//! The guard that enforces the access is `crate::middleware::guard`; the
//! global middleware around everything is `crate::middleware::apply`, with
//! the deadlines by route in `crate::middleware::deadline` (10 s to create a
//! user, an upload's timeout plus a margin, none for a progress stream, 30 s
//! for everything else).

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
use utoipa_axum::routes;

use super::{
    availability, changelog, delivery_profiles, denied, developer_keys, listings, media,
    preferences, sandbox, session, test_console, user_admin, users, webhooks,
};
use crate::endpoints::*;
use crate::middleware::guard::{Access, guard_method, guarded};
use crate::portal;
use crate::state::AppState;

use Access::{
    Key, KeyOrAdministratorSession, KeyOrProgressToken, KeyOrSession, Open, Resumable, Session,
};

/// The documented routes under `/api/v1`.
#[rustfmt::skip]
pub fn api_v1(state: &AppState) -> OpenApiRouter<AppState> {
    use Method as M;
    Table::new(state)
        // Listings (tours)
        .route(M::POST,   "/listings",                                    Key(&CREATE_LISTING),                    routes!(listings::create::create_listing))
        .route(M::GET,    "/listings",                                    Key(&READ_LISTINGS_LIST),                routes!(listings::read::list_listings))
        .route(M::GET,    "/listings/{listing_number}",                   Key(&READ_LISTING_SINGLE),               routes!(listings::read::read_listing))
        .route(M::GET,    "/listings/{listing_number}/orders",            Key(&GET_LISTING_ORDERS),                routes!(listings::orders::list_listing_orders))
        .route(M::PATCH,  "/listings/{listing_number}/status",            Key(&UPDATE_LISTING_STATUS),             routes!(listings::status::update_listing_status))
        .route(M::POST,   "/listings/{listing_number}/cancel",            Key(&CANCEL_LISTING),                    routes!(listings::cancel::cancel_listing))
        .route(M::PATCH,  "/listings/{listing_number}/sections/{section}", Key(&UPDATE_SECTION),                   routes!(listings::sections::update_section))
        .route(M::GET,    "/tours/{listing_number}",                      Key(&READ_LISTING_SINGLE),               routes!(changelog::read_tour))
        // Media
        .streaming(M::POST, "/media/upload",                              KeyOrSession(&UPLOAD_MEDIA),             routes!(media::upload::upload))
        .streaming(M::POST, "/listings/{listing_number}/media",           KeyOrSession(&UPLOAD_MEDIA),             routes!(media::upload::upload_to_listing))
        .route(M::GET,    "/progress/{operation_id}",                     KeyOrProgressToken(&READ_PROGRESS),      routes!(media::progress::progress))
        // Resumable uploads (tus 1.0)
        .route(M::OPTIONS, "/uploads",                                    Open,                                    routes!(media::resumable::create::discover))
        .streaming(M::POST, "/uploads",                                   Resumable(&CREATE_UPLOAD),               routes!(media::resumable::create::create_upload))
        .route(M::HEAD,   "/uploads/{upload_id}",                         Resumable(&TRANSFER_UPLOAD),             routes!(media::resumable::transfer::read_offset))
        .streaming(M::PATCH, "/uploads/{upload_id}",                      Resumable(&TRANSFER_UPLOAD),             routes!(media::resumable::transfer::append_upload))
        .route(M::DELETE, "/uploads/{upload_id}",                         Resumable(&TRANSFER_UPLOAD),             routes!(media::resumable::transfer::terminate_upload))
        .route(M::POST,   "/direct-uploads",                              KeyOrSession(&CREATE_DIRECT_UPLOAD),     routes!(media::resumable::direct::create_direct_upload))
        .route(M::GET,    "/direct-uploads/{upload_id}",                  KeyOrSession(&DIRECT_UPLOAD),            routes!(media::resumable::direct::read_direct_upload))
        .route(M::POST,   "/direct-uploads/{upload_id}/complete",         KeyOrSession(&DIRECT_UPLOAD),            routes!(media::resumable::direct::complete_direct_upload))
        .route(M::DELETE, "/direct-uploads/{upload_id}",                  KeyOrSession(&DIRECT_UPLOAD),            routes!(media::resumable::direct::abort_direct_upload))
        .route(M::POST,   "/upload-batches",                              KeyOrSession(&CREATE_UPLOAD_BATCH),      routes!(media::resumable::batches::create_upload_batch))
        .route(M::PATCH,  "/media/{media_id}",                            KeyOrAdministratorSession(&UPDATE_MEDIA), routes!(media::item::update_media))
        .route(M::POST,   "/media/archive",                               KeyOrAdministratorSession(&ARCHIVE_MEDIA), routes!(media::archive::create_archive))
        .route(M::GET,    "/media/archive/{operation_id}",                KeyOrAdministratorSession(&ARCHIVE_MEDIA), routes!(media::archive::read_archive))
        // Scheduling
        .route(M::GET,    "/scheduling/availability",                     Key(&GET_AVAILABILITY),                  routes!(availability::get_availability))
        // Users
        .route(M::GET,    "/users",                                       Key(&READ_USERS_LIST),                   routes!(users::list_users))
        .route(M::GET,    "/users/{user_id}",                             Key(&READ_USER_SINGLE),                  routes!(users::get_user))
        .route(M::POST,   "/users",                                       Key(&CREATE_USER),                       routes!(user_admin::create_user))
        .alias(M::POST,   "/users/",                                      Key(&CREATE_USER),                       routes!(user_admin::create_user))
        .route(M::GET,    "/users/{user_id}/can-edit",                    Key(&CAN_EDIT_USER),                     routes!(user_admin::can_edit))
        .route(M::POST,   "/users/batch-can-edit",                        Key(&BATCH_CAN_EDIT_USERS),              routes!(user_admin::batch_can_edit))
        .route(M::PUT,    "/users/{user_id}/role",                        Key(&UPDATE_USER_ROLE),                  routes!(user_admin::update_role))
        .route(M::PUT,    "/users/{user_id}/status",                      Key(&UPDATE_USER_STATUS),                routes!(user_admin::update_status))
        .route(M::DELETE, "/users/team/{assistant_id}",                   Key(&REMOVE_TEAM_MEMBER),                routes!(user_admin::remove_from_team))
        .route(M::GET,    "/users/{user_id}/preferences",                 Key(&READ_USER_PREFERENCES),             routes!(preferences::get_preferences))
        .route(M::PATCH,  "/users/{user_id}/preferences",                 Key(&UPDATE_USER_PREFERENCES),           routes!(preferences::update_preferences))
        // Delivery profiles
        .route(M::POST,   "/delivery-profiles",                           KeyOrAdministratorSession(&WRITE_DELIVERY_PROFILE),  routes!(delivery_profiles::create_profile))
        .route(M::GET,    "/delivery-profiles",                           KeyOrAdministratorSession(&READ_DELIVERY_PROFILES),  routes!(delivery_profiles::list_profiles))
        .route(M::GET,    "/delivery-profiles/{profile_id}",              KeyOrAdministratorSession(&READ_DELIVERY_PROFILES),  routes!(delivery_profiles::get_profile))
        .route(M::PATCH,  "/delivery-profiles/{profile_id}",              KeyOrAdministratorSession(&WRITE_DELIVERY_PROFILE),  routes!(delivery_profiles::update_profile))
        .route(M::DELETE, "/delivery-profiles/{profile_id}",              KeyOrAdministratorSession(&WRITE_DELIVERY_PROFILE),  routes!(delivery_profiles::delete_profile))
        .route(M::GET,    "/delivery-profile-templates",                  KeyOrAdministratorSession(&READ_DELIVERY_PROFILES),  routes!(delivery_profiles::list_templates))
        // Webhooks
        .route(M::GET,    "/webhooks/events",                             Key(&GET_WEBHOOK_CATALOG),               routes!(webhooks::catalog::event_catalog))
        .route(M::POST,   "/webhooks/endpoints",                          KeyOrAdministratorSession(&CREATE_WEBHOOK_ENDPOINT), routes!(webhooks::endpoints::create_endpoint))
        .route(M::GET,    "/webhooks/endpoints",                          KeyOrAdministratorSession(&READ_WEBHOOK_ENDPOINTS),  routes!(webhooks::endpoints::list_endpoints))
        .route(M::GET,    "/webhooks/endpoints/{endpoint_id}",            KeyOrAdministratorSession(&READ_WEBHOOK_ENDPOINTS),  routes!(webhooks::endpoints::get_endpoint))
        .route(M::PATCH,  "/webhooks/endpoints/{endpoint_id}",            KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::endpoints::update_endpoint))
        .route(M::DELETE, "/webhooks/endpoints/{endpoint_id}",            KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::endpoints::delete_endpoint))
        .route(M::POST,   "/webhooks/endpoints/{endpoint_id}/disable",    KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::endpoint_actions::disable_endpoint))
        .route(M::POST,   "/webhooks/endpoints/{endpoint_id}/enable",     KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::endpoint_actions::enable_endpoint))
        .route(M::POST,   "/webhooks/endpoints/{endpoint_id}/rotate-secret", KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::endpoint_actions::rotate_secret))
        .route(M::GET,    "/webhooks/endpoints/{endpoint_id}/deliveries", KeyOrAdministratorSession(&READ_WEBHOOK_DELIVERIES), routes!(webhooks::deliveries::list_deliveries))
        .route(M::GET,    "/webhooks/deliveries/{delivery_id}",           KeyOrAdministratorSession(&READ_WEBHOOK_DELIVERIES), routes!(webhooks::deliveries::get_delivery))
        .route(M::POST,   "/webhooks/deliveries/{delivery_id}/replay",    KeyOrAdministratorSession(&REPLAY_WEBHOOK_DELIVERY), routes!(webhooks::replay::replay_delivery))
        .route(M::POST,   "/webhooks/endpoints/{endpoint_id}/test",       KeyOrAdministratorSession(&TEST_WEBHOOK_ENDPOINT),   routes!(webhooks::test_fire::test_fire))
        .route(M::POST,   "/webhooks/endpoints/{endpoint_id}/recover",    KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::recover::recover_endpoint))
        .route(M::GET,    "/webhooks/endpoints/{endpoint_id}/recoveries/{recovery_id}", KeyOrAdministratorSession(&READ_WEBHOOK_DELIVERIES), routes!(webhooks::recover::get_recovery))
        .route(M::GET,    "/webhooks/listen",                             KeyOrAdministratorSession(&READ_WEBHOOK_DELIVERIES), routes!(webhooks::listen::listen))
        .route(M::POST,   "/webhooks/trigger",                            KeyOrAdministratorSession(&UPDATE_WEBHOOK_ENDPOINT), routes!(webhooks::listen::trigger))
        // Sessions of the developer settings
        .route(M::POST,   "/session",                                     Open,                                    routes!(session::sign_in::login))
        .route(M::GET,    "/session",                                     Session(&READ_SESSION),                  routes!(session::current::current_session))
        .route(M::DELETE, "/session",                                     Session(&END_SESSION),                   routes!(session::current::logout))
        .route(M::POST,   "/session/password-reset",                      Open,                                    routes!(session::password::request_password_reset))
        .route(M::POST,   "/session/password",                            Open,                                    routes!(session::password::set_password))
        .route(M::POST,   "/users/{user_id}/impersonate",                 Session(&IMPERSONATE),                   routes!(session::impersonation::impersonate))
        .route(M::DELETE, "/session/impersonation",                       Session(&IMPERSONATE),                   routes!(session::impersonation::end_impersonation))
        // The agency's developer settings
        .route(M::GET,    "/agency/api-keys",                             Session(&READ_KEYS),                     routes!(developer_keys::list_keys))
        .route(M::GET,    "/agency/api-keys/audit",                       Session(&READ_KEYS),                     routes!(developer_keys::key_audit))
        .route(M::POST,   "/agency/api-keys",                             Session(&MANAGE_KEYS),                   routes!(developer_keys::create_key))
        .route(M::POST,   "/agency/api-keys/{key_id}/rotate",             Session(&MANAGE_KEYS),                   routes!(developer_keys::rotate_key))
        .route(M::DELETE, "/agency/api-keys/{key_id}",                    Session(&MANAGE_KEYS),                   routes!(developer_keys::revoke_key))
        .route(M::GET,    "/agency/changelog",                            Session(&READ_CHANGELOG),                routes!(changelog::read_changelog))
        .route(M::POST,   "/agency/test-console",                         Session(&RUN_CONSOLE),                   routes!(test_console::run))
        .route(M::POST,   "/agency/sandbox/seed",                         Key(&SEED_SANDBOX),                      routes!(sandbox::seed))
        .into_router()
}

/// The routes outside the OpenAPI document, on the same listener: the
/// signed URLs the API hands out (the signature, or the progress token, is
/// the credential), the document itself, what was removed (410) or is out of
/// scope (404, `denied::DENIED`), and the pages of the developer portal and
/// the public property page (the portal's pages read their session cookie
/// themselves, and every change they offer is a call to the JSON API above).
#[rustfmt::skip]
pub fn outside_the_document(state: &AppState, document: Arc<str>) -> Router<AppState> {
    Router::new()
        // Signed URLs
        .route("/v1/progress/{operation_id}",                  guard_method(state, KeyOrProgressToken(&READ_PROGRESS), get(media::progress::progress)))
        .route("/api/v1/media/{media_id}/variants/{name}",      get(media::downloads::download))
        .route("/api/v1/media/{media_id}/outputs/{profile_id}/{name}", get(media::downloads::download_output))
        .route("/api/v1/media/archive/{operation_id}/download", get(media::archive::download))
        // The OpenAPI document
        .route("/api/openapi.json",                            get(move || serve_document(document.clone())))
        // Removed, and out of scope
        .route("/api/v1/tours",                                get(changelog::list_tours_removed))
        .nest("/api/v1",                                       denied::router())
        // The developer portal (`/settings`) and the public pages
        .route("/assets/portal.css",                           get(portal::stylesheet))
        .route("/assets/portal.js",                            get(portal::script))
        .route("/assets/uploads.js",                           get(portal::uploads_script))
        .route("/assets/profiles.js",                          get(portal::profiles_script))
        .route("/assets/tus.min.js",                           get(portal::tus_client))
        .route("/settings",                                    get(|| async { Redirect::to("/settings/keys") }))
        .route("/settings/sign-in",                            get(portal::account::sign_in_page).post(portal::account::sign_in))
        .route("/set-password",                                get(portal::account::set_password_page))
        .route("/settings/keys",                               get(portal::keys::page_handler))
        .route("/settings/uploads",                            get(portal::uploads::uploads_page))
        .route("/settings/delivery-profiles",                  get(portal::delivery_profiles::profiles_page))
        .route("/settings/delivery-profiles/{profile_id}",     get(portal::delivery_profiles::profile_page))
        .route("/settings/webhooks",                           get(portal::webhooks::endpoints_page))
        .route("/settings/webhooks/{endpoint_id}",             get(portal::webhooks::endpoint_page))
        .route("/settings/events",                             get(portal::webhooks::catalog_page))
        .route("/settings/console",                            get(portal::console::page_handler))
        .route("/settings/changelog",                          get(portal::usage::changelog_page))
        .route("/settings/usage",                              get(portal::usage::usage_page))
        .route("/property/{listing_number}",                   get(portal::public::property_page))
        .route("/dashboard/listings/{listing_number}/cancel",  get(portal::public::cancel_help_page))
}

/// The OpenAPI document, as built once at start.
async fn serve_document(document: Arc<str>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
        .into_response()
}

/// The table under construction: each row's handler guarded by its access
/// and added to the router, after its method and path were checked against
/// the handler's documentation.
struct Table<'a> {
    state: &'a AppState,
    router: OpenApiRouter<AppState>,
}

impl<'a> Table<'a> {
    fn new(state: &'a AppState) -> Self {
        Self {
            state,
            router: OpenApiRouter::new(),
        }
    }

    /// A documented route.
    fn route(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        handler: UtoipaMethodRouter<AppState>,
    ) -> Self {
        let guarded = self.guard(method, path, access, handler);
        self.router = self.router.routes(guarded);
        self
    }

    /// A documented route whose handler reads its body as a stream and
    /// enforces its own limits while it streams (the uploads).
    fn streaming(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        handler: UtoipaMethodRouter<AppState>,
    ) -> Self {
        let (schemas, paths, method_router) = self.guard(method, path, access, handler);
        self.router = self.router.routes((
            schemas,
            paths,
            method_router.layer(DefaultBodyLimit::disable()),
        ));
        self
    }

    /// A second spelling of a documented route, served alike and not
    /// documented twice (the specification writes `POST /users/`).
    fn alias(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        handler: UtoipaMethodRouter<AppState>,
    ) -> Self {
        let documented = documented_path(&handler);
        let (_, _, method_router) = self.guard(method, &documented, access, handler);
        self.router = self.router.route(path, method_router);
        self
    }

    fn guard(
        &self,
        method: Method,
        path: &str,
        access: Access,
        handler: UtoipaMethodRouter<AppState>,
    ) -> UtoipaMethodRouter<AppState> {
        check_documented(&method, path, &handler);
        guarded(self.state, access, handler)
    }

    fn into_router(self) -> OpenApiRouter<AppState> {
        self.router
    }
}

/// The one path a handler documents.
fn documented_path(handler: &UtoipaMethodRouter<AppState>) -> String {
    let paths: Vec<&String> = handler.1.paths.keys().collect();
    match paths.as_slice() {
        [path] => (*path).clone(),
        _ => panic!("a route table row names one handler of one path, not {paths:?}"),
    }
}

/// Stops the service when a row's method and path are not what its handler
/// documents: the table and the OpenAPI document may not disagree.
fn check_documented(method: &Method, path: &str, handler: &UtoipaMethodRouter<AppState>) {
    let documented = documented_path(handler);
    let item = &handler.1.paths[&documented];
    let operations = documented_methods(item);
    assert!(
        documented == path && operations == [method.clone()],
        "the route table says {method} {path}; the handler documents {operations:?} {documented}"
    );
}

/// The methods a path item documents an operation for.
fn documented_methods(item: &PathItem) -> Vec<Method> {
    let candidates: [(Method, &Option<Operation>); 7] = [
        (Method::GET, &item.get),
        (Method::POST, &item.post),
        (Method::PUT, &item.put),
        (Method::PATCH, &item.patch),
        (Method::DELETE, &item.delete),
        (Method::HEAD, &item.head),
        (Method::OPTIONS, &item.options),
    ];
    candidates
        .into_iter()
        .filter(|(_, operation)| operation.is_some())
        .map(|(method, _)| method)
        .collect()
}
