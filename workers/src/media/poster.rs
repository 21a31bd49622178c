//! Poster images for uploads that are not images themselves.
//!
//! A listing's media can be an MP4 video or a PDF (a floor plan, a brochure).
//! The image variant pipeline only understands still images, so this module
//! turns such an upload, already stored as a local file, into one PNG:
//!
//! - [`probe_video`] reads the duration and frame size of a video with
//!   `ffprobe`,
//! - [`video_poster`] grabs one frame a little way into the video with
//!   `ffmpeg`,
//! - [`pdf_first_page`] renders page 1 of a PDF with poppler's `pdftoppm`.
//!
//! # Why external processes, and how they are guarded
//!
//! Decoding video and PDF in process would pull in large C libraries; running
//! Debian's `ffmpeg`, `ffprobe` and `pdftoppm` keeps a crash or a hostile file
//! outside the worker. Every run goes through one runner that applies the same
//! guards: a timeout after which the process is killed (`kill_on_drop` as the
//! backstop), a cap on stdout, stderr kept (only its tail) to explain a
//! failure, and a typed error for a missing binary.
//!
//! ffmpeg-sidecar resolves the binaries (a sidecar next to the executable,
//! else `PATH`) and builds the `ffmpeg` command line. Its own runner is
//! synchronous and iterator based: a blocked read in `spawn_blocking` can
//! neither be timed out nor killed from outside, and its metadata comes from
//! parsing ffmpeg's human-readable log. So the command it builds is run by
//! `tokio::process`, and the probe uses `ffprobe -of json`, which is a stable,
//! machine-readable format.
//!
//! Input is forced to the MP4/QuickTime demuxer and the `file` protocol only,
//! so an upload that is really a playlist or a `concat:` URL cannot make
//! ffmpeg fetch other files or network addresses.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use ffmpeg_sidecar::command::FfmpegCommand;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

/// How long one external process may run before it is killed.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest poster image accepted from a tool's stdout.
const MAX_IMAGE_BYTES: usize = 64 * 1024 * 1024;
/// The largest `ffprobe` report accepted; a real one is a few hundred bytes.
const MAX_PROBE_BYTES: usize = 1024 * 1024;
/// How much of the end of a tool's stderr is kept to explain a failure.
const MAX_STDERR_BYTES: usize = 16 * 1024;
/// The longest failure reason handed to an API client, in characters.
const MAX_REASON_CHARS: usize = 240;
/// How many distinct stderr lines make up a failure reason.
const MAX_REASON_LINES: usize = 3;
/// The longest edge of a video poster; smaller videos keep their size.
const MAX_POSTER_EDGE: u32 = 3840;
/// The long edge, in pixels, a PDF page is rendered at (vector content, so
/// small pages lose nothing; large pages cannot blow up memory).
const PDF_LONG_EDGE: u32 = 2560;
/// Share of the duration at which the poster frame is taken.
const POSTER_SHARE: f64 = 0.1;
/// The poster frame is taken at most this many seconds in.
const MAX_POSTER_OFFSET_SECS: f64 = 3.0;
/// Clips shorter than this many seconds use their first frame.
const SHORT_CLIP_SECS: f64 = 1.0;

/// Why a poster image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PosterError {
    /// The named external program is not installed (not found on `PATH`).
    #[error("{0} is not installed on the media worker")]
    ToolMissing(&'static str),
    /// The upload is corrupt or not of the expected kind; the reason is safe
    /// to show to an API client (it never contains server paths).
    #[error("the file cannot be read: {0}")]
    Unreadable(String),
    /// The external program ran longer than allowed and was killed.
    #[error("{tool} did not finish within {seconds} s")]
    TimedOut {
        /// The program that was killed.
        tool: &'static str,
        /// The time limit that was exceeded.
        seconds: u64,
    },
    /// The external program produced more output than allowed.
    #[error("{tool} produced more than {limit} bytes of output")]
    OutputTooLarge {
        /// The program whose output was rejected.
        tool: &'static str,
        /// The output limit in bytes.
        limit: usize,
    },
    /// Starting or talking to the external program failed.
    #[error("running {tool} failed: {source}")]
    Io {
        /// The program that could not be run.
        tool: &'static str,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
}

/// What [`probe_video`] learns about a video: enough to pick a poster frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VideoInfo {
    /// Running time in seconds.
    pub duration_secs: f64,
    /// Width in pixels of the first video stream.
    pub width: u32,
    /// Height in pixels of the first video stream.
    pub height: u32,
}

