//! External servers the tests need. PostgreSQL comes from `TEST_DATABASE_URL`
//! when set; otherwise one throwaway cluster per test process is started with
//! `scripts/test-services`, which stops it when this process exits (its stdin,
//! held open here, closes).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
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

/// A Redis URL. Tests share the server; their keys never collide because every
/// key names its (unique) agency or key id.
pub fn redis_url() -> String {
    service_url("TEST_REDIS_URL", &REDIS, "redis")
}
