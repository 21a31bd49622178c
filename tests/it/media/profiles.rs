//! Delivery profiles through the API: defined, read, changed and deleted
//! by an agency, refused field by field, kept apart between agencies and
//! behind their scopes; the starting templates; and a photo's focal point
//! set by hand.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use storage::api_keys::Scope;
use tests::{Backend, TestApp, backend_tests, idempotency_key};

use super::*;
use crate::support::{expect_error, expect_ok};

/// A key that uploads, reads listings and manages profiles.
const SCOPES: [Scope; 5] = [
    Scope::MediaWrite,
    Scope::ListingsRead,
    Scope::ListingsWrite,
    Scope::DeliveryProfilesRead,
    Scope::DeliveryProfilesWrite,
];

async fn profiles_ctx(backend: Backend) -> Media {
    Media::with_scopes(
        TestApp::builder(backend).with_workers().spawn().await,
        &SCOPES,
    )
    .await
}

/// Sends `body` to `path` with `key` (and an idempotency key).
async fn send(
    media: &Media,
    method: Method,
    path: &str,
    key: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let mut request = media
        .ctx
        .app
        .client
        .request(method, media.ctx.app.url(path))
        .header("X-API-Key", key)
        .header("X-Idempotency-Key", idempotency_key());
    if let Some(body) = body {
        request = request.json(body);
    }
    request.send().await.unwrap()
}

/// An MLS-like profile of one `cover` output.
fn mls_profile(name: &str) -> Value {
    json!({
        "name": name,
        "outputs": [
            {"name": "mls_small", "fit": "cover", "width": 840, "height": 525, "format": "jpeg",
             "max_bytes": 300000, "metadata": "strip"},
        ],
    })
}

