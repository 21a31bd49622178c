//! `bench scale`: how the list routes' cost grows with the data. Seeds a
//! small and a large database (`storage::volume`, on SQLite and, given a
//! server, on PostgreSQL) and the job queue beside it (the embedded file,
//! or a Redis database; finished jobs pushed through the queue and marked
//! done, some dead), serves the
//! API and the ops listener over both sizes at once, and times every list
//! route and console page from one client, one request to each size in
//! turn: median and p99 at both sizes and their ratio.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::db::PoolSettings;
use storage::volume::{Seeded, VolumePlan};
use storage::{Clock, Database, DatabaseTarget, MasterKey, Store};

mod queue;
use queue::seed_queue;

/// Settings of `bench scale`.
#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    /// The large database as a share of the issue's volume (1.0: a million
    /// listings, ten million deliveries, five million job runs, a million
    /// progress states).
    #[arg(long, default_value_t = 1.0)]
    large: f64,
    /// The small database, the same way (0.01: ten thousand listings).
    #[arg(long, default_value_t = 0.01)]
    small: f64,
    /// The deliveries, job runs and progress states as a share of their
    /// volume at each size (1.0: as the listings; less to seed faster).
    #[arg(long, default_value_t = 1.0)]
    history: f64,
    /// Only PostgreSQL (with `--postgres-url`), not SQLite.
    #[arg(long)]
    postgres_only: bool,
    /// Timed requests per route and size (after ten to warm up).
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Finished jobs in the queue at scale 1.0 (a week of them: what the
    /// queue keeps of done jobs), spread over the agencies; one in a hundred
    /// dead.
    #[arg(long, default_value_t = 1_000_000)]
    queue_jobs: u64,
    /// A PostgreSQL server (`postgres://user@127.0.0.1:5432/postgres`): the
    /// same sizes are seeded in databases made there. Without it, SQLite only.
    #[arg(long)]
    postgres_url: Option<String>,
    /// A Redis database (`redis://127.0.0.1:6379/5`) to keep the large
    /// size's job queue in, as the distributed profile does, instead of the
    /// embedded queue file; the small size's goes in the next database (6
    /// here). Each is emptied before its size is seeded.
    #[arg(long)]
    redis_url: Option<String>,
}

/// One route's timings at one size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub(crate) median_ms: f64,
    pub(crate) p99_ms: f64,
}

pub async fn scale(args: ScaleArgs) -> anyhow::Result<()> {
    let backends = backends(args.postgres_only, args.postgres_url.as_deref());
    let mut rows: Vec<(String, String, [Timing; 2], [usize; 2])> = Vec::new();
    for backend in backends {
        // Both sizes are seeded and served at once, then timed in turn,
        // request by request: the machine's drift over the half hour of a
        // large seed falls on both alike, not on the size measured last.
        let mut sizes = Vec::new();
        for (slot, scale) in [(0, args.small), (1, args.large)] {
            sizes.push(seeded_size(&args, backend, slot, scale).await?);
        }
        let [small, large] =
            <[Size; 2]>::try_from(sizes).map_err(|_| anyhow::anyhow!("two sizes"))?;
        ensure!(
            small.prepared.routes.len() == large.prepared.routes.len(),
            "both sizes time the same routes"
        );
        let client = reqwest::Client::new();
        for (small_route, large_route) in small.prepared.routes.iter().zip(&large.prepared.routes) {
            ensure!(
                small_route.name == large_route.name,
                "routes in the same order"
            );
            let (timings, bytes) =
                interleaved(&client, [small_route, large_route], args.requests).await?;
            rows.push((backend.to_owned(), small_route.name.clone(), timings, bytes));
        }
        for size in [small, large] {
            for server in &size.prepared.servers {
                server.abort();
            }
            size.store.close().await;
        }
    }
    // The answers' sizes beside the times: a page that lists more at the
    // large size (its filter matches more there) costs more for that.
    println!(
        "\n| backend | route | median small | p99 small | median large | p99 large | median ratio | p99 ratio | bytes small | bytes large |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (backend, route, [small, large], [small_bytes, large_bytes]) in rows {
        println!(
            "| {backend} | `{route}` | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2}× | {:.2}× | {small_bytes} | {large_bytes} |",
            small.median_ms,
            small.p99_ms,
            large.median_ms,
            large.p99_ms,
            large.median_ms / small.median_ms,
            large.p99_ms / small.p99_ms,
        );
    }
    Ok(())
}

