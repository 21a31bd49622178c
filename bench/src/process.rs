//! Child processes of a benchmark: this binary in a server role, pinned to
//! core 0, announcing itself with one JSON line and stopping when its stdin
//! closes (when the orchestrator drops it or exits).

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::Context;
use serde_json::Value;

/// Runs `program args` on `core` when `taskset` exists, else unpinned.
pub fn pinned(core: u32, program: &str, args: &[String]) -> Command {
    if std::path::Path::new("/usr/bin/taskset").exists() {
        let mut command = Command::new("taskset");
        command
            .arg("-c")
            .arg(core.to_string())
            .arg(program)
            .args(args);
        command
    } else {
        let mut command = Command::new(program);
        command.args(args);
        command
    }
}

/// A running child role.
pub struct Role {
    child: Child,
    _stdin: ChildStdin,
    /// What the role printed when ready.
    pub announcement: Value,
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts this binary with `args` on core 0 and waits for its announcement.
pub fn start(args: &[String]) -> anyhow::Result<Role> {
    let exe = std::env::current_exe()?;
    let mut child = pinned(0, &exe.to_string_lossy(), args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {args:?}"))?;
    let stdin = child.stdin.take().context("stdin")?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let announcement = serde_json::from_str(line.trim())
        .with_context(|| format!("announcement of {args:?}: {line:?}"))?;
    Ok(Role {
        child,
        _stdin: stdin,
        announcement,
    })
}

/// Prints one JSON announcement line and blocks until stdin closes.
pub async fn announce_and_wait(announcement: &Value) -> anyhow::Result<()> {
    println!("{announcement}");
    tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            sink.clear();
        }
    })
    .await?;
    Ok(())
}