/// Uploads one photo to a new listing and waits for it: the listing's
/// number and the photo's media id.
async fn photo(media: &Media, file: (&str, Vec<u8>)) -> (String, String) {
    let number = media.ctx.listing().await;
    upload_and_wait(media, &number, &[Part::File("files", file.0, file.1)]).await;
    let id = listing_media(media, &number).await[0]["media_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (number, id)
}

backend_tests! {
    async fn an_agency_defines_reads_changes_and_deletes_profiles(backend) {
        let media = profiles_ctx(backend).await;
        let created = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&mls_profile("MLS"))).await;
        assert_eq!(created.status(), StatusCode::CREATED);
        let created: Value = created.json().await.unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("dpf_"), "{created}");
        assert_eq!((created["revision"].as_i64(), created["active"].as_bool()), (Some(1), Some(true)));
        assert_eq!(created["outputs"][0]["fit"], "cover");
        assert_eq!(created["outputs"][0]["max_bytes"], 300000);
        assert_eq!(created["outputs"][0]["quality"], Value::Null);
        let path = format!("/api/v1/delivery-profiles/{id}");

        let read = expect_ok(send(&media, Method::GET, &path, &media.key, None).await).await;
        assert_eq!(read, created);
        let list = expect_ok(send(&media, Method::GET, "/api/v1/delivery-profiles?limit=1", &media.key, None).await).await;
        assert_eq!((list["total"].as_i64(), list["next_cursor"].as_str()), (Some(1), Some("")));
        assert_eq!(list["items"][0]["id"], id.as_str());

        // A rename keeps the revision; new outputs move it on.
        let renamed = expect_ok(send(&media, Method::PATCH, &path, &media.key, Some(&json!({"name": "MLS board"}))).await).await;
        assert_eq!((renamed["name"].as_str(), renamed["revision"].as_i64()), (Some("MLS board"), Some(1)));
        let mut outputs = mls_profile("x")["outputs"].clone();
        outputs[0]["width"] = json!(1024);
        outputs[0]["height"] = json!(640);
        let changed = expect_ok(send(&media, Method::PATCH, &path, &media.key, Some(&json!({"outputs": outputs}))).await).await;
        assert_eq!((changed["revision"].as_i64(), changed["outputs"][0]["width"].as_i64()), (Some(2), Some(1024)));
        let paused = expect_ok(send(&media, Method::PATCH, &path, &media.key, Some(&json!({"active": false}))).await).await;
        assert_eq!((paused["active"].as_bool(), paused["revision"].as_i64()), (Some(false), Some(2)));

        // Names are unique in the agency.
        let twin = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&mls_profile("MLS board"))).await;
        let refused = expect_error(twin, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert!(refused["error"]["details"]["fields"]["name"].is_string(), "{refused}");

        let deleted = send(&media, Method::DELETE, &path, &media.key, None).await;
        assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
        let gone = send(&media, Method::GET, &path, &media.key, None).await;
        expect_error(gone, StatusCode::NOT_FOUND, "delivery_profile_not_found").await;
        let again = send(&media, Method::DELETE, &path, &media.key, None).await;
        expect_error(again, StatusCode::NOT_FOUND, "delivery_profile_not_found").await;
        let list = expect_ok(send(&media, Method::GET, "/api/v1/delivery-profiles", &media.key, None).await).await;
        assert_eq!(list["total"], 0);
    }

    async fn bad_profiles_are_refused_field_by_field(backend) {
        let media = profiles_ctx(backend).await;
        let output = |change: Value| {
            let mut output = mls_profile("x")["outputs"][0].clone();
            for (field, value) in change.as_object().unwrap() {
                output[field] = value.clone();
            }
            json!({"name": "Bad", "outputs": [output]})
        };
        let foreign_logo = {
            let other = Media::with_scopes(TestApp::builder(backend).with_workers().spawn().await, &SCOPES).await;
            photo(&other, ("logo.png", png(200, 100))).await.1
        };
        let cases = [
            (json!({"name": "", "outputs": mls_profile("x")["outputs"]}), "name"),
            (json!({"name": "x".repeat(101), "outputs": mls_profile("x")["outputs"]}), "name"),
            (json!({"name": "None", "outputs": []}), "outputs"),
            (output(json!({"name": "Has Space"})), "outputs[0].name"),
            (output(json!({"width": 8})), "outputs[0].width"),
            (output(json!({"height": 9000})), "outputs[0].height"),
            (output(json!({"quality": 0})), "outputs[0].quality"),
            (output(json!({"max_bytes": 999})), "outputs[0].max_bytes"),
            (output(json!({"watermark": {"media_id": foreign_logo, "position": "center", "scale": 0.2, "opacity": 0.5}})), "outputs[0].watermark.media_id"),
            (output(json!({"watermark": {"media_id": foreign_logo, "position": "center", "scale": 2.0, "opacity": 0.0}})), "outputs[0].watermark.scale"),
        ];
        for (body, field) in cases {
            let response = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&body)).await;
            let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"][field].is_string(), "{body} → {error}");
        }
        // Values outside the enums and unknown fields are refused by their path.
        for (body, field) in [
            (output(json!({"fit": "stretch"})), "outputs[0].fit"),
            (output(json!({"format": "gif"})), "outputs[0].format"),
            (output(json!({"metadata": "all"})), "outputs[0].metadata"),
        ] {
            let response = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&body)).await;
            let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"].to_string().contains(field), "{body} → {error}");
        }
        let unknown = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&output(json!({"colour": "red"})))).await;
        expect_error(unknown, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let list = expect_ok(send(&media, Method::GET, "/api/v1/delivery-profiles", &media.key, None).await).await;
        assert_eq!(list["total"], 0, "nothing was stored");
    }

    async fn another_agencys_profile_is_not_found_and_scopes_are_kept(backend) {
        let media = profiles_ctx(backend).await;
        let created = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&mls_profile("MLS"))).await;
        assert_eq!(created.status(), StatusCode::CREATED);
        let created: Value = created.json().await.unwrap();
        let path = format!("/api/v1/delivery-profiles/{}", created["id"].as_str().unwrap());
        let other = media.ctx.app.agency().await;
        let other_key = media.ctx.app.key(&other, &SCOPES).await;
        for method in [Method::GET, Method::DELETE] {
            let response = send(&media, method, &path, &other_key, None).await;
            expect_error(response, StatusCode::NOT_FOUND, "delivery_profile_not_found").await;
        }
        let response = send(&media, Method::PATCH, &path, &other_key, Some(&json!({"name": "Mine"}))).await;
        expect_error(response, StatusCode::NOT_FOUND, "delivery_profile_not_found").await;
        let list = expect_ok(send(&media, Method::GET, "/api/v1/delivery-profiles", &other_key, None).await).await;
        assert_eq!(list["total"], 0);
        let sandbox = media
            .ctx
            .app
            .key_with(&media.ctx.agency, &SCOPES, storage::Environment::Sandbox, storage::api_keys::KeyFormat::Ma)
            .await;
        let response = send(&media, Method::GET, &path, &sandbox, None).await;
        expect_error(response, StatusCode::NOT_FOUND, "delivery_profile_not_found").await;

        let reader = media.ctx.app.key(&media.ctx.agency, &[Scope::DeliveryProfilesRead]).await;
        expect_ok(send(&media, Method::GET, &path, &reader, None).await).await;
        let response = send(&media, Method::POST, "/api/v1/delivery-profiles", &reader, Some(&mls_profile("Other"))).await;
        expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        let lister = media.ctx.app.key(&media.ctx.agency, &[Scope::ListingsRead]).await;
        let response = send(&media, Method::GET, "/api/v1/delivery-profiles", &lister, None).await;
        expect_error(response, StatusCode::FORBIDDEN, "auth.scope_denied").await;
    }

    async fn the_cap_of_twenty_profiles_holds_under_concurrent_creates(backend) {
        let media = profiles_ctx(backend).await;
        for index in 0..17 {
            let body = mls_profile(&format!("Board {index}"));
            let created = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&body)).await;
            assert_eq!(created.status(), StatusCode::CREATED);
        }
        // Six at once for the last three places.
        let racing = futures::future::join_all((0..6).map(|index| {
            let body = mls_profile(&format!("Race {index}"));
            let media = &media;
            async move {
                send(media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&body)).await
            }
        }))
        .await;
        let mut created = 0;
        for response in racing {
            if response.status() == StatusCode::CREATED {
                created += 1;
            } else {
                let refused = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
                assert!(refused.to_string().contains("at most 20"), "{refused}");
            }
        }
        assert_eq!(created, 3, "exactly the places left");
        let listed = send(&media, Method::GET, "/api/v1/delivery-profiles?limit=100", &media.key, None).await;
        assert_eq!(expect_ok(listed).await["total"], 20);
    }

    async fn the_templates_are_accepted_as_they_are_given(backend) {
        let media = profiles_ctx(backend).await;
        let templates = expect_ok(send(&media, Method::GET, "/api/v1/delivery-profile-templates", &media.key, None).await).await;
        let templates = templates.as_array().unwrap().clone();
        let keys: Vec<&str> = templates.iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["mls_unbranded", "marketing_branded"]);
        let mls = &templates[0];
        assert_eq!(mls["suggested_watermark"], Value::Null);
        assert!(mls["profile"]["outputs"].as_array().unwrap().iter().all(|o| o["metadata"] == "strip" && o["watermark"].is_null()));
        assert_eq!(mls["profile"]["outputs"][0]["max_bytes"], 3_000_000);
        let (_, logo) = photo(&media, ("logo.png", png(300, 120))).await;
        for template in &templates {
            let mut profile = template["profile"].clone();
            if let Some(suggested) = template["suggested_watermark"].as_object() {
                let mut watermark = Value::Object(suggested.clone());
                watermark["media_id"] = json!(logo);
                for output in profile["outputs"].as_array_mut().unwrap() {
                    output["watermark"] = watermark.clone();
                }
            }
            let response = send(&media, Method::POST, "/api/v1/delivery-profiles", &media.key, Some(&profile)).await;
            assert_eq!(response.status(), StatusCode::CREATED, "{}", response.text().await.unwrap());
        }
    }

    async fn a_focal_point_is_set_by_hand_on_photos_only(backend) {
        let media = profiles_ctx(backend).await;
        let (number, id) = photo(&media, ("front.jpg", jpeg(600, 400))).await;
        let path = format!("/api/v1/media/{id}");
        let set = expect_ok(send(&media, Method::PATCH, &path, &media.key, Some(&json!({"focal_point": {"x": 0.25, "y": 0.75}}))).await).await;
        assert_eq!(set["media_id"], id.as_str());
        assert_eq!(set["focal_point"], json!({"x": 0.25, "y": 0.75, "source": "manual"}));
        for (body, field) in [
            (json!({"focal_point": {"x": 1.5, "y": 0.5}}), "focal_point.x"),
            (json!({"focal_point": {"x": 0.5, "y": -0.1}}), "focal_point.y"),
            (json!({}), "focal_point"),
        ] {
            let response = send(&media, Method::PATCH, &path, &media.key, Some(&body)).await;
            let error = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(error["error"]["details"]["fields"][field].is_string(), "{body} → {error}");
        }
        let (_, pdf) = photo(&media, ("plan.pdf", minimal_pdf())).await;
        let response = send(&media, Method::PATCH, &format!("/api/v1/media/{pdf}"), &media.key, Some(&json!({"focal_point": {"x": 0.5, "y": 0.5}}))).await;
        expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let other = media.ctx.app.agency().await;
        let other_key = media.ctx.app.key(&other, &SCOPES).await;
        let response = send(&media, Method::PATCH, &path, &other_key, Some(&json!({"focal_point": {"x": 0.5, "y": 0.5}}))).await;
        expect_error(response, StatusCode::NOT_FOUND, "media_not_found").await;
        let response = send(&media, Method::PATCH, "/api/v1/media/med_nothing", &media.key, Some(&json!({"focal_point": {"x": 0.5, "y": 0.5}}))).await;
        expect_error(response, StatusCode::NOT_FOUND, "media_not_found").await;
        // The listing read shows it.
        let read = listing_media(&media, &number).await;
        assert_eq!(read[0]["focal_point"], json!({"x": 0.25, "y": 0.75, "source": "manual"}));
    }
}
