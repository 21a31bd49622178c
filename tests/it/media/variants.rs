//! The processing job's variants: six per image at their sizes, stored and
//! decodable, announced by `media.upload.completed`; a video's come from a
//! poster frame and a PDF's from its first page; a corrupt file fails alone.

use reqwest::StatusCode;
use serde_json::Value;
use storage::rules::events::EventType;
use tests::backend_tests;

use super::*;

backend_tests! {
    async fn an_upload_streams_to_the_store_and_gets_six_variants_per_image(backend) {
        let media = Media::new(backend).await;
        let number = media.ctx.listing().await;
        let response = media
            .upload(&[
                Part::Field("listing_number", &number),
                Part::File("files", "front.jpg", jpeg(3000, 2000)),
                Part::File("files", "plan.png", png(400, 300)),
            ])
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["listing_number"], number.as_str());
        assert_eq!(body["storage_strategy"], "cloud");
        let files = body["files"].as_array().unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0]["detected_type"], "jpeg");
        assert_eq!(files[1]["detected_type"], "png");
        assert_eq!(files[1]["filename"], "plan.png");
        let url = body["progress_url"].as_str().unwrap();
        assert!(url.contains("/v1/progress/op_") && url.contains("token="), "{url}");

        // Through the token URL, as a browser's EventSource would.
        let events = media.events(&media.local(url), None).await;
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names.first(), Some(&"snapshot"), "{names:?}");
        assert_eq!(names.last(), Some(&"completed"), "{names:?}");
        let (_, last) = events.last().unwrap();
        assert_eq!(last["operation"]["status"], "completed");
        for file in last["operation"]["files"].as_array().unwrap() {
            assert_eq!(file["status"], "ready", "{file}");
            assert_eq!(file["variants"].as_array().unwrap().len(), 6, "{file}");
        }

        // The variants are in the store, decodable, at their sizes.
        let operation = storage::ids::OperationId::parse(body["operation_id"].as_str().unwrap()).unwrap();
        let items = media.ctx.app.store.media().operation_items(&media.ctx.live(), &operation).await.unwrap();
        let front = &items[0];
        let sizes: Vec<(String, i32, i32)> = front.variants.iter().map(|v| (v.name.clone(), v.width, v.height)).collect();
        for expected in [
            ("mls", 1275, 850),
            ("print", 3000, 2000),
            ("thumbnail", 150, 150),
            ("web", 2550, 1700),
            ("webp_thumb", 400, 400),
            ("webp_web", 2550, 1700),
        ] {
            let found = sizes.iter().find(|(name, _, _)| name == expected.0).unwrap();
            assert_eq!((found.1, found.2), (expected.1, expected.2), "{}", expected.0);
        }
        for variant in &front.variants {
            let bytes = std::fs::read(media.media_dir().join(variant.object_key.as_str())).unwrap();
            let decoded = image::load_from_memory(&bytes).unwrap();
            assert_eq!((decoded.width() as i32, decoded.height() as i32), (variant.width, variant.height));
            let format = image::guess_format(&bytes).unwrap();
            let expected = if variant.format == "webp" { image::ImageFormat::WebP } else { image::ImageFormat::Jpeg };
            assert_eq!(format, expected, "{}", variant.name);
        }
        // Nothing is upscaled: the small PNG's print is its own size.
        let plan_print = items[1].variants.iter().find(|v| v.name == "print").unwrap();
        assert_eq!((plan_print.width, plan_print.height), (400, 300));

        let completed = media.ctx.events_of(EventType::MediaUploadCompleted).await;
        assert_eq!(completed.len(), 1);
        let data = &completed[0].data;
        assert_eq!(data["operation_id"], body["operation_id"]);
        assert_eq!(data["listing_number"], number.as_str());
        assert_eq!(data["files"].as_array().unwrap().len(), 2);
        assert_eq!(data["files"][0]["variants"].as_array().unwrap().len(), 6);
        let schema = EventType::MediaUploadCompleted.catalog_entry().data_schema();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let problems: Vec<String> = validator.iter_errors(data).map(|e| e.to_string()).collect();
        assert!(problems.is_empty(), "the event matches its catalog schema: {problems:?}");
        // Every media item of the listing is ready: its delivery is complete.
        let delivered = media.ctx.events_of(EventType::MediaDeliveryCompleted).await;
        assert_eq!(delivered.len(), 1);
        assert_eq!(delivered[0].data["listing_number"], number.as_str());
        assert_eq!(delivered[0].data["delivered_count"], 2);
        let schema = EventType::MediaDeliveryCompleted.catalog_entry().data_schema();
        assert!(jsonschema::draft202012::new(&schema).unwrap().is_valid(&delivered[0].data));
    }

    async fn a_corrupt_file_fails_alone_with_a_reason(backend) {
        let media = Media::new(backend).await;
        let mut truncated = jpeg(800, 600);
        truncated.truncate(truncated.len() / 3);
        let response = media
            .upload(&[
                Part::File("files", "broken.jpg", truncated),
                Part::File("files", "good.jpg", jpeg(640, 480)),
            ])
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        let url = media.local(body["progress_url"].as_str().unwrap());
        let events = media.events(&url, None).await;
        let failed: Vec<&Value> = events.iter().filter(|(name, _)| name == "failed").map(|(_, data)| data).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0]["media_id"], body["files"][0]["media_id"]);
        assert!(!failed[0]["reason"].as_str().unwrap().is_empty());
        let (_, last) = events.last().unwrap();
        assert_eq!(last["event"], "completed");
        let files = last["operation"]["files"].as_array().unwrap();
        assert_eq!(files[0]["status"], "failed");
        assert!(files[0]["failure_reason"].is_string());
        assert_eq!(files[1]["status"], "ready");
        // A late subscriber gets the current state first, then the end.
        let late = media.events(&url, None).await;
        let names: Vec<&str> = late.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["snapshot", "completed"]);
        assert_eq!(late[0].1["status"], "completed");
        // Progress through the key, too.
        let operation_id = body["operation_id"].as_str().unwrap();
        let with_key = media.events(&media.ctx.app.url(&format!("/api/v1/progress/{operation_id}")), Some(&media.key)).await;
        assert_eq!(with_key.last().unwrap().0, "completed");
    }

    async fn videos_and_pdfs_get_variants_from_a_poster_frame_and_first_page(backend) {
        let media = Media::new(backend).await;
        let number = media.ctx.listing().await;
        let dir = tempfile::tempdir().unwrap();
        let video = dir.path().join("tour.mp4");
        let made = std::process::Command::new("ffmpeg")
            .args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=2:size=320x240:rate=10", "-pix_fmt", "yuv420p"])
            .arg(&video)
            .status()
            .expect("ffmpeg is installed by .ci/run");
        assert!(made.success());
        let pdf = minimal_pdf();
        upload_and_wait(
            &media,
            &number,
            &[
                Part::File("files", "tour.mp4", std::fs::read(&video).unwrap()),
                Part::File("files", "brochure.pdf", pdf),
            ],
        )
        .await;
        let items = listing_media(&media, &number).await;
        let video_item = items.iter().find(|i| i["detected_type"] == "mp4").unwrap();
        assert_eq!(video_item["status"], "ready", "{video_item}");
        assert!((video_item["duration_seconds"].as_f64().unwrap() - 2.0).abs() < 0.2);
        let print = video_item["variants"].as_array().unwrap().iter().find(|v| v["name"] == "print").unwrap();
        assert_eq!((print["width"].as_i64(), print["height"].as_i64()), (Some(320), Some(240)));
        let pdf_item = items.iter().find(|i| i["detected_type"] == "pdf").unwrap();
        assert_eq!(pdf_item["status"], "ready", "{pdf_item}");
        assert_eq!(pdf_item["variants"].as_array().unwrap().len(), 6);
    }
}
