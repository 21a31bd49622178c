//! Uploads whose jobs went wrong: never queued (the sweep pushes them), lost
//! (pushed again), or failing every attempt (the item fails and the upload
//! completes); and a delivery profile's sweep whose push the queue refused
//! (the maintenance pushes it).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use tests::TestApp;

use super::*;

#[tokio::test]
async fn an_item_whose_job_was_lost_is_pushed_again_by_the_sweep() {
    let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
    let app = TestApp::builder(tests::Backend::Sqlite)
        .clock(clock.clone())
        .with_workers()
        .spawn()
        .await;
    let agency = app.agency().await;
    let tenant = storage::Tenant::new(agency.id.clone(), storage::Environment::Live);
    // An upload whose rows committed but whose job push never happened.
    let id = storage::ids::MediaId::generate();
    let key = storage::media::StorageKey::original(
        &tenant,
        &id,
        storage::media::MediaType::Jpeg.extension(),
    );
    let dir = app.db.data_dir().join("media");
    std::fs::create_dir_all(dir.join(key.as_str()).parent().unwrap()).unwrap();
    let original = jpeg(200, 100);
    std::fs::write(dir.join(key.as_str()), &original).unwrap();
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
        filename: "lost.jpg".into(),
        size_bytes: original.len() as i64,
        media_type: storage::media::MediaType::Jpeg,
        content_sha256: tests::sha256_hex(&original),
        object_key: key,
    };
    app.store
        .media()
        .create_upload(&tenant, &operation, &options, &[item])
        .await
        .unwrap();
    let sweep = workers::handlers::maintenance::Maintenance::SweepMedia;
    assert_eq!(
        sweep.run(app.state.platform()).await.unwrap(),
        0,
        "not stale yet"
    );
    clock.advance_seconds(301);
    assert_eq!(sweep.run(app.state.platform()).await.unwrap(), 1);
    let ready = tests::deployment::eventually(
        Duration::from_secs(30),
        "the swept item processed",
        || async {
            let item = app.store.media().item(&tenant, &id).await.unwrap();
            (item.status == storage::media::MediaStatus::Ready).then_some(item)
        },
    )
    .await;
    assert_eq!(ready.variants.len(), 6);
}

/// The item once it reaches `status` (within 30 seconds).
async fn item_reaching(
    media: &Media,
    tenant: &storage::Tenant,
    id: &storage::ids::MediaId,
    status: storage::media::MediaStatus,
    what: &str,
) -> storage::media::MediaItem {
    tests::deployment::eventually(Duration::from_secs(30), what, || async {
        let item = media.ctx.app.store.media().item(tenant, id).await.unwrap();
        (item.status == status).then_some(item)
    })
    .await
}

#[tokio::test]
async fn an_upload_whose_jobs_were_not_queued_is_queued_once_the_queue_is_back() {
    let app = TestApp::builder(tests::Backend::Sqlite)
        .with_workers()
        .spawn()
        .await;
    let media = Media::with_scopes(app, &[Scope::MediaWrite]).await;
    media.ctx.app.refuse_jobs("media_variants", true).await;
    let response = media
        .upload(&[Part::File("files", "front.jpg", jpeg(200, 100))])
        .await;
    // The rows are committed, so the upload is accepted.
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["files"][0]["status"], "queued");
    let tenant = media.ctx.live();
    let id = storage::ids::MediaId::parse(body["files"][0]["media_id"].as_str().unwrap()).unwrap();
    let item = media
        .ctx
        .app
        .store
        .media()
        .item(&tenant, &id)
        .await
        .unwrap();
    assert_eq!(item.status, storage::media::MediaStatus::Queued);
    assert!(
        media.media_dir().join(item.object_key.as_str()).is_file(),
        "the original stays where its row points"
    );
    // The API keeps offering the push: once the queue takes jobs again the
    // item is processed, without waiting minutes for the media sweep.
    media.ctx.app.refuse_jobs("media_variants", false).await;
    let ready = item_reaching(
        &media,
        &tenant,
        &id,
        storage::media::MediaStatus::Ready,
        "the item processed once the queue was back",
    )
    .await;
    assert_eq!(ready.variants.len(), 6);
}

