//! External servers the tests need. PostgreSQL comes from `TEST_DATABASE_URL`
//! when set; otherwise one throwaway cluster per test process is started with
//! `scripts/test-services`, which stops it when this process exits (its stdin,
//! held open here, closes).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// A started service, kept alive for the life of the test process.
struct Running {
    url: String,
    // Held, never used: dropping them would close the pipe and stop the server.
    _child: Child,
    _stdin: ChildStdin,
}

static POSTGRES: OnceLock<Mutex<Option<Running>>> = OnceLock::new();
static REDIS: OnceLock<Mutex<Option<Running>>> = OnceLock::new();

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn start(service: &str) -> Running {
    let script = workspace_root().join("scripts/test-services");
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(service)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", script.display()));
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reading the service URL");
    let url = line.trim().to_owned();
    assert!(
        !url.is_empty(),
        "scripts/test-services {service} did not start; see its stderr"
    );
    Running {
        url,
        _child: child,
        _stdin: stdin,
    }
}

/// The URL of `variable` when set, otherwise of a server started once per test process.
fn service_url(
    variable: &str,
    slot: &'static OnceLock<Mutex<Option<Running>>>,
    service: &str,
) -> String {
    if let Ok(url) = std::env::var(variable)
        && !url.trim().is_empty()
    {
        return url;
    }
    let slot = slot.get_or_init(|| Mutex::new(None));
    let mut running = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    running.get_or_insert_with(|| start(service)).url.clone()
}

/// An administrative PostgreSQL URL (a role that may create databases).
pub fn postgres_admin_url() -> String {
    service_url("TEST_DATABASE_URL", &POSTGRES, "postgres")
}

/// The test Redis server's URL, as given. Tests share the server; a
/// deployment's queues, rate limits and caches live in a database of its own
/// (see [`isolated_redis_url`]), so only server-wide pub/sub channels are
/// shared, and theirs name unique operation or key ids.
pub fn redis_url() -> String {
    service_url("TEST_REDIS_URL", &REDIS, "redis")
}

/// A URL of a Redis database no other deployment of this test process uses.
/// Job queues on Redis are named by job kind, so two deployments sharing a
/// database would run each other's jobs against the wrong store. Database 0 is
/// left to tests that only publish; each database is emptied when first handed
/// out. `scripts/test-services redis` configures 1,024 databases; with a
/// smaller server the indices wrap around (and deployments may meet again).
pub fn isolated_redis_url() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static DATABASES: OnceLock<u32> = OnceLock::new();
    let server = redis_url();
    let databases = *DATABASES.get_or_init(|| database_count(&server));
    let handed_out = NEXT.fetch_add(1, Ordering::Relaxed);
    let index = 1 + handed_out % databases.saturating_sub(1).max(1);
    let mut url = reqwest::Url::parse(&server).expect("a Redis URL");
    url.set_path(&format!("/{index}"));
    let url = url.to_string();
    if handed_out < databases.saturating_sub(1) {
        let flushed = Command::new("redis-cli")
            .args(["-u", &url, "flushdb"])
            .output()
            .expect("run redis-cli");
        assert!(flushed.status.success(), "redis-cli flushdb: {flushed:?}");
    }
    url
}

/// How many databases the Redis server at `url` has.
fn database_count(url: &str) -> u32 {
    let output = Command::new("redis-cli")
        .args(["-u", url, "config", "get", "databases"])
        .output()
        .expect("run redis-cli");
    assert!(output.status.success(), "redis-cli config get: {output:?}");
    // Two lines: the setting's name, then its value.
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .nth(1)
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(16)
}
