//! `TestApp`: the real application served in process on `127.0.0.1:0` over a
//! fresh database, with a client and fixtures for agencies and keys.

use std::net::SocketAddr;

use api::rate_limit::RateLimiter;
use api::rate_limit::redis::RedisLimiter;
use api::{AppState, PublicUrls, TransportPolicy};
use axum::Router;
use platform::Platform;
use platform::QueueTarget;
use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use storage::ids::{AgencyId, UserId};
use storage::people::agencies::AgencyKind;
use storage::people::users::{NewUser, Role};
use storage::{Backend, Clock, Environment, Store};
use tokio::sync::watch;
use workers::runtime::RuntimeSettings;

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
    workers: Option<RuntimeSettings>,
    worker_runtimes: usize,
    ops: Option<(String, String)>,
    webhooks: Option<platform::webhooks::WebhookDelivery>,
    mail_relay: Option<String>,
    media_target: Option<storage::objects::ObjectStoreTarget>,
    upload_limits: Option<api::config::UploadLimits>,
    write_pacing: Option<api::pacing::PacingSettings>,
    paused_queues: Vec<&'static str>,
    request_deadlines: Option<api::middleware::deadline::RequestDeadlines>,
    rate_limit_clock: Option<Clock>,
}

impl TestAppBuilder {
    /// The distributed profile's Redis side: rate-limit buckets, the job queue
    /// and progress fan-out in the test Redis.
    pub fn redis(mut self) -> Self {
        self.redis = true;
        self
    }

