//! `/property/{listing_number}`: a listing's public page shows its address,
//! status and delivered photos (WebP with JPEG fallback, loaded in a real
//! browser) and nothing an agency keeps to itself; sandbox, cancelled and
//! unknown listings are a 404 page; a CDN may cache it.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tests::browser::Browser;
use tests::{Backend, idempotency_key};

use super::context::{Media, upload_and_wait};
use super::fixtures::{Part, jpeg};

async fn page(media: &Media, number: &str) -> reqwest::Response {
    media
        .ctx
        .app
        .client
        .get(media.ctx.app.url(&format!("/property/{number}")))
        .send()
        .await
        .unwrap()
}

async fn expect_not_found_page(response: reqwest::Response) {
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = response.text().await.unwrap();
    assert!(html.contains("Property not found"), "{html}");
}

#[tokio::test]
async fn a_property_page_shows_the_delivered_photos_in_a_browser() {
    let media = Media::new(Backend::Sqlite).await;
    let number = media.ctx.listing().await;
    upload_and_wait(
        &media,
        &number,
        &[
            Part::File("files", "front.jpg", jpeg(1800, 1200)),
            Part::File("files", "garden.jpg", jpeg(1200, 800)),
        ],
    )
    .await;

    let tour = media
        .ctx
        .patch(
            &format!("/api/v1/listings/{number}/sections/tour3d"),
            &json!({"operation": "set", "url": "https://tours.example.com/elm-street"}),
        )
        .await;
    assert_eq!(tour.status(), StatusCode::OK);
    let plans = media
        .ctx
        .patch(
            &format!("/api/v1/listings/{number}/sections/floorplan"),
            &json!({"operation": "set", "files": [{"url": "https://cdn.example.com/elm-1.pdf", "label": "Ground floor"}]}),
        )
        .await;
    assert_eq!(plans.status(), StatusCode::OK);

    let response = page(&media, &number).await;
    assert_eq!(response.status(), StatusCode::OK);
    let cache = response.headers()["cache-control"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cache.contains("public") && cache.contains("s-maxage"),
        "{cache}"
    );
    let policy = response.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("script-src 'none'"), "{policy}");
    let html = response.text().await.unwrap();
    let listing: Value = media
        .ctx
        .get(&format!("/api/v1/listings/{number}"))
        .await
        .json()
        .await
        .unwrap();
    assert!(html.contains("12 Elm Street, Springfield"), "{html}");
    for private in [
        listing["id"].as_str().unwrap(),
        listing["owner_user_id"].as_str().unwrap(),
        listing["agent_one_id"].as_str().unwrap(),
        media.ctx.agency.id.as_str(),
    ] {
        assert!(
            !html.contains(private),
            "the public page shows no ids: {private}"
        );
    }
    assert!(
        html.contains("<picture>")
            && html.contains("image/webp")
            && html.contains("loading=\"lazy\"")
    );
    assert!(
        html.contains("href=\"https://tours.example.com/elm-street\""),
        "the 3D tour"
    );
    assert!(
        html.contains("https://cdn.example.com/elm-1.pdf") && html.contains("Ground floor"),
        "the floorplans"
    );

    let browser = Browser::start().await;
    browser
        .open(&media.ctx.app.url(&format!("/property/{number}")))
        .await;
    browser.find("#gallery img", Duration::from_secs(20)).await;
    browser.look_at("property").await;
    let loaded = browser
        .run_async(
            "const done = arguments[arguments.length - 1];
             (async () => {
               const images = [...document.querySelectorAll('#gallery img')];
               for (const image of images) {
                 image.scrollIntoView();
                 if (!image.complete || image.naturalWidth === 0) {
                   await new Promise((ok) => { image.onload = ok; image.onerror = ok; });
                 }
               }
               done(images.map((image) => ({ width: image.naturalWidth, src: image.currentSrc })));
             })();",
            json!([]),
            Duration::from_secs(60),
        )
        .await;
    let loaded = loaded.as_array().unwrap();
    assert_eq!(loaded.len(), 2, "{loaded:?}");
    for image in loaded {
        assert!(image["width"].as_u64().unwrap() > 0, "{image}");
        assert!(
            image["src"].as_str().unwrap().contains("webp"),
            "Chromium takes the WebP source: {image}"
        );
    }
    // The pages a visitor meets when there is no listing to show, or when a
    // cancel came too late.
    browser.open(&media.ctx.app.url("/property/NOSUCH1")).await;
    browser.find("#problem", Duration::from_secs(20)).await;
    browser.look_at("property-not-found").await;
    browser
        .open(
            &media
                .ctx
                .app
                .url(&format!("/dashboard/listings/{number}/cancel")),
        )
        .await;
    browser.find("main h1", Duration::from_secs(20)).await;
    browser.look_at("cancel-help").await;
}

#[tokio::test]
async fn sandbox_cancelled_and_unknown_listings_have_no_public_page() {
    let media = Media::new(Backend::Sqlite).await;
    let sandbox_key = media.ctx.sandbox_key().await;
    let created = media
        .ctx
        .app
        .client
        .post(media.ctx.app.url("/api/v1/listings"))
        .header("X-API-Key", &sandbox_key)
        .header("X-Idempotency-Key", idempotency_key())
        .json(&media.ctx.new_listing())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let sandbox: Value = created.json().await.unwrap();
    expect_not_found_page(page(&media, sandbox["listing_number"].as_str().unwrap()).await).await;

    let number = media.ctx.listing().await;
    assert_eq!(page(&media, &number).await.status(), StatusCode::OK);
    let cancelled = media
        .ctx
        .post(&format!("/api/v1/listings/{number}/cancel"), &json!({}))
        .await;
    assert_eq!(cancelled.status(), StatusCode::OK);
    expect_not_found_page(page(&media, &number).await).await;
    expect_not_found_page(page(&media, "NOSUCH1").await).await;
    expect_not_found_page(page(&media, &"x".repeat(300)).await).await;

    let help = media
        .ctx
        .app
        .client
        .get(
            media
                .ctx
                .app
                .url(&format!("/dashboard/listings/{number}/cancel")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(help.status(), StatusCode::OK);
    let help = help.text().await.unwrap();
    assert!(
        help.contains("cancellation cutoff") && help.contains(&number),
        "{help}"
    );
}
