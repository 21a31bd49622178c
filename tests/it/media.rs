//! Uploads: multipart streamed to the object store, formats told by content,
//! every limit and refusal leaving nothing behind, the processing job's six
//! variants (a corrupt file failing alone), progress as server-sent events
//! (late subscribers, the token URL, other agencies), idempotent retries,
//! session uploads with CSRF, and `media.upload.completed` in the outbox.

use std::io::Cursor;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use storage::events::EventType;
use tests::{TestApp, backend_tests, idempotency_key};

use crate::listings::Ctx;
use crate::support::expect_error;

mod formats;
mod progress;
mod recovery;
mod strategies;

const BOUNDARY: &str = "----listing-api-test-boundary";

/// One part of a multipart body.
enum Part<'a> {
    Field(&'a str, &'a str),
    File(&'a str, &'a str, Vec<u8>),
    /// A file part with its own Content-Type.
    Typed(&'a str, &'a str, &'a str, Vec<u8>),
}

fn multipart(parts: &[Part<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match part {
            Part::Field(name, value) => {
                body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                        .as_bytes(),
                );
            }
            Part::File(name, filename, bytes) => {
                file_part(&mut body, name, filename, "application/octet-stream", bytes);
            }
            Part::Typed(name, filename, content_type, bytes) => {
                file_part(&mut body, name, filename, content_type, bytes);
            }
        }
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

fn file_part(body: &mut Vec<u8>, name: &str, filename: &str, content_type: &str, bytes: &[u8]) {
    body.extend_from_slice(
        format!(
            "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
             Content-Type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(b"\r\n");
}

/// A JPEG of `width`×`height` with a gradient, so it compresses like a photo.
fn jpeg(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image)
        .write_to(&mut out, image::ImageFormat::Jpeg)
        .unwrap();
    out.into_inner()
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let image = image::RgbaImage::from_fn(width, height, |x, _| {
        image::Rgba([200, (x % 256) as u8, 10, 255])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(image)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// Files stored under `dir`, recursively.
fn stored_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                stored_files(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

struct Media {
    ctx: Ctx,
    key: String,
}

impl Media {
    async fn new(backend: tests::Backend) -> Self {
        Self::on(TestApp::builder(backend).with_workers().spawn().await).await
    }

    /// On `app`, with a key that uploads and reads and writes listings.
    async fn on(app: TestApp) -> Self {
        Self::with_scopes(
            app,
            &[Scope::MediaWrite, Scope::ListingsRead, Scope::ListingsWrite],
        )
        .await
    }

    /// On `app`, with a key of `scopes`.
    async fn with_scopes(app: TestApp, scopes: &[Scope]) -> Self {
        let ctx = Ctx::with_app(app).await;
        let key = ctx.app.key(&ctx.agency, scopes).await;
        Self { ctx, key }
    }

    fn media_dir(&self) -> std::path::PathBuf {
        self.ctx.app.db.data_dir().join("media")
    }

    async fn upload_to(
        &self,
        path: &str,
        key: &str,
        idempotency: &str,
        body: Vec<u8>,
    ) -> reqwest::Response {
        self.ctx
            .app
            .client
            .post(self.ctx.app.url(path))
            .header("X-API-Key", key)
            .header("X-Idempotency-Key", idempotency)
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// Uploads `body` in two pieces cut at `cut`, the second `stall` later.
    async fn upload_stalling(
        &self,
        body: Vec<u8>,
        cut: usize,
        stall: Duration,
    ) -> reqwest::Response {
        let rest = body[cut..].to_vec();
        let mut first = body;
        first.truncate(cut);
        let chunks = futures::stream::iter([(first, Duration::ZERO), (rest, stall)]).then(
            |(chunk, wait)| async move {
                tokio::time::sleep(wait).await;
                Ok::<_, std::io::Error>(chunk)
            },
        );
        self.ctx
            .app
            .client
            .post(self.ctx.app.url("/api/v1/media/upload"))
            .header("X-API-Key", &self.key)
            .header("X-Idempotency-Key", idempotency_key())
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await
            .unwrap()
    }

    async fn upload(&self, parts: &[Part<'_>]) -> reqwest::Response {
        self.upload_to(
            "/api/v1/media/upload",
            &self.key,
            &idempotency_key(),
            multipart(parts),
        )
        .await
    }

    /// Reads a progress stream to its end; returns (event, data) pairs.
    async fn events(&self, url: &str, key: Option<&str>) -> Vec<(String, Value)> {
        read_events(self.open_stream(url, key).await).await
    }

    /// Opens a progress stream: when this returns, the server has subscribed.
    async fn open_stream(&self, url: &str, key: Option<&str>) -> reqwest::Response {
        let mut request = self.ctx.app.client.get(url);
        if let Some(key) = key {
            request = request.header("X-API-Key", key);
        }
        let response = tokio::time::timeout(Duration::from_secs(60), request.send())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        response
    }

    /// The local form of a progress URL (the base URL may name another host).
    fn local(&self, url: &str) -> String {
        let path = url.split_once("/v1/progress/").unwrap().1;
        self.ctx.app.url(&format!("/v1/progress/{path}"))
    }
}

/// Reads an opened progress stream to its end; returns (event, data) pairs.
/// The timeout only turns a stream that never ends into a failure; the whole
/// suite shares two cores, so it is generous.
async fn read_events(response: reqwest::Response) -> Vec<(String, Value)> {
    let text = tokio::time::timeout(Duration::from_secs(240), response.text())
        .await
        .unwrap()
        .unwrap();
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_owned());
                } else if let Some(json) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(json).ok();
                }
            }
            Some((event?, data?))
        })
        .collect()
}

backend_tests! {
    async fn an_upload_streams_to_the_store_and_gets_six_variants_per_image(backend) {
        let media = Media::new(backend).await;
        let number = media.ctx.listing().await;
        let response = media
            .upload(&[
                Part::Field("listing_number", &number),
                Part::File("files", "front.jpg", jpeg(3000, 2000)),
                Part::File("files", "plan.png", png(400, 300)),
            ])
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["listing_number"], number.as_str());
        assert_eq!(body["storage_strategy"], "cloud");
        let files = body["files"].as_array().unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0]["detected_type"], "jpeg");
        assert_eq!(files[1]["detected_type"], "png");
        assert_eq!(files[1]["filename"], "plan.png");
        let url = body["progress_url"].as_str().unwrap();
        assert!(url.contains("/v1/progress/op_") && url.contains("token="), "{url}");

        // Through the token URL, as a browser's EventSource would.
        let events = media.events(&media.local(url), None).await;
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names.first(), Some(&"snapshot"), "{names:?}");
        assert_eq!(names.last(), Some(&"completed"), "{names:?}");
        let (_, last) = events.last().unwrap();
        assert_eq!(last["operation"]["status"], "completed");
        for file in last["operation"]["files"].as_array().unwrap() {
            assert_eq!(file["status"], "ready", "{file}");
            assert_eq!(file["variants"].as_array().unwrap().len(), 6, "{file}");
        }

        // The variants are in the store, decodable, at their sizes.
        let operation = storage::ids::OperationId::parse(body["operation_id"].as_str().unwrap()).unwrap();
        let items = media.ctx.app.store.media().operation_items(&media.ctx.live(), &operation).await.unwrap();
        let front = &items[0];
        let sizes: Vec<(String, i32, i32)> = front.variants.iter().map(|v| (v.name.clone(), v.width, v.height)).collect();
        for expected in [
            ("mls", 1275, 850),
            ("print", 3000, 2000),
            ("thumbnail", 150, 150),
            ("web", 2550, 1700),
            ("webp_thumb", 400, 400),
            ("webp_web", 2550, 1700),
        ] {
            let found = sizes.iter().find(|(name, _, _)| name == expected.0).unwrap();
            assert_eq!((found.1, found.2), (expected.1, expected.2), "{}", expected.0);
        }
        for variant in &front.variants {
            let bytes = std::fs::read(media.media_dir().join(&variant.object_key)).unwrap();
            let decoded = image::load_from_memory(&bytes).unwrap();
            assert_eq!((decoded.width() as i32, decoded.height() as i32), (variant.width, variant.height));
            let format = image::guess_format(&bytes).unwrap();
            let expected = if variant.format == "webp" { image::ImageFormat::WebP } else { image::ImageFormat::Jpeg };
            assert_eq!(format, expected, "{}", variant.name);
        }
        // Nothing is upscaled: the small PNG's print is its own size.
        let plan_print = items[1].variants.iter().find(|v| v.name == "print").unwrap();
        assert_eq!((plan_print.width, plan_print.height), (400, 300));

        let completed = media.ctx.events_of(EventType::MediaUploadCompleted).await;
        assert_eq!(completed.len(), 1);
        let data = &completed[0].data;
        assert_eq!(data["operation_id"], body["operation_id"]);
        assert_eq!(data["listing_number"], number.as_str());
        assert_eq!(data["files"].as_array().unwrap().len(), 2);
        assert_eq!(data["files"][0]["variants"].as_array().unwrap().len(), 6);
        let schema = EventType::MediaUploadCompleted.catalog_entry().data_schema();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let problems: Vec<String> = validator.iter_errors(data).map(|e| e.to_string()).collect();
        assert!(problems.is_empty(), "the event matches its catalog schema: {problems:?}");
    }

    async fn a_corrupt_file_fails_alone_with_a_reason(backend) {
        let media = Media::new(backend).await;
        let mut truncated = jpeg(800, 600);
        truncated.truncate(truncated.len() / 3);
        let response = media
            .upload(&[
                Part::File("files", "broken.jpg", truncated),
                Part::File("files", "good.jpg", jpeg(640, 480)),
            ])
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        let url = media.local(body["progress_url"].as_str().unwrap());
        let events = media.events(&url, None).await;
        let failed: Vec<&Value> = events.iter().filter(|(name, _)| name == "failed").map(|(_, data)| data).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["media_id"], body["files"][0]["media_id"]);
        assert!(!failed[0]["reason"].as_str().unwrap().is_empty());
        let (_, last) = events.last().unwrap();
        assert_eq!(last["event"], "completed");
        let files = last["operation"]["files"].as_array().unwrap();
        assert_eq!(files[0]["status"], "failed");
        assert!(files[0]["failure_reason"].is_string());
        assert_eq!(files[1]["status"], "ready");
        // A late subscriber gets the current state first, then the end.
        let late = media.events(&url, None).await;
        let names: Vec<&str> = late.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["snapshot", "completed"]);
        assert_eq!(late[0].1["status"], "completed");
        // Progress through the key, too.
        let operation_id = body["operation_id"].as_str().unwrap();
        let with_key = media.events(&media.ctx.app.url(&format!("/api/v1/progress/{operation_id}")), Some(&media.key)).await;
        assert_eq!(with_key.last().unwrap().0, "completed");
    }

    async fn refused_uploads_leave_no_object_and_no_row(backend) {
        let media = Media::new(backend).await;
        let cases: Vec<(Vec<u8>, StatusCode, &str)> = vec![
            (multipart(&[Part::Field("listing_number", "")]), StatusCode::BAD_REQUEST, "upload.no_files"),
            (b"no parts here at all".to_vec(), StatusCode::BAD_REQUEST, "upload.malformed"),
            (
                multipart(&[
                    Part::File("files", "ok.jpg", jpeg(64, 64)),
                    Part::File("files", "page.html", b"<html><body>hello</body></html>".to_vec()),
                ]),
                StatusCode::BAD_REQUEST,
                "upload.unsupported_format",
            ),
            (
                multipart(&[
                    Part::File("files", "ok.jpg", jpeg(64, 64)),
                    Part::File("files", "huge.jpg", {
                        let mut big = jpeg(64, 64);
                        big.resize(50 * 1024 * 1024 + 1, 0);
                        big
                    }),
                ]),
                StatusCode::PAYLOAD_TOO_LARGE,
                "upload.file_too_large",
            ),
            (
                multipart(&[Part::File("files", "ok.jpg", jpeg(64, 64)), Part::Field("colour", "red")]),
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation.failed",
            ),
            (
                multipart(&[Part::Field("storage_strategy", "tape"), Part::File("files", "ok.jpg", jpeg(64, 64))]),
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation.failed",
            ),
            (
                multipart(&[Part::File("files", "ok.jpg", jpeg(64, 64)), Part::Field("listing_number", "NOPE234")]),
                StatusCode::NOT_FOUND,
                "listing_not_found",
            ),
        ];
        for (body, status, code) in cases {
            let response = media.upload_to("/api/v1/media/upload", &media.key, &idempotency_key(), body).await;
            expect_error(response, status, code).await;
            assert!(stored_files(&media.media_dir()).is_empty(), "{code} left objects behind");
        }
        // Not multipart at all (no boundary).
        let plain = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/upload"))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", idempotency_key())
            .header("Content-Type", "multipart/form-data")
            .body("x")
            .send()
            .await
            .unwrap();
        expect_error(plain, StatusCode::BAD_REQUEST, "upload.malformed").await;
        let many: Vec<Part<'_>> = (0..201).map(|i| Part::File("files", if i % 2 == 0 { "a.jpg" } else { "b.jpg" }, jpeg(8, 8))).collect();
        let response = media.upload(&many).await;
        expect_error(response, StatusCode::BAD_REQUEST, "upload.too_many_files").await;
        assert!(stored_files(&media.media_dir()).is_empty());
        // Another agency's listing is not found, and nothing stays.
        let other = media.ctx.app.agency().await;
        let other_ctx_number = {
            let other_key = media.ctx.app.key(&other, &[Scope::ListingsWrite]).await;
            let agent = crate::listings::add_user(&media.ctx.app, &other, storage::users::Role::Agent).await;
            let created = media
                .ctx
                .app
                .client
                .post(media.ctx.app.url("/api/v1/listings"))
                .header("X-API-Key", &other_key)
                .header("X-Idempotency-Key", idempotency_key())
                .json(&serde_json::json!({"address": "1 Other Road", "owner_user_id": other.owner_id, "agent_one_id": agent}))
                .send()
                .await
                .unwrap();
            let created: Value = created.json().await.unwrap();
            created["listing_number"].as_str().unwrap().to_owned()
        };
        let response = media
            .upload_to(
                &format!("/api/v1/listings/{other_ctx_number}/media"),
                &media.key,
                &idempotency_key(),
                multipart(&[Part::File("files", "ok.jpg", jpeg(32, 32))]),
            )
            .await;
        expect_error(response, StatusCode::NOT_FOUND, "listing_not_found").await;
        assert!(stored_files(&media.media_dir()).is_empty());
        assert_eq!(crate::support::sql::count_for_agency(media.ctx.app.store.db(), "media_items", media.ctx.agency.id.as_str()).await, 0);
        // Without a key, a scope or an idempotency key.
        let body = multipart(&[Part::File("files", "ok.jpg", jpeg(32, 32))]);
        let anonymous = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/upload"))
            .header("Content-Type", format!("multipart/form-data; boundary={BOUNDARY}"))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        expect_error(anonymous, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
        let reader = media.ctx.app.key(&media.ctx.agency, &[Scope::ListingsRead]).await;
        let response = media.upload_to("/api/v1/media/upload", &reader, &idempotency_key(), body.clone()).await;
        expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        let no_key = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/upload"))
            .header("X-API-Key", &media.key)
            .header("Content-Type", format!("multipart/form-data; boundary={BOUNDARY}"))
            .body(body)
            .send()
            .await
            .unwrap();
        expect_error(no_key, StatusCode::BAD_REQUEST, "idempotency.missing").await;
    }

    async fn a_retried_upload_replays_and_a_different_body_conflicts(backend) {
        let media = Media::new(backend).await;
        let key = idempotency_key();
        let body = multipart(&[Part::File("files", "front.jpg", jpeg(320, 200))]);
        let first = media.upload_to("/api/v1/media/upload", &media.key, &key, body.clone()).await;
        assert_eq!(first.status(), StatusCode::OK);
        let first: Value = first.json().await.unwrap();
        let again = media.upload_to("/api/v1/media/upload", &media.key, &key, body).await;
        assert_eq!(again.status(), StatusCode::OK);
        assert_eq!(again.headers()["x-idempotent-replay"], "true");
        let again: Value = again.json().await.unwrap();
        assert_eq!(again["operation_id"], first["operation_id"]);
        let other = multipart(&[Part::File("files", "front.jpg", jpeg(320, 201))]);
        let conflict = media.upload_to("/api/v1/media/upload", &media.key, &key, other).await;
        expect_error(conflict, StatusCode::CONFLICT, "idempotency_key_conflict").await;
        let items = crate::support::sql::count_for_agency(media.ctx.app.store.db(), "media_items", media.ctx.agency.id.as_str()).await;
        assert_eq!(items, 1, "the replay stored nothing new");
    }

    async fn progress_of_an_unknown_or_foreign_operation_is_not_found(backend) {
        let media = Media::new(backend).await;
        let response = media.upload(&[Part::File("files", "a.jpg", jpeg(64, 64))]).await;
        let body: Value = response.json().await.unwrap();
        let operation_id = body["operation_id"].as_str().unwrap();
        let url = media.local(body["progress_url"].as_str().unwrap());
        let other = media.ctx.app.agency().await;
        let other_key = media.ctx.app.key(&other, &[Scope::MediaWrite]).await;
        let foreign = media.ctx.app.get(&format!("/api/v1/progress/{operation_id}")).header("X-API-Key", &other_key).send().await.unwrap();
        expect_error(foreign, StatusCode::NOT_FOUND, "operation_not_found").await;
        let unknown = media.ctx.app.get("/api/v1/progress/op_01JD00000000000000000000ZZ").header("X-API-Key", &media.key).send().await.unwrap();
        expect_error(unknown, StatusCode::NOT_FOUND, "operation_not_found").await;
        let tampered = url.replace("token=", "token=x");
        expect_error(media.ctx.app.client.get(&tampered).send().await.unwrap(), StatusCode::NOT_FOUND, "operation_not_found").await;
        // A token is for its own operation only.
        let other_op = url.replace(operation_id, "op_01JD00000000000000000000ZZ");
        expect_error(media.ctx.app.client.get(&other_op).send().await.unwrap(), StatusCode::NOT_FOUND, "operation_not_found").await;
        let anonymous = media.ctx.app.get(&format!("/v1/progress/{operation_id}")).send().await.unwrap();
        expect_error(anonymous, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    }
}

