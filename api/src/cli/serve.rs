//! `api serve`: open the store, build the application and serve it.

use anyhow::Context;

use crate::config::ServeArgs;
use crate::server;
use crate::state::{AppState, PublicUrls};
use crate::transport_policy;

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
    let transport = transport_policy(&args);
    let app = crate::app(
        AppState::new(store.clone(), urls.clone()),
        transport.clone(),
    );
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(
        listen = %args.listen,
        base_url = %urls.base_url,
        profile = if args.storage.is_distributed() { "distributed" } else { "embedded" },
        database = ?store.db().backend(),
        tls = tls.is_some(),
        transport = ?transport,
        in_process_workers = !args.no_workers,
        "serving the Media Agency Listing API"
    );
    server::serve(listener, app, tls, server::shutdown_signal()).await?;
    store.db().close().await;
    Ok(())
}
