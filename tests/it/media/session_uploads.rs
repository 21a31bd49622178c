//! Session uploads: a signed-in session uploads with its CSRF token and an
//! idempotency key, and replays and conflicts like a key's upload.

use reqwest::StatusCode;
use serde_json::Value;
use tests::idempotency_key;

use super::*;
use crate::support::expect_error;

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
