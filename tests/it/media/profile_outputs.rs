//! Delivery profiles applied: a new photo is rendered to every active
//! profile in its processing, with an automatic focal point the `cover`
//! crops contain; the outputs are listed on the listing read and
//! downloadable; a moved focal point renders the crops again; a new
//! profile renders the agency's existing photos in the background.

use std::time::Duration;

use image::{GenericImageView, Rgb, RgbImage};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use storage::api_keys::Scope;
use tests::deployment::eventually;
use tests::{TestApp, backend_tests, idempotency_key};

use super::*;

const SCOPES: [Scope; 5] = [
    Scope::MediaWrite,
    Scope::ListingsRead,
    Scope::ListingsWrite,
    Scope::DeliveryProfilesRead,
    Scope::DeliveryProfilesWrite,
];

const PATIENCE: Duration = Duration::from_secs(240);

/// A 1500x1000 photo: a sky-to-lawn gradient with a red door whose centre
/// is at (0.85, 0.25).
pub(crate) fn photo_with_red_door() -> Vec<u8> {
    let (w, h) = (1500u32, 1000u32);
    let image = RgbImage::from_fn(w, h, |x, y| {
        let door = (x as i32 - 1275).abs() < 60 && (y as i32 - 250).abs() < 60;
        if door {
            Rgb([210, 20, 20])
        } else {
            let t = y as f32 / h as f32;
            Rgb([
                (150.0 - 60.0 * t) as u8,
                (180.0 - 20.0 * t) as u8,
                (220.0 - 130.0 * t) as u8,
            ])
        }
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode_image(&image)
        .unwrap();
    out
}

/// A 200x100 opaque magenta logo (PNG).
pub(crate) fn magenta_logo() -> Vec<u8> {
    let logo = RgbImage::from_pixel(200, 100, Rgb([255, 0, 255]));
    let mut out = std::io::Cursor::new(Vec::new());
    logo.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

async fn send(
    media: &Media,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut request = media
        .ctx
        .app
        .client
        .request(method, media.ctx.app.url(path))
        .header("X-API-Key", &media.key)
        .header("X-Idempotency-Key", idempotency_key());
    if let Some(body) = body {
        request = request.json(body);
    }
    request.send().await.unwrap()
}

/// Uploads `file` to a new listing, waits for it: (listing number, media id).
async fn upload(media: &Media, name: &str, bytes: Vec<u8>) -> (String, String) {
    let number = media.ctx.listing().await;
    upload_and_wait(media, &number, &[Part::File("files", name, bytes)]).await;
    let id = listing_media(media, &number).await[0]["media_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (number, id)
}

/// Creates a profile; its id.
async fn profile(media: &Media, body: Value) -> String {
    let response = send(
        media,
        Method::POST,
        "/api/v1/delivery-profiles",
        Some(&body),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let created: Value = response.json().await.unwrap();
    created["id"].as_str().unwrap().to_owned()
}

/// The photo's read once every output is ready (or failed).
async fn settled(media: &Media, number: &str, count: usize) -> Value {
    eventually(PATIENCE, "every output rendered", || async {
        let item = listing_media(media, number).await.remove(0);
        let outputs = item["outputs"].as_array().cloned().unwrap_or_default();
        (outputs.len() == count && outputs.iter().all(|o| o["status"] != "pending")).then_some(item)
    })
    .await
}

/// Downloads an output's URL and decodes it.
async fn fetched(media: &Media, output: &Value) -> (Vec<u8>, image::DynamicImage) {
    let url = output["url"].as_str().unwrap();
    let response = media.ctx.app.client.get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{url}");
    let bytes = response.bytes().await.unwrap().to_vec();
    let decoded = image::load_from_memory(&bytes).unwrap();
    (bytes, decoded)
}

fn is_red(p: image::Rgba<u8>) -> bool {
    p[0] > 150 && p[1] < 90 && p[2] < 90
}

fn is_magenta(p: image::Rgba<u8>) -> bool {
    p[0] > 200 && p[1] < 80 && p[2] > 200
}

fn any_pixel(image: &image::DynamicImage, test: fn(image::Rgba<u8>) -> bool) -> bool {
    image.pixels().any(|(_, _, p)| test(p))
}

backend_tests! {
    async fn a_new_photo_gets_every_active_profiles_outputs_around_its_focal_point(backend) {
        let media = Media::with_scopes(TestApp::builder(backend).with_workers().spawn().await, &SCOPES).await;
        let (_, logo) = upload(&media, "logo.png", magenta_logo()).await;
        let mls = profile(&media, json!({"name": "MLS", "outputs": [
            {"name": "mls_small", "fit": "cover", "width": 840, "height": 525, "format": "jpeg", "max_bytes": 60000, "metadata": "strip"},
            {"name": "square", "fit": "cover", "width": 300, "height": 300, "format": "webp", "metadata": "strip"},
        ]})).await;
        let branded = profile(&media, json!({"name": "Branded", "outputs": [
            {"name": "hero", "fit": "contain", "width": 1000, "height": 1000, "format": "jpeg", "quality": 85, "metadata": "copyright",
             "watermark": {"media_id": logo, "position": "bottom_left", "scale": 0.2, "opacity": 1.0}},
            {"name": "small", "fit": "contain", "width": 320, "height": 320, "format": "avif", "metadata": "strip"},
        ]})).await;

        let (number, _) = upload(&media, "front.jpg", photo_with_red_door()).await;
        let item = settled(&media, &number, 4).await;
        assert_eq!(item["status"], "ready");
        let focal = &item["focal_point"];
        assert_eq!(focal["source"], "auto", "{item}");
        let (x, y) = (focal["x"].as_f64().unwrap(), focal["y"].as_f64().unwrap());
        assert!((x - 0.85).abs() < 0.08 && (y - 0.25).abs() < 0.08, "the door: {focal}");

        let outputs = item["outputs"].as_array().unwrap();
        let find = |profile: &str, name: &str| outputs.iter().find(|o| o["profile_id"] == profile && o["name"] == name).unwrap().clone();
        for output in outputs {
            assert_eq!(output["status"], "ready", "{output}");
        }
        let mls_small = find(&mls, "mls_small");
        let (bytes, image) = fetched(&media, &mls_small).await;
        assert_eq!((image.width(), image.height()), (840, 525));
        assert!(bytes.len() <= 60_000, "{} bytes", bytes.len());
        assert_eq!(mls_small["bytes"], bytes.len());
        assert_eq!((mls_small["width"].as_u64(), mls_small["format"].as_str()), (Some(840), Some("jpeg")));
        assert!(any_pixel(&image, is_red), "the crop holds the door");

        let (_, square) = fetched(&media, &find(&mls, "square")).await;
        assert_eq!((square.width(), square.height()), (300, 300));
        assert!(any_pixel(&square, is_red), "the square crop holds the door");
        assert!(!any_pixel(&square, is_magenta), "no watermark in the unbranded set");

        let hero = find(&branded, "hero");
        let (_, hero_image) = fetched(&media, &hero).await;
        assert_eq!((hero_image.width(), hero_image.height()), (1000, 667));
        // The logo is 200 px wide (0.2 of 1000), 20 px (3% of 667) from the left and bottom.
        assert!(is_magenta(hero_image.get_pixel(60, 667 - 40)), "the logo at the bottom left");
        assert!(!is_magenta(hero_image.get_pixel(900, 60)), "nothing at the top right");

        let small = find(&branded, "small");
        let response = media.ctx.app.client.get(small["url"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(response.headers()["content-type"], "image/avif");
        let avif = response.bytes().await.unwrap();
        assert_eq!(&avif[4..12], b"ftypavif");
        assert_eq!((small["width"].as_u64(), small["height"].as_u64()), (Some(320), Some(213)));
    }

    async fn a_profiles_outputs_are_zipped_a_folder_per_output(backend) {
        let media = Media::with_scopes(TestApp::builder(backend).with_workers().spawn().await, &SCOPES).await;
        let id = profile(&media, json!({"name": "MLS", "outputs": [
            {"name": "mls_small", "fit": "cover", "width": 320, "height": 200, "format": "jpeg", "metadata": "strip"},
            {"name": "web", "fit": "contain", "width": 400, "height": 400, "format": "webp", "metadata": "strip"},
        ]})).await;
        let (number, photo) = upload(&media, "front.jpg", photo_with_red_door()).await;
        let item = settled(&media, &number, 2).await;
        let (_, plan) = upload(&media, "plan.pdf", minimal_pdf()).await;

        for (body, field) in [
            (json!({"file_ids": [photo], "archive_name": "mls", "profile_id": "dpf_01JD3Q8W5T7X2Z9Y4V6R1N0M8K"}), "profile_id"),
            (json!({"file_ids": [photo, plan], "archive_name": "mls", "profile_id": id}), "file_ids[1]"),
        ] {
            let refused = send(&media, Method::POST, "/api/v1/media/archive", Some(&body)).await;
            let error = crate::support::expect_error(refused, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"][field].is_string(), "{body} → {error}");
        }
        let body = json!({"file_ids": [photo], "archive_name": "mls", "profile_id": id});
        let accepted = send(&media, Method::POST, "/api/v1/media/archive", Some(&body)).await;
        assert_eq!(accepted.status(), StatusCode::ACCEPTED);
        let accepted: Value = accepted.json().await.unwrap();
        let operation = accepted["operation_id"].as_str().unwrap().to_owned();
        let read = eventually(PATIENCE, "the archive written", || async {
            let read: Value = send(&media, Method::GET, &format!("/api/v1/media/archive/{operation}"), None).await.json().await.unwrap();
            (read["status"] != "processing").then_some(read)
        })
        .await;
        assert_eq!(read["status"], "completed", "{read}");
        let zip = media.ctx.app.client.get(read["download_url"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(zip.status(), StatusCode::OK);
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(zip.bytes().await.unwrap().to_vec())).unwrap();
        let mut names: Vec<String> = (0..zip.len()).map(|i| zip.by_index(i).unwrap().name().unwrap().to_string()).collect();
        names.sort();
        assert_eq!(names, ["mls_small/front.jpg", "web/front.webp"]);
        let mut small = Vec::new();
        std::io::Read::read_to_end(&mut zip.by_name("mls_small/front.jpg").unwrap(), &mut small).unwrap();
        let listed = item["outputs"].as_array().unwrap().iter().find(|o| o["name"] == "mls_small").unwrap();
        assert_eq!(listed["bytes"], small.len());
        assert_eq!(image::load_from_memory(&small).unwrap().dimensions(), (320, 200));
    }

    async fn the_property_page_shows_the_branded_set_once_rendered(backend) {
        let media = Media::with_scopes(TestApp::builder(backend).with_workers().spawn().await, &SCOPES).await;
        let page = |number: String| {
            let url = media.ctx.app.url(&format!("/property/{number}"));
            let client = media.ctx.app.client.clone();
            async move {
                let response = client.get(url).send().await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                response.text().await.unwrap()
            }
        };
        // An unbranded profile alone: the page keeps the variants.
        profile(&media, json!({"name": "MLS", "outputs": [
            {"name": "mls", "fit": "contain", "width": 600, "height": 600, "format": "jpeg", "metadata": "strip"},
        ]})).await;
        let (first, _) = upload(&media, "front.jpg", photo_with_red_door()).await;
        settled(&media, &first, 1).await;
        let html = page(first.clone()).await;
        assert!(html.contains("/variants/") && !html.contains("/outputs/"), "{html}");

        let (_, logo) = upload(&media, "logo.png", magenta_logo()).await;
        let branded = profile(&media, json!({"name": "Branded", "outputs": [
            {"name": "large", "fit": "contain", "width": 1200, "height": 1200, "format": "jpeg", "metadata": "copyright",
             "watermark": {"media_id": logo, "position": "bottom_right", "scale": 0.2, "opacity": 0.8}},
            {"name": "small", "fit": "contain", "width": 600, "height": 600, "format": "webp", "metadata": "copyright",
             "watermark": {"media_id": logo, "position": "bottom_right", "scale": 0.2, "opacity": 0.8}},
            {"name": "square", "fit": "cover", "width": 400, "height": 400, "format": "jpeg", "metadata": "strip"},
        ]})).await;
        settled(&media, &first, 4).await;
        let html = page(first).await;
        assert!(html.contains(&format!("/outputs/{branded}/large")), "the branded JPEG: {html}");
        assert!(html.contains(&format!("/outputs/{branded}/small")), "the branded WebP: {html}");
        assert!(!html.contains(&format!("/outputs/{branded}/square")), "a crop is not the photo whole");
        assert!(!html.contains("/variants/"), "{html}");
    }

    async fn a_moved_focal_point_renders_the_crops_again(backend) {
        let media = Media::with_scopes(TestApp::builder(backend).with_workers().spawn().await, &SCOPES).await;
        profile(&media, json!({"name": "Square", "outputs": [
            {"name": "square", "fit": "cover", "width": 200, "height": 200, "format": "jpeg", "metadata": "strip"},
            {"name": "whole", "fit": "contain", "width": 300, "height": 300, "format": "jpeg", "metadata": "strip"},
        ]})).await;
        let (number, id) = upload(&media, "front.jpg", photo_with_red_door()).await;
        let before = settled(&media, &number, 2).await;
        let square = before["outputs"].as_array().unwrap().iter().find(|o| o["name"] == "square").unwrap().clone();
        let whole = before["outputs"].as_array().unwrap().iter().find(|o| o["name"] == "whole").unwrap().clone();
        assert!(any_pixel(&fetched(&media, &square).await.1, is_red));

        // Far from the door: the square crop of the left of the photo leaves it out.
        let moved = send(&media, Method::PATCH, &format!("/api/v1/media/{id}"), Some(&json!({"focal_point": {"x": 0.1, "y": 0.9}}))).await;
        assert_eq!(moved.status(), StatusCode::OK);
        let moved: Value = moved.json().await.unwrap();
        let listed = moved["outputs"].as_array().unwrap();
        assert_eq!(listed.iter().find(|o| o["name"] == "square").unwrap()["status"], "pending", "{moved}");
        assert_eq!(listed.iter().find(|o| o["name"] == "whole").unwrap()["status"], "ready", "a box does not move");
        let after = settled(&media, &number, 2).await;
        assert_eq!(after["focal_point"], json!({"x": 0.1, "y": 0.9, "source": "manual"}));
        let square = after["outputs"].as_array().unwrap().iter().find(|o| o["name"] == "square").unwrap().clone();
        assert!(!any_pixel(&fetched(&media, &square).await.1, is_red), "the door is out of the crop");
        let whole_after = after["outputs"].as_array().unwrap().iter().find(|o| o["name"] == "whole").unwrap();
        assert_eq!(whole_after["bytes"], whole["bytes"]);
    }

    async fn a_new_profile_renders_the_existing_library_in_the_background(backend) {
        let media = Media::with_scopes(TestApp::builder(backend).with_workers().spawn().await, &SCOPES).await;
        let mut photos = Vec::new();
        for index in 0..6u32 {
            photos.push(upload(&media, &format!("p{index}.jpg"), jpeg(400 + index * 10, 300)).await.0);
        }
        let profile_body = json!({"name": "Thumbs", "outputs": [
            {"name": "thumb", "fit": "cover", "width": 120, "height": 120, "format": "webp", "metadata": "strip"},
        ]});
        let id = profile(&media, profile_body).await;
        for number in &photos {
            let item = settled(&media, number, 1).await;
            let output = &item["outputs"][0];
            assert_eq!((output["profile_id"].as_str(), output["status"].as_str()), (Some(id.as_str()), Some("ready")));
            assert_eq!((output["width"].as_u64(), output["height"].as_u64()), (Some(120), Some(120)));
        }
        // A new revision replaces the outputs; the old name's are forgotten.
        let changed = send(&media, Method::PATCH, &format!("/api/v1/delivery-profiles/{id}"), Some(&json!({"outputs": [
            {"name": "tiny", "fit": "cover", "width": 64, "height": 64, "format": "jpeg", "metadata": "strip"},
        ]}))).await;
        assert_eq!(changed.status(), StatusCode::OK);
        for number in &photos {
            let item = settled(&media, number, 1).await;
            assert_eq!((item["outputs"][0]["name"].as_str(), item["outputs"][0]["width"].as_u64()), (Some("tiny"), Some(64)));
        }
        // A deleted profile's outputs go with it.
        let deleted = send(&media, Method::DELETE, &format!("/api/v1/delivery-profiles/{id}"), None).await;
        assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
        let item = listing_media(&media, &photos[0]).await.remove(0);
        assert_eq!(item["outputs"], json!([]));
    }
}
