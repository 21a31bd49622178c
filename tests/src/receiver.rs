//! A real HTTPS webhook receiver on loopback: a self-signed certificate,
//! answers chosen by the test, and every delivery recorded byte for byte.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use tokio::sync::{Notify, watch};

use crate::app::TlsIdentity;

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    /// Header names lower-cased, values as text.
    pub headers: BTreeMap<String, String>,
    /// The raw body.
    pub body: Vec<u8>,
    /// When it arrived.
    pub at: Instant,
}

impl Received {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON delivery body")
    }
}

#[derive(Default)]
struct Behaviour {
    scripted: VecDeque<u16>,
    status: Option<u16>,
    delay: Option<Duration>,
}

#[derive(Clone, Default)]
struct Shared {
    behaviour: Arc<Mutex<Behaviour>>,
    received: Arc<Mutex<Vec<Received>>>,
    arrived: Arc<Notify>,
}

/// The receiver; stops when dropped.
pub struct WebhookReceiver {
    /// `https://localhost:PORT/hooks`.
    pub url: String,
    /// The certificate deliveries must trust.
    pub cert_pem: String,
    shared: Shared,
    _stop: watch::Sender<bool>,
}

async fn receive(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let (status, delay) = {
        let mut behaviour = shared.behaviour.lock().expect("receiver state");
        let status = behaviour
            .scripted
            .pop_front()
            .or(behaviour.status)
            .unwrap_or(200);
        (status, behaviour.delay)
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let headers = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_ascii_lowercase(),
                value.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    shared
        .received
        .lock()
        .expect("receiver log")
        .push(Received {
            headers,
            body: body.to_vec(),
            at: Instant::now(),
        });
    shared.arrived.notify_waiters();
    StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
}

impl WebhookReceiver {
    /// Starts a receiver answering 200.
    pub async fn start() -> Self {
        api::server::install_crypto_provider();
        let identity = TlsIdentity::self_signed();
        let tls = api::server::tls_from_pem(
            identity.cert_pem.clone().into_bytes(),
            identity.key_pem.clone().into_bytes(),
        )
        .await
        .expect("receiver TLS");
        let shared = Shared::default();
        let app = Router::new()
            .route("/hooks", any(receive))
            .route("/hooks/{*rest}", any(receive))
            .with_state(shared.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            let _ = api::server::serve(listener, app, Some(tls), stopped).await;
        });
        Self {
            url: format!("https://localhost:{port}/hooks"),
            cert_pem: identity.cert_pem,
            shared,
            _stop: stop,
        }
    }

    /// Answers every request with `status` from now on.
    pub fn answer(&self, status: u16) {
        self.shared.behaviour.lock().expect("receiver state").status = Some(status);
    }

    /// Answers the next requests with these statuses, then as before.
    pub fn script(&self, statuses: &[u16]) {
        self.shared
            .behaviour
            .lock()
            .expect("receiver state")
            .scripted
            .extend(statuses.iter().copied());
    }

    /// Waits this long before answering.
    pub fn delay(&self, delay: Duration) {
        self.shared.behaviour.lock().expect("receiver state").delay = Some(delay);
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("receiver log").clone()
    }

    /// Waits (at most `within`) until `count` requests arrived; returns them.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let arrived = self.shared.arrived.notified();
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "expected {count} deliveries within {within:?}, got {}",
                    received.len()
                );
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), arrived).await;
        }
    }

    /// The delivery settings of a test deployment reaching this receiver:
    /// loopback allowed, its certificate trusted, retries sped up `speedup` times.
    pub fn delivery(&self, speedup: u32) -> workers::handlers::WebhookDelivery {
        workers::handlers::WebhookDelivery {
            client: workers::webhooks::WebhookClient::new(
                workers::webhooks::AddressPolicy {
                    allow_private_networks: true,
                },
                Some(self.cert_pem.as_bytes()),
            )
            .expect("webhook client"),
            retry_speedup: speedup,
        }
    }
}
