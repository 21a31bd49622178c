//! Where media objects live: local files under the data directory (embedded
//! profile) or any S3-compatible server (`OBJECT_STORE_URL=s3://bucket`).
//! The S3 client takes its credentials, region and endpoint from the standard
//! `AWS_*` environment variables, so a deployment configures it the way it
//! configures any other S3 client; [`S3Settings`] can override any of them
//! explicitly (tests do, since they must not touch the process environment).
//!
//! [`MediaObjects`] is what the media code holds: the opened store plus, for
//! S3, a signer for pre-signed download URLs.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsCredential};
use object_store::local::LocalFileSystem;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::signer::{Method, SignedUrlOptions, Signer};
use object_store::{ObjectStore, StaticCredentialProvider};

mod key;

pub use key::StorageKey;

/// The `object_store` crate this module is built on, re-exported so callers
/// (the media code, the tests) name the same version of its types.
pub use object_store;

/// Directory under the data directory that holds media objects by default.
pub const LOCAL_MEDIA_DIR: &str = "media";

/// Explicit S3 client settings. Each one left `None` comes from the standard
/// `AWS_*` environment variable instead; each one set overrides it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// The server's base URL (`AWS_ENDPOINT`), e.g. `http://127.0.0.1:9000`
    /// for an S3-compatible server; `None` is AWS itself.
    pub endpoint: Option<String>,
    /// The region to sign for (`AWS_REGION`; the client's default is `us-east-1`).
    pub region: Option<String>,
    /// The access key id (`AWS_ACCESS_KEY_ID`).
    pub access_key_id: Option<String>,
    /// The secret access key (`AWS_SECRET_ACCESS_KEY`).
    pub secret_access_key: Option<String>,
    /// Whether plain `http://` endpoints are allowed (`AWS_ALLOW_HTTP`).
    pub allow_http: Option<bool>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

impl S3Settings {
    /// A client builder: the environment first, then every explicit setting.
    fn builder(&self, url: &str) -> AmazonS3Builder {
        let mut builder = AmazonS3Builder::from_env().with_url(url);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = &self.region {
            builder = builder.with_region(region);
        }
        if let Some(allow_http) = self.allow_http {
            builder = builder.with_allow_http(allow_http);
        }
        match (&self.access_key_id, &self.secret_access_key) {
            // Both explicit: a static provider, so no session token (or other
            // credential source) from the environment is mixed in.
            (Some(key_id), Some(secret_key)) => {
                builder.with_credentials(Arc::new(StaticCredentialProvider::new(AwsCredential {
                    key_id: key_id.clone(),
                    secret_key: secret_key.clone(),
                    token: None,
                })))
            }
            (key_id, secret_key) => {
                if let Some(key_id) = key_id {
                    builder = builder.with_access_key_id(key_id);
                }
                if let Some(secret_key) = secret_key {
                    builder = builder.with_secret_access_key(secret_key);
                }
                builder
            }
        }
    }
}

/// A configured object store, before it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectStoreTarget {
    /// A directory on this host.
    Local(PathBuf),
    /// An S3 bucket.
    S3 {
        /// The bucket URL (`s3://bucket[/prefix]`).
        url: String,
        /// Explicit client settings; the defaults take everything from `AWS_*`.
        settings: S3Settings,
    },
}

