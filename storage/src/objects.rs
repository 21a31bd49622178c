//! Where media objects live: local files under the data directory (embedded
//! profile) or any S3-compatible server (`OBJECT_STORE_URL=s3://bucket`).
//! The S3 client takes its credentials, region and endpoint from the standard
//! `AWS_*` environment variables, so a deployment configures it the way it
//! configures any other S3 client.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;

/// Directory under the data directory that holds media objects by default.
pub const LOCAL_MEDIA_DIR: &str = "media";

/// A configured object store, before it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectStoreTarget {
    /// A directory on this host.
    Local(PathBuf),
    /// An S3 bucket URL (`s3://bucket[/prefix]`).
    S3(String),
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
    /// the `media` directory under `data_dir`.
    pub fn from_url(url: Option<&str>, data_dir: &Path) -> Result<Self, ObjectStoreConfigError> {
        match url.map(str::trim).filter(|url| !url.is_empty()) {
            None => Ok(Self::Local(data_dir.join(LOCAL_MEDIA_DIR))),
            Some(url) if url.starts_with("s3://") && url.len() > "s3://".len() => {
                Ok(Self::S3(url.to_owned()))
            }
            Some(url) => match url.strip_prefix("file://") {
                Some(path) if path.starts_with('/') => Ok(Self::Local(PathBuf::from(path))),
                _ => Err(ObjectStoreConfigError::Scheme(url.to_owned())),
            },
        }
    }

    /// Opens the store. Nothing is contacted yet: an unreachable S3 server
    /// shows up at the first request, a malformed configuration here.
    pub fn open(&self) -> Result<Arc<dyn ObjectStore>, ObjectStoreConfigError> {
        match self {
            Self::Local(path) => {
                std::fs::create_dir_all(path).map_err(|source| {
                    ObjectStoreConfigError::Directory {
                        path: path.clone(),
                        source,
                    }
                })?;
                Ok(Arc::new(LocalFileSystem::new_with_prefix(path)?))
            }
            Self::S3(url) => Ok(Arc::new(AmazonS3Builder::from_env().with_url(url).build()?)),
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
            ObjectStoreTarget::S3("s3://media/agencies".into())
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
