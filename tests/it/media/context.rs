//! Shared context of the media tests: [`Media`], a listing context with a key
//! that uploads, and the progress streams and listing reads the tests check.

use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::{TestApp, idempotency_key};

use super::fixtures::{BOUNDARY, Part, multipart};
use crate::listings::Ctx;

/// A listing context and a key that uploads.
pub(crate) struct Media {
    pub(crate) ctx: Ctx,
    pub(crate) key: String,
}

impl Media {
    pub(crate) async fn new(backend: tests::Backend) -> Self {
        Self::on(TestApp::builder(backend).with_workers().spawn().await).await
    }

    /// On `app`, with a key that uploads and reads and writes listings.
    pub(crate) async fn on(app: TestApp) -> Self {
        Self::with_scopes(
            app,
            &[Scope::MediaWrite, Scope::ListingsRead, Scope::ListingsWrite],
        )
        .await
    }

    /// On `app`, with a key of `scopes`.
    pub(crate) async fn with_scopes(app: TestApp, scopes: &[Scope]) -> Self {
        let ctx = Ctx::with_app(app).await;
        let key = ctx.app.key(&ctx.agency, scopes).await;
        Self { ctx, key }
    }

    pub(super) fn media_dir(&self) -> std::path::PathBuf {
        self.ctx.app.db.data_dir().join("media")
    }

    pub(crate) async fn upload_to(
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
    pub(super) async fn upload_stalling(
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

    pub(super) async fn upload(&self, parts: &[Part<'_>]) -> reqwest::Response {
        self.upload_to(
            "/api/v1/media/upload",
            &self.key,
            &idempotency_key(),
            multipart(parts),
        )
        .await
    }

    /// Reads a progress stream to its end; returns (event, data) pairs.
    pub(crate) async fn events(&self, url: &str, key: Option<&str>) -> Vec<(String, Value)> {
        read_events(self.open_stream(url, key).await).await
    }

    /// Opens a progress stream: when this returns, the server has subscribed.
    pub(crate) async fn open_stream(&self, url: &str, key: Option<&str>) -> reqwest::Response {
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
    pub(crate) fn local(&self, url: &str) -> String {
        let path = url.split_once("/v1/progress/").unwrap().1;
        self.ctx.app.url(&format!("/v1/progress/{path}"))
    }
}

/// Reads an opened progress stream to its end; returns (event, data) pairs.
/// The timeout only turns a stream that never ends into a failure; the whole
/// suite shares two cores, so it is generous.
pub(crate) async fn read_events(response: reqwest::Response) -> Vec<(String, Value)> {
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

/// The listing's media, as its read shows them.
pub(crate) async fn listing_media(media: &Media, number: &str) -> Vec<Value> {
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
pub(crate) async fn upload_and_wait(media: &Media, number: &str, parts: &[Part<'_>]) -> Value {
    upload_to_and_wait(media, &format!("/api/v1/listings/{number}/media"), parts).await
}

/// Uploads `parts` to no listing (a logo) and waits for the end of processing.
pub(crate) async fn upload_alone_and_wait(media: &Media, parts: &[Part<'_>]) -> Value {
    upload_to_and_wait(media, "/api/v1/media/upload", parts).await
}

async fn upload_to_and_wait(media: &Media, path: &str, parts: &[Part<'_>]) -> Value {
    let response = media
        .upload_to(path, &media.key, &idempotency_key(), multipart(parts))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let events = media
        .events(&media.local(body["progress_url"].as_str().unwrap()), None)
        .await;
    assert_eq!(events.last().unwrap().0, "completed");
    body
}
