//! Memory of the API process read from `/proc/<pid>/status`: single readings
//! and a background sampler of the peak `VmRSS`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
pub(super) fn status_kb(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("{field} of {pid}"))
}

/// Samples a process's `VmRSS` every few milliseconds on its own thread.
pub(super) struct RssSampler {
    stop: Arc<AtomicBool>,
    peak_kb: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl RssSampler {
    /// Starts sampling process `pid`.
    pub(super) fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kb = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (stop, peak_kb) = (stop.clone(), peak_kb.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(rss) = status_kb(pid, "VmRSS") {
                        peak_kb.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Self {
            stop,
            peak_kb,
            thread,
        }
    }

    /// Stops sampling; the largest `VmRSS` seen, KiB.
    pub(super) fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak_kb.load(Ordering::Relaxed)
    }
}
