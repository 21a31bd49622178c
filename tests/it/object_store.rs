//! The media object store against a real S3-compatible server (`s3s-fs`,
//! which checks signatures): round trips, streaming multipart uploads,
//! pre-signed downloads and their refusal once expired or tampered with.

use std::time::Duration;

use storage::objects::object_store::path::Path;
use storage::objects::object_store::{
    Error as StoreError, ObjectStoreExt, PutPayload, WriteMultipart,
};
use storage::objects::{ObjectStoreTarget, is_s3_environment_variable};
use tests::s3::S3Server;

fn client() -> reqwest::Client {
    tests::app::base_client().build().unwrap()
}

/// Deterministic, non-repeating-looking bytes (a simple LCG), so a part
/// landing at the wrong offset would not go unnoticed.
fn pattern(len: usize) -> Vec<u8> {
    let mut state: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

#[tokio::test]
async fn put_get_and_delete_round_trip() {
    let server = S3Server::start().await;
    let media = server.media();
    assert!(!media.is_local());
    let store = media.store();
    let path = Path::from("agc_1/live/photo.jpg");
    store
        .put(&path, PutPayload::from_static(b"jpeg bytes"))
        .await
        .unwrap();
    assert_eq!(store.head(&path).await.unwrap().size, 10);
    let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(&bytes[..], b"jpeg bytes");
    // The server really holds it (s3s-fs keeps objects as files).
    assert!(
        server
            .root()
            .join(tests::s3::BUCKET)
            .join("agc_1/live/photo.jpg")
            .is_file()
    );

    store.delete(&path).await.unwrap();
    assert!(matches!(
        store.get(&path).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.head(&path).await,
        Err(StoreError::NotFound { .. })
    ));
}

#[tokio::test]
async fn multipart_upload_streams_twelve_megabytes() {
    const PART: usize = 5 * 1024 * 1024;
    let server = S3Server::start().await;
    let media = server.media();
    let store = media.store();
    let path = Path::from("agc_1/uploads/tour.mp4");
    // Three parts: 5 MiB, 5 MiB and the odd-sized rest.
    let data = pattern(12 * 1024 * 1024 + 12_345);

    let upload = store.put_multipart(&path).await.unwrap();
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
    // Fed in 1 MiB slices, as a request body would arrive, never more than
    // two parts in flight.
    for slice in data.chunks(1024 * 1024) {
        writer.wait_for_capacity(2).await.unwrap();
        writer.write(slice);
    }
    writer.finish().await.unwrap();

    let meta = store.head(&path).await.unwrap();
    assert_eq!(meta.size, data.len() as u64);
    let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(bytes.len(), data.len());
    assert!(bytes[..] == data[..], "the object differs from the upload");
}

#[tokio::test]
async fn signed_get_url_downloads_the_object() {
    let server = S3Server::start().await;
    let media = server.media();
    let path = Path::from("agc_1/live/plan floor 1.png");
    let data = pattern(70_000);
    media
        .store()
        .put(&path, PutPayload::from(data.clone()))
        .await
        .unwrap();

    let url = media
        .signed_get_url(&path, Duration::from_secs(300))
        .await
        .unwrap()
        .expect("an S3 store signs URLs");
    assert!(url.as_str().starts_with(server.endpoint()), "{url}");
    let response = client().get(url.as_str()).send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    assert_eq!(&response.bytes().await.unwrap()[..], &data[..]);
}

async fn assert_refused(url: &str) {
    let response = client().get(url).send().await.unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert_eq!(status, 403, "{url} was not refused: {body}");
    assert!(
        body.contains("AccessDenied") || body.contains("SignatureDoesNotMatch"),
        "{body}"
    );
}

#[tokio::test]
async fn tampered_or_expired_signed_urls_are_refused() {
    let server = S3Server::start().await;
    let media = server.media();
    let store = media.store();
    let path = Path::from("agc_1/live/photo.jpg");
    let other = Path::from("agc_2/live/photo.jpg");
    for p in [&path, &other] {
        store
            .put(p, PutPayload::from_static(b"private"))
            .await
            .unwrap();
    }
    let url = media
        .signed_get_url(&path, Duration::from_secs(300))
        .await
        .unwrap()
        .unwrap();

    // A changed signature.
    let mut tampered = url.clone();
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(name, value)| {
            let value = if name == "X-Amz-Signature" {
                let flipped = if value.ends_with('0') { '1' } else { '0' };
                format!("{}{flipped}", &value[..value.len() - 1])
            } else {
                value.into_owned()
            };
            (name.into_owned(), value)
        })
        .collect();
    tampered.query_pairs_mut().clear().extend_pairs(pairs);
    assert_ne!(tampered, url);
    assert_refused(tampered.as_str()).await;

    // The signature of one object used for another.
    let mut elsewhere = url.clone();
    elsewhere.set_path(&url.path().replace("agc_1", "agc_2"));
    assert_refused(elsewhere.as_str()).await;

    // A longer lifetime than was signed.
    let mut extended = url.clone();
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(name, value)| {
            let value = if name == "X-Amz-Expires" {
                "604800".to_owned()
            } else {
                value.into_owned()
            };
            (name.into_owned(), value)
        })
        .collect();
    extended.query_pairs_mut().clear().extend_pairs(pairs);
    assert_refused(extended.as_str()).await;

    // Expired.
    let short = media
        .signed_get_url(&path, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert_refused(short.as_str()).await;

    // The untouched URL still works: the refusals were about the changes.
    let response = client().get(url.as_str()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(&response.bytes().await.unwrap()[..], b"private");
}

#[tokio::test]
async fn a_bucket_prefix_keeps_objects_under_it() {
    let server = S3Server::start().await;
    let prefixed = server.target(Some("agencies")).open_media().unwrap();
    let path = Path::from("agc_1/photo.jpg");
    prefixed
        .store()
        .put(&path, PutPayload::from_static(b"under the prefix"))
        .await
        .unwrap();

    // The bucket itself sees the object under the prefix.
    let bucket = server.media();
    let full = Path::from("agencies/agc_1/photo.jpg");
    let bytes = bucket
        .store()
        .get(&full)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&bytes[..], b"under the prefix");
    assert!(matches!(
        bucket.store().head(&path).await,
        Err(StoreError::NotFound { .. })
    ));

    // And the signed URL points there too.
    let url = prefixed
        .signed_get_url(&path, Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let response = client().get(url.as_str()).send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    assert_eq!(&response.bytes().await.unwrap()[..], b"under the prefix");
}

#[tokio::test]
async fn local_media_objects_are_not_signed() {
    let dir = tempfile::tempdir().unwrap();
    let media = ObjectStoreTarget::from_url(None, dir.path())
        .unwrap()
        .open_media()
        .unwrap();
    assert!(media.is_local());
    let path = Path::from("agc_1/live/photo.jpg");
    media
        .store()
        .put(&path, PutPayload::from_static(b"jpeg bytes"))
        .await
        .unwrap();
    let url = media
        .signed_get_url(&path, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(url, None);
}

#[tokio::test]
async fn subprocess_environment_names_the_client_settings() {
    let server = S3Server::start().await;
    let env = server.env();
    let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
    for expected in [
        "AWS_ENDPOINT",
        "AWS_ALLOW_HTTP",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for name in names {
        assert!(is_s3_environment_variable(name), "{name}");
    }
    let value = |name: &str| {
        env.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let settings = server.settings();
    assert_eq!(Some(value("AWS_ENDPOINT")), settings.endpoint);
    assert_eq!(Some(value("AWS_ACCESS_KEY_ID")), settings.access_key_id);
    assert_eq!(
        Some(value("AWS_SECRET_ACCESS_KEY")),
        settings.secret_access_key
    );
    assert_eq!(server.bucket_url(), format!("s3://{}", tests::s3::BUCKET));
}