    /// Serve the ops listener too, accepting this operator account.
    pub fn with_ops(mut self, user: &str, password: &str) -> Self {
        self.ops = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// Run the workers in process, as `api serve` does, with a one-second
    /// heartbeat and fast polling.
    pub fn with_workers(mut self) -> Self {
        self.workers = Some(RuntimeSettings {
            queues: platform::kinds::QUEUES.iter().map(|q| (*q, 4)).collect(),
            heartbeat: std::time::Duration::from_secs(1),
            poll: std::time::Duration::from_millis(50),
            shutdown_timeout: std::time::Duration::from_secs(5),
            fetch_batch: None,
            agency_caps: Default::default(),
            schedules: true,
        });
        self
    }

    /// Runs `count` worker runtimes in process (after `with_workers`): each
    /// registers and consumes on its own, as separate worker processes on
    /// the same queue would; only the first runs the schedules.
    pub fn worker_runtimes(mut self, count: usize) -> Self {
        self.worker_runtimes = count.max(1);
        self
    }

    /// Changes the in-process workers' settings (after `with_workers`).
    pub fn tune_workers(mut self, tune: impl FnOnce(&mut RuntimeSettings)) -> Self {
        if let Some(settings) = self.workers.as_mut() {
            tune(settings);
        }
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
        self.transport = TransportPolicy::tls();
        self
    }

    /// Configure a legacy alias base URL.
    pub fn legacy_base_url(mut self, url: &str) -> Self {
        self.legacy_base_url = Some(url.to_owned());
        self
    }

    /// Deliver webhooks with these settings (default: production's strict policy).
    pub fn webhooks(mut self, webhooks: platform::webhooks::WebhookDelivery) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// Requests under these deadlines instead of the specification's.
    pub fn request_deadlines(
        mut self,
        deadlines: api::middleware::deadline::RequestDeadlines,
    ) -> Self {
        self.request_deadlines = Some(deadlines);
        self
    }

    /// Uploads under `limits` instead of the specification's.
    pub fn upload_limits(mut self, limits: api::config::UploadLimits) -> Self {
        self.upload_limits = Some(limits);
        self
    }

    /// Keep media in `target` (an S3 bucket, say) instead of the data directory.
    pub fn media_target(mut self, target: storage::objects::ObjectStoreTarget) -> Self {
        self.media_target = Some(target);
        self
    }

    /// E-mail owners through the SMTP relay at `url`.
    pub fn mail_relay(mut self, url: &str) -> Self {
        self.mail_relay = Some(url.to_owned());
        self
    }

    /// Pace writes by their agency's webhook backlog as `settings` say.
    pub fn write_pacing(mut self, settings: api::pacing::PacingSettings) -> Self {
        self.write_pacing = Some(settings);
        self
    }

    /// Start with `queue` paused for every worker, as an operator leaves it
    /// (the workers read it before their first job; resume it in the store).
    pub fn paused(mut self, queue: &'static str) -> Self {
        self.paused_queues.push(queue);
        self
    }

    /// The in-process rate limits refill on `clock` rather than the wall
    /// clock: a standing clock refills them only when moved. It may be the
    /// store's ([`Self::clock`]) or theirs alone, everything else keeping
    /// the wall clock (a browser test spends a budget at whatever pace the
    /// machine allows, and its refusal still comes at the budget).
    pub fn rate_limits_on(mut self, clock: Clock) -> Self {
        self.rate_limit_clock = Some(clock);
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
        init_test_logging();
        let db = TestDatabase::create(self.backend).await;
        let store = db.store(self.clock).await;
        for queue in &self.paused_queues {
            store
                .schedules()
                .set_paused(queue, true)
                .await
                .expect("pause a queue");
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let base_url = format!("{scheme}://{addr}");
        let urls = PublicUrls {
            base_url: base_url.clone(),
            legacy_base_url: self.legacy_base_url,
        };
        let redis_url = self.redis.then(crate::services::isolated_redis_url);
        let rate_limiter = match &redis_url {
            Some(url) => {
                let limiter = RedisLimiter::connect(url, api::cli::serve::REDIS_PREFIX)
                    .await
                    .expect("connect to test Redis");
                RateLimiter::shared(limiter)
            }
            None => match self.rate_limit_clock {
                Some(clock) => RateLimiter::in_process_on(clock),
                None => RateLimiter::in_process(),
            },
        };
        let queue = match &redis_url {
            Some(url) => QueueTarget::Redis(url.clone()),
            None => QueueTarget::SqliteFile(db.data_dir().join(api::config::QUEUE_FILE)),
        };
        let platform = Platform::connect(store.clone(), &queue, redis_url.as_deref())
            .await
            .expect("connect the job queue");
        let media_target = match self.media_target {
            Some(target) => target,
            None => storage::objects::ObjectStoreTarget::from_url(None, db.data_dir())
                .expect("local media directory"),
        };
        let platform = platform.with_media(
            platform::media_stores::MediaStores::open(&media_target, db.data_dir())
                .expect("open the media stores"),
        );
        let platform = match self.webhooks {
            Some(webhooks) => platform.with_webhooks(webhooks),
            None => platform,
        };
        let platform = platform.with_mailer(self.mail_relay.map(|url| {
            platform::mail::Mailer::new(&url, "Listing API <no-reply@example.com>").expect("mailer")
        }));
        let mut state = AppState::new(platform.clone(), urls, rate_limiter);
        if let Some(url) = &redis_url {
            state = state.with_revocation_channel(url.clone());
        }
        if let Some(deadlines) = self.request_deadlines {
            state = state.with_request_deadlines(deadlines);
        }
        if let Some(limits) = self.upload_limits {
            state = state.with_upload_limits(limits);
        }
        if let Some(settings) = self.write_pacing {
            state = state.with_write_pacing(settings);
        }
        let ops_transport = self.transport.clone();
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
        let ops_tls = tls.clone();
        let (shutdown, on_shutdown) = watch::channel(false);
        let mut server_stop = on_shutdown.clone();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = server_stop.wait_for(|stop| *stop).await;
            };
            if let Err(err) = api::server::serve(listener, app, tls, stopped).await {
                eprintln!("test server stopped: {err:#}");
            }
        });
        let ops_url = match self.ops {
            None => None,
            Some(account) => {
                let ops_listener =
                    std::net::TcpListener::bind("127.0.0.1:0").expect("bind ops listener");
                let ops_addr = ops_listener.local_addr().expect("ops address");
                let ops_app = api::ops::router(
                    state.clone(),
                    api::ops::OpsAuth::new(Some(account)),
                    api::metrics::install(),
                    ops_transport,
                );
                let scheme = if ops_tls.is_some() { "https" } else { "http" };
                let mut ops_stop = on_shutdown.clone();
                tokio::spawn(async move {
                    let stopped = async move {
                        let _ = ops_stop.wait_for(|stop| *stop).await;
                    };
                    if let Err(err) =
                        api::server::serve(ops_listener, ops_app, ops_tls, stopped).await
                    {
                        eprintln!("test ops listener stopped: {err:#}");
                    }
                });
                Some(format!("{scheme}://{ops_addr}"))
            }
        };
        if let Some(settings) = self.workers {
            for runtime in 0..self.worker_runtimes {
                let mut workers_stop = on_shutdown.clone();
                let platform = platform.clone();
                let mut settings = settings.clone();
                settings.schedules = settings.schedules && runtime == 0;
                tokio::spawn(async move {
                    let stopped = async move {
                        let _ = workers_stop.wait_for(|stop| *stop).await;
                    };
                    if let Err(err) = workers::runtime::run(platform, settings, stopped).await {
                        eprintln!("test workers stopped: {err:#}");
                    }
                });
            }
        }
        TestApp {
            addr,
            base_url,
            ops_url,
            client,
            state,
            store,
            db,
            redis_url,
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
    /// The ops listener, when asked for.
    pub ops_url: Option<String>,
    /// A client for it (trusting its certificate when TLS is on).
    pub client: reqwest::Client,
    /// Its shared state (caches, limiter), as its handlers see it.
    pub state: AppState,
    /// Direct access to its repositories.
    pub store: Store,
    /// Its database.
    pub db: TestDatabase,
    /// Its Redis database, in the distributed profile.
    pub redis_url: Option<String>,
    // Dropping the sender stops the server and the workers.
    _shutdown: watch::Sender<bool>,
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
            transport: TransportPolicy::serve_all(),
            extra_routes: Router::new(),
            tls: None,
            legacy_base_url: None,
            clock: Clock::System,
            redis: false,
            workers: None,
            worker_runtimes: 1,
            ops: None,
            webhooks: None,
            mail_relay: None,
            media_target: None,
            upload_limits: None,
            write_pacing: None,
            paused_queues: Vec::new(),
            request_deadlines: None,
            rate_limit_clock: None,
        }
    }

    /// Starts the application with defaults.
    pub async fn spawn(backend: Backend) -> Self {
        Self::builder(backend).spawn().await
    }

    /// Makes the SQLite job queue refuse (`true`) or accept again pushes of
    /// jobs of `kind`, as a queue that is away would: the push fails.
    pub async fn refuse_jobs(&self, kind: &str, refuse: bool) {
        assert!(
            kind.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "a job kind"
        );
        let path = self.db.data_dir().join(api::config::QUEUE_FILE);
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
        let pool = sqlx::SqlitePool::connect_with(options)
            .await
            .expect("the queue file");
        let sql = if refuse {
            format!(
                "create trigger refuse_{kind} before insert on Jobs
                 when new.job_type = '{kind}'
                 begin select raise(abort, 'the queue refuses {kind} jobs'); end"
            )
        } else {
            format!("drop trigger refuse_{kind}")
        };
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .expect("the refusal trigger");
        pool.close().await;
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

    /// Issues a live `sk_` key acting for `user` (its creator) and returns its plaintext.
    pub async fn key_acting_for(
        &self,
        agency: &TestAgency,
        user: &UserId,
        scopes: &[Scope],
    ) -> String {
        self.issue_key(agency, user, scopes, Environment::Live, KeyFormat::Sk)
            .await
    }

    /// Creates a user of `agency` with `role`, managed by `manager`.
    pub async fn user_managed_by(
        &self,
        agency: &TestAgency,
        role: Role,
        manager: &UserId,
    ) -> UserId {
        self.store
            .users()
            .create(
                &agency.id,
                NewUser {
                    role,
                    email: Some(format!("{}@example.com", ulid::Ulid::generate()).to_lowercase()),
                    name: None,
                    manager_id: Some(manager.clone()),
                },
            )
            .await
            .expect("create user")
            .id
    }

    /// Issues a key with every option and returns its plaintext.
    pub async fn key_with(
        &self,
        agency: &TestAgency,
        scopes: &[Scope],
        environment: Environment,
        format: KeyFormat,
    ) -> String {
        self.issue_key(agency, &agency.owner_id, scopes, environment, format)
            .await
    }

    async fn issue_key(
        &self,
        agency: &TestAgency,
        user: &UserId,
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
                    created_by: Some(user.clone()),
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

/// Warnings and errors of in-process servers go to the test's captured output
/// (shown when it fails); `RUST_LOG` overrides the level.
fn init_test_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
