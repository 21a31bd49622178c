#![doc = include_str!("../README.md")]

pub use storage::rules::changelog;
pub mod cli;
pub mod config;
pub mod cross_site;
pub mod endpoints;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod middleware;
pub mod multipart;
pub mod ops;
pub mod pacing;
pub mod pagination;
pub mod portal;
pub mod principal;
pub mod rate_limit;
pub mod revocation;
pub mod routes;
pub mod server;
pub mod state;
pub mod usage;

use axum::Router;

pub use error::ApiError;
pub use middleware::transport::TransportPolicy;
pub use state::{AppState, PublicUrls};

/// The whole HTTP application: routes under the global middleware.
pub fn app(state: AppState, transport: TransportPolicy) -> Router {
    app_with_routes(state, transport, Router::new())
}

/// The application with `extra` routes merged in under the same middleware.
/// Tests use it to add routes that exercise the middleware (a handler that
/// panics, for one) without such routes existing in production.
pub fn app_with_routes(
    state: AppState,
    transport: TransportPolicy,
    extra: Router<AppState>,
) -> Router {
    let (routes, _doc) = routes::router(state.clone());
    let deadlines = middleware::deadline::Deadlines {
        deadlines: state.request_deadlines(),
        uploads: state.upload_limits(),
    };
    let app = middleware::apply(
        routes.merge(extra).with_state(state),
        transport,
        Some(deadlines),
    );
    // Outside the routes: a 405's `Allow` is written by the route itself,
    // after any layer of the router.
    let app = Router::new()
        .fallback_service(app)
        .layer(axum::middleware::from_fn(routes::denied::honest_allow));
    // The test console sends its requests into this same application (which,
    // itself without the extension, cannot run the console again).
    let console_target = routes::test_console::ConsoleTarget(app.clone());
    app.layer(axum::Extension(console_target))
}

/// The transport policy of the listener `args` configures.
pub fn transport_policy(args: &config::ServeArgs) -> TransportPolicy {
    TransportPolicy::for_listener(
        args.listen,
        args.tls_cert.is_some(),
        args.trusted_proxies.clone(),
    )
}

/// The transport policy of the ops listener: the same rule as the public one,
/// for its own address (it is served with the same certificate).
pub fn ops_transport_policy(args: &config::ServeArgs) -> TransportPolicy {
    TransportPolicy::for_listener(
        args.ops_listen,
        args.tls_cert.is_some(),
        args.trusted_proxies.clone(),
    )
}
