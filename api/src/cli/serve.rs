//! `api serve`: open the store, build the application and serve it.

use anyhow::Context;

use crate::config::ServeArgs;
use crate::rate_limit::RateLimiter;
use crate::rate_limit::redis::RedisLimiter;
use crate::server;
use crate::state::{AppState, PublicUrls};
use crate::transport_policy;

/// Prefix of every rate-limit key the API writes to Redis.
pub const REDIS_PREFIX: &str = "listing-api:rl:";

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    args.validate()?;
    server::install_crypto_provider();
    let store = args.storage.open_store().await?;
    let urls = PublicUrls {
        base_url: args.base_url(),
        legacy_base_url: args
            .legacy_base_url
            .as_deref()
            .map(|url| url.trim_end_matches('/').to_owned()),
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(server::load_tls(cert, key).await?),
        _ => None,
    };
    let redis_url = args.redis_url.as_deref().filter(|url| !url.is_empty());
    let rate_limiter = match redis_url {
        Some(url) => RateLimiter::Redis(
            RedisLimiter::connect(url, REDIS_PREFIX)
                .await
                .context("connecting to Redis for rate limiting")?,
        ),
        None => RateLimiter::in_process(),
    };
    let transport = transport_policy(&args);
    let state = AppState::with_rate_limiter(store.clone(), urls.clone(), rate_limiter);
    let app = crate::app(state, transport.clone());
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(
        listen = %args.listen,
        base_url = %urls.base_url,
        profile = if args.storage.is_distributed() { "distributed" } else { "embedded" },
        database = ?store.db().backend(),
        shared_rate_limits = redis_url.is_some(),
        tls = tls.is_some(),
        transport = ?transport,
        in_process_workers = !args.no_workers,
        "serving the Media Agency Listing API"
    );
    server::serve(listener, app, tls, server::shutdown_signal()).await?;
    store.close().await;
    Ok(())
}
