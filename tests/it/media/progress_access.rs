//! Who reads an operation's progress: an unknown or another agency's
//! operation, or a tampered or misapplied token, is not found; no key is
//! unauthorized.

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::backend_tests;

use super::*;
use crate::support::expect_error;

backend_tests! {
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
