//! A deployment driven through the real binaries: `api serve`, `api admin …`
//! and `workers run` as separate processes over one data directory (and, in
//! the distributed profile, one PostgreSQL database and one Redis). Processes
//! are killed if a test ends without stopping them.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use storage::{Backend, Clock, MasterKey, Store};

use crate::binaries::binary;
use crate::database::TestDatabase;

/// The data of one deployment and how processes reach it.
pub struct Deployment {
    /// Its database and data directory.
    pub db: TestDatabase,
    /// The master key every process is given.
    pub master_key: String,
    /// Redis, for the distributed profile.
    pub redis_url: Option<String>,
}

impl Deployment {
    /// A deployment on `backend`, with the queue in the data directory.
    pub async fn new(backend: Backend) -> Self {
        Self {
            db: TestDatabase::create(backend).await,
            master_key: MasterKey::generate().to_text(),
            redis_url: None,
        }
    }

    /// A deployment whose queue, rate limits and fan-out are in the test Redis.
    pub async fn with_redis(backend: Backend) -> Self {
        Self {
            redis_url: Some(crate::services::isolated_redis_url()),
            ..Self::new(backend).await
        }
    }

    /// A command of binary `name` with this deployment's settings.
    pub fn command_of(&self, name: &str, args: &[&str]) -> Command {
        let mut command = Command::new(binary(name));
        command
            .args(args)
            .arg("--data-dir")
            .arg(self.db.data_dir())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("MASTER_KEY", &self.master_key)
            .stdin(Stdio::null());
        if let Some(url) = &self.db.database_url {
            command.env("DATABASE_URL", url);
        }
        if let Some(url) = &self.redis_url {
            command.env("REDIS_URL", url);
        }
        command
    }

    /// An `api` command.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_of("api", args)
    }

    /// Runs `api admin <args>`.
    pub fn admin(&self, args: &[&str]) -> Output {
        let mut full = vec!["admin"];
        full.extend_from_slice(args);
        self.command(&full).output().expect("run api admin")
    }

    /// Runs `api admin <args>`, expects success and returns its one JSON object.
    pub fn admin_ok(&self, args: &[&str]) -> Value {
        let output = self.admin(args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            stdout.trim().lines().count(),
            1,
            "exactly one line: {stdout}"
        );
        serde_json::from_str(stdout.trim()).expect("one JSON object")
    }

    /// Runs `api admin <args>` and expects a JSON error with `code` and status 1.
    pub fn admin_err(&self, args: &[&str], code: &str) {
        let output = self.admin(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(output.stdout.is_empty(), "nothing on stdout");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let error: Value = stderr
            .lines()
            .find_map(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(|| panic!("a JSON error on stderr: {stderr}"));
        assert_eq!(error["error"]["code"], code, "{args:?}: {error}");
    }

    /// Where the deployment's job queue lives.
    pub fn queue_target(&self) -> platform::QueueTarget {
        match &self.redis_url {
            Some(url) => platform::QueueTarget::Redis(url.clone()),
            None => platform::QueueTarget::SqliteFile(
                self.db.data_dir().join(platform::config::QUEUE_FILE),
            ),
        }
    }

    /// The deployment's store, opened from the test process (as another host would).
    pub async fn store(&self) -> Store {
        let key = MasterKey::from_text(&self.master_key).expect("master key");
        Store::open(self.db.connect().await, &key, Clock::System)
            .await
            .expect("open store")
    }

    fn log_file(&self, what: &str) -> PathBuf {
        self.db
            .data_dir()
            .join(format!("{what}-{}.log", ulid::Ulid::generate()))
    }

    /// Starts `workers run <extra>` with debug logs kept in a file.
    pub fn spawn_workers(&self, extra: &[&str]) -> Process {
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        let log = self.log_file("workers");
        let child = self
            .command_of("workers", &args)
            .env("RUST_LOG", "info,workers=debug")
            // As for `serve`: a grace the test's wait for the exit covers
            // (`--shutdown-seconds` overrides it).
            .env("WORKER_SHUTDOWN_SECONDS", "10")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn workers run");
        Process { child, log }
    }
}

/// A child process, killed (SIGKILL) if the test ends without stopping it.
pub struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and how).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("wait on child")
    }

    /// Sends `signal` (`TERM`, `KILL`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal}");
    }

    /// Sends SIGTERM and waits (at most `timeout`) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        self.signal("TERM");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "did not stop on SIGTERM:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server process: the child, its public base URL and its ops URL.
pub struct ServerProcess {
    /// The process.
    pub process: Process,
    /// `http(s)://127.0.0.1:PORT`.
    pub base_url: String,
    /// The ops listener, `http://127.0.0.1:PORT`.
    pub ops_url: String,
}

/// A port the OS considers free right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("free port")
}

/// Starts `api serve <extra>` and waits until it answers.
pub async fn serve(
    deployment: &Deployment,
    extra: &[&str],
    client: &reqwest::Client,
    scheme: &str,
) -> ServerProcess {
    let listen = format!("127.0.0.1:{}", free_port());
    let ops_listen = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["serve", "--listen", &listen, "--ops-listen", &ops_listen];
    args.extend_from_slice(extra);
    let log = deployment.log_file("serve");
    let child = deployment
        .command(&args)
        .env("RUST_LOG", "debug")
        // A job in flight at SIGTERM has this grace before it is handed
        // back, so a test's wait for the exit (`terminate`, 30 s) covers
        // the grace and the flushes after it; the default of 30 s alone
        // would take the whole wait on a busy machine.
        .env("WORKER_SHUTDOWN_SECONDS", "10")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn api serve");
    let mut process = Process { child, log };
    let base_url = format!("{scheme}://{listen}");
    let url = format!("{base_url}/api/openapi.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = client.get(&url).send().await
            && response.status() == StatusCode::OK
        {
            break;
        }
        if let Some(status) = process.try_wait() {
            panic!(
                "api serve exited early with {status}:\n{}",
                process.log_text()
            );
        }
        assert!(Instant::now() < deadline, "api serve did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ServerProcess {
        process,
        base_url,
        ops_url: format!("http://{ops_listen}"),
    }
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
