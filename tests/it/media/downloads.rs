//! Downloads: a listing read shows its media with signed variant URLs that
//! serve the variant, and a tampered URL opens nothing.

use reqwest::StatusCode;
use storage::rules::events::EventType;
use tests::backend_tests;

use super::*;
use crate::support::expect_error;

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
}
