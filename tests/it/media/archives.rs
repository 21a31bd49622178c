//! Archives: a ZIP of the chosen originals, written by a job and downloaded
//! through a signed URL (pre-signed when written to the bucket, which also
//! takes local items); refusals name the field, another agency's media and
//! archives are not the caller's.

use std::io::Cursor;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::{backend_tests, idempotency_key};

use super::bucket::{PREFIX, bucket_keys, bucket_object, data_dir_keys, fetch, with_s3};
use super::*;
use crate::support::expect_error;

backend_tests! {
    async fn an_archive_zips_the_originals_and_is_downloadable_when_written(backend) {
        let media = Media::new(backend).await;
        let front = jpeg(320, 240);
        let pdf = minimal_pdf();
        let response = media
            .upload(&[
                Part::File("files", "front.jpg", front.clone()),
                Part::File("files", "front.jpg", jpeg(64, 64)),
                Part::File("files", "brochure.pdf", pdf.clone()),
            ])
            .await;
        let uploaded: Value = response.json().await.unwrap();
        let ids: Vec<Value> = uploaded["files"].as_array().unwrap().iter().map(|f| f["media_id"].clone()).collect();
        let archive = |body: Value| {
            media
                .ctx
                .app
                .client
                .post(media.ctx.app.url("/api/v1/media/archive"))
                .header("X-API-Key", &media.key)
                .header("X-Idempotency-Key", idempotency_key())
                .json(&body)
                .send()
        };
        let queued = archive(serde_json::json!({"file_ids": ids, "archive_name": "Elm Street photos"})).await.unwrap();
        assert_eq!(queued.status(), StatusCode::ACCEPTED);
        let queued: Value = queued.json().await.unwrap();
        assert_eq!(queued["status"], "processing");
        let events = media.events(&media.local(queued["progress_url"].as_str().unwrap()), None).await;
        assert_eq!(events.last().unwrap().0, "completed", "{events:?}");
        let operation_id = queued["operation_id"].as_str().unwrap();
        let read = media
            .ctx
            .app
            .get(&format!("/api/v1/media/archive/{operation_id}"))
            .header("X-API-Key", &media.key)
            .send()
            .await
            .unwrap();
        let read: Value = read.json().await.unwrap();
        assert_eq!(read["status"], "completed");
        let url = read["download_url"].as_str().unwrap();
        let local = media.ctx.app.url(&format!("/api/v1/media/{}", url.split_once("/api/v1/media/").unwrap().1));
        let download = media.ctx.app.client.get(&local).send().await.unwrap();
        assert_eq!(download.status(), StatusCode::OK);
        assert_eq!(download.headers()["content-type"], "application/zip");
        let bytes = download.bytes().await.unwrap();
        assert_eq!(read["size_bytes"].as_u64().unwrap() as usize, bytes.len());
        let mut zip = zip::ZipArchive::new(Cursor::new(bytes.to_vec())).unwrap();
        let names: Vec<String> = (0..zip.len()).map(|i| zip.by_index(i).unwrap().name().unwrap().to_string()).collect();
        assert_eq!(names, ["front.jpg", "front (2).jpg", "brochure.pdf"]);
        let mut first = Vec::new();
        std::io::Read::read_to_end(&mut zip.by_name("front.jpg").unwrap(), &mut first).unwrap();
        assert_eq!(first, front);
        let mut document = Vec::new();
        std::io::Read::read_to_end(&mut zip.by_name("brochure.pdf").unwrap(), &mut document).unwrap();
        assert_eq!(document, pdf);
        let tampered = local.replace("signature=", "signature=x");
        expect_error(media.ctx.app.client.get(&tampered).send().await.unwrap(), StatusCode::NOT_FOUND, "operation_not_found").await;

        // Refusals name the field; another agency's media is not the caller's.
        let other = media.ctx.app.agency().await;
        let other_key = media.ctx.app.key(&other, &[Scope::MediaWrite]).await;
        let foreign = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/archive"))
            .header("X-API-Key", &other_key)
            .header("X-Idempotency-Key", idempotency_key())
            .json(&serde_json::json!({"file_ids": [ids[0]], "archive_name": "x"}))
            .send()
            .await
            .unwrap();
        let body = expect_error(foreign, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert!(body["error"]["details"]["fields"]["file_ids[0]"].is_string());
        let unreadable = media.ctx.app.get(&format!("/api/v1/media/archive/{operation_id}")).header("X-API-Key", &other_key).send().await.unwrap();
        expect_error(unreadable, StatusCode::NOT_FOUND, "operation_not_found").await;
        for (body, field) in [
            (serde_json::json!({"file_ids": [], "archive_name": "x"}), "file_ids"),
            (serde_json::json!({"file_ids": [ids[0]], "archive_name": "../etc"}), "archive_name"),
            (serde_json::json!({"file_ids": ["med_nope"], "archive_name": "x"}), "file_ids[0]"),
        ] {
            let body = expect_error(archive(body).await.unwrap(), StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(body["error"]["details"]["fields"][field].is_string(), "{body}");
        }
    }
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

#[tokio::test]
async fn an_archive_the_queue_did_not_take_is_a_503_to_repeat_and_fails_its_operation() {
    let media = Media::new(tests::Backend::Sqlite).await;
    let uploaded: Value = media
        .upload(&[Part::File("files", "front.jpg", jpeg(120, 80))])
        .await
        .json()
        .await
        .unwrap();
    let body = serde_json::json!({
        "file_ids": [uploaded["files"][0]["media_id"]],
        "archive_name": "front",
    });
    let key = idempotency_key();
    let archive = || {
        media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/archive"))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", &key)
            .json(&body)
            .send()
    };
    media.ctx.app.refuse_jobs("media_archive", true).await;
    let refused = archive().await.unwrap();
    assert_eq!(refused.headers()["retry-after"], "1");
    let refused = expect_error(refused, StatusCode::SERVICE_UNAVAILABLE, "server.not_ready").await;
    assert_eq!(refused["error"]["details"]["component"], "job queue");
    let operations = crate::support::sql::count_for_agency(
        media.ctx.app.store.db(),
        "media_operations",
        media.ctx.agency.id.as_str(),
    )
    .await;
    assert_eq!(operations, 2, "the upload's and the failed archive's");

    // The same request again, once the queue is back, is a new archive.
    media.ctx.app.refuse_jobs("media_archive", false).await;
    let accepted = archive().await.unwrap();
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
    let accepted: Value = accepted.json().await.unwrap();
    let done = archive_when_done(&media, accepted["operation_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
}
