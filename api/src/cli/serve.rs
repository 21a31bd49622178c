//! `api serve`: open the platform, then serve the public API and the ops
//! listener and (unless `--no-workers`) run the workers, all until SIGTERM.

use anyhow::Context;
use tokio::sync::watch;

use crate::config::ServeArgs;
use crate::ops::{self, OpsAuth};
use crate::rate_limit::RateLimiter;
use crate::rate_limit::redis::RedisLimiter;
use crate::server;
use crate::state::{AppState, PublicUrls};
use crate::transport_policy;

/// Prefix of every rate-limit key the API writes to Redis.
pub const REDIS_PREFIX: &str = "listing-api:rl:";

/// Resolves once the shutdown flag is raised.
async fn stopped(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await;
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    args.validate()?;
    server::install_crypto_provider();
    let metrics = crate::metrics::install();
    let platform = platform::Platform::open(&args.storage)
        .await?
        .with_webhooks(args.workers.webhooks.delivery()?)
        .with_mailer(args.workers.mail.mailer()?);
    let store = platform.store.clone();
    let redis_url = args.storage.redis().map(str::to_owned);
    let rate_limiter = match &redis_url {
        Some(url) => RateLimiter::shared(
            RedisLimiter::connect(url, REDIS_PREFIX)
                .await
                .context("connecting to Redis for rate limiting")?,
        ),
        None => RateLimiter::in_process(),
    };
    let relay = redis_url
        .clone()
        .map(|url| platform.progress.spawn_redis_relay(url));
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
    let transport = transport_policy(&args);
    let mut state = AppState::new(platform.clone(), urls.clone(), rate_limiter)
        .with_write_pacing(args.write_pacing())
        .with_upload_limits(args.upload_limits());
    if let Some(url) = &redis_url {
        state = state.with_revocation_channel(url.clone());
    }
    // Keys revoked by any process sharing the Redis are forgotten here at once.
    let revocations = redis_url
        .clone()
        .map(|url| crate::revocation::spawn_listener(url, state.clone()).0);
    // And keys any process sharing the database ended, with or without Redis.
    let (database_revocations, _) = crate::revocation::spawn_database_follower(state.clone());
    let app = crate::app(state.clone(), transport.clone());
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("binding {}", args.listen))?;
    let ops_listener = std::net::TcpListener::bind(args.ops_listen)
        .with_context(|| format!("binding the ops listener {}", args.ops_listen))?;
    let ops_auth = OpsAuth::new(args.ops_basic_auth()?);
    let ops_app = ops::router(
        state.clone(),
        ops_auth,
        metrics,
        crate::ops_transport_policy(&args),
    );

    let (stop, stop_flag) = watch::channel(false);
    tokio::spawn(async move {
        server::shutdown_signal().await;
        let _ = stop.send(true);
    });
    tracing::info!(
        listen = %args.listen,
        ops_listen = %args.ops_listen,
        base_url = %urls.base_url,
        profile = if args.storage.is_distributed() { "distributed" } else { "embedded" },
        database = ?store.db().backend(),
        queue = ?args.storage.queue_target(),
        shared_rate_limits = redis_url.is_some(),
        tls = tls.is_some(),
        transport = ?transport,
        in_process_workers = !args.no_workers,
        "serving the Media Agency Listing API"
    );
    let public = server::serve(listener, app, tls.clone(), stopped(stop_flag.clone()));
    let ops = server::serve(ops_listener, ops_app, tls, stopped(stop_flag.clone()));
    let workers = async {
        if args.no_workers {
            return Ok(());
        }
        let settings = workers::cli::settings(&args.workers)?;
        let pacing = args.write_pacing();
        if let Some(delivery_slots) = settings.first_attempt_slots()
            && pacing.outgrows(delivery_slots)
        {
            tracing::warn!(
                backlog_limit = pacing.backlog_limit,
                delivery_slots,
                "an agency's webhook backlog may outgrow this process's delivery slots, \
                 so first attempts beyond them wait in the queue: raise \
                 `--queue webhook_delivery=N` to at least WEBHOOK_BACKLOG_LIMIT"
            );
        }
        workers::runtime::run(platform.clone(), settings, stopped(stop_flag.clone())).await
    };
    let outcome = tokio::try_join!(public, ops, workers);
    if let Some(relay) = relay {
        relay.abort();
    }
    if let Some(revocations) = revocations {
        revocations.abort();
    }
    database_revocations.abort();
    platform
        .dispatch
        .flush(std::time::Duration::from_secs(5))
        .await;
    store.close().await;
    outcome.map(|_| ())
}
