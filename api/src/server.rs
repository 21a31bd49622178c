//! Serving the application: plain HTTP (axum) or HTTPS (rustls through
//! axum-server), with the peer address available to the transport policy, and
//! graceful shutdown on SIGTERM or Ctrl-C.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum_server::tls_rustls::RustlsConfig;

/// How long in-flight requests may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Installs the process-wide rustls crypto provider (aws-lc-rs). Several crates
/// in the tree enable rustls; naming one provider avoids an ambiguous default.
pub fn install_crypto_provider() {
    // An error means a provider is installed already, which is what we want.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// TLS settings loaded from PEM files.
pub async fn load_tls(cert: &Path, key: &Path) -> anyhow::Result<RustlsConfig> {
    install_crypto_provider();
    RustlsConfig::from_pem_file(cert, key)
        .await
        .with_context(|| {
            format!(
                "loading TLS certificate {} and key {}",
                cert.display(),
                key.display()
            )
        })
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight
/// requests finish.
pub async fn serve(
    listener: std::net::TcpListener,
    app: Router,
    tls: Option<RustlsConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    match tls {
        None => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            axum::serve(listener, service)
                .with_graceful_shutdown(shutdown)
                .await?;
        }
        Some(config) => {
            let handle = axum_server::Handle::new();
            let on_signal = handle.clone();
            tokio::spawn(async move {
                shutdown.await;
                on_signal.graceful_shutdown(Some(DRAIN_TIMEOUT));
            });
            axum_server::from_tcp_rustls(listener, config)?
                .handle(handle)
                .serve(service)
                .await?;
        }
    }
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}

/// TLS settings from PEM text (certificate chain and private key).
pub async fn tls_from_pem(cert: Vec<u8>, key: Vec<u8>) -> anyhow::Result<RustlsConfig> {
    install_crypto_provider();
    RustlsConfig::from_pem(cert, key)
        .await
        .context("loading TLS certificate and key")
}
