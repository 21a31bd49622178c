//! `enable_optimization=false`: the original is kept and no variant made,
//! whatever the file, the flag may follow the files, and an unreadable value
//! is refused.

use reqwest::StatusCode;
use storage::rules::events::EventType;

use super::bucket::{PREFIX, bucket_keys, bucket_object, data_dir_keys, item_keys, with_s3};
use super::*;
use crate::support::expect_error;

#[tokio::test]
async fn without_optimization_the_original_is_kept_and_no_variant_made() {
    let (s3, media) = with_s3().await;
    let number = media.ctx.listing().await;
    let photo = jpeg(900, 600);
    let pdf = minimal_pdf();
    // Unlike storage_strategy, the flag may come after the files.
    let body = upload_and_wait(
        &media,
        &number,
        &[
            Part::File("files", "front.jpg", photo.clone()),
            Part::File("files", "brochure.pdf", pdf.clone()),
            Part::Field("enable_optimization", "false"),
        ],
    )
    .await;
    let operation_id = body["operation_id"].as_str().unwrap();
    // Every file is ready, with no variant; nothing but originals is stored.
    let items = listing_media(&media, &number).await;
    assert_eq!(items.len(), 2);
    for item in &items {
        assert_eq!(item["status"], "ready", "{item}");
        assert!(item["variants"].as_array().unwrap().is_empty(), "{item}");
    }
    let mut originals = Vec::new();
    for (file, uploaded) in body["files"].as_array().unwrap().iter().zip([&photo, &pdf]) {
        let (original_key, variant_keys) =
            item_keys(&media, file["media_id"].as_str().unwrap()).await;
        assert!(variant_keys.is_empty());
        assert_eq!(&bucket_object(&s3, &original_key).await, uploaded);
        originals.push(format!("{PREFIX}/{original_key}"));
    }
    originals.sort();
    assert_eq!(bucket_keys(&s3).await, originals, "only the originals");
    assert!(data_dir_keys(&media).is_empty());
    // Progress ends with the operation completed, each file ready and bare.
    let events = media
        .events(
            &media
                .ctx
                .app
                .url(&format!("/api/v1/progress/{operation_id}")),
            Some(&media.key),
        )
        .await;
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "completed");
    assert_eq!(data["operation"]["status"], "completed");
    for file in data["operation"]["files"].as_array().unwrap() {
        assert_eq!(file["status"], "ready", "{file}");
        assert!(file["variants"].as_array().unwrap().is_empty(), "{file}");
    }
    // The completion event lists the files, ready, each with no variants.
    let completed = media.ctx.events_of(EventType::MediaUploadCompleted).await;
    assert_eq!(completed.len(), 1);
    for file in completed[0].data["files"].as_array().unwrap() {
        assert_eq!(file["status"], "ready", "{file}");
        assert!(file["variants"].as_array().unwrap().is_empty(), "{file}");
    }
    // An unreadable value is refused.
    let response = media
        .upload(&[
            Part::Field("enable_optimization", "maybe"),
            Part::File("files", "front.jpg", jpeg(32, 32)),
        ])
        .await;
    let refused = expect_error(
        response,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;
    assert!(refused["error"]["details"]["fields"]["enable_optimization"].is_string());
}