/// One size of a backend, seeded and served.
struct Size {
    store: Store,
    prepared: Prepared,
    /// The SQLite files' directory, removed when the size is dropped.
    _dir: tempfile::TempDir,
}

/// Seeds the size `scale` of `backend` (slot 0 the small, 1 the large) and
/// its queue, and serves them.
async fn seeded_size(
    args: &ScaleArgs,
    backend: &str,
    slot: u8,
    scale: f64,
) -> anyhow::Result<Size> {
    let dir = tempfile::tempdir()?;
    let label = format!("scale_{}", (scale * 1_000_000.0).round());
    let store = open(backend, args.postgres_url.as_deref(), dir.path(), &label).await?;
    let mut plan = VolumePlan::scaled(scale);
    plan.deliveries = ((plan.deliveries as f64) * args.history).round() as u64;
    plan.job_runs = ((plan.job_runs as f64) * args.history).round() as u64;
    plan.progress_events = ((plan.progress_events as f64) * args.history).round() as u64;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let seeded = store
        .volume()
        .seed(&plan, &mut |part, rows| {
            if last_report.elapsed() > Duration::from_secs(10) {
                eprintln!("  {backend} ×{scale}: {part} {rows}");
                last_report = Instant::now();
            }
        })
        .await?;
    let seed_seconds = started.elapsed().as_secs_f64();
    // A database that grew over years has been vacuumed and analysed by
    // autovacuum; one bulk-loaded a minute ago has not, and autovacuum
    // would run during the measurement. Its pages written out too, so the
    // checkpoint after a bulk load does not flush during the measurement.
    if let Database::Postgres(pool) = store.db() {
        sqlx::query("vacuum analyze").execute(pool).await?;
        sqlx::query("checkpoint").execute(pool).await?;
    }
    println!(
        "{}",
        json!({
            "seeded": backend,
            "scale": scale,
            "listings": seeded.listings,
            "deliveries": seeded.deliveries,
            "job_runs": plan.job_runs,
            "progress_states": plan.progress_events,
            "seconds": (seed_seconds * 10.0).round() / 10.0,
        })
    );
    let queue_jobs = ((args.queue_jobs as f64) * scale).round().max(1.0) as u64;
    let queue = match &args.redis_url {
        Some(url) => {
            let url = redis_database(url, slot)?;
            let client = redis::Client::open(url.as_str())?;
            let mut connection = client.get_multiplexed_async_connection().await?;
            redis::cmd("FLUSHDB")
                .query_async::<()>(&mut connection)
                .await?;
            platform::QueueTarget::Redis(url)
        }
        None => platform::QueueTarget::SqliteFile(dir.path().join(api::config::QUEUE_FILE)),
    };
    let prepared = prepare(&store, &queue, &seeded, queue_jobs).await?;
    Ok(Size {
        store,
        prepared,
        _dir: dir,
    })
}

/// The Redis database of a size: the small one in the database after
/// `url`'s (both are served at once), the large one in `url`'s own.
fn redis_database(url: &str, slot: u8) -> anyhow::Result<String> {
    let (server, database) = url
        .rsplit_once('/')
        .filter(|(server, _)| server.contains("://"))
        .context("--redis-url names its database: redis://127.0.0.1:6379/5")?;
    let database: u32 = database
        .parse()
        .context("--redis-url ends with its database's number")?;
    let database = if slot == 0 { database + 1 } else { database };
    Ok(format!("{server}/{database}"))
}