/// Reads the duration and the frame size of the first video stream of an
/// MP4 (or QuickTime) file with `ffprobe`.
pub async fn probe_video(path: &Path) -> Result<VideoInfo, PosterError> {
    let tool = Tool::ffprobe();
    let mut command = tool.command();
    command
        .args(["-v", "error", "-f", "mp4", "-protocol_whitelist", "file"])
        .args(["-select_streams", "v:0", "-of", "json"])
        .args([
            "-show_entries",
            "format=duration:stream=width,height,duration",
        ])
        .arg(file_url(path));
    let report = run_tool(&tool, command, Limits::new(MAX_PROBE_BYTES))
        .await?
        .into_success(path)?;
    parse_probe_report(&report)
}

/// Takes one frame of the video as PNG bytes, 10 % into the video (at most
/// 3 s in, the first frame of very short clips), never larger than the
/// source and at most 3840 pixels on its long edge.
pub async fn video_poster(path: &Path, info: &VideoInfo) -> Result<Vec<u8>, PosterError> {
    let offset = poster_offset(info.duration_secs);
    let mut png = extract_frame(path, offset).await?;
    if png.is_empty() && offset > 0.0 {
        // The declared duration can be longer than the decodable video.
        png = extract_frame(path, 0.0).await?;
    }
    non_empty(png, "the video contains no decodable frame")
}

/// Renders the first page of a PDF as PNG bytes with `pdftoppm`, scaled so
/// that its long edge is 2560 pixels.
pub async fn pdf_first_page(path: &Path) -> Result<Vec<u8>, PosterError> {
    let tool = Tool::pdftoppm();
    let mut command = tool.command();
    command
        .args(["-f", "1", "-l", "1", "-singlefile", "-png"])
        .arg("-scale-to")
        .arg(PDF_LONG_EDGE.to_string())
        .arg(local_arg(path));
    let png = run_tool(&tool, command, Limits::new(MAX_IMAGE_BYTES))
        .await?
        .into_success(path)?;
    non_empty(png, "the PDF has no page that could be rendered")
}

/// Seconds into the video at which the poster frame is taken.
fn poster_offset(duration_secs: f64) -> f64 {
    if !duration_secs.is_finite() || duration_secs < SHORT_CLIP_SECS {
        return 0.0;
    }
    (duration_secs * POSTER_SHARE).min(MAX_POSTER_OFFSET_SECS)
}

/// Runs `ffmpeg` to decode one frame at `offset_secs` as PNG; empty output
/// means there was no frame at that position.
async fn extract_frame(path: &Path, offset_secs: f64) -> Result<Vec<u8>, PosterError> {
    let tool = Tool::ffmpeg();
    let command = frame_command(&tool, path, offset_secs);
    run_tool(&tool, command, Limits::new(MAX_IMAGE_BYTES))
        .await?
        .into_success(path)
}

/// The `ffmpeg` command line for one poster frame, built with ffmpeg-sidecar.
fn frame_command(tool: &Tool, path: &Path, offset_secs: f64) -> Command {
    let scale = format!(
        "scale=w='min(iw,{MAX_POSTER_EDGE})':h='min(ih,{MAX_POSTER_EDGE})'\
         :force_original_aspect_ratio=decrease"
    );
    let mut ffmpeg = FfmpegCommand::from(std::process::Command::new(&tool.program));
    ffmpeg
        .args(["-nostdin", "-loglevel", "error"])
        .hide_banner()
        .seek(format!("{offset_secs:.3}"))
        .format("mp4")
        .args(["-protocol_whitelist", "file"])
        .input(file_url(path))
        .map("0:v:0")
        .frames(1)
        .filter(scale)
        .format("image2pipe")
        .codec_video("png")
        .output("pipe:1");
    Command::from(std::process::Command::from(ffmpeg))
}

/// The part of `ffprobe -of json` output that is read.
#[derive(Debug, Deserialize)]
struct ProbeReport {
    #[serde(default)]
    streams: Vec<ProbeStream>,
    format: Option<ProbeFormat>,
}

/// One video stream in an `ffprobe` report.
#[derive(Debug, Deserialize)]
struct ProbeStream {
    width: Option<u32>,
    height: Option<u32>,
    duration: Option<String>,
}

/// The container section of an `ffprobe` report.
#[derive(Debug, Deserialize)]
struct ProbeFormat {
    duration: Option<String>,
}

