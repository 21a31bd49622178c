//! Shared fixtures of the media tests against a real S3-compatible server
//! (`s3s-fs`): an app whose object store is a bucket, and reads of the bucket
//! and of the data directory.

use futures::StreamExt;
use storage::objects::object_store::path::Path as ObjectPath;
use storage::objects::object_store::{ObjectStore, ObjectStoreExt};
use tests::TestApp;
use tests::s3::S3Server;

use super::*;

/// The prefix the app's bucket target writes under.
pub(super) const PREFIX: &str = "agencies";

/// An app whose configured object store is `s3://<bucket>/agencies` on a
/// fresh server, with workers, and a key that uploads and reads listings.
pub(super) async fn with_s3() -> (S3Server, Media) {
    let s3 = S3Server::start().await;
    let app = TestApp::builder(tests::Backend::Sqlite)
        .with_workers()
        .media_target(s3.target(Some(PREFIX)))
        .spawn()
        .await;
    (s3, Media::on(app).await)
}

/// Every key in the bucket (read through S3, so the server's own metadata
/// files do not count), sorted.
pub(super) async fn bucket_keys(s3: &S3Server) -> Vec<String> {
    let media = s3.media();
    let listed: Vec<_> = media.store().list(None).collect().await;
    let mut keys: Vec<String> = listed
        .into_iter()
        .map(|meta| meta.expect("list the bucket").location.to_string())
        .collect();
    keys.sort();
    keys
}

/// An object of the bucket, by its key under [`PREFIX`].
pub(super) async fn bucket_object(s3: &S3Server, key: &str) -> Vec<u8> {
    let media = s3.media();
    let path = ObjectPath::from(format!("{PREFIX}/{key}"));
    let object = media.store().get(&path).await.unwrap_or_else(|err| {
        panic!("{key} is not in the bucket: {err}");
    });
    object.bytes().await.unwrap().to_vec()
}

/// The data directory's media objects, as keys relative to it, sorted.
pub(super) fn data_dir_keys(media: &Media) -> Vec<String> {
    let dir = media.media_dir();
    let mut keys: Vec<String> = stored_files(&dir)
        .into_iter()
        .map(|path| {
            path.strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    keys.sort();
    keys
}

/// The object keys an item's rows name: its original and its variants.
pub(super) async fn item_keys(media: &Media, media_id: &str) -> (String, Vec<String>) {
    let id = storage::ids::MediaId::parse(media_id).unwrap();
    let item = media
        .ctx
        .app
        .store
        .media()
        .item(&media.ctx.live(), &id)
        .await
        .unwrap();
    let variants = item
        .variants
        .iter()
        .map(|v| v.object_key.to_string())
        .collect();
    (item.object_key.to_string(), variants)
}

/// GETs `url` with a client that carries no key and no cookie.
pub(super) async fn fetch(url: &str) -> reqwest::Response {
    tests::app::base_client()
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap()
}
