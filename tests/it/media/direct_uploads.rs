//! Direct uploads (`/api/v1/direct-uploads`, the S3 profile) against a real
//! S3-compatible server (`s3s-fs`): a shoot's files sent by pre-signed part
//! URLs straight to the bucket become the listing's media with their
//! variants; the completion's checks (parts, size, format) and the worker's
//! of the declared sha256; termination and expiry have the store drop the
//! parts; another agency's upload, and the other door's, are 404.

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::{Clock, Timestamp};
use tests::TestApp;
use tests::s3::S3Server;
use workers::handlers::maintenance::Maintenance;

use super::bucket::{PREFIX, bucket_keys};
use super::*;
use crate::support::expect_error;

const PART: usize = 5 * 1024 * 1024;

async fn direct_app(backend: tests::Backend, clock: Option<Clock>) -> (S3Server, Media) {
    let s3 = S3Server::start().await;
    let mut builder = TestApp::builder(backend)
        .with_workers()
        .media_target(s3.target(Some(PREFIX)));
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    (s3, Media::on(builder.spawn().await).await)
}

impl Media {
    async fn direct(&self, body: &Value) -> reqwest::Response {
        self.ctx
            .app
            .client
            .post(self.ctx.app.url("/api/v1/direct-uploads"))
            .header("X-API-Key", &self.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(body)
            .send()
            .await
            .unwrap()
    }

    async fn direct_created(&self, body: &Value) -> Value {
        let response = self.direct(body).await;
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json().await.unwrap()
    }

    async fn direct_read(&self, upload: &Value) -> reqwest::Response {
        let id = upload["upload_id"].as_str().unwrap();
        self.ctx
            .app
            .get(&format!("/api/v1/direct-uploads/{id}"))
            .header("X-API-Key", &self.key)
            .send()
            .await
            .unwrap()
    }

    async fn direct_complete(&self, upload: &Value, parts: &[(i64, String)]) -> reqwest::Response {
        let id = upload["upload_id"].as_str().unwrap();
        let parts: Vec<Value> = parts
            .iter()
            .map(|(number, etag)| json!({"part_number": number, "etag": etag}))
            .collect();
        self.ctx
            .app
            .client
            .post(
                self.ctx
                    .app
                    .url(&format!("/api/v1/direct-uploads/{id}/complete")),
            )
            .header("X-API-Key", &self.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({ "parts": parts }))
            .send()
            .await
            .unwrap()
    }

    async fn direct_delete(&self, upload: &Value) -> reqwest::Response {
        let id = upload["upload_id"].as_str().unwrap();
        self.ctx
            .app
            .client
            .delete(self.ctx.app.url(&format!("/api/v1/direct-uploads/{id}")))
            .header("X-API-Key", &self.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .send()
            .await
            .unwrap()
    }
}

/// `PUT`s part `number` of `upload` (its bytes cut from `file` by the
/// upload's plan) to its pre-signed URL; the store's answer.
async fn put_part(upload: &Value, number: i64, file: &[u8]) -> reqwest::Response {
    let part = upload["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|part| part["part_number"] == number)
        .unwrap_or_else(|| panic!("no part {number} in {upload}"));
    let offset = part["offset"].as_u64().unwrap() as usize;
    let size = part["size_bytes"].as_u64().unwrap() as usize;
    let end = (offset + size).min(file.len());
    tests::app::base_client()
        .build()
        .unwrap()
        .put(part["url"].as_str().unwrap())
        .body(file[offset.min(end)..end].to_vec())
        .send()
        .await
        .unwrap()
}

/// Sends part `number` and returns the ETag the store answered.
async fn send_part(upload: &Value, number: i64, file: &[u8]) -> (i64, String) {
    let sent = put_part(upload, number, file).await;
    assert_eq!(sent.status(), StatusCode::OK, "part {number}");
    let etag = sent.headers()["etag"].to_str().unwrap().to_owned();
    (number, etag)
}

/// A photo of more than one 5 MiB part: a JPEG with padding after its end,
/// which decoders stop before.
fn large_photo() -> Vec<u8> {
    let mut photo = jpeg(1024, 768);
    photo.resize(PART + 123_456, 0);
    photo
}

fn declaration(filename: &str, file: &[u8]) -> Value {
    json!({
        "filename": filename,
        "size_bytes": file.len(),
        "sha256": tests::sha256_hex(file),
        "content_type": "image/jpeg",
    })
}

/// The bucket's keys under the uploads folders.
async fn upload_keys(s3: &S3Server) -> Vec<String> {
    bucket_keys(s3)
        .await
        .into_iter()
        .filter(|key| key.contains("/uploads/"))
        .collect()
}

tests::backend_tests! {
    async fn a_shoot_sent_straight_to_the_bucket_becomes_the_listings_media(backend) {
        let (s3, media) = direct_app(backend, None).await;
        let number = media.ctx.listing().await;
        let batch = media.ctx.app.client.post(media.ctx.app.url("/api/v1/upload-batches"))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({"file_count": 2, "listing_number": number}))
            .send().await.unwrap();
        assert_eq!(batch.status(), StatusCode::CREATED);
        let batch: Value = batch.json().await.unwrap();
        let batch_id = batch["batch_id"].as_str().unwrap();
        let stream = media.open_stream(&media.local(batch["progress_url"].as_str().unwrap()), None).await;

        let front = large_photo();
        let mut body = declaration("front.jpg", &front);
        body["batch_id"] = json!(batch_id);
        body["part_size"] = json!(PART);
        let first = media.direct_created(&body).await;
        assert_eq!(first["status"], "receiving");
        assert_eq!(first["part_count"], 2);
        assert_eq!(first["parts"][1]["offset"], PART);
        assert_eq!(first["parts"][1]["size_bytes"], 123_456);
        assert_eq!(first["batch_id"], batch_id);
        let url = first["parts"][0]["url"].as_str().unwrap();
        assert!(url.starts_with(s3.endpoint()) && url.contains("X-Amz-Signature") && url.contains("uploadId="), "{url}");
        // Out of order, as a client sending parts at once does.
        let second_part = send_part(&first, 2, &front).await;
        let first_part = send_part(&first, 1, &front).await;
        let completed = media.direct_complete(&first, &[second_part.clone(), first_part.clone()]).await;
        assert_eq!(completed.status(), StatusCode::OK);
        let completed: Value = completed.json().await.unwrap();
        assert_eq!(completed["status"], "completed");
        assert_eq!(completed["parts"], json!([]));
        let front_id = completed["media_id"].as_str().unwrap().to_owned();
        // Completing again answers the same item.
        let again = media.direct_complete(&first, &[first_part, second_part]).await;
        assert_eq!(again.status(), StatusCode::OK);
        assert_eq!(again.json::<Value>().await.unwrap()["media_id"], front_id.as_str());

        // The second file by the listing alone, in one part of the default size.
        let back = jpeg(640, 480);
        let mut body = declaration("back.jpg", &back);
        body["batch_id"] = json!(batch_id);
        body["listing_number"] = json!(number);
        let second = media.direct_created(&body).await;
        assert_eq!(second["part_size"], 8 * 1024 * 1024);
        assert_eq!(second["part_count"], 1);
        let only = send_part(&second, 1, &back).await;
        let completed = media.direct_complete(&second, &[only]).await;
        assert_eq!(completed.status(), StatusCode::OK);

        let events = read_events(stream).await;
        assert_eq!(events.last().unwrap().0, "completed", "{events:?}");
        let items = listing_media(&media, &number).await;
        assert_eq!(items.len(), 2, "{items:?}");
        for item in &items {
            assert_eq!(item["status"], "ready", "{item}");
            assert_eq!(item["variants"].as_array().unwrap().len(), 6, "{item}");
        }
        let stored = media.ctx.app.store.media()
            .item(&media.ctx.live(), &storage::ids::MediaId::parse(&front_id).unwrap())
            .await
            .unwrap();
        assert_eq!(stored.content_sha256, tests::sha256_hex(&front));
        assert_eq!(stored.size_bytes, front.len() as i64);
        assert_eq!(super::bucket::bucket_object(&s3, stored.object_key.as_str()).await, front);
        // Nothing is left of the uploads but the items.
        assert_eq!(upload_keys(&s3).await, Vec::<String>::new());
    }
}

#[tokio::test]
async fn without_a_bucket_the_api_says_to_use_tus() {
    let media = Media::on(TestApp::builder(tests::Backend::Sqlite).spawn().await).await;
    let photo = jpeg(64, 48);
    let refused = media.direct(&declaration("a.jpg", &photo)).await;
    let body = expect_error(refused, StatusCode::CONFLICT, "upload.direct_unavailable").await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/api/v1/uploads"),
        "{body}"
    );
}

#[tokio::test]
async fn the_creation_checks_what_it_is_told() {
    let (_s3, media) = direct_app(tests::Backend::Sqlite, None).await;
    let photo = jpeg(64, 48);
    let with = |field: &str, value: Value| {
        let mut body = declaration("a.jpg", &photo);
        body[field] = value;
        body
    };
    for (body, field) in [
        (with("size_bytes", json!(0)), "size_bytes"),
        (with("size_bytes", json!(1.5)), "size_bytes"),
        (with("sha256", json!("abc")), "sha256"),
        (with("sha256", json!("z".repeat(64))), "sha256"),
        (with("part_size", json!(1000)), "part_size"),
        (with("storage_strategy", json!("local")), "storage_strategy"),
        (
            with("storage_strategy", json!("sideways")),
            "storage_strategy",
        ),
    ] {
        let refused = media.direct(&body).await;
        let answer = expect_error(
            refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
        assert!(answer.to_string().contains(field), "{field}: {answer}");
    }
    let too_large = media
        .direct(&with("size_bytes", json!(50 * 1024 * 1024 + 1)))
        .await;
    expect_error(
        too_large,
        StatusCode::PAYLOAD_TOO_LARGE,
        "upload.file_too_large",
    )
    .await;
    let long_name = media
        .direct(&with("filename", json!("n".repeat(300))))
        .await;
    expect_error(
        long_name,
        StatusCode::BAD_REQUEST,
        "upload.filename_too_long",
    )
    .await;
    let no_listing = media.direct(&with("listing_number", json!("NOPE-1"))).await;
    assert_eq!(no_listing.status(), StatusCode::NOT_FOUND);
    let unknown_field = media.direct(&with("colour", json!("red"))).await;
    assert_eq!(unknown_field.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let no_key = media
        .ctx
        .app
        .client
        .post(media.ctx.app.url("/api/v1/direct-uploads"))
        .json(&declaration("a.jpg", &photo))
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_completion_checks_parts_size_format_and_the_worker_the_sha256() {
    let (s3, media) = direct_app(tests::Backend::Sqlite, None).await;
    let photo = large_photo();
    let mut body = declaration("p.jpg", &photo);
    body["part_size"] = json!(PART);
    let upload = media.direct_created(&body).await;
    let first = send_part(&upload, 1, &photo).await;

    // Naming too few parts, a part twice, or one out of range is the client's error.
    let missing = media
        .direct_complete(&upload, std::slice::from_ref(&first))
        .await;
    let answer = expect_error(
        missing,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert!(answer.to_string().contains("missing: 2"), "{answer}");
    let twice = media
        .direct_complete(&upload, &[first.clone(), (1, first.1.clone())])
        .await;
    expect_error(twice, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
    let beyond = media
        .direct_complete(&upload, &[first.clone(), (3, "\"x\"".into())])
        .await;
    expect_error(
        beyond,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    // A part named but never sent: the store refuses; the upload goes on.
    let unsent = media
        .direct_complete(&upload, &[first.clone(), (2, "\"feed\"".into())])
        .await;
    let answer = expect_error(unsent, StatusCode::CONFLICT, "upload.parts_refused").await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("complete again"),
        "{answer}"
    );
    let read: Value = media.direct_read(&upload).await.json().await.unwrap();
    assert_eq!(read["status"], "receiving");
    // The URLs are signed afresh, and the part can still be sent.
    let second = send_part(&read, 2, &photo).await;
    let done = media.direct_complete(&upload, &[first, second]).await;
    assert_eq!(done.status(), StatusCode::OK);

    // Fewer bytes than declared: the part is named, and the client ends it.
    let short = jpeg(64, 48);
    let mut body = declaration("short.jpg", &short);
    body["size_bytes"] = json!(short.len() + 10);
    let upload = media.direct_created(&body).await;
    let only = send_part(&upload, 1, &short).await;
    let refused = media
        .direct_complete(&upload, std::slice::from_ref(&only))
        .await;
    let answer = expect_error(refused, StatusCode::CONFLICT, "upload.parts_refused").await;
    let expected = format!("part 1 is {} bytes, not {}", short.len(), short.len() + 10);
    assert!(answer.to_string().contains(&expected), "{answer}");
    assert_eq!(
        media.direct_delete(&upload).await.status(),
        StatusCode::NO_CONTENT
    );
    let read: Value = media.direct_read(&upload).await.json().await.unwrap();
    assert_eq!(read["status"], "terminated");
    let late = media.direct_complete(&upload, &[only]).await;
    expect_error(late, StatusCode::GONE, "upload.gone").await;

    // Content of no accepted format.
    let text = b"these are not the photos you are looking for".to_vec();
    let upload = media.direct_created(&declaration("notes.jpg", &text)).await;
    let only = send_part(&upload, 1, &text).await;
    let refused = media.direct_complete(&upload, &[only]).await;
    expect_error(
        refused,
        StatusCode::BAD_REQUEST,
        "upload.unsupported_format",
    )
    .await;

    // A sha256 that is not the bytes': the worker fails the item, saying so.
    let photo = jpeg(320, 240);
    let mut body = declaration("tampered.jpg", &photo);
    body["sha256"] = json!(tests::sha256_hex(b"another file"));
    let upload = media.direct_created(&body).await;
    let only = send_part(&upload, 1, &photo).await;
    let completed = media.direct_complete(&upload, &[only]).await;
    assert_eq!(completed.status(), StatusCode::OK);
    let completed: Value = completed.json().await.unwrap();
    let events = media
        .events(
            &media.local(completed["progress_url"].as_str().unwrap()),
            None,
        )
        .await;
    let failed = events
        .iter()
        .find(|(name, _)| name == "failed")
        .unwrap_or_else(|| panic!("no failure: {events:?}"));
    assert!(failed.1.to_string().contains("sha256"), "{failed:?}");

    assert_eq!(upload_keys(&s3).await, Vec::<String>::new());
}

#[tokio::test]
async fn an_ended_upload_has_the_store_drop_its_parts() {
    let clock = Clock::manual(Timestamp::from_micros(1_800_000_000_000_000));
    let (s3, media) = direct_app(tests::Backend::Sqlite, Some(clock.clone())).await;
    let photo = large_photo();
    let mut body = declaration("p.jpg", &photo);
    body["part_size"] = json!(PART);

    // Terminated by its client.
    let upload = media.direct_created(&body).await;
    send_part(&upload, 1, &photo).await;
    let deleted = media.direct_delete(&upload).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let after = put_part(&upload, 2, &photo).await;
    assert!(
        !after.status().is_success(),
        "the store still takes parts: {}",
        after.status()
    );
    let again = media.direct_delete(&upload).await;
    expect_error(again, StatusCode::GONE, "upload.gone").await;
    let read: Value = media.direct_read(&upload).await.json().await.unwrap();
    assert_eq!(read["status"], "terminated");
    assert_eq!(read["parts"], json!([]));

    // Abandoned: a day later the expiry task ends it.
    let abandoned = media.direct_created(&body).await;
    send_part(&abandoned, 1, &photo).await;
    clock.advance_seconds(24 * 3_600 + 1);
    let platform = media.ctx.app.state.platform();
    // It expires, and the terminated one, a day after its end, is forgotten.
    assert_eq!(Maintenance::ExpireUploads.run(platform).await.unwrap(), 2);
    let read: Value = media.direct_read(&abandoned).await.json().await.unwrap();
    assert_eq!(read["status"], "expired");
    let after = put_part(&abandoned, 2, &photo).await;
    assert!(
        !after.status().is_success(),
        "the store still takes parts: {}",
        after.status()
    );

    // Assembled in the store, and the API stopped before it recorded the
    // item: completing again finds the assembled file and goes on.
    let interrupted = media.direct_created(&body).await;
    let first = send_part(&interrupted, 1, &photo).await;
    let second = send_part(&interrupted, 2, &photo).await;
    let (assembled, store_upload_id) = in_the_store(&media, &interrupted).await;
    s3.media()
        .complete_direct_upload(
            &assembled,
            &store_upload_id,
            vec![first.1.clone(), second.1.clone()],
        )
        .await
        .unwrap();
    let completed = media.direct_complete(&interrupted, &[first, second]).await;
    assert_eq!(completed.status(), StatusCode::OK);
    let completed: Value = completed.json().await.unwrap();
    assert_eq!(completed["status"], "completed");

    // Aborted in the store behind the API's back (a bucket's lifecycle
    // rule): s3s-fs then lists no parts (AWS answers NoSuchUpload, which
    // ends the upload with 410), and the client is told what is missing.
    let orphan = media.direct_created(&body).await;
    let first = send_part(&orphan, 1, &photo).await;
    let (assembled, store_upload_id) = in_the_store(&media, &orphan).await;
    s3.media()
        .abort_direct_upload(&assembled, &store_upload_id)
        .await
        .unwrap();
    let refused = media
        .direct_complete(&orphan, &[first, (2, "\"e\"".into())])
        .await;
    let answer = expect_error(refused, StatusCode::CONFLICT, "upload.parts_refused").await;
    assert!(answer.to_string().contains("part 1 is missing"), "{answer}");
    assert_eq!(
        media.direct_delete(&orphan).await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(upload_keys(&s3).await, Vec::<String>::new());
}

/// Where the store keeps `upload` (its assembled object's key, from the
/// bucket's root) and the store's multipart upload id: what a test needs to
/// act on the store behind the API's back.
async fn in_the_store(
    media: &Media,
    upload: &Value,
) -> (storage::objects::object_store::path::Path, String) {
    let tenant = media.ctx.live();
    let id = storage::ids::UploadId::parse(upload["upload_id"].as_str().unwrap()).unwrap();
    let row = media
        .ctx
        .app
        .store
        .media()
        .resumable(&tenant, &id)
        .await
        .unwrap();
    let assembled = storage::media::StorageKey::direct_upload(&tenant, &id);
    (
        format!("{PREFIX}/{assembled}").into(),
        row.direct.unwrap().store_upload_id,
    )
}

#[tokio::test]
async fn another_agencys_upload_and_the_other_doors_are_404() {
    let (_s3, media) = direct_app(tests::Backend::Sqlite, None).await;
    let photo = jpeg(64, 48);
    let upload = media.direct_created(&declaration("a.jpg", &photo)).await;
    let id = upload["upload_id"].as_str().unwrap();

    let other = media.ctx.app.agency().await;
    let other_key = media
        .ctx
        .app
        .key(&other, &[storage::api_keys::Scope::MediaWrite])
        .await;
    let theirs = media
        .ctx
        .app
        .get(&format!("/api/v1/direct-uploads/{id}"))
        .header("X-API-Key", &other_key)
        .send()
        .await
        .unwrap();
    expect_error(theirs, StatusCode::NOT_FOUND, "upload_not_found").await;
    let complete = media
        .ctx
        .app
        .client
        .post(
            media
                .ctx
                .app
                .url(&format!("/api/v1/direct-uploads/{id}/complete")),
        )
        .header("X-API-Key", &other_key)
        .header("X-Idempotency-Key", tests::idempotency_key())
        .json(&json!({"parts": []}))
        .send()
        .await
        .unwrap();
    expect_error(complete, StatusCode::NOT_FOUND, "upload_not_found").await;

    // A direct upload is no tus upload, and a tus upload no direct one.
    let head = media
        .ctx
        .app
        .client
        .head(media.ctx.app.url(&format!("/api/v1/uploads/{id}")))
        .header("X-API-Key", &media.key)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::NOT_FOUND);
    let tus = media
        .ctx
        .app
        .client
        .post(media.ctx.app.url("/api/v1/uploads"))
        .header("X-API-Key", &media.key)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", "10")
        .send()
        .await
        .unwrap();
    assert_eq!(tus.status(), StatusCode::CREATED);
    let location = tus.headers()["location"].to_str().unwrap().to_owned();
    let tus_id = location.rsplit('/').next().unwrap();
    let read = media
        .ctx
        .app
        .get(&format!("/api/v1/direct-uploads/{tus_id}"))
        .header("X-API-Key", &media.key)
        .send()
        .await
        .unwrap();
    expect_error(read, StatusCode::NOT_FOUND, "upload_not_found").await;
}

/// A store that lost an upload's parts (aborted behind the API's back, as
/// a bucket's lifecycle rule does) is said so: 410 `upload.gone`, the
/// upload ended. A store that refuses the API is 500
/// `upload.storage_unavailable`, which says to try again and leaves the
/// upload as it was: once the store answers, the same completion succeeds.
/// A store that assembles the parts wrongly ends the upload.
#[tokio::test]
async fn a_store_that_lost_the_parts_or_refuses_is_said_so() {
    use tests::s3::{FaultyStore, StoreFault};
    let s3 = S3Server::start().await;
    let relay = FaultyStore::start(s3.endpoint()).await;
    let app = TestApp::builder(tests::Backend::Sqlite)
        .media_target(relay.target(&s3, PREFIX))
        .spawn()
        .await;
    let media = Media::on(app).await;
    let photo = jpeg(64, 48);
    let lost = media.direct_created(&declaration("lost.jpg", &photo)).await;
    let kept = media.direct_created(&declaration("kept.jpg", &photo)).await;
    let odd = media.direct_created(&declaration("odd.jpg", &photo)).await;
    let lost_part = send_part(&lost, 1, &photo).await;
    let kept_part = send_part(&kept, 1, &photo).await;
    let odd_part = send_part(&odd, 1, &photo).await;

    // A store that assembles the parts into a file of another size: the
    // upload ends, its file deleted, and the client is told to start over.
    relay.set(StoreFault::MisreportSize);
    let wrong = media.direct_complete(&odd, &[odd_part]).await;
    let answer = expect_error(wrong, StatusCode::BAD_GATEWAY, "upload.assembly_failed").await;
    assert!(
        answer.to_string().contains("Create a new upload"),
        "{answer}"
    );
    relay.set(StoreFault::None);
    let read: Value = media.direct_read(&odd).await.json().await.unwrap();
    assert_eq!(read["status"], "terminated", "{read}");
    assert!(
        upload_keys(&s3)
            .await
            .iter()
            .all(|key| !key.contains(odd["upload_id"].as_str().unwrap()))
    );

    relay.set(StoreFault::UploadGone);
    let gone = media
        .direct_complete(&lost, std::slice::from_ref(&lost_part))
        .await;
    let answer = expect_error(gone, StatusCode::GONE, "upload.gone").await;
    assert!(
        answer.to_string().contains("Create a new upload"),
        "{answer}"
    );
    relay.set(StoreFault::None);
    let read: Value = media.direct_read(&lost).await.json().await.unwrap();
    assert_eq!(read["status"], "terminated", "{read}");
    assert_eq!(read["parts"], json!([]), "{read}");
    let again = media.direct_complete(&lost, &[lost_part]).await;
    expect_error(again, StatusCode::GONE, "upload.gone").await;

    relay.set(StoreFault::Refuse);
    let created = media.direct(&declaration("later.jpg", &photo)).await;
    let answer = expect_error(
        created,
        StatusCode::INTERNAL_SERVER_ERROR,
        "upload.storage_unavailable",
    )
    .await;
    assert!(answer.to_string().contains("try again"), "{answer}");
    let refused = media
        .direct_complete(&kept, std::slice::from_ref(&kept_part))
        .await;
    expect_error(
        refused,
        StatusCode::INTERNAL_SERVER_ERROR,
        "upload.storage_unavailable",
    )
    .await;
    relay.set(StoreFault::None);
    let read: Value = media.direct_read(&kept).await.json().await.unwrap();
    assert_eq!(read["status"], "receiving", "{read}");
    let completed = media.direct_complete(&kept, &[kept_part]).await;
    assert_eq!(completed.status(), StatusCode::OK);
    let item: Value = completed.json().await.unwrap();
    assert_eq!(item["filename"], "kept.jpg", "{item}");
}