/// Why an object store could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum ObjectStoreConfigError {
    /// The URL has a scheme we do not serve.
    #[error("OBJECT_STORE_URL must be s3://bucket or file:///absolute/path, got {0}")]
    Scheme(String),
    /// The client refused the configuration (missing bucket, bad endpoint...).
    #[error("object store configuration: {0}")]
    Client(#[from] object_store::Error),
    /// The local directory could not be created.
    #[error("object store directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

impl ObjectStoreTarget {
    /// The target for a configured URL: `s3://…`, `file:///…`, or, when unset,
    /// the `media` directory under `data_dir`. An S3 target takes its client
    /// settings from the environment.
    pub fn from_url(url: Option<&str>, data_dir: &Path) -> Result<Self, ObjectStoreConfigError> {
        match url.map(str::trim).filter(|url| !url.is_empty()) {
            None => Ok(Self::Local(data_dir.join(LOCAL_MEDIA_DIR))),
            Some(url) if url.starts_with("s3://") && url.len() > "s3://".len() => Ok(Self::S3 {
                url: url.to_owned(),
                settings: S3Settings::default(),
            }),
            Some(url) => match url.strip_prefix("file://") {
                Some(path) if path.starts_with('/') => Ok(Self::Local(PathBuf::from(path))),
                _ => Err(ObjectStoreConfigError::Scheme(url.to_owned())),
            },
        }
    }

    /// Opens the store. Nothing is contacted yet: an unreachable S3 server
    /// shows up at the first request, a malformed configuration here.
    pub fn open(&self) -> Result<Arc<dyn ObjectStore>, ObjectStoreConfigError> {
        Ok(self.open_media()?.store)
    }

    /// Opens the store as the media code uses it: the store plus, for S3, a
    /// signer for pre-signed URLs. Like [`ObjectStoreTarget::open`], nothing
    /// is contacted yet.
    pub fn open_media(&self) -> Result<MediaObjects, ObjectStoreConfigError> {
        match self {
            Self::Local(path) => {
                std::fs::create_dir_all(path).map_err(|source| {
                    ObjectStoreConfigError::Directory {
                        path: path.clone(),
                        source,
                    }
                })?;
                let files = Arc::new(LocalFileSystem::new_with_prefix(path)?);
                Ok(MediaObjects {
                    store: files.clone(),
                    kind: Kind::Local(files),
                })
            }
            Self::S3 { url, settings } => {
                let client = Arc::new(settings.builder(url).build()?);
                let prefix = bucket_prefix(url);
                let store: Arc<dyn ObjectStore> = if prefix.parts_count() == 0 {
                    client.clone()
                } else {
                    Arc::new(PrefixStore::new(client.clone(), prefix.clone()))
                };
                Ok(MediaObjects {
                    store,
                    kind: Kind::S3 {
                        client,
                        prefix,
                        http: reqwest::Client::new(),
                    },
                })
            }
        }
    }
}

/// The key prefix of `s3://bucket/some/prefix` (`some/prefix`); empty for a
/// bare bucket.
fn bucket_prefix(url: &str) -> ObjectPath {
    let rest = url.strip_prefix("s3://").unwrap_or(url);
    rest.split('/')
        .skip(1)
        .filter(|part| !part.is_empty())
        .collect()
}

/// The opened media object store. Cheap to clone.
#[derive(Clone)]
pub struct MediaObjects {
    store: Arc<dyn ObjectStore>,
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// Files under a directory of this host.
    Local(Arc<LocalFileSystem>),
    S3 {
        /// The bucket's client, which signs URLs for keys under `prefix`.
        client: Arc<AmazonS3>,
        prefix: ObjectPath,
        /// For the one request `object_store` does not make (ListParts),
        /// sent to a URL the client signs.
        http: reqwest::Client,
    },
}

impl fmt::Debug for MediaObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MediaObjects")
            .field("store", &format_args!("{}", self.store))
            .field("local", &self.is_local())
            .finish()
    }
}

impl MediaObjects {
    /// The object store. Paths are relative to the configured directory or
    /// bucket prefix.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The file of the object at `path`, when objects are files on this host.
    pub fn local_file(&self, path: &ObjectPath) -> Option<PathBuf> {
        match &self.kind {
            Kind::Local(files) => files.path_to_filesystem(path).ok(),
            Kind::S3 { .. } => None,
        }
    }

    /// Whether objects are files on this host (the API then serves them itself).
    pub fn is_local(&self) -> bool {
        matches!(self.kind, Kind::Local(_))
    }

    /// A pre-signed URL that lets anyone holding it download the object at
    /// `path` for `expires_in`, straight from the S3 server. `None` for local
    /// files, which the API serves on a route it signs itself. Signing is
    /// offline: the object is not checked to exist.
    pub async fn signed_get_url(
        &self,
        path: &ObjectPath,
        expires_in: Duration,
    ) -> Result<Option<url::Url>, object_store::Error> {
        match self.s3(path) {
            None => Ok(None),
            Some((client, key)) => Ok(Some(
                client.signed_url(Method::GET, &key, expires_in).await?,
            )),
        }
    }
}

/// A part of a multipart upload, as the store lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredPart {
    /// From 1.
    pub part_number: i64,
    /// Its bytes.
    pub size: i64,
}

/// S3's ListParts answer, the fields read of it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListPartsResult {
    #[serde(rename = "Part", default)]
    parts: Vec<ListedPart>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListedPart {
    part_number: i64,
    size: i64,
}

/// The S3 side of direct uploads: a multipart upload the client sends its
/// parts to by pre-signed URLs. Each call names the object by its path
/// under the configured prefix, as the rest of the media code does.
impl MediaObjects {
    fn s3(&self, path: &ObjectPath) -> Option<(&Arc<AmazonS3>, ObjectPath)> {
        match &self.kind {
            Kind::Local(_) => None,
            Kind::S3 { client, prefix, .. } => {
                Some((client, prefix.parts().chain(path.parts()).collect()))
            }
        }
    }

    /// Whether clients can send objects straight to the store (S3 only).
    pub fn takes_direct_uploads(&self) -> bool {
        !self.is_local()
    }

