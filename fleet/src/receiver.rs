//! The webhook receiver on the client host: HTTPS with a self-signed
//! certificate the API and worker hosts are told to trust, answering 200 to
//! every delivery and recording what arrived, per endpoint path.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use bytes::Bytes;

/// One delivery as it arrived.
#[derive(Clone, Debug)]
pub struct Arrival {
    /// `X-Event-Id`.
    pub event_id: String,
    /// The envelope's nonce: one per delivery attempt.
    pub nonce: String,
}

type Arrivals = Arc<Mutex<BTreeMap<String, Vec<Arrival>>>>;

/// The running receiver.
#[derive(Clone)]
pub struct Receiver {
    address: SocketAddr,
    arrivals: Arrivals,
}

/// Writes a self-signed certificate for `ip` into `out`.
pub fn write_certificate(ip: IpAddr, out: &Path) -> anyhow::Result<bool> {
    let certified = rcgen::generate_simple_self_signed(vec![ip.to_string()])?;
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("receiver.pem"), certified.cert.pem())?;
    std::fs::write(out.join("receiver-ca.pem"), certified.cert.pem())?;
    std::fs::write(
        out.join("receiver-key.pem"),
        certified.signing_key.serialize_pem(),
    )?;
    Ok(true)
}

async fn receive(
    State(arrivals): State<Arrivals>,
    UrlPath(endpoint): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let event_id = headers
        .get("x-event-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let nonce = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|envelope| envelope["nonce"].as_str().map(str::to_owned))
        .unwrap_or_default();
    if let Ok(mut arrivals) = arrivals.lock() {
        arrivals
            .entry(endpoint)
            .or_default()
            .push(Arrival { event_id, nonce });
    }
    StatusCode::OK
}

impl Receiver {
    /// Starts on `address` with the certificate in `dir`.
    pub async fn start(address: SocketAddr, dir: &Path) -> anyhow::Result<Self> {
        api::server::install_crypto_provider();
        let cert = std::fs::read(dir.join("receiver.pem")).context("receiver.pem")?;
        let key = std::fs::read(dir.join("receiver-key.pem")).context("receiver-key.pem")?;
        let tls = api::server::tls_from_pem(cert, key).await?;
        let arrivals: Arrivals = Arc::default();
        let app = Router::new()
            .route("/hooks/{endpoint}", post(receive))
            .with_state(arrivals.clone());
        let listener = std::net::TcpListener::bind(address)
            .with_context(|| format!("binding the receiver on {address}"))?;
        tokio::spawn(async move {
            if let Err(err) =
                api::server::serve(listener, app, Some(tls), std::future::pending()).await
            {
                eprintln!("fleet-drill: the receiver stopped: {err:#}");
            }
        });
        Ok(Self { address, arrivals })
    }

    /// The URL of endpoint path `name`.
    pub fn url(&self, name: &str) -> String {
        format!("https://{}/hooks/{name}", self.address)
    }

    /// What arrived at `name` so far.
    pub fn arrivals(&self, name: &str) -> Vec<Arrival> {
        self.arrivals
            .lock()
            .map(|arrivals| arrivals.get(name).cloned().unwrap_or_default())
            .unwrap_or_default()
    }
}
