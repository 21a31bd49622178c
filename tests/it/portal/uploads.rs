//! The upload page in headless Chromium: a shoot's files chosen go to the
//! listing through tus-js-client and show ready; an upload left unfinished
//! (its half sent, its URL kept by the browser as tus-js-client keeps it)
//! is listed after a reload, and the same file chosen again resumes that
//! very upload instead of starting over. Looked at 1280 and 375 px wide.

use std::time::UNIX_EPOCH;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use serde_json::json;
use storage::api_keys::Scope;
use tests::browser::Browser;
use tests::{Backend, TestApp};

use super::PATIENCE;
use crate::media::jpeg;
use crate::sessions::owner_login;

#[tokio::test]
async fn a_shoot_uploads_from_the_browser_and_an_unfinished_file_resumes_after_a_reload() {
    let ctx = crate::listings::Ctx::with_app(
        TestApp::builder(Backend::Sqlite)
            .with_workers()
            .spawn()
            .await,
    )
    .await;
    let email = owner_login(&ctx.app, &ctx.agency).await;
    let key = ctx.app.key(&ctx.agency, &[Scope::MediaWrite]).await;
    let number = ctx.listing().await;
    let app = &ctx.app;
    let folder = tempfile::tempdir().unwrap();
    let front = folder.path().join("front.jpg");
    let garden = folder.path().join("garden.jpg");
    std::fs::write(&front, jpeg(900, 600)).unwrap();
    std::fs::write(&garden, jpeg(700, 500)).unwrap();

    let browser = Browser::start().await;
    browser.open(&app.url("/settings/uploads")).await;
    let field = browser.find("#email", PATIENCE).await;
    browser.type_into(&field, &email).await;
    let field = browser.find("#password", PATIENCE).await;
    browser.type_into(&field, crate::sessions::PASSWORD).await;
    let submit = browser.find("#sign-in button[type=submit]", PATIENCE).await;
    browser.click(&submit).await;
    browser.find("#drop-zone", PATIENCE).await;
    browser.look_at("uploads").await;

    // Two photos chosen: one batch, each row to Ready.
    let listing = browser.find("#listing-number", PATIENCE).await;
    browser.type_into(&listing, &number).await;
    let input = browser.find("#files", PATIENCE).await;
    browser.choose_files(&input, &[&front, &garden]).await;
    let said = browser
        .wait_for_text("#status", "2 of 2 files ready", PATIENCE * 6)
        .await;
    assert!(said.contains(&number), "{said}");
    let rows = browser.wait_for_text("#queue", "Ready", PATIENCE).await;
    assert_eq!(rows.matches("Ready").count(), 2, "{rows}");
    browser.look_at("uploads-done").await;

    // An upload half sent, whose URL this browser kept (as tus-js-client
    // keeps one when a page is closed midway).
    let porch_bytes = jpeg(1200, 800);
    let porch = folder.path().join("porch.jpg");
    std::fs::write(&porch, &porch_bytes).unwrap();
    let metadata = format!(
        "filename {},filetype {},listing_number {}",
        STANDARD.encode("porch.jpg"),
        STANDARD.encode("image/jpeg"),
        STANDARD.encode(&number)
    );
    let created = app
        .client
        .post(app.url("/api/v1/uploads"))
        .header("X-API-Key", &key)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", porch_bytes.len().to_string())
        .header("Upload-Metadata", &metadata)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let location = created.headers()["location"].to_str().unwrap().to_owned();
    let half = porch_bytes.len() / 2;
    let patched = app
        .client
        .patch(app.url(&location))
        .header("X-API-Key", &key)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Offset", "0")
        .header("Content-Type", "application/offset+octet-stream")
        .body(porch_bytes[..half].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::NO_CONTENT);
    let modified = std::fs::metadata(&porch)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let fingerprint = format!(
        "listing-api/live/{number}/porch.jpg/image/jpeg/{}/{modified}",
        porch_bytes.len()
    );
    let entry = json!({
        "size": porch_bytes.len(),
        "metadata": {"filename": "porch.jpg", "filetype": "image/jpeg", "listing_number": number},
        "creationTime": "2026-11-29T10:00:00.000Z",
        "uploadUrl": app.url(&location),
    });
    browser
        .run(
            "localStorage.setItem(arguments[0], arguments[1]); return true;",
            json!([format!("tus::{fingerprint}::1"), entry.to_string()]),
        )
        .await;
    browser.open(&app.url("/settings/uploads")).await;
    let earlier = browser
        .wait_for_text("#earlier-list", "porch.jpg", PATIENCE)
        .await;
    assert!(earlier.contains(&number), "{earlier}");
    browser.look_at("uploads-earlier").await;
    let listing = browser.find("#listing-number", PATIENCE).await;
    browser.type_into(&listing, &number).await;
    let input = browser.find("#files", PATIENCE).await;
    browser.choose_files(&input, &[&porch]).await;
    browser
        .wait_for_text("#status", "Every file is sent", PATIENCE * 3)
        .await;
    // The very upload went on from its half: it is complete now.
    let head = app
        .client
        .head(app.url(&location))
        .header("X-API-Key", &key)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert!(head.headers().contains_key("upload-media-id"));
    assert_eq!(
        head.headers()["upload-offset"].to_str().unwrap(),
        porch_bytes.len().to_string()
    );
    // And the browser forgot it once done.
    browser.open(&app.url("/settings/uploads")).await;
    browser.find("#drop-zone", PATIENCE).await;
    let hidden = browser
        .run(
            "return document.getElementById('earlier').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(hidden, json!(true));
}
