//! Videos: duration and frame size read with `ffprobe -of json`, and one
//! poster frame grabbed with `ffmpeg` (command line built by ffmpeg-sidecar).

use std::path::Path;

use ffmpeg_sidecar::command::FfmpegCommand;
use serde::Deserialize;
use tokio::process::Command;

use super::error::PosterError;
use super::input::file_url;
use super::reason::{non_empty, unreadable};
use super::runner::{Limits, MAX_IMAGE_BYTES, Tool, run_tool};

/// The largest `ffprobe` report accepted; a real one is a few hundred bytes.
const MAX_PROBE_BYTES: usize = 1024 * 1024;
/// The longest edge of a video poster; smaller videos keep their size.
const MAX_POSTER_EDGE: u32 = 3840;
/// Share of the duration at which the poster frame is taken.
const POSTER_SHARE: f64 = 0.1;
/// The poster frame is taken at most this many seconds in.
const MAX_POSTER_OFFSET_SECS: f64 = 3.0;
/// Clips shorter than this many seconds use their first frame.
const SHORT_CLIP_SECS: f64 = 1.0;

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::PathBuf;

    use super::super::fixtures::{ScratchDir, assert_unreadable, installed};
    use super::*;

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

    #[test]
    fn poster_offset_is_a_tenth_capped_at_three_seconds() {
        assert_eq!(poster_offset(0.5), 0.0);
        assert_eq!(poster_offset(f64::NAN), 0.0);
        assert!((poster_offset(2.0) - 0.2).abs() < 1e-9);
        assert!((poster_offset(600.0) - 3.0).abs() < 1e-9);
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