    /// Starts a multipart upload of the object at `path` and returns its id;
    /// `None` when the store is local files, which no client reaches.
    pub async fn start_direct_upload(
        &self,
        path: &ObjectPath,
    ) -> Result<Option<String>, object_store::Error> {
        match self.s3(path) {
            None => Ok(None),
            Some((client, key)) => Ok(Some(client.create_multipart(&key).await?)),
        }
    }

    /// A pre-signed URL that lets its holder `PUT` part `part_number` (one
    /// for the first) of the multipart upload `upload_id` of `path` for
    /// `expires_in`. Signing is offline. `None` for local files.
    pub async fn signed_part_url(
        &self,
        path: &ObjectPath,
        upload_id: &str,
        part_number: i64,
        expires_in: Duration,
    ) -> Result<Option<url::Url>, object_store::Error> {
        let Some((client, key)) = self.s3(path) else {
            return Ok(None);
        };
        let options = SignedUrlOptions::new().with_query([
            ("partNumber", part_number.to_string()),
            ("uploadId", upload_id.to_owned()),
        ]);
        Ok(Some(
            client
                .signed_url_opts(Method::PUT, &key, expires_in, &options)
                .await?,
        ))
    }

    /// The parts the store holds of the multipart upload `upload_id` of
    /// `path`, by part number (S3's ListParts; a direct upload has at most a
    /// few dozen, under the 1,000 one answer lists). `NotFound` when the
    /// store has no such upload (completed or aborted).
    pub async fn direct_upload_parts(
        &self,
        path: &ObjectPath,
        upload_id: &str,
    ) -> Result<Vec<StoredPart>, object_store::Error> {
        let Kind::S3 { http, .. } = &self.kind else {
            return Ok(Vec::new());
        };
        let Some((client, key)) = self.s3(path) else {
            return Ok(Vec::new());
        };
        let failed =
            |source: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
                store: "S3",
                source,
            };
        let options = SignedUrlOptions::new().with_query([("uploadId", upload_id)]);
        let url = client
            .signed_url_opts(Method::GET, &key, Duration::from_secs(60), &options)
            .await?;
        let response = http
            .get(url)
            .send()
            .await
            .map_err(|err| failed(Box::new(err)))?;
        let status = response.status();
        let body = response.text().await.map_err(|err| failed(Box::new(err)))?;
        if status == reqwest::StatusCode::NOT_FOUND || body.contains("<Code>NoSuchUpload</Code>") {
            return Err(object_store::Error::NotFound {
                path: key.to_string(),
                source: format!("no multipart upload {upload_id}").into(),
            });
        }
        if !status.is_success() {
            return Err(failed(
                format!(
                    "ListParts answered {status}: {}",
                    body.chars().take(300).collect::<String>()
                )
                .into(),
            ));
        }
        let listed: ListPartsResult =
            quick_xml::de::from_str(&body).map_err(|err| failed(Box::new(err)))?;
        let mut parts: Vec<StoredPart> = listed
            .parts
            .into_iter()
            .map(|part| StoredPart {
                part_number: part.part_number,
                size: part.size,
            })
            .collect();
        parts.sort_by_key(|part| part.part_number);
        Ok(parts)
    }

    /// Completes the multipart upload `upload_id` of `path` from its parts'
    /// ETags, in part order (part 1 first), as the store answered each `PUT`.
    pub async fn complete_direct_upload(
        &self,
        path: &ObjectPath,
        upload_id: &str,
        etags: Vec<String>,
    ) -> Result<(), object_store::Error> {
        let Some((client, key)) = self.s3(path) else {
            return Err(object_store::Error::NotImplemented {
                operation: "complete a direct upload".to_owned(),
                implementer: "local files".to_owned(),
            });
        };
        let parts = etags
            .into_iter()
            .map(|content_id| PartId { content_id })
            .collect();
        client
            .complete_multipart(&key, &upload_id.to_owned(), parts)
            .await?;
        Ok(())
    }

    /// Aborts the multipart upload `upload_id` of `path`: the store drops
    /// the parts it holds. An upload already gone is no error.
    pub async fn abort_direct_upload(
        &self,
        path: &ObjectPath,
        upload_id: &str,
    ) -> Result<(), object_store::Error> {
        let Some((client, key)) = self.s3(path) else {
            return Ok(());
        };
        match client.abort_multipart(&key, &upload_id.to_owned()).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

/// Whether the S3 client reads the environment variable `name` (an `AWS_*`
/// name that maps onto one of its configuration keys). Deployment files are
/// checked against this so a misspelt variable is caught before it is ignored.
pub fn is_s3_environment_variable(name: &str) -> bool {
    name.starts_with("AWS_") && AmazonS3ConfigKey::from_str(&name.to_ascii_lowercase()).is_ok()
}

#[cfg(test)]
mod tests {
    use object_store::path::Path as ObjectPath;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    #[test]
    fn unset_is_the_data_directory() {
        let target = ObjectStoreTarget::from_url(None, Path::new("/srv/data")).unwrap();
        assert_eq!(target, ObjectStoreTarget::Local("/srv/data/media".into()));
        let blank = ObjectStoreTarget::from_url(Some("  "), Path::new("/srv/data")).unwrap();
        assert_eq!(blank, target);
    }

    #[test]
    fn schemes_are_checked() {
        let data = Path::new("/srv/data");
        assert_eq!(
            ObjectStoreTarget::from_url(Some("s3://media/agencies"), data).unwrap(),
            ObjectStoreTarget::S3 {
                url: "s3://media/agencies".into(),
                settings: S3Settings::default(),
            }
        );
        assert_eq!(
            ObjectStoreTarget::from_url(Some("file:///var/media"), data).unwrap(),
            ObjectStoreTarget::Local("/var/media".into())
        );
        for bad in [
            "s3://",
            "file://relative",
            "gs://media",
            "http://minio:9000/media",
        ] {
            assert!(
                matches!(
                    ObjectStoreTarget::from_url(Some(bad), data),
                    Err(ObjectStoreConfigError::Scheme(_))
                ),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn local_store_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = ObjectStoreTarget::from_url(None, dir.path())
            .unwrap()
            .open()
            .unwrap();
        let path = ObjectPath::from("agc_1/live/photo.jpg");
        store
            .put(&path, PutPayload::from_static(b"jpeg bytes"))
            .await
            .unwrap();
        let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(&bytes[..], b"jpeg bytes");
        assert!(dir.path().join("media/agc_1/live/photo.jpg").exists());
    }

    #[tokio::test]
    async fn local_media_objects_sign_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let media = ObjectStoreTarget::from_url(None, dir.path())
            .unwrap()
            .open_media()
            .unwrap();
        assert!(media.is_local());
        let path = ObjectPath::from("agc_1/live/photo.jpg");
        let url = media
            .signed_get_url(&path, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(url, None);
    }

    fn explicit_settings() -> S3Settings {
        S3Settings {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("eu-west-3".into()),
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("not-in-the-debug-output".into()),
            allow_http: Some(true),
        }
    }

    #[tokio::test]
    async fn explicit_s3_settings_sign_under_the_prefix() {
        let target = ObjectStoreTarget::S3 {
            url: "s3://media/agencies/".into(),
            settings: explicit_settings(),
        };
        // Signing is offline: nothing listens on port 9.
        let media = target.open_media().unwrap();
        assert!(!media.is_local());
        let path = ObjectPath::from("agc_1/live/photo.jpg");
        let url = media
            .signed_get_url(&path, Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(url.scheme(), "http");
        assert_eq!(url.host_str(), Some("127.0.0.1"));
        assert_eq!(url.port(), Some(9));
        assert_eq!(url.path(), "/media/agencies/agc_1/live/photo.jpg");
        let query: std::collections::HashMap<_, _> = url.query_pairs().collect();
        assert_eq!(query["X-Amz-Expires"], "60");
        let credential = &query["X-Amz-Credential"];
        assert!(credential.starts_with("AKIDEXAMPLE/"), "{credential}");
        assert!(credential.contains("/eu-west-3/s3/"), "{credential}");
        assert!(query.contains_key("X-Amz-Signature"));
    }

    #[tokio::test]
    async fn a_bare_bucket_signs_at_its_root() {
        let target = ObjectStoreTarget::S3 {
            url: "s3://media".into(),
            settings: explicit_settings(),
        };
        let url = target
            .open_media()
            .unwrap()
            .signed_get_url(&ObjectPath::from("a/b.jpg"), Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(url.path(), "/media/a/b.jpg");
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let settings = explicit_settings();
        let target = ObjectStoreTarget::S3 {
            url: "s3://media".into(),
            settings,
        };
        let shown = format!("{target:?} {:?}", target.open_media().unwrap());
        assert!(shown.contains("AKIDEXAMPLE"), "{shown}");
        assert!(!shown.contains("not-in-the-debug-output"), "{shown}");
    }

    #[test]
    fn s3_environment_names_are_the_clients() {
        for known in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            "AWS_ENDPOINT",
            "AWS_ALLOW_HTTP",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
        ] {
            assert!(is_s3_environment_variable(known), "{known}");
        }
        for unknown in [
            "AWS_SECRET_KEY_ID",
            "AWS_ENDPOINT_URLS",
            "S3_BUCKET",
            "REGION",
        ] {
            assert!(!is_s3_environment_variable(unknown), "{unknown}");
        }
    }
}
