//! Where media objects go, by an upload's storage strategy: `cloud` is the
//! configured object store (S3, or the data directory by default), `local`
//! the data directory, `hybrid` both. When the configured store is the data
//! directory itself, `cloud` and `local` are one place and written once.

use std::path::Path;
use std::sync::Arc;

use std::time::Duration;

use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};
use storage::Tenant;
use storage::ids::UploadId;
use storage::media::{StorageKey, StorageStrategy};
use storage::objects::{LOCAL_MEDIA_DIR, MediaObjects, ObjectStoreTarget};

/// The two places media objects can live.
#[derive(Clone)]
pub struct MediaStores {
    cloud: MediaObjects,
    local: Arc<dyn ObjectStore>,
    cloud_is_local: bool,
    local_is_shared: bool,
}

impl std::fmt::Debug for MediaStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaStores")
            .field("cloud_is_local", &self.cloud_is_local)
            .field("local_is_shared", &self.local_is_shared)
            .finish_non_exhaustive()
    }
}

impl MediaStores {
    /// Opens the configured store and the data directory's.
    pub fn open(target: &ObjectStoreTarget, data_dir: &Path) -> anyhow::Result<Self> {
        let local_dir = data_dir.join(LOCAL_MEDIA_DIR);
        std::fs::create_dir_all(&local_dir)?;
        let local: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(&local_dir)?);
        let cloud_is_local = matches!(target, ObjectStoreTarget::Local(dir) if *dir == local_dir);
        let cloud = target.open_media()?;
        let local = if cloud_is_local {
            cloud.store().clone()
        } else {
            local
        };
        Ok(Self {
            cloud,
            local,
            cloud_is_local,
            local_is_shared: true,
        })
    }

    /// Whether every host that serves or processes this deployment's media
    /// reads the same data directory. True of one process (the embedded
    /// profile); false where the API and the workers may run on separate
    /// hosts (the distributed profile), where `local` uploads are refused.
    #[must_use]
    pub fn with_local_shared(mut self, shared: bool) -> Self {
        self.local_is_shared = shared;
        self
    }

    /// Why an upload of `strategy` cannot be stored here, if it cannot: a
    /// `local` original written into this host's data directory could be
    /// read neither by a worker on another host nor through another API
    /// replica.
    pub fn refusal(&self, strategy: StorageStrategy) -> Option<&'static str> {
        (strategy == StorageStrategy::Local && !self.local_is_shared).then_some(
            "local keeps files in one host's data directory, which the other hosts of this \
             deployment cannot read; use cloud (or hybrid, which keeps a local copy as well)",
        )
    }

    /// The stores an upload of `strategy` writes to, the one read back first.
    pub fn targets(&self, strategy: StorageStrategy) -> Vec<Arc<dyn ObjectStore>> {
        let cloud = self.cloud.store().clone();
        match strategy {
            StorageStrategy::Cloud => vec![cloud],
            StorageStrategy::Local => vec![self.local.clone()],
            StorageStrategy::Hybrid if self.cloud_is_local => vec![cloud],
            StorageStrategy::Hybrid => vec![cloud, self.local.clone()],
        }
    }

    /// Where resumable uploads keep their parts until they complete: the
    /// configured store, which every API replica reads.
    pub fn parts(&self) -> Arc<dyn ObjectStore> {
        self.cloud.store().clone()
    }

    /// The file `key` is written to when an upload of `strategy` writes it
    /// to one store only and that store is this host's files (the embedded
    /// profile); `None` otherwise.
    pub fn only_local_file(
        &self,
        strategy: StorageStrategy,
        key: &StorageKey,
    ) -> Option<std::path::PathBuf> {
        if self.cloud_is_local || strategy == StorageStrategy::Cloud {
            self.cloud.local_file(&key.to_path())
        } else {
            None
        }
    }

    /// The configured store, with what it can sign.
    pub fn cloud(&self) -> &MediaObjects {
        &self.cloud
    }

    /// Deletes every object a resumable upload holds (its parts, and any a
    /// crashed request left uncommitted) and, for a direct upload that did
    /// not complete (`multipart`, its store upload id), the parts the store
    /// holds. Nothing there is no error. A multipart upload the store could
    /// not abort is only logged: the sweep that forgets the upload tries
    /// again, and the bucket's lifecycle rule for incomplete multipart
    /// uploads is the last resort (README).
    pub async fn delete_upload_parts(
        &self,
        tenant: &Tenant,
        upload: &UploadId,
        multipart: Option<&str>,
    ) -> Result<u64, object_store::Error> {
        use futures::TryStreamExt;
        if let Some(multipart) = multipart {
            let assembled = StorageKey::direct_upload(tenant, upload).to_path();
            if let Err(err) = self.cloud.abort_direct_upload(&assembled, multipart).await {
                tracing::warn!(%err, %upload, "a direct upload's parts were not aborted in the store");
            }
        }
        let store = self.parts();
        let prefix = StorageKey::upload_prefix(tenant, upload).to_path();
        let listed: Vec<_> = store
            .list(Some(&prefix))
            .map_ok(|meta| meta.location)
            .try_collect()
            .await?;
        let mut deleted = 0;
        for location in listed {
            match store.delete(&location).await {
                Ok(()) => deleted += 1,
                Err(object_store::Error::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(deleted)
    }

    /// Deletes the object `key` from every place media can live (an
    /// output whose item's strategy is no longer at hand). Nothing there is
    /// no error; a store that refuses is logged, and the object is left.
    pub async fn delete_everywhere(&self, key: &str) {
        let path = object_store::path::Path::from(key);
        for store in self.targets(StorageStrategy::Hybrid) {
            match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(err) => tracing::warn!(%err, key, "a media object was not deleted"),
            }
        }
    }

    /// Where an item of `strategy` is read from.
    pub fn primary(&self, strategy: StorageStrategy) -> Arc<dyn ObjectStore> {
        if strategy.uses_cloud() {
            self.cloud.store().clone()
        } else {
            self.local.clone()
        }
    }

    /// Whether objects of `strategy` are read from local files (served
    /// through the API's signed download route rather than pre-signed URLs).
    pub fn is_local(&self, strategy: StorageStrategy) -> bool {
        !strategy.uses_cloud() || self.cloud.is_local()
    }

    /// A pre-signed download URL of an object kept in S3; `None` when the
    /// object is read from local files (the API signs its own route then).
    pub async fn signed_url(
        &self,
        strategy: StorageStrategy,
        key: &StorageKey,
        expires_in: Duration,
    ) -> Result<Option<url::Url>, object_store::Error> {
        if self.is_local(strategy) {
            return Ok(None);
        }
        self.cloud.signed_get_url(&key.to_path(), expires_in).await
    }
}
