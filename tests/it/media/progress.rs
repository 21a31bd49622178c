//! The progress stream: every state of one image in order, and its end
//! delivered whatever the order its publishers' numbers arrive in, or made
//! from the stored status when it was never published.

use std::time::Duration;

use platform::progress::{MediaStep, ProgressEvent, ProgressState};
use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::TestApp;

use super::*;
use tests::backend_tests;

/// An upload of one JPEG recorded straight in the store (its original on
/// disk, no job queued), as a worker would find it.
async fn recorded_upload(
    app: &TestApp,
    tenant: &storage::Tenant,
) -> (storage::ids::OperationId, storage::ids::MediaId) {
    let id = storage::ids::MediaId::generate();
    let key = storage::media::StorageKey::original(
        tenant,
        &id,
        storage::media::MediaType::Jpeg.extension(),
    );
    let path = app.db.data_dir().join("media").join(key.as_str());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original = jpeg(200, 100);
    std::fs::write(&path, &original).unwrap();
    let operation = storage::ids::OperationId::generate();
    let options = storage::media::UploadOptions {
        listing_id: None,
        storage_strategy: storage::media::StorageStrategy::Cloud,
        enable_optimization: true,
        related_entity_type: None,
        related_entity_id: None,
    };
    let item = storage::media::NewMediaItem {
        id: id.clone(),
        filename: "front.jpg".into(),
        size_bytes: original.len() as i64,
        media_type: storage::media::MediaType::Jpeg,
        content_sha256: tests::sha256_hex(&original),
        object_key: key,
    };
    app.store
        .media()
        .create_upload(tenant, &operation, &options, &[item])
        .await
        .unwrap();
    (operation, id)
}

/// A media context without workers: the test drives what happens.
async fn media_without_workers(backend: tests::Backend) -> Media {
    Media::with_scopes(
        TestApp::builder(backend).spawn().await,
        &[Scope::MediaWrite],
    )
    .await
}

backend_tests! {
    async fn a_completed_state_behind_a_higher_seq_still_ends_the_stream_and_stays_latest(backend) {
        let media = media_without_workers(backend).await;
        let tenant = media.ctx.live();
        let (operation, _) = recorded_upload(&media.ctx.app, &tenant).await;
        let hub = &media.ctx.app.state.platform().progress;
        let snapshot = media.ctx.app.store.media().snapshot(&tenant, &operation).await.unwrap();
        let state = |seq: u64, step: MediaStep| ProgressState {
            event: ProgressEvent::Media { step, operation: snapshot.clone() },
            seq,
        };
        let file_done = || MediaStep::FileDone { media_id: snapshot.files[0].media_id.clone() };
        // Two publishers: the one holding seq 5 got through first.
        hub.publish(&tenant, &operation, state(5, file_done())).await.unwrap();
        let url = media.ctx.app.url(&format!("/api/v1/progress/{operation}"));
        let stream = media.open_stream(&url, Some(&media.key)).await;
        hub.publish(&tenant, &operation, state(3, MediaStep::completed())).await.unwrap();
        let events = read_events(stream).await;
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["snapshot", "completed"]);
        // The end is what a late subscriber reads, whatever comes after it.
        hub.publish(&tenant, &operation, state(9, file_done())).await.unwrap();
        let latest = media.ctx.app.store.progress().latest(&tenant, operation.as_str()).await.unwrap().unwrap();
        assert_eq!(latest.state["event"], "completed");
        let late = media.events(&url, Some(&media.key)).await;
        let names: Vec<&str> = late.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["snapshot", "completed"]);
    }

    async fn a_finished_operation_ends_its_stream_even_without_its_completed_state(backend) {
        let media = media_without_workers(backend).await;
        let tenant = media.ctx.live();
        let (operation, id) = recorded_upload(&media.ctx.app, &tenant).await;
        let url = media.ctx.app.url(&format!("/api/v1/progress/{operation}"));
        let stream = media.open_stream(&url, Some(&media.key)).await;
        // The upload finishes, but its `completed` is never published.
        let store = media.ctx.app.store.media();
        store.fail_item(&tenant, &id, "unreadable").await.unwrap();
        assert!(store.complete_upload_if_done(&tenant, &operation).await.unwrap().is_some());
        let events = read_events(stream).await;
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["snapshot", "completed"]);
        assert_eq!(events[1].1["operation"]["status"], "failed");
        // A subscriber arriving now ends at once.
        let late = media.events(&url, Some(&media.key)).await;
        let names: Vec<&str> = late.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["snapshot", "completed"]);
        assert_eq!(late[1].1["operation"]["files"][0]["failure_reason"], "unreadable");
    }
}

#[tokio::test]
async fn the_progress_of_one_image_is_every_state_in_order() {
    let media = media_without_workers(tests::Backend::Sqlite).await;
    let response = media
        .upload(&[Part::File("files", "front.jpg", jpeg(900, 600))])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let media_id = body["files"][0]["media_id"].clone();
    // Subscribed before any worker runs, so no state can be missed.
    let stream = media
        .open_stream(&media.local(body["progress_url"].as_str().unwrap()), None)
        .await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let settings = workers::runtime::RuntimeSettings {
        queues: [(<platform::kinds::ProcessMedia as platform::Job>::KIND, 1)]
            .into_iter()
            .collect(),
        heartbeat: Duration::from_secs(1),
        poll: Duration::from_millis(50),
        shutdown_timeout: Duration::from_secs(5),
        fetch_batch: None,
        agency_caps: Default::default(),
        schedules: false,
    };
    let platform = media.ctx.app.state.platform().clone();
    let runtime = tokio::spawn(workers::runtime::run(platform, settings, async move {
        let _ = stopped.await;
    }));
    let events = read_events(stream).await;
    let _ = stop.send(());
    let _ = runtime.await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    let mut expected = vec!["snapshot", "processing"];
    expected.extend(["variant_done"; 6]);
    expected.extend(["file_done", "completed"]);
    assert_eq!(names, expected);
    // The snapshot is the upload's `queued` state; each later state is numbered after it.
    assert_eq!(events[0].1["files"][0]["status"], "queued");
    let variants: Vec<&str> = events[2..8]
        .iter()
        .map(|(_, data)| data["variant"].as_str().unwrap())
        .collect();
    let mut sorted = variants.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["mls", "print", "thumbnail", "web", "webp_thumb", "webp_web"]
    );
    for (_, data) in &events[1..] {
        if data["event"] != "completed" {
            assert_eq!(data["media_id"], media_id, "{data}");
        }
    }
    let seqs: Vec<u64> = events[1..]
        .iter()
        .map(|(_, data)| data["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
    let (_, last) = events.last().unwrap();
    assert_eq!(last["operation"]["status"], "completed");
    assert_eq!(last["operation"]["files"][0]["status"], "ready");
}
