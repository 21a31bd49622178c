//! The one guarded runner every external program goes through: no stdin, a
//! timeout that kills, a cap on stdout, the tail of stderr kept, and a typed
//! error for a missing binary.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use super::error::PosterError;
use super::reason::client_reason;

/// How long one external process may run before it is killed.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest poster image accepted from a tool's stdout.
pub(super) const MAX_IMAGE_BYTES: usize = 64 * 1024 * 1024;
/// How much of the end of a tool's stderr is kept to explain a failure.
const MAX_STDERR_BYTES: usize = 16 * 1024;

/// An external program: the name used in errors and the binary to run.
#[derive(Debug, Clone)]
pub(super) struct Tool {
    name: &'static str,
    pub(super) program: PathBuf,
}

impl Tool {
    /// `ffprobe`, as resolved by ffmpeg-sidecar (sidecar binary or `PATH`).
    pub(super) fn ffprobe() -> Self {
        let program = ffmpeg_sidecar::ffprobe::ffprobe_path();
        Self {
            name: "ffprobe",
            program,
        }
    }

    /// `ffmpeg`, as resolved by ffmpeg-sidecar (sidecar binary or `PATH`).
    pub(super) fn ffmpeg() -> Self {
        let program = ffmpeg_sidecar::paths::ffmpeg_path();
        Self {
            name: "ffmpeg",
            program,
        }
    }

    /// Poppler's `pdftoppm` from `PATH`.
    pub(super) fn pdftoppm() -> Self {
        let program = PathBuf::from("pdftoppm");
        Self {
            name: "pdftoppm",
            program,
        }
    }

    /// A command for this program without arguments.
    pub(super) fn command(&self) -> Command {
        Command::new(&self.program)
    }
}

/// The limits one run of an external program is held to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    timeout: Duration,
    max_output: usize,
}

impl Limits {
    /// The standard timeout with the given stdout cap.
    pub(super) fn new(max_output: usize) -> Self {
        Self {
            timeout: TOOL_TIMEOUT,
            max_output,
        }
    }
}

/// What a finished external program left behind.
#[derive(Debug)]
pub(super) struct ToolOutput {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl ToolOutput {
    /// The stdout of a successful run; a failed run means the input could not
    /// be read, explained by stderr with `input` hidden.
    pub(super) fn into_success(self, input: &Path) -> Result<Vec<u8>, PosterError> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(PosterError::Unreadable(client_reason(&self.stderr, input)))
        }
    }
}

/// Runs `command` with no stdin, captured output and the given limits; the
/// process is killed when the time runs out or its output is too large.
pub(super) async fn run_tool(
    tool: &Tool,
    mut command: Command,
    limits: Limits,
) -> Result<ToolOutput, PosterError> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|source| spawn_error(tool.name, source))?;
    let collected = collect_output(tool.name, &mut child, limits.max_output);
    match tokio::time::timeout(limits.timeout, collected).await {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(error)) => {
            stop(tool.name, &mut child).await;
            Err(error)
        }
        Err(_elapsed) => {
            stop(tool.name, &mut child).await;
            let seconds = limits.timeout.as_secs();
            Err(PosterError::TimedOut {
                tool: tool.name,
                seconds,
            })
        }
    }
}

/// Reads stdout (capped) and the tail of stderr, then waits for the exit.
async fn collect_output(
    tool: &'static str,
    child: &mut Child,
    max_output: usize,
) -> Result<ToolOutput, PosterError> {
    let stdout = child.stdout.take().ok_or_else(|| missing_pipe(tool))?;
    let stderr = child.stderr.take().ok_or_else(|| missing_pipe(tool))?;
    let (stdout, stderr) = tokio::join!(
        read_capped(stdout, max_output),
        read_tail(stderr, MAX_STDERR_BYTES)
    );
    let io_error = |source| PosterError::Io { tool, source };
    let stdout = stdout
        .map_err(io_error)?
        .ok_or(PosterError::OutputTooLarge {
            tool,
            limit: max_output,
        })?;
    let stderr = stderr.map_err(io_error)?;
    let status = child.wait().await.map_err(io_error)?;
    Ok(ToolOutput {
        status,
        stdout,
        stderr,
    })
}

/// Reads everything up to `limit` bytes; `None` when there is more. Dropping
/// the reader early closes the pipe, so the writer stops with `EPIPE`.
async fn read_capped<R: AsyncRead + Unpin>(reader: R, limit: usize) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    let allowed = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(allowed).read_to_end(&mut bytes).await?;
    Ok((bytes.len() <= limit).then_some(bytes))
}

/// Reads to the end and keeps the last `limit` bytes, where tools put the
/// error that made them stop.
async fn read_tail<R: AsyncRead + Unpin>(mut reader: R, limit: usize) -> io::Result<Vec<u8>> {
    let mut tail = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = reader.read(&mut chunk).await?;
        if read == 0 {
            return Ok(tail);
        }
        tail.extend_from_slice(&chunk[..read]);
        let excess = tail.len().saturating_sub(limit);
        tail.drain(..excess);
    }
}

/// Kills a process that is no longer wanted and reaps it.
async fn stop(tool: &'static str, child: &mut Child) {
    if let Err(error) = child.kill().await {
        tracing::debug!(tool, %error, "stopping an external process failed");
    }
}

/// Maps a failed spawn: a missing binary is [`PosterError::ToolMissing`].
fn spawn_error(tool: &'static str, source: io::Error) -> PosterError {
    if source.kind() == io::ErrorKind::NotFound {
        PosterError::ToolMissing(tool)
    } else {
        PosterError::Io { tool, source }
    }
}

/// The error for a stdio pipe that was configured but not handed out.
fn missing_pipe(tool: &'static str) -> PosterError {
    let source = io::Error::other("the output pipe was not captured");
    PosterError::Io { tool, source }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[tokio::test]
    async fn missing_program_is_a_typed_error() {
        let tool = Tool {
            name: "ffmpeg",
            program: PathBuf::from("/nonexistent/ffmpeg-for-poster-test"),
        };
        let result = run_tool(&tool, tool.command(), Limits::new(1024)).await;
        assert!(matches!(result, Err(PosterError::ToolMissing("ffmpeg"))));
    }

    #[tokio::test]
    async fn slow_program_is_killed_at_the_timeout() {
        let tool = Tool {
            name: "sleep",
            program: PathBuf::from("sleep"),
        };
        let mut command = tool.command();
        command.arg("30");
        let limits = Limits {
            timeout: Duration::from_millis(200),
            max_output: 1024,
        };
        let started = Instant::now();
        let result = run_tool(&tool, command, limits).await;
        assert!(matches!(
            result,
            Err(PosterError::TimedOut { tool: "sleep", .. })
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn endless_output_is_cut_off() {
        let tool = Tool {
            name: "yes",
            program: PathBuf::from("yes"),
        };
        let result = run_tool(&tool, tool.command(), Limits::new(4096)).await;
        assert!(matches!(
            result,
            Err(PosterError::OutputTooLarge {
                tool: "yes",
                limit: 4096
            })
        ));
    }
}
