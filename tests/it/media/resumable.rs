//! Resumable uploads (tus 1.0 at `/api/v1/uploads`): a shoot's batch of
//! uploads sent in chunks becomes media items of its listing, followed by
//! one progress stream; offsets, checksums and the protocol's refusals;
//! termination and expiry delete the bytes; a request cut midway keeps what
//! arrived; another agency's upload is 404; a creation's idempotency key.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use storage::api_keys::Scope;
use storage::{Clock, Timestamp};
use tests::{TestApp, backend_tests};
use workers::handlers::maintenance::Maintenance;

use super::*;

const TUS: &str = "1.0.0";

/// `Upload-Metadata` of `pairs`.
fn metadata(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(key, value)| format!("{key} {}", STANDARD.encode(value)))
        .collect::<Vec<_>>()
        .join(",")
}

impl Media {
    fn tus(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.ctx
            .app
            .client
            .request(method, self.local_upload(url))
            .header("X-API-Key", &self.key)
            .header("Tus-Resumable", TUS)
    }

    /// The local form of an upload URL.
    fn local_upload(&self, url: &str) -> String {
        match url.split_once("/api/v1/uploads") {
            Some((_, rest)) => self.ctx.app.url(&format!("/api/v1/uploads{rest}")),
            None => self.ctx.app.url(url),
        }
    }

    /// Creates an upload of `length` bytes; returns its URL.
    async fn create_upload(&self, length: usize, meta: &[(&str, &str)]) -> reqwest::Response {
        self.tus(reqwest::Method::POST, "/api/v1/uploads")
            .header("Upload-Length", length.to_string())
            .header("Upload-Metadata", metadata(meta))
            .send()
            .await
            .unwrap()
    }

    async fn patch(&self, url: &str, offset: usize, bytes: Vec<u8>) -> reqwest::Response {
        self.tus(reqwest::Method::PATCH, url)
            .header("Upload-Offset", offset.to_string())
            .header("Content-Type", "application/offset+octet-stream")
            .body(bytes)
            .send()
            .await
            .unwrap()
    }

    async fn head(&self, url: &str) -> reqwest::Response {
        self.tus(reqwest::Method::HEAD, url).send().await.unwrap()
    }

