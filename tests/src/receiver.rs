//! A real HTTPS webhook receiver on loopback: a self-signed certificate,
//! answers (status, headers, body) chosen by the test, and every delivery
//! recorded byte for byte.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::any;
use tokio::sync::{Notify, Semaphore, watch};

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

/// How the receiver answers one request.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// The response body.
    pub body: Vec<u8>,
}

impl Answer {
    /// `status` with an empty body.
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// `status` with `body` (sent as `text/plain`).
    pub fn with_body(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
            body: body.into(),
        }
    }

    /// A redirect: `status` (301, 302, 307, 308…) with `Location: location`.
    pub fn redirect(status: u16, location: &str) -> Self {
        Self {
            status,
            headers: vec![("location".into(), location.to_owned())],
            body: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Behaviour {
    scripted: VecDeque<Answer>,
    answer: Option<Answer>,
    delay: Option<Duration>,
    hold: bool,
    /// Requests that reached the handler, answered or not.
    arrivals: usize,
    /// Requests waiting for a release.
    held: usize,
}

#[derive(Clone)]
struct Shared {
    behaviour: Arc<Mutex<Behaviour>>,
    received: Arc<Mutex<Vec<Received>>>,
    arrived: Arc<Notify>,
    /// One permit lets one held request be answered.
    releases: Arc<Semaphore>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            behaviour: Arc::default(),
            received: Arc::default(),
            arrived: Arc::default(),
            releases: Arc::new(Semaphore::new(0)),
        }
    }
}

/// The receiver; stops when dropped.
pub struct WebhookReceiver {
    /// `https://localhost:PORT/hooks`.
    pub url: String,
    /// The certificate deliveries must trust.
    pub cert_pem: String,
    key_pem: String,
    shared: Shared,
    _stop: watch::Sender<bool>,
}

