//! Rendering at background priority: variant work runs on a thread of its
//! own whose scheduling priority is lowered (nice 10), and the threads it
//! starts inherit it. The engine uses every core for one image, so at normal
//! priority a backlog of renders would take the cores from what people are
//! waiting on in the same process: API requests (another agency's upload),
//! progress events, webhook deliveries. Lowered, the render still gets every
//! idle cycle and yields to them.

use tokio::sync::oneshot;

/// A rendering thread's priority on `thread-priority`'s 0–99 scale (higher
/// runs first): 22 is nice 10 on Linux, between normal (0) and lowest (19).
const RENDER_PRIORITY: u8 = 22;

/// The nice value [`RENDER_PRIORITY`] gives on Linux.
pub const RENDER_NICE: i32 = 10;

/// Why a background render gave no result.
#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    /// The operating system refused a new thread.
    #[error("the rendering thread could not start: {0}")]
    Spawn(std::io::Error),
    /// The render panicked.
    #[error("the rendering thread stopped without a result")]
    Stopped,
}

/// Lowers the calling thread's priority; best effort (lowering needs no
/// privilege, so this fails only where threads have no priorities of their
/// own, and the render then runs at normal priority).
fn lower_this_threads_priority() {
    use thread_priority::{ThreadPriority, ThreadPriorityValue, set_current_thread_priority};
    if let Ok(value) = ThreadPriorityValue::try_from(RENDER_PRIORITY)
        && let Err(err) = set_current_thread_priority(ThreadPriority::Crossplatform(value))
    {
        tracing::debug!(?err, "rendering at normal priority");
    }
}

/// The calling thread's nice value, from `/proc` (Linux only).
pub fn this_threads_nice() -> Option<i32> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name, which ends at the last ')': the state
    // is field 3 and the nice value field 19.
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_whitespace().nth(16)?.parse().ok()
}

/// Runs `work` on a new thread at background priority; resolves to its
/// result. A panic in `work` is reported as [`BackgroundError::Stopped`].
pub async fn render<T, F>(work: F) -> Result<T, BackgroundError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (done, result) = oneshot::channel();
    std::thread::Builder::new()
        .name("media-render".to_owned())
        .spawn(move || {
            lower_this_threads_priority();
            let _ = done.send(work());
        })
        .map_err(BackgroundError::Spawn)?;
    result.await.map_err(|_| BackgroundError::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn renders_run_below_normal_priority_and_so_do_their_threads() {
        let Some(before) = this_threads_nice() else {
            return; // no per-thread priorities to read here
        };
        let (render_nice, helper_nice) = render(|| {
            let helper = std::thread::spawn(this_threads_nice).join().unwrap();
            (this_threads_nice(), helper)
        })
        .await
        .unwrap();
        // Never above the caller's priority (raising it needs privilege).
        assert_eq!(render_nice, Some(before.max(RENDER_NICE)));
        assert_eq!(
            helper_nice, render_nice,
            "threads a render starts inherit it"
        );
        // The caller's own priority is untouched.
        assert_eq!(this_threads_nice(), Some(before));
    }

    #[tokio::test]
    async fn a_panicking_render_is_an_error_not_a_hang() {
        let result = render(|| -> u32 { panic!("decoder bug") }).await;
        assert!(matches!(result, Err(BackgroundError::Stopped)));
    }
}