/// Turns `ffprobe`'s JSON into [`VideoInfo`], preferring the container's
/// duration and falling back to the stream's.
fn parse_probe_report(json: &[u8]) -> Result<VideoInfo, PosterError> {
    let report: ProbeReport = serde_json::from_slice(json)
        .map_err(|_| unreadable("the video's metadata could not be understood"))?;
    let stream = report
        .streams
        .first()
        .ok_or_else(|| unreadable("the file contains no video stream"))?;
    let (width, height) = match (stream.width, stream.height) {
        (Some(width), Some(height)) if width > 0 && height > 0 => (width, height),
        _ => return Err(unreadable("the video has no frame size")),
    };
    let container = report.format.as_ref().and_then(|f| f.duration.as_deref());
    let duration_secs = [container, stream.duration.as_deref()]
        .into_iter()
        .flatten()
        .filter_map(|text| text.trim().parse::<f64>().ok())
        .find(|secs| secs.is_finite() && *secs >= 0.0)
        .ok_or_else(|| unreadable("the video has no duration"))?;
    Ok(VideoInfo {
        duration_secs,
        width,
        height,
    })
}

/// An external program: the name used in errors and the binary to run.
#[derive(Debug, Clone)]
struct Tool {
    name: &'static str,
    program: PathBuf,
}

impl Tool {
    /// `ffprobe`, as resolved by ffmpeg-sidecar (sidecar binary or `PATH`).
    fn ffprobe() -> Self {
        let program = ffmpeg_sidecar::ffprobe::ffprobe_path();
        Self {
            name: "ffprobe",
            program,
        }
    }

    /// `ffmpeg`, as resolved by ffmpeg-sidecar (sidecar binary or `PATH`).
    fn ffmpeg() -> Self {
        let program = ffmpeg_sidecar::paths::ffmpeg_path();
        Self {
            name: "ffmpeg",
            program,
        }
    }

    /// Poppler's `pdftoppm` from `PATH`.
    fn pdftoppm() -> Self {
        let program = PathBuf::from("pdftoppm");
        Self {
            name: "pdftoppm",
            program,
        }
    }

    /// A command for this program without arguments.
    fn command(&self) -> Command {
        Command::new(&self.program)
    }
}

/// The limits one run of an external program is held to.
#[derive(Debug, Clone, Copy)]
struct Limits {
    timeout: Duration,
    max_output: usize,
}

impl Limits {
    /// The standard timeout with the given stdout cap.
    fn new(max_output: usize) -> Self {
        Self {
            timeout: TOOL_TIMEOUT,
            max_output,
        }
    }
}

/// What a finished external program left behind.
#[derive(Debug)]
struct ToolOutput {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl ToolOutput {
    /// The stdout of a successful run; a failed run means the input could not
    /// be read, explained by stderr with `input` hidden.
    fn into_success(self, input: &Path) -> Result<Vec<u8>, PosterError> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(PosterError::Unreadable(client_reason(&self.stderr, input)))
        }
    }
}