#[tokio::test]
async fn an_item_whose_job_fails_every_attempt_fails_and_completes_its_upload() {
    let app = TestApp::builder(tests::Backend::Sqlite)
        .with_workers()
        .spawn()
        .await;
    let media = Media::with_scopes(app, &[Scope::MediaWrite]).await;
    // Every progress write of this agency fails, so every attempt of the
    // job fails (after it marked its item processing).
    let storage::Database::Sqlite(sqlite) = media.ctx.app.store.db() else {
        unreachable!("a SQLite app");
    };
    let refuse = format!(
        "create trigger refuse_progress before insert on operation_progress
         when new.agency_id = '{}'
         begin select raise(abort, 'progress refused'); end",
        media.ctx.agency.id
    );
    crate::support::sql::sqlite_schema_change(sqlite.pool(), &refuse).await;
    let response = media
        .upload(&[Part::File("files", "front.jpg", jpeg(320, 200))])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let tenant = media.ctx.live();
    let id = storage::ids::MediaId::parse(body["files"][0]["media_id"].as_str().unwrap()).unwrap();
    let operation =
        storage::ids::OperationId::parse(body["operation_id"].as_str().unwrap()).unwrap();
    let failed = item_reaching(
        &media,
        &tenant,
        &id,
        storage::media::MediaStatus::Failed,
        "the item failed once its job was given up on",
    )
    .await;
    assert_eq!(
        failed.failure_reason.as_deref(),
        Some(workers::handlers::process_media::GIVEN_UP_REASON)
    );
    // The upload completes after its item failed (a write of its own, once
    // the failed state was offered to the progress stream).
    let status =
        tests::deployment::eventually(Duration::from_secs(30), "the upload completed", || async {
            let stored = media
                .ctx
                .app
                .store
                .media()
                .operation(&tenant, &operation)
                .await
                .unwrap();
            (stored.status != "processing").then_some(stored.status)
        })
        .await;
    assert_eq!(status, "failed", "its only item failed");
    // Its progress ends, though no state of it could be stored.
    let events = media
        .events(&media.local(body["progress_url"].as_str().unwrap()), None)
        .await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["snapshot", "completed"]);
    assert_eq!(
        events[1].1["operation"]["files"][0]["failure_reason"],
        "processing failed"
    );
    // The workers are still writing: the drop waits its turn.
    crate::support::sql::sqlite_schema_change(sqlite.pool(), "drop trigger refuse_progress").await;
}

#[tokio::test]
async fn a_profile_whose_sweep_was_not_queued_is_swept_by_the_maintenance() {
    let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
    let app = TestApp::builder(tests::Backend::Sqlite)
        .clock(clock.clone())
        .with_workers()
        .spawn()
        .await;
    let media = Media::with_scopes(
        app,
        &[
            Scope::MediaWrite,
            Scope::ListingsRead,
            Scope::ListingsWrite,
            Scope::DeliveryProfilesWrite,
        ],
    )
    .await;
    let number = media.ctx.listing().await;
    upload_and_wait(
        &media,
        &number,
        &[Part::File("files", "front.jpg", jpeg(300, 200))],
    )
    .await;
    let app = &media.ctx.app;
    let profile_call = |method: reqwest::Method, path: String, body: Value| {
        app.client
            .request(method, app.url(&path))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&body)
            .send()
    };
    let outputs = || async {
        listing_media(&media, &number).await.remove(0)["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["status"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let sweep = workers::handlers::maintenance::Maintenance::SweepProfiles;
    let platform = app.state.platform();

    // The queue refuses the sweep: the profile is saved all the same.
    app.refuse_jobs("delivery_outputs", true).await;
    let created = profile_call(
        reqwest::Method::POST,
        "/api/v1/delivery-profiles".to_owned(),
        serde_json::json!({"name": "Board", "outputs": [
            {"name": "small", "fit": "contain", "width": 120, "height": 120, "format": "jpeg", "metadata": "strip"}
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let profile: Value = created.json().await.unwrap();
    let id = profile["id"].as_str().unwrap().to_owned();
    assert_eq!(outputs().await, ["pending"]);
    app.refuse_jobs("delivery_outputs", false).await;
    assert_eq!(sweep.run(platform).await.unwrap(), 0, "not overdue yet");

    // Once overdue, the maintenance pushes it; the photo is rendered, and
    // the round swept is not pushed again.
    clock.advance_seconds(121);
    assert_eq!(sweep.run(platform).await.unwrap(), 1);
    tests::deployment::eventually(Duration::from_secs(60), "the sweep rendered", || async {
        (outputs().await == ["ready"]).then_some(())
    })
    .await;
    tests::deployment::eventually(Duration::from_secs(30), "the round swept", || async {
        (sweep.run(platform).await.unwrap() == 0).then_some(())
    })
    .await;

    // Paused, a photo uploaded meanwhile is not rendered to it; resumed, a
    // new round sweeps it, even though the revision is the same.
    let patch = |active: bool| {
        profile_call(
            reqwest::Method::PATCH,
            format!("/api/v1/delivery-profiles/{id}"),
            serde_json::json!({ "active": active }),
        )
    };
    assert_eq!(patch(false).await.unwrap().status(), StatusCode::OK);
    upload_and_wait(
        &media,
        &number,
        &[Part::File("files", "garden.jpg", jpeg(200, 300))],
    )
    .await;
    let resumed: Value = patch(true).await.unwrap().json().await.unwrap();
    assert_eq!(resumed["revision"], 1, "a resume changes no output");
    tests::deployment::eventually(
        Duration::from_secs(60),
        "the resumed sweep rendered",
        || async {
            let all: Vec<Vec<String>> = listing_media(&media, &number)
                .await
                .iter()
                .map(|item| {
                    item["outputs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|o| o["status"].as_str().unwrap().to_owned())
                        .collect()
                })
                .collect();
            (all == [vec!["ready".to_owned()], vec!["ready".to_owned()]]).then_some(())
        },
    )
    .await;
}
