//! How one side of the variant benchmark is measured: spawn-to-exit wall
//! time and GNU time's peak RSS, after waiting for an idle machine.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};

/// One timed command.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    /// Spawn to exit, seconds.
    pub(super) wall: f64,
    /// GNU time's `%M`, KiB.
    pub(super) max_rss_kb: u64,
}

/// Runs `program args` under `/usr/bin/time -f %M`, timing it from here.
pub(super) fn timed(program: &Path, args: &[OsString], time_file: &Path) -> anyhow::Result<Sample> {
    let started = Instant::now();
    let status = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(time_file)
        .args(["-f", "%M"])
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .context("running /usr/bin/time")?;
    let wall = started.elapsed().as_secs_f64();
    ensure!(status.success(), "{} failed: {status}", program.display());
    let text = std::fs::read_to_string(time_file)?;
    let max_rss_kb = text
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .context("no %M from /usr/bin/time")?;
    Ok(Sample { wall, max_rss_kb })
}

/// Waits (up to 60 s) until the CPUs are at least 90% idle over 300 ms, so
/// other work on the machine (a build) does not skew one side.
pub(super) fn wait_idle() {
    let sample = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        Some((cpu.iter().take(8).sum(), cpu.get(3)? + cpu.get(4)?))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Some((t1, i1)) = sample() else { return };
        std::thread::sleep(Duration::from_millis(300));
        let Some((t2, i2)) = sample() else { return };
        if (i2 - i1) * 10 >= (t2 - t1).max(1) * 9 {
            return;
        }
    }
    eprintln!("warning: the machine was still busy after 60 s");
}
