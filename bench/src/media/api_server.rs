//! The API under test: a release `api serve` seeded with agencies and a
//! `media:write` key each, pinned to core 0: on the embedded profile, or with
//! its queue on Redis; with or without its in-process workers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::Value;

use super::launch::launch;

/// Where the `api` binary is.
#[derive(Debug, Clone, Args)]
pub(crate) struct ApiArgs {
    /// The `api` binary; default: the release build beside this binary
    /// (`cargo build --release -p api`).
    #[arg(long)]
    api_bin: Option<PathBuf>,
    /// File-descriptor limit (soft and hard) the API and the client run
    /// with; default: this process's hard limit.
    #[arg(long)]
    nofile: Option<u64>,
}

impl ApiArgs {
    /// The file-descriptor limit to run the children with.
    pub(super) fn nofile(&self) -> anyhow::Result<u64> {
        if let Some(n) = self.nofile {
            return Ok(n);
        }
        let limits = std::fs::read_to_string("/proc/self/limits")?;
        let hard = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max open files"))
            .and_then(|l| l.split_whitespace().nth(1))
            .context("Max open files in /proc/self/limits")?;
        Ok(if hard == "unlimited" {
            1 << 20
        } else {
            hard.parse()?
        })
    }

    /// The `api` binary, checked to exist.
    pub(crate) fn binary(&self) -> anyhow::Result<PathBuf> {
        let path = match &self.api_bin {
            Some(path) => path.clone(),
            None => std::env::current_exe()?
                .parent()
                .context("the bench binary's directory")?
                .join("api"),
        };
        ensure!(
            path.exists(),
            "no api binary at {}: run `cargo build --release -p api` first",
            path.display()
        );
        Ok(path)
    }
}

/// Variables that would take `api` off the embedded profile.
const PROFILE_ENV: [&str; 5] = [
    "DATABASE_URL",
    "REDIS_URL",
    "OBJECT_STORE_URL",
    "MASTER_KEY",
    "DATA_DIR",
];

/// A running `api serve`.
pub(crate) struct ApiServer {
    child: Child,
    /// The API's process id (`prlimit` and `taskset` exec it).
    pub(crate) pid: u32,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base_url: String,
    /// Its data directory (store and, on the embedded profile, queue files).
    pub(crate) data: tempfile::TempDir,
}

/// What a server is started with.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerOptions {
    /// Run the workers in the API process (`api serve` without `--no-workers`).
    pub(crate) workers: bool,
    /// The queue on this Redis (`--redis-url`); the store stays embedded.
    pub(crate) redis_url: Option<String>,
    /// Agencies to seed, each with a `media:write` key (at least one).
    pub(crate) agencies: usize,
}