/// The listing's media, as its read shows them.
async fn listing_media(media: &Media, number: &str) -> Vec<Value> {
    let read = media
        .ctx
        .app
        .get(&format!("/api/v1/listings/{number}"))
        .header("X-API-Key", &media.key)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let read: Value = read.json().await.unwrap();
    read["media"].as_array().unwrap().clone()
}

/// Uploads `parts` to the listing and waits for the end of processing.
async fn upload_and_wait(media: &Media, number: &str, parts: &[Part<'_>]) -> Value {
    let response = media
        .upload_to(
            &format!("/api/v1/listings/{number}/media"),
            &media.key,
            &idempotency_key(),
            multipart(parts),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let events = media
        .events(&media.local(body["progress_url"].as_str().unwrap()), None)
        .await;
    assert_eq!(events.last().unwrap().0, "completed");
    body
}

backend_tests! {
    async fn a_listing_read_shows_media_with_signed_variant_downloads(backend) {
        let media = Media::new(backend).await;
        let number = media.ctx.listing().await;
        upload_and_wait(
            &media,
            &number,
            &[
                Part::Field("storage_strategy", "hybrid"),
                Part::Field("related_entity_type", "room"),
                Part::Field("related_entity_id", "kitchen"),
                Part::File("files", "front.jpg", jpeg(900, 600)),
            ],
        )
        .await;
        let items = listing_media(&media, &number).await;
        assert_eq!(items.len(), 1);
        let item = &items[0];
        assert_eq!(item["status"], "ready");
        assert_eq!(item["storage_strategy"], "hybrid");
        assert_eq!((item["related_entity_type"].as_str(), item["related_entity_id"].as_str()), (Some("room"), Some("kitchen")));
        let completed = media.ctx.events_of(EventType::MediaUploadCompleted).await;
        assert_eq!(completed[0].data["related_entity_type"], "room");
        assert_eq!(completed[0].data["storage_strategy"], "hybrid");
        let variants = item["variants"].as_array().unwrap();
        assert_eq!(variants.len(), 6);
        let mls = variants.iter().find(|v| v["name"] == "mls").unwrap();
        let url = mls["url"].as_str().unwrap();
        let local = media.ctx.app.url(&format!("/api/v1/media/{}", url.split_once("/api/v1/media/").unwrap().1));
        let download = media.ctx.app.client.get(&local).send().await.unwrap();
        assert_eq!(download.status(), StatusCode::OK);
        assert_eq!(download.headers()["content-type"], "image/jpeg");
        let bytes = download.bytes().await.unwrap();
        let decoded = image::load_from_memory(&bytes).unwrap();
        assert_eq!((decoded.width(), decoded.height()), (900, 600));
        // A changed signature, variant or expiry opens nothing.
        for tampered in [
            local.replace("signature=", "signature=x"),
            local.replace("/variants/mls", "/variants/print"),
            local.replace("expires=", "expires=9"),
        ] {
            let response = media.ctx.app.client.get(&tampered).send().await.unwrap();
            expect_error(response, StatusCode::NOT_FOUND, "media_not_found").await;
        }
    }

    async fn videos_and_pdfs_get_variants_from_a_poster_frame_and_first_page(backend) {
        let media = Media::new(backend).await;
        let number = media.ctx.listing().await;
        let dir = tempfile::tempdir().unwrap();
        let video = dir.path().join("tour.mp4");
        let made = std::process::Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=2:size=320x240:rate=10", "-pix_fmt", "yuv420p"])
            .arg(&video)
            .status()
            .expect("ffmpeg is installed by .ci/run");
        assert!(made.success());
        let pdf = minimal_pdf();
        upload_and_wait(
            &media,
            &number,
            &[
                Part::File("files", "tour.mp4", std::fs::read(&video).unwrap()),
                Part::File("files", "brochure.pdf", pdf),
            ],
        )
        .await;
        let items = listing_media(&media, &number).await;
        let video_item = items.iter().find(|i| i["detected_type"] == "mp4").unwrap();
        assert_eq!(video_item["status"], "ready", "{video_item}");
        assert!((video_item["duration_seconds"].as_f64().unwrap() - 2.0).abs() < 0.2);
        let print = video_item["variants"].as_array().unwrap().iter().find(|v| v["name"] == "print").unwrap();
        assert_eq!((print["width"].as_i64(), print["height"].as_i64()), (Some(320), Some(240)));
        let pdf_item = items.iter().find(|i| i["detected_type"] == "pdf").unwrap();
        assert_eq!(pdf_item["status"], "ready", "{pdf_item}");
        assert_eq!(pdf_item["variants"].as_array().unwrap().len(), 6);
    }
}

/// A one-page PDF with a filled rectangle, with a correct cross-reference table.
fn minimal_pdf() -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 300] /Contents 4 0 R >>".to_owned(),
        {
            let stream = "0 0 1 rg 50 50 300 200 re f";
            format!(
                "<< /Length {} >>\nstream\n{stream}\nendstream",
                stream.len()
            )
        },
    ];
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", index + 1).as_bytes());
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

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