    async fn batch(&self, file_count: i64, listing: Option<&str>) -> Value {
        let response = self
            .ctx
            .app
            .client
            .post(self.ctx.app.url("/api/v1/upload-batches"))
            .header("X-API-Key", &self.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({"file_count": file_count, "listing_number": listing}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json().await.unwrap()
    }
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .to_str()
        .unwrap()
        .to_owned()
}

async fn code(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap();
    body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The objects under the tenant's uploads folder.
fn upload_objects(media: &Media) -> Vec<std::path::PathBuf> {
    stored_files(&media.media_dir())
        .into_iter()
        .filter(|path| path.components().any(|part| part.as_os_str() == "uploads"))
        .collect()
}

backend_tests! {
    async fn a_batch_of_chunked_uploads_becomes_the_listings_media(backend) {
        let media = Media::new(backend).await;
        let number = media.ctx.listing().await;
        let options = media
            .ctx
            .app
            .client
            .request(reqwest::Method::OPTIONS, media.ctx.app.url("/api/v1/uploads"))
            .send()
            .await
            .unwrap();
        assert_eq!(options.status(), StatusCode::NO_CONTENT);
        assert_eq!(header(&options, "tus-version"), TUS);
        assert!(header(&options, "tus-extension").contains("creation-with-upload"));
        assert!(header(&options, "tus-checksum-algorithm").contains("sha256"));
        assert_eq!(header(&options, "tus-max-size"), (50 * 1024 * 1024).to_string());

        let batch = media.batch(2, Some(&number)).await;
        let batch_id = batch["batch_id"].as_str().unwrap().to_owned();
        let stream = media
            .open_stream(&media.local(batch["progress_url"].as_str().unwrap()), None)
            .await;

        // The first photo in three chunks, each request from its offset.
        let front = jpeg(640, 480);
        let created = media
            .create_upload(front.len(), &[("filename", "front.jpg"), ("filetype", "image/jpeg"), ("batch_id", &batch_id)])
            .await;
        assert_eq!(created.status(), StatusCode::CREATED);
        assert_eq!(header(&created, "tus-resumable"), TUS);
        assert_eq!(header(&created, "upload-batch-id"), batch_id);
        assert!(!header(&created, "upload-expires").is_empty());
        let url = header(&created, "location");
        assert!(url.contains("/api/v1/uploads/upl_"), "{url}");
        let head = media.head(&url).await;
        assert_eq!(head.status(), StatusCode::OK);
        assert_eq!(header(&head, "upload-offset"), "0");
        assert_eq!(header(&head, "upload-length"), front.len().to_string());
        assert_eq!(header(&head, "cache-control"), "no-store");
        let cuts = [0, front.len() / 3, 2 * front.len() / 3, front.len()];
        let mut last = None;
        for window in cuts.windows(2) {
            // Before the second chunk, other bytes to the file's end that
            // no checksum matches: kept nowhere, and written over (the
            // item comes out ready, its sha256 checked by the worker).
            if window[0] > 0 && window[1] < front.len() {
                let junk = vec![0x5A; front.len() - window[0]];
                let refused = media
                    .tus(reqwest::Method::PATCH, &url)
                    .header("Upload-Offset", window[0].to_string())
                    .header("Content-Type", "application/offset+octet-stream")
                    .header("Upload-Checksum", format!("sha256 {}", STANDARD.encode(Sha256::digest(b"other"))))
                    .body(junk)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(code(refused).await, "upload.checksum_mismatch");
            }
            let response = media.patch(&url, window[0], front[window[0]..window[1]].to_vec()).await;
            assert_eq!(response.status(), StatusCode::NO_CONTENT);
            assert_eq!(header(&response, "upload-offset"), window[1].to_string());
            last = Some(response);
        }
        let media_id = header(&last.unwrap(), "upload-media-id");
        assert!(media_id.starts_with("med_"));
        let head = media.head(&url).await;
        assert_eq!(header(&head, "upload-media-id"), media_id);

        // The second in the creation itself (creation-with-upload).
        let back = jpeg(320, 240);
        let created = media
            .tus(reqwest::Method::POST, "/api/v1/uploads")
            .header("Upload-Length", back.len().to_string())
            .header("Upload-Metadata", metadata(&[("filename", "back.jpg"), ("batch_id", &batch_id), ("listing_number", &number)]))
            .header("Content-Type", "application/offset+octet-stream")
            .body(back.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
        assert_eq!(header(&created, "upload-offset"), back.len().to_string());
        assert!(header(&created, "upload-media-id").starts_with("med_"));

        // The batch is full, and its one stream follows both to the end.
        let third = media.create_upload(10, &[("batch_id", &batch_id)]).await;
        assert_eq!(third.status(), StatusCode::CONFLICT);
        assert_eq!(code(third).await, "upload.batch_full");
        let events = read_events(stream).await;
        assert_eq!(events.last().unwrap().0, "completed", "{events:?}");
        let items = listing_media(&media, &number).await;
        let names: Vec<&str> = items.iter().map(|item| item["filename"].as_str().unwrap()).collect();
        assert_eq!(names, ["front.jpg", "back.jpg"]);
        assert!(items.iter().all(|item| item["status"] == "ready"), "{items:?}");
        // The parts are gone once the originals are written.
        assert!(upload_objects(&media).is_empty(), "{:?}", upload_objects(&media));
        let completed = media
            .ctx
            .events_of(storage::rules::events::EventType::MediaUploadCompleted)
            .await;
        assert_eq!(completed.len(), 1);
    }

    async fn offsets_checksums_and_the_protocols_refusals(backend) {
        let media = Media::on(TestApp::builder(backend).spawn().await).await;
        let photo = jpeg(200, 100);
        let url = header(&media.create_upload(photo.len(), &[("filename", "a.jpg")]).await, "location");

        let no_version = media
            .ctx
            .app
            .client
            .head(media.local_upload(&url))
            .header("X-API-Key", &media.key)
            .send()
            .await
            .unwrap();
        assert_eq!(no_version.status(), StatusCode::PRECONDITION_FAILED);
        assert_eq!(header(&no_version, "tus-version"), TUS);

        let wrong_type = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "0")
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong_type.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(code(wrong_type).await, "upload.content_type_unsupported");

        let wrong_offset = media.patch(&url, 5, photo[5..10].to_vec()).await;
        assert_eq!(wrong_offset.status(), StatusCode::CONFLICT);
        assert_eq!(code(wrong_offset).await, "upload.offset_mismatch");

        // A checksum that does not match keeps nothing; one that does, all.
        let digest = |bytes: &[u8]| format!("sha256 {}", STANDARD.encode(Sha256::digest(bytes)));
        let mismatch = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "0")
            .header("Content-Type", "application/offset+octet-stream")
            .header("Upload-Checksum", digest(b"other bytes"))
            .body(photo[..100].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(mismatch.status().as_u16(), 460);
        assert_eq!(code(mismatch).await, "upload.checksum_mismatch");
        assert_eq!(header(&media.head(&url).await, "upload-offset"), "0");
        let matched = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "0")
            .header("Content-Type", "application/offset+octet-stream")
            .header("Upload-Checksum", digest(&photo[..100]))
            .body(photo[..100].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(matched.status(), StatusCode::NO_CONTENT);
        assert_eq!(header(&matched, "upload-offset"), "100");
        let unknown = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "100")
            .header("Content-Type", "application/offset+octet-stream")
            .header("Upload-Checksum", "md5 AAAA")
            .body(photo[100..].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(code(unknown).await, "upload.checksum_algorithm_unsupported");

        let mut too_long = photo[100..].to_vec();
        too_long.extend_from_slice(b"extra");
        let past = media.patch(&url, 100, too_long).await;
        assert_eq!(past.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(code(past).await, "upload.length_exceeded");
        assert_eq!(header(&media.head(&url).await, "upload-offset"), "100");

        // Creation's refusals.
        let big = media.create_upload(50 * 1024 * 1024 + 1, &[]).await;
        assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(code(big).await, "upload.file_too_large");
        let no_length = media.tus(reqwest::Method::POST, "/api/v1/uploads").send().await.unwrap();
        assert_eq!(no_length.status(), StatusCode::BAD_REQUEST);
        assert_eq!(code(no_length).await, "upload.length_required");
        let bad_metadata = media
            .tus(reqwest::Method::POST, "/api/v1/uploads")
            .header("Upload-Length", "10")
            .header("Upload-Metadata", "filename !!!")
            .send()
            .await
            .unwrap();
        assert_eq!(code(bad_metadata).await, "upload.malformed");
        let long_name = "n".repeat(256);
        let named = media.create_upload(10, &[("filename", &long_name)]).await;
        assert_eq!(code(named).await, "upload.filename_too_long");
        let no_listing = media.create_upload(10, &[("listing_number", "NOPE-1")]).await;
        assert_eq!(no_listing.status(), StatusCode::NOT_FOUND);
        assert_eq!(code(no_listing).await, "listing_not_found");

        // Content of no accepted format ends the upload with its bytes.
        let text = b"plain text, not a photo at all, long enough to be judged by its content".to_vec();
        let url = header(&media.create_upload(text.len(), &[("filename", "notes.txt")]).await, "location");
        let refused = media.patch(&url, 0, text).await;
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        assert_eq!(code(refused).await, "upload.unsupported_format");
        assert_eq!(media.head(&url).await.status(), StatusCode::GONE);
    }

    async fn the_creations_other_refusals(backend) {
        let media = Media::on(TestApp::builder(backend).spawn().await).await;
        let number = media.ctx.listing().await;
        let deferred = media
            .tus(reqwest::Method::POST, "/api/v1/uploads")
            .header("Upload-Defer-Length", "1")
            .send()
            .await
            .unwrap();
        assert_eq!(deferred.status(), StatusCode::BAD_REQUEST);
        assert_eq!(code(deferred).await, "upload.length_required");
        let concatenated = media
            .tus(reqwest::Method::POST, "/api/v1/uploads")
            .header("Upload-Length", "10")
            .header("Upload-Concat", "partial")
            .send()
            .await
            .unwrap();
        assert_eq!(code(concatenated).await, "upload.malformed");
        let bad_key = media
            .tus(reqwest::Method::POST, "/api/v1/uploads")
            .header("Upload-Length", "10")
            .header("X-Idempotency-Key", "k".repeat(129))
            .send()
            .await
            .unwrap();
        assert_eq!(bad_key.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(code(bad_key).await, "validation.failed");
        let strategy = media.create_upload(10, &[("storage_strategy", "tape")]).await;
        assert_eq!(code(strategy).await, "validation.failed");
        let no_batch = media
            .create_upload(10, &[("batch_id", "op_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")])
            .await;
        assert_eq!(no_batch.status(), StatusCode::NOT_FOUND);
        assert_eq!(code(no_batch).await, "operation_not_found");

        // A batch of the listing refuses an upload naming another listing,
        // and once its one upload ended, any more.
        let batch = media.batch(1, Some(&number)).await;
        let batch_id = batch["batch_id"].as_str().unwrap().to_owned();
        let other = media.ctx.listing().await;
        let elsewhere = media
            .create_upload(10, &[("batch_id", &batch_id), ("listing_number", &other)])
            .await;
        assert_eq!(elsewhere.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(code(elsewhere).await, "validation.failed");
        let url = header(&media.create_upload(10, &[("batch_id", &batch_id)]).await, "location");
        let ended = media.tus(reqwest::Method::DELETE, &url).send().await.unwrap();
        assert_eq!(ended.status(), StatusCode::NO_CONTENT);
        let late = media.create_upload(10, &[("batch_id", &batch_id)]).await;
        assert_eq!(late.status(), StatusCode::CONFLICT);
        assert_eq!(code(late).await, "upload.batch_ended");
        let batches = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/upload-batches"))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&json!({"file_count": 0}))
            .send()
            .await
            .unwrap();
        assert_eq!(batches.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(code(batches).await, "validation.failed");
    }

    async fn another_agencys_upload_is_not_found(backend) {
        let media = Media::on(TestApp::builder(backend).spawn().await).await;
        let url = header(&media.create_upload(100, &[]).await, "location");
        let other = media.ctx.app.agency().await;
        let other_key = media.ctx.app.key(&other, &[Scope::MediaWrite]).await;
        for method in [reqwest::Method::HEAD, reqwest::Method::PATCH, reqwest::Method::DELETE] {
            let response = media
                .ctx
                .app
                .client
                .request(method.clone(), media.local_upload(&url))
                .header("X-API-Key", &other_key)
                .header("Tus-Resumable", TUS)
                .header("Upload-Offset", "0")
                .header("Content-Type", "application/offset+octet-stream")
                .body(vec![0xff, 0xd8, 0xff])
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{method}");
            if method != reqwest::Method::HEAD {
                assert_eq!(code(response).await, "upload_not_found");
            }
        }
        assert_eq!(header(&media.head(&url).await, "upload-offset"), "0");
        let malformed = media.head("/api/v1/uploads/not-an-id").await;
        assert_eq!(malformed.status(), StatusCode::NOT_FOUND);
        let unauthenticated = media
            .ctx
            .app
            .client
            .head(media.local_upload(&url))
            .header("Tus-Resumable", TUS)
            .send()
            .await
            .unwrap();
        assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);
    }

    async fn termination_and_expiry_delete_the_bytes(backend) {
        let clock = Clock::manual(Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let media = Media::on(app).await;
        let photo = jpeg(300, 200);

        let terminated = header(&media.create_upload(photo.len(), &[]).await, "location");
        assert_eq!(media.patch(&terminated, 0, photo[..500].to_vec()).await.status(), StatusCode::NO_CONTENT);
        assert!(!upload_objects(&media).is_empty());
        let deleted = media.tus(reqwest::Method::DELETE, &terminated).send().await.unwrap();
        assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
        assert!(upload_objects(&media).is_empty());
        assert_eq!(media.head(&terminated).await.status(), StatusCode::GONE);
        let again = media.tus(reqwest::Method::DELETE, &terminated).send().await.unwrap();
        assert_eq!(code(again).await, "upload.gone");

        // Abandoned: no bytes for a day; the expiry task deletes them.
        let abandoned = header(&media.create_upload(photo.len(), &[]).await, "location");
        assert_eq!(media.patch(&abandoned, 0, photo[..500].to_vec()).await.status(), StatusCode::NO_CONTENT);
        let platform = media.ctx.app.state.platform();
        clock.advance_seconds(23 * 3_600);
        assert_eq!(Maintenance::ExpireUploads.run(platform).await.unwrap(), 0);
        assert_eq!(upload_objects(&media).len(), 1);
        // Bytes move the expiry on.
        assert_eq!(media.patch(&abandoned, 500, photo[500..600].to_vec()).await.status(), StatusCode::NO_CONTENT);
        clock.advance_seconds(23 * 3_600);
        // A day after its end, the terminated upload is forgotten: 404.
        assert_eq!(Maintenance::ExpireUploads.run(platform).await.unwrap(), 1);
        assert_eq!(media.head(&terminated).await.status(), StatusCode::NOT_FOUND);
        clock.advance_seconds(3_600 + 1);
        assert_eq!(Maintenance::ExpireUploads.run(platform).await.unwrap(), 1);
        assert!(upload_objects(&media).is_empty());
        let head = media.head(&abandoned).await;
        assert_eq!(head.status(), StatusCode::GONE);
        let late = media.patch(&abandoned, 600, photo[600..].to_vec()).await;
        assert_eq!(code(late).await, "upload.gone");
        // A day on, it is forgotten too.
        clock.advance_seconds(86_400);
        assert_eq!(Maintenance::ExpireUploads.run(platform).await.unwrap(), 1);
        assert_eq!(media.head(&abandoned).await.status(), StatusCode::NOT_FOUND);
    }

    async fn a_cut_request_keeps_the_bytes_that_arrived(backend) {
        let media = Media::on(TestApp::builder(backend).spawn().await).await;
        let photo = jpeg(800, 600);
        let url = header(&media.create_upload(photo.len(), &[("filename", "cut.jpg")]).await, "location");
        let first = photo[..2000].to_vec();
        let uploads = media.media_dir();
        // The link drops once the server is storing the request's bytes.
        let chunks = futures::StreamExt::then(futures::stream::iter([0, 1]), move |step| {
            let first = first.clone();
            let uploads = uploads.clone();
            async move {
                if step == 0 {
                    return Ok::<_, std::io::Error>(first);
                }
                for _ in 0..400 {
                    let storing = stored_files(&uploads)
                        .iter()
                        .any(|path| path.to_string_lossy().contains("/uploads/"));
                    if storing {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                }
                Err(std::io::Error::other("the link dropped"))
            }
        });
        let cut = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "0")
            .header("Content-Type", "application/offset+octet-stream")
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await;
        assert!(cut.is_err(), "{cut:?}");
        // The part commits in its own task once the server sees the cut.
        let mut offset = String::new();
        for _ in 0..200 {
            offset = header(&media.head(&url).await, "upload-offset");
            if offset == "2000" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        assert_eq!(offset, "2000");
        let rest = media.patch(&url, 2000, photo[2000..].to_vec()).await;
        assert_eq!(rest.status(), StatusCode::NO_CONTENT);
        assert!(header(&rest, "upload-media-id").starts_with("med_"));
    }

    async fn a_retry_takes_the_upload_from_a_request_that_hangs(backend) {
        let media = Media::on(TestApp::builder(backend).spawn().await).await;
        let photo = jpeg(800, 600);
        let url = header(&media.create_upload(photo.len(), &[("filename", "hang.jpg")]).await, "location");
        // A request whose client sent 2,000 bytes and then nothing, its
        // connection still open (a link gone silent).
        let first = photo[..2000].to_vec();
        let silent = futures::StreamExt::chain(
            futures::stream::iter([Ok::<_, std::io::Error>(first)]),
            futures::stream::pending(),
        );
        let hanging = tokio::spawn(
            media
                .tus(reqwest::Method::PATCH, &url)
                .header("Upload-Offset", "0")
                .header("Content-Type", "application/offset+octet-stream")
                .body(reqwest::Body::wrap_stream(silent))
                .send(),
        );
        let file = || {
            upload_objects(&media)
                .into_iter()
                .find(|path| path.file_name().is_some_and(|name| name == "file"))
        };
        for _ in 0..400 {
            if file().is_some_and(|path| std::fs::metadata(path).is_ok_and(|meta| meta.len() >= 2000)) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        // The client's retry from the offset it knew: the hanging request
        // is asked to let go, keeps its 2,000 bytes, and the retry is told
        // the offset moved, without waiting out the idle limit.
        let retry = media.patch(&url, 0, photo.clone()).await;
        assert_eq!(code(retry).await, "upload.offset_mismatch");
        assert_eq!(header(&media.head(&url).await, "upload-offset"), "2000");
        let rest = media.patch(&url, 2000, photo[2000..].to_vec()).await;
        assert_eq!(rest.status(), StatusCode::NO_CONTENT);
        assert!(header(&rest, "upload-media-id").starts_with("med_"));
        hanging.abort();
    }

    async fn a_creations_idempotency_key_answers_the_same_upload(backend) {
        let media = Media::on(TestApp::builder(backend).spawn().await).await;
        let create = |key: &'static str, length: usize| {
            media
                .tus(reqwest::Method::POST, "/api/v1/uploads")
                .header("Upload-Length", length.to_string())
                .header("X-Idempotency-Key", key)
                .send()
        };
        let first = create("shoot-1-front", 100).await.unwrap();
        assert_eq!(first.status(), StatusCode::CREATED);
        let again = create("shoot-1-front", 100).await.unwrap();
        assert_eq!(again.status(), StatusCode::CREATED);
        assert_eq!(header(&again, "x-idempotent-replay"), "true");
        assert_eq!(header(&again, "location"), header(&first, "location"));
        let other = create("shoot-1-front", 200).await.unwrap();
        assert_eq!(other.status(), StatusCode::CONFLICT);
        assert_eq!(code(other).await, "idempotency_key_conflict");
        // Bytes with a key are taken as any: their offset is their safety.
        let photo = jpeg(10, 10);
        let url = header(&media.create_upload(photo.len(), &[]).await, "location");
        let keyed = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "0")
            .header("X-Idempotency-Key", "bytes-1")
            .header("Content-Type", "application/offset+octet-stream")
            .body(photo.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(keyed.status(), StatusCode::NO_CONTENT);
        let resent = media
            .tus(reqwest::Method::PATCH, &url)
            .header("Upload-Offset", "0")
            .header("X-Idempotency-Key", "bytes-1")
            .header("Content-Type", "application/offset+octet-stream")
            .body(photo)
            .send()
            .await
            .unwrap();
        assert_eq!(resent.status(), StatusCode::CONFLICT);
    }
}

backend_tests! {
    /// An upload's offset lives in the database and its bytes in the store
    /// every replica reads: its bytes go through one `api serve`, then
    /// another beside it, then the first again after a restart, and it
    /// completes. On PostgreSQL the replicas run the distributed profile
    /// (queue and fan-out in Redis).
    async fn an_upload_goes_on_through_another_replica_and_after_a_restart(backend) {
        use std::time::Duration;
        use tests::deployment::{Deployment, serve};

        let deployment = match backend {
            tests::Backend::Sqlite => Deployment::new(backend).await,
            tests::Backend::Postgres => Deployment::with_redis(backend).await,
        };
        let client = tests::app::base_client().build().unwrap();
        let agency = deployment.admin_ok(&["create-agency", "--name", "Replica Media"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let key = deployment.admin_ok(&["create-key", "--agency", &agency_id, "--name", "uploader", "--scopes", "media:write"]);
        let key = key["key"].as_str().unwrap().to_owned();
        let mut first = serve(&deployment, &["--no-workers"], &client, "http").await;
        let second = serve(&deployment, &["--no-workers"], &client, "http").await;
        let tus = |method: reqwest::Method, url: String| {
            client
                .request(method, url)
                .header("X-API-Key", &key)
                .header("Tus-Resumable", TUS)
        };
        let photo = jpeg(600, 400);
        let third = photo.len() / 3;
        let created = tus(reqwest::Method::POST, format!("{}/api/v1/uploads", first.base_url))
            .header("Upload-Length", photo.len().to_string())
            .header("Upload-Metadata", metadata(&[("filename", "hall.jpg")]))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
        let location = header(&created, "location");
        let send = |base: String, from: usize, to: usize| {
            tus(reqwest::Method::PATCH, format!("{base}{location}"))
                .header("Upload-Offset", from.to_string())
                .header("Content-Type", "application/offset+octet-stream")
                .body(photo[from..to].to_vec())
                .send()
        };
        let sent = send(first.base_url.clone(), 0, third).await.unwrap();
        assert_eq!(sent.status(), StatusCode::NO_CONTENT);
        // The other replica knows the offset and takes the next bytes.
        let head = tus(reqwest::Method::HEAD, format!("{}{location}", second.base_url)).send().await.unwrap();
        assert_eq!(header(&head, "upload-offset"), third.to_string());
        let sent = send(second.base_url.clone(), third, 2 * third).await.unwrap();
        assert_eq!(sent.status(), StatusCode::NO_CONTENT);
        // The first, restarted, goes on from there.
        assert!(first.process.terminate(Duration::from_secs(30)).success());
        let restarted = serve(&deployment, &["--no-workers"], &client, "http").await;
        let head = tus(reqwest::Method::HEAD, format!("{}{location}", restarted.base_url)).send().await.unwrap();
        assert_eq!(header(&head, "upload-offset"), (2 * third).to_string());
        let sent = send(restarted.base_url.clone(), 2 * third, photo.len()).await.unwrap();
        assert_eq!(sent.status(), StatusCode::NO_CONTENT);
        let media_id = header(&sent, "upload-media-id");
        let store = deployment.store().await;
        let tenant = storage::Tenant::new(
            storage::ids::AgencyId::parse(&agency_id).unwrap(),
            storage::Environment::Live,
        );
        let item = store
            .media()
            .item(&tenant, &storage::ids::MediaId::parse(&media_id).unwrap())
            .await
            .unwrap();
        assert_eq!(item.content_sha256, hex::encode(Sha256::digest(&photo)));
        assert_eq!(item.filename, "hall.jpg");
    }
}
