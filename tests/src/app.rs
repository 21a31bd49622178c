//! `TestApp`: the real application served in process on `127.0.0.1:0` over a
//! fresh database, with a client and fixtures for agencies and keys.

use std::net::SocketAddr;

use api::rate_limit::RateLimiter;
use api::rate_limit::redis::RedisLimiter;
use api::{AppState, PublicUrls, TransportPolicy};
use axum::Router;
use storage::agencies::AgencyKind;
use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use storage::ids::{AgencyId, UserId};
use storage::{Backend, Clock, Environment, Store};
use tokio::sync::oneshot;

use crate::database::TestDatabase;

/// A certificate and key for a TLS listener, and the certificate for clients to trust.
pub struct TlsIdentity {
    /// PEM certificate.
    pub cert_pem: String,
    /// PEM private key.
    pub key_pem: String,
}

impl TlsIdentity {
    /// A self-signed certificate for `localhost` and `127.0.0.1`.
    pub fn self_signed() -> Self {
        let certified = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .expect("self-signed certificate");
        Self {
            cert_pem: certified.cert.pem(),
            key_pem: certified.signing_key.serialize_pem(),
        }
    }
}

/// Options for a `TestApp`.
pub struct TestAppBuilder {
    backend: Backend,
    transport: TransportPolicy,
    extra_routes: Router<AppState>,
    tls: Option<TlsIdentity>,
    legacy_base_url: Option<String>,
    clock: Clock,
    redis: bool,
}

impl TestAppBuilder {
    /// Keep rate-limit buckets in the test Redis instead of in process.
    pub fn redis(mut self) -> Self {
        self.redis = true;
        self
    }

    /// Serve under this transport policy (default: serve everything, like a loopback listener).
    pub fn transport(mut self, transport: TransportPolicy) -> Self {
        self.transport = transport;
        self
    }

    /// Merge extra routes under the global middleware.
    pub fn extra_routes(mut self, routes: Router<AppState>) -> Self {
        self.extra_routes = routes;
        self
    }

    /// Serve HTTPS with a self-signed certificate.
    pub fn tls(mut self) -> Self {
        self.tls = Some(TlsIdentity::self_signed());
        self
    }

    /// Configure a legacy alias base URL.
    pub fn legacy_base_url(mut self, url: &str) -> Self {
        self.legacy_base_url = Some(url.to_owned());
        self
    }

    /// Use this clock in the store.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Starts the application.
    pub async fn spawn(self) -> TestApp {
        api::server::install_crypto_provider();
        let db = TestDatabase::create(self.backend).await;
        let store = db.store(self.clock).await;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let base_url = format!("{scheme}://{addr}");
        let urls = PublicUrls {
            base_url: base_url.clone(),
            legacy_base_url: self.legacy_base_url,
        };
        let rate_limiter = if self.redis {
            let url = crate::services::redis_url();
            let limiter = RedisLimiter::connect(&url, api::cli::serve::REDIS_PREFIX)
                .await
                .expect("connect to test Redis");
            RateLimiter::Redis(limiter)
        } else {
            RateLimiter::in_process()
        };
        let state = AppState::with_rate_limiter(store.clone(), urls, rate_limiter);
        let app = api::app_with_routes(state.clone(), self.transport, self.extra_routes);
        let (tls, client) = match &self.tls {
            None => (None, base_client().build().expect("client")),
            Some(identity) => {
                let config = api::server::tls_from_pem(
                    identity.cert_pem.clone().into(),
                    identity.key_pem.clone().into(),
                )
                .await
                .expect("TLS config");
                let ca = reqwest::Certificate::from_pem(identity.cert_pem.as_bytes())
                    .expect("certificate");
                (
                    Some(config),
                    base_client().tls_certs_only([ca]).build().expect("client"),
                )
            }
        };
        let (shutdown, on_shutdown) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = on_shutdown.await;
            };
            if let Err(err) = api::server::serve(listener, app, tls, stopped).await {
                eprintln!("test server stopped: {err:#}");
            }
        });
        TestApp {
            addr,
            base_url,
            client,
            state,
            store,
            db,
            _shutdown: shutdown,
        }
    }
}

/// A client that never goes through a proxy from the environment.
pub fn base_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder().no_proxy()
}

/// The application under test.
pub struct TestApp {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT` (or `https://`).
    pub base_url: String,
    /// A client for it (trusting its certificate when TLS is on).
    pub client: reqwest::Client,
    /// Its shared state (caches, limiter), as its handlers see it.
    pub state: AppState,
    /// Direct access to its repositories.
    pub store: Store,
    /// Its database.
    pub db: TestDatabase,
    // Dropping the sender stops the server.
    _shutdown: oneshot::Sender<()>,
}

/// An agency created for a test, with its owner.
#[derive(Clone, Debug)]
pub struct TestAgency {
    /// The agency.
    pub id: AgencyId,
    /// Its owner user.
    pub owner_id: UserId,
}

impl TestApp {
    /// A builder with defaults: loopback transport (serve all), no TLS, system clock.
    pub fn builder(backend: Backend) -> TestAppBuilder {
        TestAppBuilder {
            backend,
            transport: TransportPolicy::ServeAll,
            extra_routes: Router::new(),
            tls: None,
            legacy_base_url: None,
            clock: Clock::System,
            redis: false,
        }
    }

    /// Starts the application with defaults.
    pub async fn spawn(backend: Backend) -> Self {
        Self::builder(backend).spawn().await
    }

    /// The absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// A GET of `path`.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(self.url(path))
    }

    /// Creates a media agency with its owner.
    pub async fn agency(&self) -> TestAgency {
        self.agency_of_kind(AgencyKind::MediaAgency).await
    }

    /// Creates an agency of `kind` with its owner.
    pub async fn agency_of_kind(&self, kind: AgencyKind) -> TestAgency {
        let (agency, owner) = self
            .store
            .agencies()
            .create(&format!("Agency {}", ulid::Ulid::generate()), kind)
            .await
            .expect("create agency");
        TestAgency {
            id: agency.id,
            owner_id: owner.id,
        }
    }

    /// Issues a live `sk_` key with `scopes` and returns its plaintext.
    pub async fn key(&self, agency: &TestAgency, scopes: &[Scope]) -> String {
        self.key_with(agency, scopes, Environment::Live, KeyFormat::Sk)
            .await
    }

    /// Issues a key with every option and returns its plaintext.
    pub async fn key_with(
        &self,
        agency: &TestAgency,
        scopes: &[Scope],
        environment: Environment,
        format: KeyFormat,
    ) -> String {
        self.store
            .api_keys()
            .issue(
                &agency.id,
                NewApiKey {
                    name: "test key".to_owned(),
                    scopes: scopes.to_vec(),
                    environment,
                    format,
                    created_by: Some(agency.owner_id.clone()),
                    rate_limit_overrides: Default::default(),
                },
            )
            .await
            .expect("issue key")
            .plaintext
            .expose()
            .to_owned()
    }
}