async fn receive(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let hold = {
        let mut behaviour = shared.behaviour.lock().expect("receiver state");
        behaviour.arrivals += 1;
        behaviour.held += usize::from(behaviour.hold);
        behaviour.hold
    };
    shared.arrived.notify_waiters();
    if hold {
        if let Ok(permit) = shared.releases.acquire().await {
            permit.forget();
        }
        shared.behaviour.lock().expect("receiver state").held -= 1;
    }
    let (answer, delay) = {
        let mut behaviour = shared.behaviour.lock().expect("receiver state");
        let answer = behaviour
            .scripted
            .pop_front()
            .or_else(|| behaviour.answer.clone())
            .unwrap_or_else(|| Answer::status(200));
        (answer, behaviour.delay)
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
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    for (name, value) in answer.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

impl WebhookReceiver {
    /// Starts a receiver answering 200.
    pub async fn start() -> Self {
        Self::start_with(TlsIdentity::self_signed()).await
    }

    /// Starts a second receiver with this one's certificate, so a client
    /// trusting one reaches both (the target of a redirect, say).
    pub async fn beside(&self) -> Self {
        Self::start_with(TlsIdentity {
            cert_pem: self.cert_pem.clone(),
            key_pem: self.key_pem.clone(),
        })
        .await
    }

    /// Starts a receiver speaking plain HTTP, as a developer's local server
    /// does (the target of `api listen --forward-to`).
    pub async fn start_plain() -> Self {
        Self::start_serving(TlsIdentity::self_signed(), false).await
    }

    async fn start_with(identity: TlsIdentity) -> Self {
        Self::start_serving(identity, true).await
    }

    async fn start_serving(identity: TlsIdentity, with_tls: bool) -> Self {
        api::server::install_crypto_provider();
        let tls = if with_tls {
            Some(
                api::server::tls_from_pem(
                    identity.cert_pem.clone().into_bytes(),
                    identity.key_pem.clone().into_bytes(),
                )
                .await
                .expect("receiver TLS"),
            )
        } else {
            None
        };
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
            let _ = api::server::serve(listener, app, tls, stopped).await;
        });
        let scheme = if with_tls { "https" } else { "http" };
        Self {
            url: format!("{scheme}://localhost:{port}/hooks"),
            cert_pem: identity.cert_pem,
            key_pem: identity.key_pem,
            shared,
            _stop: stop,
        }
    }

    /// Answers every request with `status` from now on.
    pub fn answer(&self, status: u16) {
        self.answer_with(Answer::status(status));
    }

    /// Answers every request with `status` and `body` from now on.
    pub fn answer_with_body(&self, status: u16, body: impl Into<Vec<u8>>) {
        self.answer_with(Answer::with_body(status, body));
    }

    /// Answers every request with a `status` redirect to `location` from now on.
    pub fn redirect_to(&self, status: u16, location: &str) {
        self.answer_with(Answer::redirect(status, location));
    }

    /// Answers every request this way from now on.
    pub fn answer_with(&self, answer: Answer) {
        self.shared.behaviour.lock().expect("receiver state").answer = Some(answer);
    }

    /// Answers the next requests with these statuses, then as before.
    pub fn script(&self, statuses: &[u16]) {
        self.script_answers(statuses.iter().map(|s| Answer::status(*s)));
    }

    /// Answers the next requests these ways, then as before.
    pub fn script_answers(&self, answers: impl IntoIterator<Item = Answer>) {
        self.shared
            .behaviour
            .lock()
            .expect("receiver state")
            .scripted
            .extend(answers);
    }

    /// Waits this long before answering.
    pub fn delay(&self, delay: Duration) {
        self.shared.behaviour.lock().expect("receiver state").delay = Some(delay);
    }

    /// Holds every request from now on until [`Self::release`] lets it be
    /// answered: the test sees it arrive ([`Self::wait_for_arrivals`]) and
    /// chooses when it is answered (within the sender's timeout).
    pub fn hold(&self) {
        self.shared.behaviour.lock().expect("receiver state").hold = true;
    }

    /// Lets `count` held requests (or the next ones to arrive) be answered.
    pub fn release(&self, count: usize) {
        self.shared.releases.add_permits(count);
    }

    /// Stops holding requests and answers every held one.
    pub fn stop_holding(&self) {
        let mut behaviour = self.shared.behaviour.lock().expect("receiver state");
        behaviour.hold = false;
        self.shared.releases.add_permits(behaviour.held);
    }

    /// Requests that reached the receiver so far, held ones included.
    pub fn arrivals(&self) -> usize {
        self.shared
            .behaviour
            .lock()
            .expect("receiver state")
            .arrivals
    }

    /// Waits (at most `within`) until `count` requests reached the receiver,
    /// held ones included.
    pub async fn wait_for_arrivals(&self, count: usize, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let arrived = self.shared.arrived.notified();
            let arrivals = self.arrivals();
            if arrivals >= count {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!("expected {count} requests to arrive within {within:?}, got {arrivals}");
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), arrived).await;
        }
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
    pub fn delivery(&self, speedup: u32) -> platform::webhooks::WebhookDelivery {
        self.delivery_with(
            platform::webhooks::AddressPolicy {
                allow_private_networks: true,
            },
            Arc::new(platform::webhooks::SystemLookup),
            speedup,
        )
    }

    /// Delivery settings trusting this receiver's certificate, under
    /// `policy`, with names looked up by `lookup`.
    pub fn delivery_with(
        &self,
        policy: platform::webhooks::AddressPolicy,
        lookup: Arc<dyn platform::webhooks::Lookup>,
        speedup: u32,
    ) -> platform::webhooks::WebhookDelivery {
        platform::webhooks::WebhookDelivery {
            client: platform::webhooks::WebhookClient::with_lookup(
                policy,
                Some(self.cert_pem.as_bytes()),
                lookup,
            )
            .expect("webhook client"),
            retry_speedup: speedup,
        }
    }
}
