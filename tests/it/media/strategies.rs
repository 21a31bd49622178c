//! Where media go, against a real S3-compatible server (`s3s-fs`): `local`
//! keeps everything in the data directory even with a bucket configured,
//! `hybrid` writes both, a `storage_strategy` after the files is refused with
//! nothing left anywhere, `enable_optimization=false` keeps the original and
//! makes no variant, and an archive of bucket and local media is written to
//! the bucket and downloaded through its pre-signed URL.

use reqwest::StatusCode;
use serde_json::Value;
use storage::events::EventType;
use storage::objects::object_store::path::Path as ObjectPath;
use storage::objects::object_store::{ObjectStore, ObjectStoreExt};
use tests::TestApp;
use tests::s3::S3Server;

use super::*;
use crate::support::expect_error;

/// The prefix the app's bucket target writes under.
const PREFIX: &str = "agencies";

/// An app whose configured object store is `s3://<bucket>/agencies` on a
/// fresh server, with workers, and a key that uploads and reads listings.
async fn with_s3() -> (S3Server, Media) {
    let s3 = S3Server::start().await;
    let app = TestApp::builder(tests::Backend::Sqlite)
        .with_workers()
        .media_target(s3.target(Some(PREFIX)))
        .spawn()
        .await;
    (s3, Media::on(app).await)
}

/// Every key in the bucket (read through S3, so the server's own metadata
/// files do not count), sorted.
async fn bucket_keys(s3: &S3Server) -> Vec<String> {
    let media = s3.media();
    let listed: Vec<_> = media.store().list(None).collect().await;
    let mut keys: Vec<String> = listed
        .into_iter()
        .map(|meta| meta.expect("list the bucket").location.to_string())
        .collect();
    keys.sort();
    keys
}

/// An object of the bucket, by its key under [`PREFIX`].
async fn bucket_object(s3: &S3Server, key: &str) -> Vec<u8> {
    let media = s3.media();
    let path = ObjectPath::from(format!("{PREFIX}/{key}"));
    let object = media.store().get(&path).await.unwrap_or_else(|err| {
        panic!("{key} is not in the bucket: {err}");
    });
    object.bytes().await.unwrap().to_vec()
}