/// The backends a run covers: SQLite unless `postgres_only`, PostgreSQL
/// when given a server.
pub(crate) fn backends(postgres_only: bool, postgres_url: Option<&str>) -> Vec<&'static str> {
    let mut backends = if postgres_only {
        vec![]
    } else {
        vec!["sqlite"]
    };
    if postgres_url.is_some() {
        backends.push("postgres");
    }
    backends
}

/// A migrated store of `backend`, empty: a SQLite file in `dir`, or a new
/// database named after `label` on the PostgreSQL server.
pub(crate) async fn open(
    backend: &str,
    postgres_url: Option<&str>,
    dir: &std::path::Path,
    label: &str,
) -> anyhow::Result<Store> {
    let target = match backend {
        "sqlite" => DatabaseTarget::SqliteFile(dir.join(api::config::SQLITE_FILE)),
        _ => {
            let server = postgres_url.context("--postgres-url")?;
            let name = format!(
                "bench_{label}_{}",
                ulid::Ulid::generate().to_string().to_lowercase()
            );
            let admin = sqlx::PgPool::connect(server).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
                .execute(&admin)
                .await?;
            admin.close().await;
            let (base, _) = server.rsplit_once('/').context("a database in the URL")?;
            DatabaseTarget::Url(format!("{base}/{name}"))
        }
    };
    let db = Database::connect(&target, &PoolSettings::default()).await?;
    db.migrate().await?;
    Ok(Store::open(db, &MasterKey::generate(), Clock::System).await?)
}

/// How a timed request is let in.
#[derive(Clone, Debug)]
enum Credential {
    /// The public API, with the large agency's key.
    ApiKey(String),
    /// The ops listener, with its account.
    Ops,
    /// The developer portal, with the administrator's session token.
    Session(String),
}

/// One request a route is timed by.
#[derive(Clone, Debug)]
struct Planned {
    url: String,
    credential: Credential,
}

/// A route or page and the requests it is timed by: one, sent again and
/// again, or a list sent in turn (`rounds` times as many timed requests as
/// the others, each item warmed once first).
#[derive(Debug)]
struct Route {
    name: String,
    requests: Vec<Planned>,
    rounds: usize,
}

impl Route {
    fn one(name: impl Into<String>, planned: Planned) -> Self {
        Self {
            name: name.into(),
            requests: vec![planned],
            rounds: 1,
        }
    }
}

/// A size's servers and the routes to time against them.
struct Prepared {
    routes: Vec<Route>,
    servers: Vec<tokio::task::JoinHandle<()>>,
}

