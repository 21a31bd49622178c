//! Formats are told by content: ISO base media that is not MP4 video is
//! refused, and neither the file name nor the declared type counts.

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::TestApp;

use super::*;
use crate::support::expect_error;

/// The start of an ISO base media file: an `ftyp` box with `brands` (major
/// first), then filler standing in for the rest of the file.
fn iso_bmff(brands: &[&[u8; 4]]) -> Vec<u8> {
    let size = u32::try_from(16 + 4 * brands.len()).unwrap();
    let mut bytes = size.to_be_bytes().to_vec();
    bytes.extend_from_slice(b"ftyp");
    bytes.extend_from_slice(brands[0]);
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    for brand in brands {
        bytes.extend_from_slice(*brand);
    }
    bytes.extend_from_slice(&[0, 0, 0, 16]);
    bytes.extend_from_slice(b"mdat");
    bytes.resize(4096, 0x5a);
    bytes
}

#[tokio::test]
async fn formats_are_judged_by_content_not_by_name_or_declared_type() {
    let app = TestApp::builder(tests::Backend::Sqlite).spawn().await;
    let media = Media::with_scopes(app, &[Scope::MediaWrite]).await;
    // ISO base media that is not MP4 video: HEIC, AVIF, QuickTime, M4A.
    for (name, bytes) in [
        ("photo.heic", iso_bmff(&[b"heic", b"mif1", b"heic"])),
        ("photo.mp4", iso_bmff(&[b"heix", b"mif1"])),
        ("image.avif", iso_bmff(&[b"avif", b"mif1", b"miaf"])),
        ("clip.mov", iso_bmff(&[b"qt  "])),
        ("song.m4a", iso_bmff(&[b"M4A ", b"mp42", b"isom"])),
    ] {
        let response = media
            .upload(&[Part::Typed("files", name, "video/mp4", bytes)])
            .await;
        expect_error(
            response,
            StatusCode::BAD_REQUEST,
            "upload.unsupported_format",
        )
        .await;
    }
    // HTML is not a JPEG for being named and declared one.
    let response = media
        .upload(&[Part::Typed(
            "files",
            "x.jpg",
            "image/jpeg",
            b"<!doctype html><html><body><script>alert(1)</script></body></html>".to_vec(),
        )])
        .await;
    expect_error(
        response,
        StatusCode::BAD_REQUEST,
        "upload.unsupported_format",
    )
    .await;
    assert!(stored_files(&media.media_dir()).is_empty());

    // PNG bytes named and declared JPEG are a PNG.
    let response = media
        .upload(&[Part::Typed("files", "photo.jpg", "image/jpeg", png(40, 30))])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["files"][0]["filename"], "photo.jpg");
    assert_eq!(body["files"][0]["detected_type"], "png");
    assert_eq!(body["files"][0]["content_type"], "image/png");

    // A real MP4 (ffmpeg's brands: isom, iso2, avc1, mp41) is still one.
    let dir = tempfile::tempdir().unwrap();
    let video = dir.path().join("clip.bin");
    let made = std::process::Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "testsrc=duration=1:size=64x48:rate=5",
            "-pix_fmt",
            "yuv420p",
            "-f",
            "mp4",
        ])
        .arg(&video)
        .status()
        .expect("ffmpeg is installed by scripts/test");
    assert!(made.success());
    let response = media
        .upload(&[Part::Typed(
            "files",
            "clip.bin",
            "application/octet-stream",
            std::fs::read(&video).unwrap(),
        )])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["files"][0]["detected_type"], "mp4");
    assert_eq!(body["files"][0]["content_type"], "video/mp4");
}
