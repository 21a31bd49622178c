//! The delivery profile pages in headless Chromium: an administrator creates
//! the unbranded MLS set and the branded set (with the agency's logo) from
//! their templates, previews a listing's photos rendered to the branded set,
//! moves a photo's focal point with a click and sees the crops rendered again
//! around it, downloads the set as a ZIP and sees it on the listing's public
//! property page. Looked at 1280 and 375 px wide. Over HTTP: the pages'
//! refusals (another agency's profile, a listing that does not exist, an
//! agent who administers nothing).

use std::io::Read;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use storage::people::users::Role;
use tests::browser::Browser;
use tests::deployment::eventually;
use tests::{Backend, TestApp};

use super::PATIENCE;
use crate::media::{
    Media, Part, listing_media, magenta_logo, photo_with_red_door, upload_alone_and_wait,
    upload_and_wait,
};
use crate::sessions::{Signed, account, owner_login, sign_in};
use crate::support::expect_error;

const SCOPES: [Scope; 5] = [
    Scope::MediaWrite,
    Scope::ListingsRead,
    Scope::ListingsWrite,
    Scope::DeliveryProfilesRead,
    Scope::DeliveryProfilesWrite,
];

/// How long rendering a profile's outputs may take in a debug build.
const RENDERING: Duration = Duration::from_secs(240);