/// The data directory's media objects, as keys relative to it, sorted.
fn data_dir_keys(media: &Media) -> Vec<String> {
    let dir = media.media_dir();
    let mut keys: Vec<String> = stored_files(&dir)
        .into_iter()
        .map(|path| {
            path.strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    keys.sort();
    keys
}

/// The object keys an item's rows name: its original and its variants.
async fn item_keys(media: &Media, media_id: &str) -> (String, Vec<String>) {
    let id = storage::ids::MediaId::parse(media_id).unwrap();
    let item = media
        .ctx
        .app
        .store
        .media()
        .item(&media.ctx.live(), &id)
        .await
        .unwrap();
    let variants = item.variants.iter().map(|v| v.object_key.clone()).collect();
    (item.object_key, variants)
}

/// GETs `url` with a client that carries no key and no cookie.
async fn fetch(url: &str) -> reqwest::Response {
    tests::app::base_client()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap()
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

#[tokio::test]
async fn without_optimization_the_original_is_kept_and_no_variant_made() {
    let (s3, media) = with_s3().await;
    let number = media.ctx.listing().await;
    let photo = jpeg(900, 600);
    let pdf = minimal_pdf();
    // Unlike storage_strategy, the flag may come after the files.
    let body = upload_and_wait(
        &media,
        &number,
        &[
            Part::File("files", "front.jpg", photo.clone()),
            Part::File("files", "brochure.pdf", pdf.clone()),
            Part::Field("enable_optimization", "false"),
        ],
    )
    .await;
    let operation_id = body["operation_id"].as_str().unwrap();
    // Every file is ready, with no variant; nothing but originals is stored.
    let items = listing_media(&media, &number).await;
    assert_eq!(items.len(), 2);
    for item in &items {
        assert_eq!(item["status"], "ready", "{item}");
        assert!(item["variants"].as_array().unwrap().is_empty(), "{item}");
    }
    let mut originals = Vec::new();
    for (file, uploaded) in body["files"].as_array().unwrap().iter().zip([&photo, &pdf]) {
        let (original_key, variant_keys) =
            item_keys(&media, file["media_id"].as_str().unwrap()).await;
        assert!(variant_keys.is_empty());
        assert_eq!(&bucket_object(&s3, &original_key).await, uploaded);
        originals.push(format!("{PREFIX}/{original_key}"));
    }
    originals.sort();
    assert_eq!(bucket_keys(&s3).await, originals, "only the originals");
    assert!(data_dir_keys(&media).is_empty());
    // Progress ends with the operation completed, each file ready and bare.
    let events = media
        .events(
            &media
                .ctx
                .app
                .url(&format!("/api/v1/progress/{operation_id}")),
            Some(&media.key),
        )
        .await;
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "completed");
    assert_eq!(data["operation"]["status"], "completed");
    for file in data["operation"]["files"].as_array().unwrap() {
        assert_eq!(file["status"], "ready", "{file}");
        assert!(file["variants"].as_array().unwrap().is_empty(), "{file}");
    }
    // The completion event lists the files, ready, each with no variants.
    let completed = media.ctx.events_of(EventType::MediaUploadCompleted).await;
    assert_eq!(completed.len(), 1);
    for file in completed[0].data["files"].as_array().unwrap() {
        assert_eq!(file["status"], "ready", "{file}");
        assert!(file["variants"].as_array().unwrap().is_empty(), "{file}");
    }
    // An unreadable value is refused.
    let response = media
        .upload(&[
            Part::Field("enable_optimization", "maybe"),
            Part::File("files", "front.jpg", jpeg(32, 32)),
        ])
        .await;
    let refused = expect_error(
        response,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert!(refused["error"]["details"]["fields"]["enable_optimization"].is_string());
}

/// Reads an archive operation until it is no longer `processing`.
async fn archive_when_done(media: &Media, operation_id: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let response = media
            .ctx
            .app
            .get(&format!("/api/v1/media/archive/{operation_id}"))
            .header("X-API-Key", &media.key)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let read: Value = response.json().await.unwrap();
        if read["status"] != "processing" {
            return read;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the archive is still processing after 60 s: {read}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_archive_is_written_to_the_bucket_and_downloads_presigned() {
    let (s3, media) = with_s3().await;
    let number = media.ctx.listing().await;
    let front = jpeg(320, 240);
    let back = png(200, 100);
    let pdf = minimal_pdf();
    let cloud = upload_and_wait(
        &media,
        &number,
        &[
            Part::File("files", "front.jpg", front.clone()),
            Part::File("files", "brochure.pdf", pdf.clone()),
        ],
    )
    .await;
    // A local item is read from the data directory into the same archive.
    let local = upload_and_wait(
        &media,
        &number,
        &[
            Part::Field("storage_strategy", "local"),
            Part::File("files", "back.png", back.clone()),
        ],
    )
    .await;
    let ids: Vec<Value> = cloud["files"]
        .as_array()
        .unwrap()
        .iter()
        .chain(local["files"].as_array().unwrap())
        .map(|file| file["media_id"].clone())
        .collect();
    let before: Vec<String> = bucket_keys(&s3).await;
    let queued = media
        .ctx
        .app
        .client
        .post(media.ctx.app.url("/api/v1/media/archive"))
        .header("X-API-Key", &media.key)
        .header("X-Idempotency-Key", idempotency_key())
        .json(&serde_json::json!({"file_ids": ids, "archive_name": "Elm Street"}))
        .send()
        .await
        .unwrap();
    assert_eq!(queued.status(), StatusCode::ACCEPTED);
    let queued: Value = queued.json().await.unwrap();
    let operation_id = queued["operation_id"].as_str().unwrap();
    let read = archive_when_done(&media, operation_id).await;
    assert_eq!(read["status"], "completed", "{read}");

    // The ZIP is the one new object in the bucket, under the archives.
    let after = bucket_keys(&s3).await;
    let added: Vec<&String> = after.iter().filter(|key| !before.contains(key)).collect();
    let agency = media.ctx.agency.id.as_str();
    assert_eq!(
        added,
        [&format!(
            "{PREFIX}/{agency}/live/archives/{operation_id}/Elm Street.zip"
        )],
        "{after:?}"
    );
    let stored = bucket_object(
        &s3,
        &format!("{agency}/live/archives/{operation_id}/Elm Street.zip"),
    )
    .await;
    assert!(
        !data_dir_keys(&media)
            .iter()
            .any(|key| key.contains("archives")),
        "no archive in the data directory"
    );

    let url = read["download_url"].as_str().unwrap();
    assert!(
        url.starts_with(s3.endpoint()) && url.contains("X-Amz-Signature"),
        "pre-signed: {url}"
    );
    assert!(read["download_expires_at"].is_string());
    let download = fetch(url).await;
    assert_eq!(download.status(), StatusCode::OK);
    let bytes = download.bytes().await.unwrap();
    assert_eq!(bytes.as_ref(), stored.as_slice());
    assert_eq!(read["size_bytes"].as_u64().unwrap() as usize, bytes.len());
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes.to_vec())).unwrap();
    let names: Vec<String> = (0..zip.len())
        .map(|i| zip.by_index(i).unwrap().name().unwrap().to_string())
        .collect();
    assert_eq!(names, ["front.jpg", "brochure.pdf", "back.png"]);
    for (name, original) in [
        ("front.jpg", &front),
        ("brochure.pdf", &pdf),
        ("back.png", &back),
    ] {
        let mut entry = Vec::new();
        std::io::Read::read_to_end(&mut zip.by_name(name).unwrap(), &mut entry).unwrap();
        assert_eq!(&entry, original, "{name} is the original byte for byte");
    }
    // A tampered pre-signed URL opens nothing.
    let (unsigned, signature) = url.split_once("X-Amz-Signature=").unwrap();
    let flipped = if signature.starts_with('0') { '1' } else { '0' };
    let tampered = format!("{unsigned}X-Amz-Signature={flipped}{}", &signature[1..]);
    assert_eq!(fetch(&tampered).await.status(), StatusCode::FORBIDDEN);
}
