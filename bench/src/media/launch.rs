//! Child processes pinned to one core with the file-descriptor limit raised:
//! the API server on core 0 and this binary's client roles on core 1.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::Context;
use serde_json::Value;

use crate::process::pinned;

/// `program args` pinned to `core` with the file-descriptor limit raised.
pub(super) fn launch(core: u32, nofile: u64, program: &Path, args: &[String]) -> Command {
    let inner = pinned(core, &program.to_string_lossy(), args);
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--nofile={nofile}:{nofile}"))
        .arg(inner.get_program())
        .args(inner.get_args());
    command
}

/// Starts a client role of this binary pinned to core 1.
pub(super) fn start_client(nofile: u64, args: &[String]) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?;
    launch(1, nofile, &exe, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {args:?}"))
}

/// The first line a child prints, as JSON.
pub(super) fn read_line_json(child: &mut Child) -> anyhow::Result<Value> {
    let stdout = child.stdout.take().context("client stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    serde_json::from_str(line.trim()).with_context(|| format!("client said {line:?}"))
}
