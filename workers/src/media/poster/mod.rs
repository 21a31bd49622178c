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
//!
//! The runner lives in `runner`, the client-safe failure reasons in `reason`,
//! the spelling of the input path in `input`; `video` and `pdf` build the
//! command lines.

mod error;
mod input;
mod pdf;
mod reason;
mod runner;
mod video;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fixtures;

pub use error::PosterError;
pub use pdf::pdf_first_page;
pub use video::{VideoInfo, probe_video, video_poster};
