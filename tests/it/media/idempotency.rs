//! Idempotent uploads: a retry under the same key replays, another body
//! conflicts, and an upload the object store refused records nothing under
//! its key, so the same key may retry.

use reqwest::StatusCode;
use serde_json::Value;
use tests::{TestApp, backend_tests, idempotency_key};

use super::*;
use crate::support::expect_error;

backend_tests! {
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

backend_tests! {
    /// A request that runs past the lease (a slow upload) renews its
    /// reservation, so a retry meanwhile is told it is in progress rather
    /// than running it a second time; the lease is short only for a
    /// reservation whose process died.
    async fn an_upload_running_past_the_lease_keeps_its_key(backend) {
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).with_workers().spawn().await;
        let media = Media::on(app).await;
        let key = idempotency_key();
        let body = multipart(&[Part::File("files", "slow.jpg", jpeg(320, 200))]);
        let cut = body.len() / 2;
        // The second half arrives when the test sends it.
        let (chunks, stream) = futures::channel::mpsc::unbounded::<Result<Vec<u8>, std::io::Error>>();
        chunks.unbounded_send(Ok(body[..cut].to_vec())).unwrap();
        let request = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/media/upload"))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", &key)
            .header("Content-Type", format!("multipart/form-data; boundary={BOUNDARY}"))
            .body(reqwest::Body::wrap_stream(stream))
            .send();
        let upload = tokio::spawn(request);
        let db = media.ctx.app.store.db().clone();
        let first_lease = tests::deployment::eventually(
            std::time::Duration::from_secs(30),
            "the upload's reservation",
            || async { crate::support::sql::idempotency_lease(&db, &key).await },
        )
        .await;
        // Past most of the lease, the running request renews it.
        let lease = i64::try_from(api::middleware::idempotency::LEASE.as_secs()).unwrap();
        clock.advance_seconds(lease - 1);
        tests::deployment::eventually(
            std::time::Duration::from_secs(30),
            "a renewal of the reservation",
            || async {
                crate::support::sql::idempotency_lease(&db, &key)
                    .await
                    .filter(|renewed| *renewed > first_lease)
            },
        )
        .await;
        // The first lease is over; the renewed one holds.
        clock.advance_seconds(2);
        let retry = media.upload_to("/api/v1/media/upload", &media.key, &key, body.clone()).await;
        expect_error(retry, StatusCode::CONFLICT, "idempotency_key_in_progress").await;

        chunks.unbounded_send(Ok(body[cut..].to_vec())).unwrap();
        drop(chunks);
        let first = upload.await.unwrap().unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let again = media.upload_to("/api/v1/media/upload", &media.key, &key, body).await;
        assert_eq!(again.headers()["x-idempotent-replay"], "true");
    }
}
