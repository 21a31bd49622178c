//! Refused uploads: every malformed, unsupported, oversized or unauthorized
//! upload is refused with its code and leaves no object and no row.

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::{backend_tests, idempotency_key};

use super::*;
use crate::support::expect_error;

backend_tests! {
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
            let agent = crate::listings::add_user(&media.ctx.app, &other, storage::people::users::Role::Agent).await;
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
}

backend_tests! {
    /// A file name is capped at 255 bytes of UTF-8: a longer one is refused
    /// before anything of the request is kept (the file before it included),
    /// and a name of exactly 255 bytes is stored as sent.
    async fn a_file_name_over_255_bytes_is_refused_and_nothing_is_kept(backend) {
        let media = Media::new(backend).await;
        // 89 characters, but 259 bytes: the limit counts bytes.
        let long = format!("{}.jpg", "日".repeat(85));
        assert_eq!(long.len(), 259);
        let body = multipart(&[
            Part::File("files", "ok.jpg", jpeg(32, 32)),
            Part::File("files", &long, jpeg(32, 32)),
        ]);
        let response = media.upload_to("/api/v1/media/upload", &media.key, &idempotency_key(), body).await;
        let refused = expect_error(response, StatusCode::BAD_REQUEST, "upload.filename_too_long").await;
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("255 bytes") && message.contains("File 2"), "{message}");
        assert!(!message.contains(&long), "the name is not repeated back");
        assert!(stored_files(&media.media_dir()).is_empty());
        assert_eq!(
            crate::support::sql::count_for_agency(media.ctx.app.store.db(), "media_items", media.ctx.agency.id.as_str()).await,
            0
        );
        // Exactly 255 bytes is accepted and kept whole.
        let fits = format!("{}.jpg", "a".repeat(251));
        assert_eq!(fits.len(), 255);
        let response = media.upload(&[Part::File("files", &fits, jpeg(32, 32))]).await;
        assert_eq!(response.status(), StatusCode::OK);
        let accepted: Value = response.json().await.unwrap();
        assert_eq!(accepted["files"][0]["filename"], fits.as_str());
    }
}