/// The agency's profiles, as the API lists them.
async fn profiles(media: &Media) -> Vec<Value> {
    let page: Value = media
        .ctx
        .app
        .get("/api/v1/delivery-profiles")
        .header("X-API-Key", &media.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["items"].as_array().unwrap().clone()
}

/// Signs the owner in on `path` through the sign-in page.
async fn signed_in(browser: &Browser, media: &Media, path: &str) {
    let email = owner_login(&media.ctx.app, &media.ctx.agency).await;
    browser.open(&media.ctx.app.url(path)).await;
    let field = browser.find("#email", PATIENCE).await;
    browser.type_into(&field, &email).await;
    let field = browser.find("#password", PATIENCE).await;
    browser.type_into(&field, crate::sessions::PASSWORD).await;
    let submit = browser.find("#sign-in button[type=submit]", PATIENCE).await;
    browser.click(&submit).await;
}

#[tokio::test]
async fn an_agency_defines_previews_and_applies_its_profiles_in_the_portal() {
    let app = TestApp::builder(Backend::Sqlite)
        .with_workers()
        .spawn()
        .await;
    let media = Media::with_scopes(app, &SCOPES).await;
    upload_alone_and_wait(
        &media,
        &[Part::File("files", "agency-logo.png", magenta_logo())],
    )
    .await;
    let number = media.ctx.listing().await;
    upload_and_wait(
        &media,
        &number,
        &[Part::File("files", "front.jpg", photo_with_red_door())],
    )
    .await;
    let photo = listing_media(&media, &number).await.remove(0);
    let photo_id = photo["media_id"].as_str().unwrap().to_owned();

    let browser = Browser::start().await;
    signed_in(&browser, &media, "/settings/delivery-profiles").await;
    browser
        .wait_for_text("#no-profiles", "No delivery profiles", PATIENCE)
        .await;
    let offered = browser
        .text(&browser.find("#logo-marketing_branded", PATIENCE).await)
        .await;
    assert!(
        offered.contains("agency-logo.png"),
        "the loose logo is offered: {offered}"
    );
    browser.look_at("profiles-empty").await;

    // Both templates copied as they are.
    let create = browser
        .find("#template-mls_unbranded button[type=submit]", PATIENCE)
        .await;
    browser.click(&create).await;
    browser
        .wait_for_text("#profiles", "MLS (unbranded)", PATIENCE)
        .await;
    let create = browser
        .find("#template-marketing_branded button[type=submit]", PATIENCE)
        .await;
    browser.click(&create).await;
    let listed = browser
        .wait_for_text("#profiles", "Marketing (branded)", PATIENCE)
        .await;
    assert!(
        listed.contains("branded") && listed.contains("active"),
        "{listed}"
    );
    browser.look_at("profiles").await;
    let created = profiles(&media).await;
    assert_eq!(created.len(), 2);
    let branded = created
        .iter()
        .find(|p| p["name"] == "Marketing (branded)")
        .unwrap();
    let logo_id = branded["outputs"][0]["watermark"]["media_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for output in branded["outputs"].as_array().unwrap() {
        assert_eq!(output["watermark"]["media_id"], logo_id.as_str());
        assert_eq!(output["watermark"]["position"], "bottom_right");
    }
    let branded_id = branded["id"].as_str().unwrap().to_owned();

    // The preview: the listing's photo with its three outputs, once rendered
    // (the page looks again by itself while they are not).
    browser
        .open(&media.ctx.app.url(&format!(
            "/settings/delivery-profiles/{branded_id}?listing={}",
            number.to_lowercase()
        )))
        .await;
    browser.find(&format!("#photo-{photo_id}"), PATIENCE).await;
    browser
        .wait_for_text("#outputs", "bottom right, 18 % wide, 85 % opaque", PATIENCE)
        .await;
    let before = eventually(RENDERING, "the branded outputs rendered", || async {
        let item = listing_media(&media, &number).await.remove(0);
        let mine: Vec<Value> = item["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["profile_id"] == branded_id.as_str())
            .cloned()
            .collect();
        (mine.len() == 3 && mine.iter().all(|o| o["status"] == "ready")).then_some(item)
    })
    .await;
    let shown = browser
        .wait_for_text(&format!("#photo-{photo_id}"), "1500 × 844", PATIENCE)
        .await;
    assert!(
        shown.contains("hero") && shown.contains("square") && shown.contains("full"),
        "{shown}"
    );
    assert!(shown.contains("WebP"), "{shown}");
    browser.look_at("profile-preview").await;
    assert_eq!(before["focal_point"]["source"], "auto");

    // A click at 20 % across and 80 % down moves the focal point there; the
    // crops are rendered again around it.
    let moved = browser
        .run(
            "const button = document.querySelector('button.focal');
             const box = button.querySelector('img').getBoundingClientRect();
             button.dispatchEvent(new MouseEvent('click', {
               bubbles: true, detail: 1,
               clientX: box.left + box.width * 0.2, clientY: box.top + box.height * 0.8 }));
             return true;",
            serde_json::json!([]),
        )
        .await;
    assert_eq!(moved, Value::Bool(true));
    browser
        .wait_for_text("#status", "Focal point moved", PATIENCE)
        .await;
    let after = eventually(
        RENDERING,
        "the crops rendered around the new point",
        || async {
            let item = listing_media(&media, &number).await.remove(0);
            let ready = item["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["profile_id"] == branded_id.as_str())
                .all(|o| o["status"] == "ready");
            (item["focal_point"]["source"] == "manual" && ready).then_some(item)
        },
    )
    .await;
    let (x, y) = (
        after["focal_point"]["x"].as_f64().unwrap(),
        after["focal_point"]["y"].as_f64().unwrap(),
    );
    assert!(
        (x - 0.2).abs() < 0.02 && (y - 0.8).abs() < 0.02,
        "({x}, {y})"
    );
    browser
        .wait_for_text(
            &format!("#photo-{photo_id}"),
            "focal point manual",
            RENDERING,
        )
        .await;
    // The page stops looking again once nothing renders.
    browser
        .wait_for_text(&format!("#photo-{photo_id}"), "1000 × 1000", RENDERING)
        .await;
    let hero = |item: &Value| {
        item["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["profile_id"] == branded_id.as_str() && o["name"] == "hero")
            .unwrap()["bytes"]
            .clone()
    };
    assert_ne!(hero(&before), hero(&after), "the hero crop was made again");
    browser.look_at("profile-focal-moved").await;

    // The ZIP of the shown photos' outputs: a folder per output.
    let zip = browser.find("#zip-button", PATIENCE).await;
    browser.click(&zip).await;
    let link = browser.find("#zip-download", RENDERING).await;
    assert!(!link.is_empty());
    let href = browser
        .run(
            "return document.getElementById('zip-download').href;",
            serde_json::json!([]),
        )
        .await;
    let href = href.as_str().unwrap().to_owned();
    let archive = media.ctx.app.client.get(&href).send().await.unwrap();
    assert_eq!(archive.status(), StatusCode::OK);
    let bytes = archive.bytes().await.unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let mut names: Vec<String> = (0..zip.len())
        .map(|index| zip.by_index(index).unwrap().name().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names[0].starts_with("full/")
            && names[1].starts_with("hero/")
            && names[2].starts_with("square/"),
        "{names:?}"
    );
    let mut first = Vec::new();
    zip.by_index(0).unwrap().read_to_end(&mut first).unwrap();
    assert!(!first.is_empty());
    browser.look_at("profile-zip").await;

    // The public property page shows the branded set: its `contain`
    // output, with the logo in its pixels.
    browser
        .open(&media.ctx.app.url(&format!("/property/{number}")))
        .await;
    browser.find("picture img", PATIENCE).await;
    let source = browser
        .run(
            "return document.querySelector('picture img').getAttribute('src');",
            serde_json::json!([]),
        )
        .await;
    let source = source.as_str().unwrap().to_owned();
    assert!(
        source.contains(&format!("/outputs/{branded_id}/full")),
        "the branded full output: {source}"
    );
    browser.look_at("property-branded").await;
    browser
        .open(&media.ctx.app.url(&format!(
            "/settings/delivery-profiles/{branded_id}?listing={number}"
        )))
        .await;

    // Paused from its page: listed as paused.
    let pause = browser.find("#toggle-active", PATIENCE).await;
    browser.click(&pause).await;
    browser
        .wait_for_text("#profile-status", "paused", PATIENCE)
        .await;
    let paused = profiles(&media).await;
    assert!(
        paused
            .iter()
            .any(|p| p["id"] == branded_id.as_str() && p["active"] == false)
    );
}

#[tokio::test]
async fn the_profile_pages_refuse_what_is_not_theirs_and_say_what_to_do() {
    let app = TestApp::builder(Backend::Sqlite).spawn().await;
    let media = Media::with_scopes(app, &SCOPES).await;
    let app = &media.ctx.app;
    let owner = sign_in(app, &owner_login(app, &media.ctx.agency).await).await;
    let page = |signed: &Signed, path: &str| {
        let request = signed.cookie_only(app.get(path));
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (status, response.text().await.unwrap())
        }
    };
    let created: Value = app
        .client
        .post(app.url("/api/v1/delivery-profiles"))
        .header("X-API-Key", &media.key)
        .header("X-Idempotency-Key", tests::idempotency_key())
        .json(&serde_json::json!({"name": "Board", "outputs": [
            {"name": "small", "fit": "cover", "width": 840, "height": 525, "format": "jpeg",
             "max_bytes": 300000, "metadata": "strip"}
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();
    let profile_path = format!("/settings/delivery-profiles/{id}");

    // Its own profile, and a listing that does not exist: what to do next.
    let (status, body) = page(&owner, &format!("{profile_path}?listing=MA-0000000")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("840 × 525, cropped at the focal point"),
        "{body}"
    );
    assert!(body.contains("no listing MA-0000000"), "{body}");
    // A listing without photos.
    let number = media.ctx.listing().await;
    let (_, body) = page(&owner, &format!("{profile_path}?listing={number}")).await;
    assert!(body.contains("has no processed photos yet"), "{body}");
    // No logo yet: the branded template says how to add one.
    let (_, body) = page(&owner, "/settings/delivery-profiles").await;
    assert!(body.contains("Upload your logo first"), "{body}");
    assert!(
        body.contains(&profile_path),
        "the profile is listed: {body}"
    );

    // The sandbox has no such profile, nor has another agency, nor is an
    // id that is not one found.
    let (status, body) = page(&owner, &format!("{profile_path}?environment=sandbox")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("Live/Sandbox switch"), "{body}");
    let other = app.agency().await;
    let stranger = sign_in(app, &owner_login(app, &other).await).await;
    let (status, _) = page(&stranger, &profile_path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = page(&owner, "/settings/delivery-profiles/dpf_garbage").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An agent administers nothing: the page says whom to ask, the profile
    // is not found, and the focal point and archive calls are refused.
    let (_, agent_email) = account(app, &media.ctx.agency, Role::Agent).await;
    let agent = sign_in(app, &agent_email).await;
    let (status, body) = page(&agent, "/settings/delivery-profiles").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("id=\"not-admin\""), "{body}");
    assert!(!body.contains(&profile_path), "{body}");
    let (status, _) = page(&agent, &profile_path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let refused = agent
        .send(
            app.client
                .patch(app.url("/api/v1/media/med_01JD3Q8W5T7X2Z9Y4V6R1N0M8K")),
        )
        .header("X-Idempotency-Key", tests::idempotency_key())
        .json(&serde_json::json!({"focal_point": {"x": 0.5, "y": 0.5}}))
        .send()
        .await
        .unwrap();
    expect_error(refused, StatusCode::FORBIDDEN, "permission_denied").await;
    // The administrator's session without its CSRF token is refused too.
    let forged = owner
        .cookie_only(app.client.post(app.url("/api/v1/media/archive")))
        .header("X-Idempotency-Key", tests::idempotency_key())
        .json(&serde_json::json!({"file_ids": ["med_01JD3Q8W5T7X2Z9Y4V6R1N0M8K"], "archive_name": "x"}))
        .send()
        .await
        .unwrap();
    expect_error(forged, StatusCode::FORBIDDEN, "auth.csrf_failed").await;

    // Signed out: the sign-in page, which comes back here after.
    let anonymous = app
        .client
        .get(app.url("/settings/delivery-profiles"))
        .send()
        .await
        .unwrap();
    assert!(
        anonymous.url().path() == "/settings/sign-in"
            || anonymous.status() == StatusCode::SEE_OTHER,
        "{}",
        anonymous.url()
    );
}