/// Sends `planned` and reads its whole answer, which must be a success
/// (and, from the portal, its page, not the sign-in form); returns its body.
async fn send(client: &reqwest::Client, planned: &Planned) -> anyhow::Result<String> {
    let request = client.get(&planned.url);
    let request = match &planned.credential {
        Credential::ApiKey(key) => request.header("X-API-Key", key),
        Credential::Ops => request.basic_auth(OPS_USER, Some(OPS_PASSWORD)),
        Credential::Session(token) => request.header(
            reqwest::header::COOKIE,
            format!("{}={token}", api::middleware::session::SESSION_COOKIE),
        ),
    };
    let response = request.send().await?;
    let status = response.status();
    let body = response.text().await?;
    ensure!(status.is_success(), "{}: {status}: {body}", planned.url);
    if matches!(planned.credential, Credential::Session(_)) {
        ensure!(
            !body.contains(r#"id="sign-in""#),
            "{}: the sign-in page, not the portal's",
            planned.url
        );
    }
    Ok(body)
}

/// Times one route at both sizes in turn: each size's warm-up (ten
/// requests, or one pass over a list), then `requests` timed rounds
/// (`rounds` times as many for a list), each sending one request to each
/// size, the small first in even rounds and the large first in odd ones.
/// Returns each size's timing and the median length of its answers' bodies.
async fn interleaved(
    client: &reqwest::Client,
    sizes: [&Route; 2],
    requests: usize,
) -> anyhow::Result<([Timing; 2], [usize; 2])> {
    for route in sizes {
        let warm_up = if route.requests.len() > 1 {
            route.requests.len()
        } else {
            10
        };
        for planned in route.requests.iter().cycle().take(warm_up) {
            send(client, planned).await?;
        }
    }
    let count = requests * sizes[0].rounds;
    let mut samples = [Vec::with_capacity(count), Vec::with_capacity(count)];
    let mut lengths = [Vec::with_capacity(count), Vec::with_capacity(count)];
    for round in 0..count {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for slot in order {
            let route = sizes[slot];
            let planned = &route.requests[round % route.requests.len()];
            let started = Instant::now();
            let body = send(client, planned).await?;
            samples[slot].push(started.elapsed().as_secs_f64() * 1_000.0);
            lengths[slot].push(body.len());
        }
    }
    let [small, large] = samples;
    let median_length = |mut lengths: Vec<usize>| {
        lengths.sort_unstable();
        lengths.get(lengths.len() / 2).copied().unwrap_or(0)
    };
    let [small_lengths, large_lengths] = lengths;
    Ok((
        [percentiles(small), percentiles(large)],
        [median_length(small_lengths), median_length(large_lengths)],
    ))
}

/// Serves the API and the ops listener over `store`, with `queue_jobs`
/// finished jobs in the queue (no workers: nothing runs), and plans the
/// requests of every list route, console page and portal page.
async fn prepare(
    store: &Store,
    queue: &platform::QueueTarget,
    seeded: &Seeded,
    queue_jobs: u64,
) -> anyhow::Result<Prepared> {
    let key = crate::fixture::unbounded_key(
        store,
        &seeded.agency_id,
        &seeded.owner_id,
        "scale",
        vec![Scope::ListingsRead, Scope::UsersRead, Scope::WebhooksRead],
    )
    .await?;
    let platform = platform::Platform::connect(store.clone(), queue, None).await?;
    let started = Instant::now();
    let (one_operation, few_jobs_agency) = seed_queue(&platform, seeded, queue_jobs).await?;
    println!(
        "{}",
        json!({"queue_jobs": queue_jobs, "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0})
    );
    let state = api::AppState::new(
        platform,
        api::PublicUrls {
            base_url: "https://api.bench.example".into(),
            legacy_base_url: None,
        },
        api::rate_limit::RateLimiter::in_process(),
    );
    let ops_app = api::ops::router(
        state.clone(),
        api::ops::OpsAuth::new(Some((OPS_USER.to_owned(), OPS_PASSWORD.to_owned()))),
        api::metrics::install(),
        api::TransportPolicy::serve_all(),
    );
    let ops_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let ops_base = format!("http://{}", ops_listener.local_addr()?);
    let ops_server = tokio::spawn(async move {
        let _ = api::server::serve(ops_listener, ops_app, None, std::future::pending()).await;
    });
    let app = api::app(state, api::TransportPolicy::serve_all());
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let site = format!("http://{}", listener.local_addr()?);
    let base = format!("{site}/api/v1");
    let server = tokio::spawn(async move {
        let _ = api::server::serve(listener, app, None, std::future::pending()).await;
    });
    let client = reqwest::Client::new();
    // A request to the API with the key, and to the ops listener.
    let api = |path: &str| Planned {
        url: format!("{base}{path}"),
        credential: Credential::ApiKey(key.clone()),
    };
    let ops = |path: &str| Planned {
        url: format!("{ops_base}{path}"),
        credential: Credential::Ops,
    };
    // The JSON answer of `planned`, for what the routes read by.
    let json_of = |planned: Planned| {
        let client = &client;
        async move {
            anyhow::Ok(serde_json::from_str::<Value>(
                &send(client, &planned).await?,
            )?)
        }
    };
    let get = |path: String| json_of(api(&path));
    // What the routes read by: a listing, an agent, the endpoint, and
    // cursors 25 pages of 200 deep.
    let first = get("/listings?limit=1".into()).await?;
    let number = first["items"][0]["listing_number"]
        .as_str()
        .context("a listing")?
        .to_owned();
    let agent = seeded.agent_ids[0].to_string();
    let endpoint = seeded.endpoint_id.to_string();
    let deep = |path: String| {
        let get = &get;
        async move {
            let mut cursor = String::new();
            for _ in 0..25 {
                let separator = if path.contains('?') { '&' } else { '?' };
                let page = get(format!("{path}{separator}limit=200&cursor={cursor}")).await?;
                match page["next_cursor"].as_str() {
                    Some(next) if !next.is_empty() => cursor = next.to_owned(),
                    _ => break,
                }
            }
            anyhow::Ok(cursor)
        }
    };
    let listings_cursor = deep("/listings".to_owned()).await?;
    // A working set larger than the single-listing cache (20,000 entries):
    // 30,000 listings read in turn, each read a different one.
    let mut working_set = Vec::new();
    let mut cursor = String::new();
    while working_set.len() < 30_000 {
        let page = get(format!("/listings?limit=200&cursor={cursor}")).await?;
        for item in page["items"].as_array().into_iter().flatten() {
            if let Some(number) = item["listing_number"].as_str() {
                working_set.push(number.to_owned());
            }
        }
        match page["next_cursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = next.to_owned(),
            _ => break,
        }
    }
    let deliveries_path = format!("/webhooks/endpoints/{endpoint}/deliveries");
    let deliveries_cursor = deep(deliveries_path.clone()).await?;
    let done = json_of(ops("/ops/api/jobs?state=done&limit=1")).await?;
    let job_id = done["items"][0]["id"]
        .as_str()
        .context("a done job")?
        .to_owned();
    let agency_id = seeded.agency_id.to_string();
    let cookie = portal_session(store, seeded).await?;

    let api_route = |name: &str, path: String| Route::one(name, api(&path));
    let ops_page = |name: &str, path: String| Route::one(name, ops(&path));
    let portal_page = |name: &str, path: String| {
        Route::one(
            name,
            Planned {
                url: format!("{site}{path}"),
                credential: Credential::Session(cookie.clone()),
            },
        )
    };
    let mut routes = vec![
        ops_page("ops: done jobs", "/ops/?state=done".into()),
        ops_page(
            "ops: done jobs, page 400",
            "/ops/?state=done&page=400".into(),
        ),
        ops_page(
            "ops: done jobs of a queue",
            "/ops/?state=done&queue=probe".into(),
        ),
        ops_page("ops: dead jobs", "/ops/?state=dead".into()),
        ops_page(
            "ops: done jobs of an agency with 25",
            format!("/ops/?state=done&agency={few_jobs_agency}"),
        ),
        ops_page(
            "ops: done jobs of the agency with half",
            format!("/ops/?state=done&agency={agency_id}"),
        ),
        ops_page(
            "ops: search, one match",
            format!("/ops/?state=done&search={one_operation}"),
        ),
        ops_page(
            "ops: search, no match",
            "/ops/?state=done&search=no%20such%20text".into(),
        ),
        ops_page(
            "ops: search by listing number",
            format!("/ops/?state=done&search={number}"),
        ),
        ops_page(
            "ops: search of errors, dead",
            "/ops/?state=dead&search=failed%20on%20purpose".into(),
        ),
        ops_page("ops: a job", format!("/ops/jobs/{job_id}")),
        ops_page("ops: workers", "/ops/workers".into()),
        ops_page("ops: history", "/ops/history".into()),
        ops_page("ops: audit", "/ops/audit".into()),
        ops_page(
            "ops api: done jobs",
            "/ops/api/jobs?state=done&limit=50".into(),
        ),
        ops_page("ops api: most recent dead", "/ops/api/jobs/dead".into()),
        ops_page("ops api: queues", "/ops/api/queues".into()),
        ops_page("/metrics", "/metrics".into()),
        // The developer portal's pages, as the large agency's
        // administrator signed in sees them.
        portal_page("portal: keys", "/settings/keys".into()),
        portal_page("portal: webhooks", "/settings/webhooks".into()),
        portal_page(
            "portal: an endpoint's deliveries",
            format!("/settings/webhooks/{endpoint}"),
        ),
        portal_page(
            "portal: an endpoint's failed deliveries",
            format!("/settings/webhooks/{endpoint}?status=failed"),
        ),
        portal_page(
            "portal: an endpoint's deliveries of one type",
            format!("/settings/webhooks/{endpoint}?event_type=order.paid"),
        ),
        portal_page("portal: usage", "/settings/usage".into()),
        portal_page("portal: events", "/settings/events".into()),
        portal_page("portal: console", "/settings/console".into()),
    ];
    // Every read a different listing of the working set, round and round:
    // warmed by one pass, then ten times as many timed as another route's.
    routes.push(Route {
        name: "GET /listings/{n}, up to 30,000 different in turn".into(),
        requests: working_set
            .iter()
            .map(|number| api(&format!("/listings/{number}")))
            .collect(),
        rounds: 10,
    });
    routes.extend([
        api_route("GET /listings", "/listings?limit=50".into()),
        api_route(
            "GET /listings, page 26 by cursor",
            format!("/listings?limit=50&cursor={listings_cursor}"),
        ),
        api_route(
            "GET /listings?status=Sold",
            "/listings?limit=50&status=Sold".into(),
        ),
        api_route(
            "GET /listings?status=Off Market",
            "/listings?limit=50&status=Off%20Market".into(),
        ),
        api_route(
            "GET /listings?agent_id",
            format!("/listings?limit=50&agent_id={agent}"),
        ),
        api_route(
            "GET /listings?agent_id&status=Active",
            format!("/listings?limit=50&agent_id={agent}&status=Active"),
        ),
        api_route("GET /listings/{n}", format!("/listings/{number}")),
        api_route(
            "GET /listings/{n}/orders",
            format!("/listings/{number}/orders"),
        ),
        api_route("GET /users", "/users?limit=50".into()),
        api_route("GET /users?role=agent", "/users?limit=50&role=agent".into()),
        api_route(
            "GET /users?active=true",
            "/users?limit=50&active=true".into(),
        ),
        api_route(
            "GET /webhooks/endpoints",
            "/webhooks/endpoints?limit=50".into(),
        ),
        api_route("GET …/deliveries", format!("{deliveries_path}?limit=50")),
        api_route(
            "GET …/deliveries, page 26 by cursor",
            format!("{deliveries_path}?limit=50&cursor={deliveries_cursor}"),
        ),
    ]);
    Ok(Prepared {
        routes,
        servers: vec![ops_server, server],
    })
}

/// A portal session's token for an administrator of the large agency (made
/// for the benchmark, with a password, signed in as the portal signs in).
async fn portal_session(store: &Store, seeded: &Seeded) -> anyhow::Result<String> {
    let email = format!("portal-{}@volume.example", seeded.agency_id).to_lowercase();
    let admin = store
        .users()
        .create(
            &seeded.agency_id,
            storage::people::users::NewUser {
                role: storage::people::users::Role::MediaAgency,
                email: Some(email.clone()),
                name: Some("Portal Bench".into()),
                manager_id: None,
            },
        )
        .await?;
    store
        .accounts()
        .set_password(&seeded.agency_id, &admin.id, PORTAL_PASSWORD)
        .await?;
    let started = store
        .sessions()
        .login(&email, PORTAL_PASSWORD)
        .await?
        .context("the portal sign-in")?;
    Ok(started.token)
}

/// The portal administrator's password in the benchmark.
const PORTAL_PASSWORD: &str = "Bench-portal-password-1";

/// The ops listener's account in the benchmark.
const OPS_USER: &str = "bench";
const OPS_PASSWORD: &str = "bench-ops-password";

/// The median and 99th percentile of `samples` (milliseconds).
pub(crate) fn percentiles(mut samples: Vec<f64>) -> Timing {
    samples.sort_by(f64::total_cmp);
    let at = |share: f64| samples[((samples.len() as f64 * share) as usize).min(samples.len() - 1)];
    Timing {
        median_ms: at(0.5),
        p99_ms: at(0.99),
    }
}
