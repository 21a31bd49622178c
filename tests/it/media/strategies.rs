//! Where media go, against a real S3-compatible server (`s3s-fs`): `cloud`
//! keeps the original and its variants in the bucket with pre-signed
//! downloads, `local` keeps everything in the data directory even with a
//! bucket configured, `hybrid` writes both, and a `storage_strategy` after the
//! files is refused with nothing left anywhere.

use reqwest::StatusCode;
use serde_json::Value;
use storage::rules::events::EventType;
use tests::TestApp;
use tests::s3::S3Server;

use super::bucket::{PREFIX, bucket_keys, bucket_object, data_dir_keys, fetch, item_keys, with_s3};
use super::*;
use crate::support::expect_error;

#[tokio::test]
async fn uploads_to_s3_keep_originals_and_variants_in_the_bucket() {
    let s3 = tests::s3::S3Server::start().await;
    let app = TestApp::builder(tests::Backend::Sqlite)
        .with_workers()
        .media_target(s3.target(Some("agencies")))
        .spawn()
        .await;
    let media = Media::on(app).await;
    let number = media.ctx.listing().await;
    upload_and_wait(
        &media,
        &number,
        &[Part::File("files", "front.jpg", jpeg(640, 480))],
    )
    .await;
    assert!(
        stored_files(&media.media_dir()).is_empty(),
        "cloud objects are not in the data directory"
    );
    // The server keeps its own metadata files beside the bucket's directory.
    let in_bucket: Vec<_> = stored_files(&s3.root())
        .into_iter()
        .filter(|path| path.to_string_lossy().contains("/media-test/agencies/"))
        .collect();
    assert_eq!(
        in_bucket.len(),
        7,
        "the original and six variants: {in_bucket:?}"
    );
    let items = listing_media(&media, &number).await;
    let thumbnail = items[0]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "thumbnail")
        .unwrap();
    let url = thumbnail["url"].as_str().unwrap();
    assert!(
        url.starts_with(s3.endpoint()) && url.contains("X-Amz-Signature"),
        "pre-signed: {url}"
    );
    let bytes = tests::app::base_client()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let decoded = image::load_from_memory(&bytes).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (150, 150));
}

/// Downloads every variant of a listing read's item through its signed
/// `url` and checks it decodes at its stated size. `presigned` says whether
/// the URLs must be S3 pre-signed ones (else the API's signed route).
async fn download_variants(media: &Media, s3: &S3Server, item: &Value, presigned: bool) {
    let variants = item["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 6, "{item}");
    for variant in variants {
        let url = variant["url"].as_str().unwrap();
        let url = if presigned {
            assert!(
                url.starts_with(s3.endpoint()) && url.contains("X-Amz-Signature"),
                "pre-signed: {url}"
            );
            url.to_owned()
        } else {
            assert!(
                !url.starts_with(s3.endpoint()) && url.contains("/api/v1/media/"),
                "the API's signed route: {url}"
            );
            media.ctx.app.url(&format!(
                "/api/v1/media/{}",
                url.split_once("/api/v1/media/").unwrap().1
            ))
        };
        let response = fetch(&url).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{}: {url}",
            variant["name"]
        );
        let bytes = response.bytes().await.unwrap();
        assert_eq!(
            bytes.len() as u64,
            variant["size_bytes"].as_u64().unwrap(),
            "{}",
            variant["name"]
        );
        let decoded = image::load_from_memory(&bytes).unwrap();
        assert_eq!(
            (u64::from(decoded.width()), u64::from(decoded.height())),
            (
                variant["width"].as_u64().unwrap(),
                variant["height"].as_u64().unwrap()
            ),
            "{}",
            variant["name"]
        );
    }
}

#[tokio::test]
async fn local_strategy_keeps_everything_in_the_data_directory_despite_s3() {
    let (s3, media) = with_s3().await;
    let number = media.ctx.listing().await;
    let original = jpeg(900, 600);
    let body = upload_and_wait(
        &media,
        &number,
        &[
            Part::Field("storage_strategy", "local"),
            Part::File("files", "front.jpg", original.clone()),
        ],
    )
    .await;
    assert_eq!(body["storage_strategy"], "local");
    assert!(
        bucket_keys(&s3).await.is_empty(),
        "nothing of a local upload is in the bucket: {:?}",
        bucket_keys(&s3).await
    );
    let media_id = body["files"][0]["media_id"].as_str().unwrap();
    let (original_key, variant_keys) = item_keys(&media, media_id).await;
    assert_eq!(variant_keys.len(), 6);
    let mut expected: Vec<String> = variant_keys.clone();
    expected.push(original_key.clone());
    expected.sort();
    assert_eq!(
        data_dir_keys(&media),
        expected,
        "the original and six variants"
    );
    let kept = std::fs::read(media.media_dir().join(&original_key)).unwrap();
    assert_eq!(kept, original, "the original is kept byte for byte");

    let items = listing_media(&media, &number).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["status"], "ready");
    assert_eq!(items[0]["storage_strategy"], "local");
    // Local objects are served by the API's signed route, not pre-signed S3.
    download_variants(&media, &s3, &items[0], false).await;
}