/// An agency seeded in a server's store.
#[derive(Debug, Clone)]
pub(crate) struct SeededAgency {
    /// `agc_…`.
    pub(crate) agency_id: String,
    /// Its owner (`usr_…`).
    pub(crate) owner_user_id: String,
    /// A live `media:write` key.
    pub(crate) key: String,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `api admin <args> --data-dir DIR` and returns its JSON.
pub(crate) fn admin(bin: &Path, data_dir: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let mut command = Command::new(bin);
    for var in PROFILE_ENV {
        command.env_remove(var);
    }
    let output = command
        .arg("admin")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("api admin {args:?}"))?;
    ensure!(
        output.status.success(),
        "api admin {args:?}: {}",
        output.status
    );
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// A port free on loopback right now.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Seeds an agency with a `media:write` key, starts `api serve
/// --no-workers` on core 0 and waits until it answers; returns it and the key.
pub(super) async fn start_api(args: &ApiArgs) -> anyhow::Result<(ApiServer, String)> {
    let options = ServerOptions {
        agencies: 1,
        ..ServerOptions::default()
    };
    let (server, mut agencies) = start_server(args, &options).await?;
    let agency = agencies.pop().context("a seeded agency")?;
    Ok((server, agency.key))
}

/// Seeds agencies, starts `api serve` on core 0 as `options` say and waits
/// until it answers.
pub(crate) async fn start_server(
    args: &ApiArgs,
    options: &ServerOptions,
) -> anyhow::Result<(ApiServer, Vec<SeededAgency>)> {
    start_server_with(args, options, &[]).await
}

/// Creates an agency named `name` in `data_dir`'s store, with a live key of
/// `scopes` (comma-separated).
pub(crate) fn seed_agency(
    bin: &Path,
    data_dir: &Path,
    name: &str,
    scopes: &str,
) -> anyhow::Result<SeededAgency> {
    let agency = admin(bin, data_dir, &["create-agency", "--name", name])?;
    let agency_id = agency["agency_id"]
        .as_str()
        .context("agency_id")?
        .to_owned();
    let owner_user_id = agency["owner_user_id"]
        .as_str()
        .context("owner_user_id")?
        .to_owned();
    let key = create_key(bin, data_dir, &agency_id, scopes)?;
    Ok(SeededAgency {
        agency_id,
        owner_user_id,
        key,
    })
}

/// A live key of `scopes` (comma-separated) for an agency already in
/// `data_dir`'s store.
pub(crate) fn create_key(
    bin: &Path,
    data_dir: &Path,
    agency_id: &str,
    scopes: &str,
) -> anyhow::Result<String> {
    let key = admin(
        bin,
        data_dir,
        &[
            "create-key",
            "--agency",
            agency_id,
            "--name",
            "media-benchmark",
            "--scopes",
            scopes,
        ],
    )?;
    Ok(key["key"].as_str().context("key")?.to_owned())
}

/// [`start_server`] with `serve_flags` added to `api serve`'s arguments.
pub(crate) async fn start_server_with(
    args: &ApiArgs,
    options: &ServerOptions,
    serve_flags: &[String],
) -> anyhow::Result<(ApiServer, Vec<SeededAgency>)> {
    let bin = args.binary()?;
    let data = tempfile::tempdir()?;
    let mut agencies = Vec::new();
    for n in 0..options.agencies.max(1) {
        let name = format!("Benchmark Media {}", n + 1);
        agencies.push(seed_agency(&bin, data.path(), &name, "media:write")?);
    }
    let server = serve_prepared(args, options, data, serve_flags).await?;
    Ok((server, agencies))
}

/// Starts `api serve` on core 0 over `data`, a data directory already
/// seeded, as `options` say (its `agencies` are not read), and waits until
/// it answers.
pub(crate) async fn serve_prepared(
    args: &ApiArgs,
    options: &ServerOptions,
    data: tempfile::TempDir,
    serve_flags: &[String],
) -> anyhow::Result<ApiServer> {
    let bin = args.binary()?;
    let (port, ops_port) = (free_port()?, free_port()?);
    let mut serve_args = vec![
        "serve".to_owned(),
        "--data-dir".into(),
        data.path().to_string_lossy().into_owned(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--ops-listen".into(),
        format!("127.0.0.1:{ops_port}"),
    ];
    if !options.workers {
        serve_args.push("--no-workers".into());
    }
    if let Some(url) = &options.redis_url {
        serve_args.extend(["--redis-url".to_owned(), url.clone()]);
    }
    serve_args.extend(serve_flags.iter().cloned());
    let mut command = launch(0, args.nofile()?, &bin, &serve_args);
    for var in PROFILE_ENV {
        command.env_remove(var);
    }
    let child = command
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting api serve")?;
    let pid = child.id();
    let server = ApiServer {
        child,
        pid,
        base_url: format!("http://127.0.0.1:{port}"),
        data,
    };
    let health = format!("http://127.0.0.1:{ops_port}/healthz");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = client.get(&health).send().await
            && response.status().is_success()
        {
            break;
        }
        ensure!(Instant::now() < deadline, "api serve did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // prlimit and taskset exec the program: the pid is the API's.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))?;
    ensure!(comm.trim() == "api", "pid {pid} is {comm:?}, not the API");
    Ok(server)
}
