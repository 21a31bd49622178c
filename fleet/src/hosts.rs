//! Acting on the fleet's other hosts through `scripts/fleet` (its path in
//! `FLEET_SCRIPT`, its settings in the environment it gave this process).

use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, bail};
use serde_json::Value;

/// The fleet script.
#[derive(Clone, Debug)]
pub struct Hosts {
    script: PathBuf,
}

impl Hosts {
    /// From `FLEET_SCRIPT`.
    pub fn from_env() -> anyhow::Result<Self> {
        let script = std::env::var_os("FLEET_SCRIPT")
            .map(PathBuf::from)
            .context("FLEET_SCRIPT is unset: run the drills with `scripts/fleet drill`")?;
        Ok(Self { script })
    }

    async fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        let mut command = tokio::process::Command::new(&self.script);
        command
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().context("running scripts/fleet")?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use tokio::io::AsyncWriteExt;
            pipe.write_all(text.as_bytes()).await?;
        }
        let output = child.wait_with_output().await?;
        if !output.status.success() {
            bail!(
                "scripts/fleet {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `kill -9` of a host's process.
    pub async fn kill(&self, host: &str) -> anyhow::Result<()> {
        self.run(&["host", "kill", host], None).await.map(drop)
    }

    /// A clean stop of a host's process (it may flush and close).
    pub async fn stop(&self, host: &str) -> anyhow::Result<()> {
        self.run(&["host", "stop", host], None).await.map(drop)
    }

    /// Starts a host's process again (waits until it listens).
    pub async fn start(&self, host: &str) -> anyhow::Result<()> {
        self.run(&["host", "start", host], None).await.map(drop)
    }

    /// Whether a host's process runs.
    pub async fn running(&self, host: &str) -> bool {
        self.run(&["host", "running", host], None).await.is_ok()
    }

    /// Cuts (`false`) or restores (`true`) a host's link to the bridge.
    pub async fn link(&self, host: &str, up: bool) -> anyhow::Result<()> {
        let state = if up { "up" } else { "down" };
        self.run(&["link", state, host], None).await.map(drop)
    }

    /// `api admin ARGS` on api-1: its one JSON object.
    pub async fn admin(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Value> {
        let mut full = vec!["admin"];
        full.extend_from_slice(args);
        let out = self.run(&full, stdin).await?;
        serde_json::from_str(out.trim()).with_context(|| format!("api admin {args:?}: {out}"))
    }
}