#[tokio::test]
async fn a_session_uploads_with_its_csrf_token_and_an_idempotency_key() {
    let media = Media::new(tests::Backend::Sqlite).await;
    let email = crate::sessions::owner_login(&media.ctx.app, &media.ctx.agency).await;
    let signed = crate::sessions::sign_in(&media.ctx.app, &email).await;
    let body = multipart(&[Part::File("files", "front.jpg", jpeg(64, 64))]);
    let request = |key: Option<&str>| {
        let request = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/upload"))
            .header(
                "Content-Type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(body.clone());
        match key {
            Some(key) => request.header("X-Idempotency-Key", key),
            None => request,
        }
    };
    let key = idempotency_key();
    let without_token = signed
        .cookie_only(request(Some(&key)))
        .send()
        .await
        .unwrap();
    expect_error(without_token, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
    assert!(stored_files(&media.media_dir()).is_empty());
    // Every POST carries an idempotency key, a session's too.
    let without_key = signed.send(request(None)).send().await.unwrap();
    expect_error(without_key, StatusCode::BAD_REQUEST, "idempotency.missing").await;
    assert!(stored_files(&media.media_dir()).is_empty());
    let response = signed.send(request(Some(&key))).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().contains_key("x-rate-limit-limit"));
    assert!(!response.headers().contains_key("x-idempotent-replay"));
    let uploaded: Value = response.json().await.unwrap();
    assert_eq!(uploaded["files"][0]["detected_type"], "jpeg");
    // The same request again is the same upload, replayed.
    let again = signed.send(request(Some(&key))).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(again.headers()["x-idempotent-replay"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["operation_id"], uploaded["operation_id"]);
    let items = crate::support::sql::count_for_agency(
        media.ctx.app.store.db(),
        "media_items",
        media.ctx.agency.id.as_str(),
    )
    .await;
    assert_eq!(items, 1, "the replay stored nothing new");
    // Another body under the key conflicts.
    let other = multipart(&[Part::File("files", "front.jpg", jpeg(64, 65))]);
    let conflict = signed
        .send(
            media
                .ctx
                .app
                .client
                .post(media.ctx.app.url("/api/v1/media/upload"))
                .header("X-Idempotency-Key", &key)
                .header(
                    "Content-Type",
                    format!("multipart/form-data; boundary={BOUNDARY}"),
                )
                .body(other),
        )
        .send()
        .await
        .unwrap();
    expect_error(conflict, StatusCode::CONFLICT, "idempotency_key_conflict").await;
    let events = media
        .events(
            &media.local(uploaded["progress_url"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(events.last().unwrap().0, "completed");
}

#[tokio::test]
async fn each_streaming_limit_refuses_the_request_and_removes_what_it_stored() {
    let limits = api::routes::media::upload::UploadLimits {
        max_files: 3,
        max_file_bytes: 1024 * 1024,
        max_request_bytes: 2 * 1024 * 1024 + 512 * 1024,
        timeout: Duration::from_secs(2),
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
async fn an_unreachable_object_store_is_a_500_the_same_key_may_retry() {
    // An S3 endpoint nothing listens on.
    let settings = storage::objects::S3Settings {
        endpoint: Some(format!(
            "http://127.0.0.1:{}",
            tests::deployment::free_port()
        )),
        region: Some("us-east-1".to_owned()),
        access_key_id: Some("unreachable".to_owned()),
        secret_access_key: Some("unreachable".to_owned()),
        allow_http: Some(true),
    };
    let app = TestApp::builder(tests::Backend::Sqlite)
        .media_target(storage::objects::ObjectStoreTarget::S3 {
            url: "s3://media-down".to_owned(),
            settings,
        })
        .spawn()
        .await;
    let media = Media::on(app).await;
    let number = media.ctx.listing().await;
    let path = format!("/api/v1/listings/{number}/media");
    let idempotency = idempotency_key();
    let body = multipart(&[Part::File("files", "front.jpg", jpeg(64, 48))]);
    let response = media
        .upload_to(&path, &media.key, &idempotency, body.clone())
        .await;
    let refused = expect_error(
        response,
        StatusCode::INTERNAL_SERVER_ERROR,
        "upload.storage_unavailable",
    )
    .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("safe to retry"),
        "{refused}"
    );
    assert!(listing_media(&media, &number).await.is_empty(), "no rows");
    // Nothing was recorded under the key: the retry runs again (and fails
    // again), it is not a replay of the first answer.
    let again = media.upload_to(&path, &media.key, &idempotency, body).await;
    assert!(again.headers().get("x-idempotent-replay").is_none());
    let second = expect_error(
        again,
        StatusCode::INTERNAL_SERVER_ERROR,
        "upload.storage_unavailable",
    )
    .await;
    assert_ne!(
        second["error"]["request_id"],
        refused["error"]["request_id"]
    );
    assert!(
        listing_media(&media, &number).await.is_empty(),
        "still no rows"
    );
}

#[tokio::test]
async fn a_timed_out_upload_to_s3_leaves_no_object_and_no_unfinished_multipart_upload() {
    let s3 = tests::s3::S3Server::start().await;
    let limits = api::routes::media::upload::UploadLimits {
        timeout: Duration::from_secs(2),
        ..api::routes::media::upload::UploadLimits::default()
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
