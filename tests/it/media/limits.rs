//! Upload limits while the body streams: too many files, a file or a request
//! too large, and a stalled body are refused, and what was already stored
//! is removed (on S3, the unfinished multipart upload is aborted).

use std::time::Duration;

use reqwest::StatusCode;
use storage::api_keys::Scope;
use tests::{TestApp, idempotency_key};

use super::*;
use crate::support::expect_error;

#[tokio::test]
async fn each_streaming_limit_refuses_the_request_and_removes_what_it_stored() {
    let limits = api::config::UploadLimits {
        max_files: 3,
        max_file_bytes: 1024 * 1024,
        max_request_bytes: 2 * 1024 * 1024 + 512 * 1024,
        timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let app = TestApp::builder(tests::Backend::Sqlite)
        .upload_limits(limits)
        .spawn()
        .await;
    let media = Media::with_scopes(app, &[Scope::MediaWrite]).await;
    let file = |bytes: usize| {
        let mut content = jpeg(16, 16);
        content.resize(bytes, 7);
        content
    };
    let cases = [
        (
            multipart(
                &(0..4)
                    .map(|_| Part::File("files", "a.jpg", file(1000)))
                    .collect::<Vec<_>>(),
            ),
            StatusCode::BAD_REQUEST,
            "upload.too_many_files",
        ),
        (
            multipart(&[
                Part::File("files", "a.jpg", file(1000)),
                Part::File("files", "big.jpg", file(1024 * 1024 + 1)),
            ]),
            StatusCode::PAYLOAD_TOO_LARGE,
            "upload.file_too_large",
        ),
        (
            multipart(
                &(0..3)
                    .map(|_| Part::File("files", "a.jpg", file(1024 * 1024)))
                    .collect::<Vec<_>>(),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "upload.request_too_large",
        ),
    ];
    for (body, status, code) in cases {
        let response = media
            .upload_to("/api/v1/media/upload", &media.key, &idempotency_key(), body)
            .await;
        expect_error(response, status, code).await;
        assert!(
            stored_files(&media.media_dir()).is_empty(),
            "{code} left objects behind"
        );
    }
    // A body that stalls past the timeout, after one whole file arrived.
    let complete = multipart(&[
        Part::File("files", "a.jpg", file(2000)),
        Part::File("files", "b.jpg", file(2000)),
    ]);
    let stalled = media
        .upload_stalling(complete, 2500, Duration::from_secs(4))
        .await;
    expect_error(stalled, StatusCode::REQUEST_TIMEOUT, "upload.timeout").await;
    assert!(
        stored_files(&media.media_dir()).is_empty(),
        "the timed-out upload's first file was removed"
    );
}

#[tokio::test]
async fn a_timed_out_upload_to_s3_leaves_no_object_and_no_unfinished_multipart_upload() {
    let s3 = tests::s3::S3Server::start().await;
    let limits = api::config::UploadLimits {
        timeout: Duration::from_secs(2),
        ..api::config::UploadLimits::default()
    };
    let app = TestApp::builder(tests::Backend::Sqlite)
        .media_target(s3.target(Some("agencies")))
        .upload_limits(limits)
        .spawn()
        .await;
    let media = Media::with_scopes(app, &[Scope::MediaWrite]).await;
    // One whole file, then the start of a second one, then nothing.
    let complete = multipart(&[
        Part::File("files", "a.jpg", jpeg(64, 48)),
        Part::File("files", "b.jpg", jpeg(64, 48)),
    ]);
    let cut = complete.len() - 300;
    let stalled = media
        .upload_stalling(complete, cut, Duration::from_secs(4))
        .await;
    expect_error(stalled, StatusCode::REQUEST_TIMEOUT, "upload.timeout").await;
    // s3s-fs keeps objects under the bucket's directory and an unfinished
    // multipart upload as `.upload-<id>` files beside it.
    let left: Vec<_> = stored_files(&s3.root())
        .into_iter()
        .filter(|path| {
            let path = path.to_string_lossy();
            path.contains("/media-test/agencies/") || path.contains(".upload-")
        })
        .collect();
    assert!(
        left.is_empty(),
        "the first file removed, the second's multipart upload aborted: {left:?}"
    );
}
