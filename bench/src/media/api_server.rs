//! The API under test: a release `api serve` on the embedded profile, seeded
//! with an agency and a `media:write` key, pinned to core 0.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::Value;

use super::launch::launch;

/// Where the `api` binary is.
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
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

    fn binary(&self) -> anyhow::Result<PathBuf> {
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
pub(super) struct ApiServer {
    child: Child,
    /// The API's process id (`prlimit` and `taskset` exec it).
    pub(super) pid: u32,
    /// `http://127.0.0.1:<port>`.
    pub(super) base_url: String,
    _data: tempfile::TempDir,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `api admin <args> --data-dir DIR` and returns its JSON.
fn admin(bin: &Path, data_dir: &Path, args: &[&str]) -> anyhow::Result<Value> {
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

/// Seeds an agency with a `media:write` key, starts `api serve` on core 0
/// and waits until it answers; returns it and the key.
pub(super) async fn start_api(args: &ApiArgs) -> anyhow::Result<(ApiServer, String)> {
    let bin = args.binary()?;
    let data = tempfile::tempdir()?;
    let agency = admin(
        &bin,
        data.path(),
        &["create-agency", "--name", "Benchmark Media"],
    )?;
    let agency_id = agency["agency_id"].as_str().context("agency_id")?;
    let key = admin(
        &bin,
        data.path(),
        &[
            "create-key",
            "--agency",
            agency_id,
            "--name",
            "media-benchmark",
            "--scopes",
            "media:write",
        ],
    )?;
    let key = key["key"].as_str().context("key")?.to_owned();
    let (port, ops_port) = (free_port()?, free_port()?);
    let serve_args = vec![
        "serve".to_owned(),
        "--data-dir".into(),
        data.path().to_string_lossy().into_owned(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--ops-listen".into(),
        format!("127.0.0.1:{ops_port}"),
        "--no-workers".into(),
    ];
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
        _data: data,
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
    Ok((server, key))
}