/// Runs `command` with no stdin, captured output and the given limits; the
/// process is killed when the time runs out or its output is too large.
async fn run_tool(
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

/// A [`PosterError::Unreadable`] with a fixed reason.
fn unreadable(reason: &str) -> PosterError {
    PosterError::Unreadable(reason.to_owned())
}

/// `bytes` unless empty, in which case the input held nothing to show.
fn non_empty(bytes: Vec<u8>, reason: &str) -> Result<Vec<u8>, PosterError> {
    if bytes.is_empty() {
        Err(unreadable(reason))
    } else {
        Ok(bytes)
    }
}

/// The path as an ffmpeg URL with the `file` protocol, so that a name such as
/// `concat:…` or `http:…` is never taken as another protocol.
fn file_url(path: &Path) -> OsString {
    let mut url = OsString::from("file:");
    url.push(path.as_os_str());
    url
}

/// The path as a program argument that cannot be read as an option or as
/// `-` (stdin): relative paths get a `./` prefix.
fn local_arg(path: &Path) -> PathBuf {
    if path.is_relative() {
        Path::new(".").join(path)
    } else {
        path.to_path_buf()
    }
}

/// A short failure reason for an API client from a tool's stderr: the last
/// few distinct messages, without log prefixes and without the server path.
fn client_reason(stderr: &[u8], input: &Path) -> String {
    let text = hide_input(&String::from_utf8_lossy(stderr), input);
    let mut messages: Vec<&str> = Vec::new();
    for message in text.lines().map(clean_message).filter(|m| !m.is_empty()) {
        messages.retain(|seen| *seen != message);
        messages.push(message);
    }
    let first_kept = messages.len().saturating_sub(MAX_REASON_LINES);
    let reason = messages[first_kept..].join("; ");
    if reason.is_empty() {
        return "the file could not be processed".to_owned();
    }
    shorten(&reason, MAX_REASON_CHARS)
}

/// Replaces every spelling of the input path the tools may echo.
fn hide_input(text: &str, input: &Path) -> String {
    let spellings = [
        file_url(input).to_string_lossy().into_owned(),
        local_arg(input).to_string_lossy().into_owned(),
        input.to_string_lossy().into_owned(),
    ];
    spellings
        .iter()
        .filter(|spelling| !spelling.is_empty())
        .fold(text.to_owned(), |text, spelling| {
            text.replace(spelling.as_str(), "the file")
        })
}

/// A stderr line without ffmpeg's `[demuxer @ 0x…]` prefix.
fn clean_message(line: &str) -> &str {
    let line = line.trim();
    match line
        .strip_prefix('[')
        .and_then(|rest| rest.split_once("] "))
    {
        Some((_, message)) => message.trim(),
        None => line,
    }
}

/// `text` cut to at most `max_chars` characters, marked with `…` when cut.
fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A scratch directory removed when the test ends (the crate has no
    /// `tempfile` dev-dependency).
    struct ScratchDir(PathBuf);

    impl ScratchDir {
        fn new(test: &str) -> Self {
            let pid = std::process::id();
            let dir = std::env::temp_dir().join(format!("poster-test-{pid}-{test}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for ScratchDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Whether every program answers `-v`. `.ci/run` installs ffmpeg and
    /// poppler-utils, so a missing one fails the test rather than skipping it.
    fn installed(programs: &[&str]) -> bool {
        let missing: Vec<&&str> = programs
            .iter()
            .filter(|program| {
                std::process::Command::new(program)
                    .arg("-v")
                    .output()
                    .is_err()
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{missing:?} not installed: .ci/run installs ffmpeg and poppler-utils"
        );
        true
    }

    /// A 2 s, 320×240, 10 fps test pattern as H.264 MP4 (MPEG-4 part 2 when
    /// libx264 is not available).
    async fn sample_mp4(dir: &ScratchDir) -> PathBuf {
        let path = dir.file("sample.mp4");
        for codec in ["libx264", "mpeg4"] {
            let status = Command::new("ffmpeg")
                .args(["-nostdin", "-v", "error", "-y", "-f", "lavfi"])
                .args(["-i", "testsrc=duration=2:size=320x240:rate=10"])
                .args(["-pix_fmt", "yuv420p", "-c:v", codec])
                .arg(&path)
                .status()
                .await
                .unwrap();
            if status.success() {
                return path;
            }
        }
        panic!("ffmpeg could not encode the sample video");
    }

    /// A one-page PDF (200×100 pt, a blue rectangle) with a correct xref.
    fn sample_pdf() -> Vec<u8> {
        let content = "0 0 1 rg 20 20 160 60 re f";
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R >>".to_owned(),
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            ),
        ];
        let mut pdf = String::from("%PDF-1.4\n");
        let mut offsets = Vec::new();
        for (index, object) in objects.iter().enumerate() {
            offsets.push(pdf.len());
            let number = index + 1;
            pdf.push_str(&format!("{number} 0 obj\n{object}\nendobj\n"));
        }
        let xref_at = pdf.len();
        let count = objects.len() + 1;
        pdf.push_str(&format!("xref\n0 {count}\n0000000000 65535 f \n"));
        for offset in offsets {
            pdf.push_str(&format!("{offset:010} 00000 n \n"));
        }
        pdf.push_str(&format!(
            "trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref_at}\n%%EOF\n"
        ));
        pdf.into_bytes()
    }

    fn assert_unreadable<T: std::fmt::Debug>(result: Result<T, PosterError>, dir: &ScratchDir) {
        match result {
            Err(PosterError::Unreadable(reason)) => {
                assert!(!reason.is_empty());
                let dir = dir.0.to_string_lossy();
                assert!(!reason.contains(dir.as_ref()), "path leaked: {reason}");
            }
            other => panic!("expected Unreadable, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn probe_reads_duration_and_frame_size() {
        if !installed(&["ffmpeg", "ffprobe"]) {
            return;
        }
        let dir = ScratchDir::new("probe");
        let video = sample_mp4(&dir).await;
        let info = probe_video(&video).await.unwrap();
        assert!((info.duration_secs - 2.0).abs() < 0.1, "{info:?}");
        assert_eq!((info.width, info.height), (320, 240));
    }

    #[tokio::test]
    async fn poster_is_a_png_of_the_source_size() {
        if !installed(&["ffmpeg", "ffprobe"]) {
            return;
        }
        let dir = ScratchDir::new("poster");
        let video = sample_mp4(&dir).await;
        let info = probe_video(&video).await.unwrap();
        let png = video_poster(&video, &info).await.unwrap();
        assert_eq!(image::guess_format(&png).unwrap(), image::ImageFormat::Png);
        let poster = image::load_from_memory(&png).unwrap();
        assert_eq!((poster.width(), poster.height()), (320, 240));
    }

    #[tokio::test]
    async fn poster_falls_back_to_the_first_frame_past_the_end() {
        if !installed(&["ffmpeg"]) {
            return;
        }
        let dir = ScratchDir::new("overlong");
        let video = sample_mp4(&dir).await;
        let claimed = VideoInfo {
            duration_secs: 600.0,
            width: 320,
            height: 240,
        };
        // Only the declared duration is wrong; 3 s is past the 2 s video.
        let png = video_poster(&video, &claimed).await.unwrap();
        assert!(image::load_from_memory(&png).is_ok());
    }

    #[tokio::test]
    async fn truncated_and_garbage_videos_are_unreadable() {
        if !installed(&["ffmpeg", "ffprobe"]) {
            return;
        }
        let dir = ScratchDir::new("badvideo");
        let video = sample_mp4(&dir).await;
        let bytes = std::fs::read(&video).unwrap();
        let truncated = dir.file("truncated.mp4");
        std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
        let garbage = dir.file("garbage.mp4");
        std::fs::write(&garbage, b"this is not a video at all").unwrap();
        let info = VideoInfo {
            duration_secs: 2.0,
            width: 320,
            height: 240,
        };
        for path in [&truncated, &garbage] {
            assert_unreadable(probe_video(path).await, &dir);
            assert_unreadable(video_poster(path, &info).await, &dir);
        }
    }

    #[tokio::test]
    async fn pdf_first_page_renders_to_the_long_edge() {
        if !installed(&["pdftoppm"]) {
            return;
        }
        let dir = ScratchDir::new("pdf");
        let pdf = dir.file("sample.pdf");
        std::fs::write(&pdf, sample_pdf()).unwrap();
        let png = pdf_first_page(&pdf).await.unwrap();
        let page = image::load_from_memory(&png).unwrap();
        assert!(page.width() > 0);
        assert_eq!(
            (page.width(), page.height()),
            (PDF_LONG_EDGE, PDF_LONG_EDGE / 2)
        );
    }

    #[tokio::test]
    async fn garbage_pdf_is_unreadable() {
        if !installed(&["pdftoppm"]) {
            return;
        }
        let dir = ScratchDir::new("badpdf");
        let pdf = dir.file("garbage.pdf");
        std::fs::write(&pdf, b"%PDF-1.4\nthis is not really a PDF").unwrap();
        assert_unreadable(pdf_first_page(&pdf).await, &dir);
    }

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

    #[test]
    fn poster_offset_is_a_tenth_capped_at_three_seconds() {
        assert_eq!(poster_offset(0.5), 0.0);
        assert_eq!(poster_offset(f64::NAN), 0.0);
        assert!((poster_offset(2.0) - 0.2).abs() < 1e-9);
        assert!((poster_offset(600.0) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn client_reason_hides_the_path_and_log_prefixes() {
        let input = Path::new("/srv/media/tenant-a/upload.mp4");
        let stderr = b"[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d1] moov atom not found\n\
            file:/srv/media/tenant-a/upload.mp4: Invalid data found when processing input\n";
        let reason = client_reason(stderr, input);
        assert_eq!(
            reason,
            "moov atom not found; the file: Invalid data found when processing input"
        );
        let long = "x".repeat(1000);
        assert_eq!(
            client_reason(long.as_bytes(), input).chars().count(),
            MAX_REASON_CHARS + 1
        );
        assert_eq!(client_reason(b"", input), "the file could not be processed");
    }

    #[test]
    fn probe_report_without_video_stream_is_unreadable() {
        let json = br#"{"streams": [], "format": {"duration": "3.0"}}"#;
        assert!(matches!(
            parse_probe_report(json),
            Err(PosterError::Unreadable(_))
        ));
        let json = br#"{"streams": [{"width": 64, "height": 48, "duration": "1.5"}]}"#;
        let info = parse_probe_report(json).unwrap();
        assert_eq!(
            info,
            VideoInfo {
                duration_secs: 1.5,
                width: 64,
                height: 48
            }
        );
    }
}
