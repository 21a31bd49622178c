//! Where media objects go, by an upload's storage strategy: `cloud` is the
//! configured object store (S3, or the data directory by default), `local`
//! the data directory, `hybrid` both. When the configured store is the data
//! directory itself, `cloud` and `local` are one place and written once.

use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use storage::media::StorageStrategy;
use storage::objects::{LOCAL_MEDIA_DIR, ObjectStoreTarget};

/// The two places media objects can live.
#[derive(Clone, Debug)]
pub struct MediaStores {
    cloud: Arc<dyn ObjectStore>,
    local: Arc<dyn ObjectStore>,
    cloud_is_local: bool,
}

impl MediaStores {
    /// Opens the configured store and the data directory's.
    pub fn open(target: &ObjectStoreTarget, data_dir: &Path) -> anyhow::Result<Self> {
        let local_dir = data_dir.join(LOCAL_MEDIA_DIR);
        std::fs::create_dir_all(&local_dir)?;
        let local: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(&local_dir)?);
        let cloud_is_local = matches!(target, ObjectStoreTarget::Local(dir) if *dir == local_dir);
        let cloud = if cloud_is_local {
            local.clone()
        } else {
            target.open()?
        };
        Ok(Self {
            cloud,
            local,
            cloud_is_local,
        })
    }

    /// The stores an upload of `strategy` writes to, the one read back first.
    pub fn targets(&self, strategy: StorageStrategy) -> Vec<Arc<dyn ObjectStore>> {
        match strategy {
            StorageStrategy::Cloud => vec![self.cloud.clone()],
            StorageStrategy::Local => vec![self.local.clone()],
            StorageStrategy::Hybrid if self.cloud_is_local => vec![self.cloud.clone()],
            StorageStrategy::Hybrid => vec![self.cloud.clone(), self.local.clone()],
        }
    }

    /// Where an item of `strategy` is read from.
    pub fn primary(&self, strategy: StorageStrategy) -> Arc<dyn ObjectStore> {
        if strategy.uses_cloud() {
            self.cloud.clone()
        } else {
            self.local.clone()
        }
    }

    /// Whether objects of `strategy` are read from local files (served
    /// through the API's signed download route rather than pre-signed URLs).
    pub fn is_local(&self, strategy: StorageStrategy) -> bool {
        !strategy.uses_cloud() || self.cloud_is_local
    }
}