#[tokio::test]
async fn hybrid_strategy_writes_the_bucket_and_the_data_directory() {
    let (s3, media) = with_s3().await;
    let number = media.ctx.listing().await;
    let original = jpeg(900, 600);
    let body = upload_and_wait(
        &media,
        &number,
        &[
            Part::Field("storage_strategy", "hybrid"),
            Part::File("files", "front.jpg", original.clone()),
        ],
    )
    .await;
    assert_eq!(body["storage_strategy"], "hybrid");
    let media_id = body["files"][0]["media_id"].as_str().unwrap();
    let (original_key, variant_keys) = item_keys(&media, media_id).await;
    assert_eq!(variant_keys.len(), 6);
    let mut expected: Vec<String> = variant_keys.clone();
    expected.push(original_key.clone());
    expected.sort();
    assert_eq!(data_dir_keys(&media), expected, "all seven in the data dir");
    let in_bucket: Vec<String> = expected
        .iter()
        .map(|key| format!("{PREFIX}/{key}"))
        .collect();
    assert_eq!(bucket_keys(&s3).await, in_bucket, "all seven in the bucket");
    // The two copies are the same bytes, and the original is the upload.
    for key in &expected {
        let local = std::fs::read(media.media_dir().join(key)).unwrap();
        assert_eq!(local, bucket_object(&s3, key).await, "{key}");
    }
    assert_eq!(bucket_object(&s3, &original_key).await, original);

    let items = listing_media(&media, &number).await;
    assert_eq!(items[0]["status"], "ready");
    assert_eq!(items[0]["storage_strategy"], "hybrid");
    // Hybrid items are read from the bucket: pre-signed URLs.
    download_variants(&media, &s3, &items[0], true).await;
}

#[tokio::test]
async fn a_storage_strategy_after_the_files_is_refused_and_leaves_nothing() {
    let (s3, media) = with_s3().await;
    let number = media.ctx.listing().await;
    let cases = [
        // The default (cloud) file went to the bucket before the late part.
        vec![
            Part::File("files", "front.jpg", jpeg(64, 64)),
            Part::Field("storage_strategy", "local"),
        ],
        // Hybrid files went to both places.
        vec![
            Part::Field("storage_strategy", "hybrid"),
            Part::File("files", "front.jpg", jpeg(64, 64)),
            Part::File("files", "back.jpg", jpeg(48, 48)),
            Part::Field("storage_strategy", "hybrid"),
        ],
        // Local files, then a late part naming the bucket.
        vec![
            Part::Field("listing_number", &number),
            Part::Field("storage_strategy", "local"),
            Part::File("files", "front.jpg", jpeg(64, 64)),
            Part::Field("storage_strategy", "cloud"),
        ],
    ];
    for parts in &cases {
        let response = media.upload(parts).await;
        let body = expect_error(
            response,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
        assert!(
            body["error"]["details"]["fields"]["storage_strategy"].is_string(),
            "{body}"
        );
        assert!(bucket_keys(&s3).await.is_empty(), "the bucket is empty");
        assert!(data_dir_keys(&media).is_empty(), "the data dir is empty");
        for table in ["media_items", "media_operations"] {
            let rows = crate::support::sql::count_for_agency(
                media.ctx.app.store.db(),
                table,
                media.ctx.agency.id.as_str(),
            )
            .await;
            assert_eq!(rows, 0, "no {table} row");
        }
    }
    assert!(
        media
            .ctx
            .events_of(EventType::MediaUploadCompleted)
            .await
            .is_empty()
    );
    assert!(listing_media(&media, &number).await.is_empty());
}

/// In the distributed profile the API and the workers may run on separate
/// hosts, each with its own data directory: a `local` original would be
/// unreadable to the worker that processes it and to every other API replica,
/// so it is refused before anything is stored.
#[tokio::test]
async fn the_distributed_profile_refuses_local_uploads_before_storing_anything() {
    use tests::deployment::{Deployment, serve};

    let deployment = Deployment::with_redis(tests::Backend::Postgres).await;
    let agency = deployment.admin_ok(&["create-agency", "--name", "Two hosts"]);
    let agency_id = agency["agency_id"].as_str().unwrap();
    let key = deployment.admin_ok(&[
        "create-key",
        "--agency",
        agency_id,
        "--name",
        "uploads",
        "--scopes",
        "listings:write,listings:read,media:write",
    ]);
    let client = tests::app::base_client().build().unwrap();
    let server = serve(&deployment, &["--no-workers"], &client, "http").await;
    let upload = |strategy: &'static str| {
        client
            .post(format!("{}/api/v1/media/upload", server.base_url))
            .header("X-API-Key", key["key"].as_str().unwrap())
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(multipart(&[
                Part::Field("storage_strategy", strategy),
                Part::File("files", "front.jpg", jpeg(64, 48)),
            ]))
            .send()
    };

    let body = expect_error(
        upload("local").await.unwrap(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    let reason = body["error"]["details"]["fields"]["storage_strategy"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("use cloud"), "says what to do: {body}");
    let media_dir = deployment
        .db
        .data_dir()
        .join(storage::objects::LOCAL_MEDIA_DIR);
    assert!(
        stored_files(&media_dir).is_empty(),
        "nothing was written: {:?}",
        stored_files(&media_dir)
    );
    let store = deployment.store().await;
    let rows = crate::support::sql::count_for_agency(store.db(), "media_items", agency_id).await;
    assert_eq!(rows, 0, "no media item was recorded");

    // The same upload in the cloud is accepted.
    assert_eq!(upload("cloud").await.unwrap().status(), StatusCode::OK);
}
