//! `StorageKey`: where an object lives in the object store, built only by
//! the constructors below, so the layout of the store is written down once:
//!
//! ```text
//! <agency>/<environment>/<media id>/original.<ext>
//! <agency>/<environment>/<media id>/<variant>.<ext>
//! <agency>/<environment>/<media id>/outputs/<profile id>/<output>.<ext>
//! <agency>/<environment>/archives/<operation id>/<name>.zip
//! <agency>/<environment>/uploads/<upload id>/<start offset>-<part id>
//! <agency>/<environment>/uploads/<upload id>/assembled
//! ```
//!
//! Every key starts with the tenant, so one agency's objects never share a
//! prefix with another's, nor live with sandbox ones.

use std::fmt;

use object_store::path::Path as ObjectPath;

use crate::Tenant;
use crate::ids::{DeliveryProfileId, MediaId, OperationId, UploadId};

/// An object's key in the media store.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, sqlx::Type)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct StorageKey(String);

impl StorageKey {
    /// The original of an uploaded item, its extension the detected format's.
    pub fn original(tenant: &Tenant, media: &MediaId, extension: &str) -> Self {
        Self(format!(
            "{}/original.{extension}",
            Self::media_prefix(tenant, media)
        ))
    }

    /// One delivery variant (`web`, `thumbnail`, …), beside its original.
    pub fn variant(tenant: &Tenant, media: &MediaId, variant: &str, extension: &str) -> Self {
        Self(format!(
            "{}/{variant}.{extension}",
            Self::media_prefix(tenant, media)
        ))
    }

    /// One output of a delivery profile, beside its item's variants.
    pub fn output(
        tenant: &Tenant,
        media: &MediaId,
        profile: &DeliveryProfileId,
        output: &str,
        extension: &str,
    ) -> Self {
        Self(format!(
            "{}/outputs/{profile}/{output}.{extension}",
            Self::media_prefix(tenant, media)
        ))
    }

    /// The ZIP an archive operation writes.
    pub fn archive(tenant: &Tenant, operation: &OperationId, name: &str) -> Self {
        Self(format!(
            "{}/archives/{operation}/{name}.zip",
            Self::tenant_prefix(tenant)
        ))
    }

    /// One part of a resumable upload: the bytes one request added from
    /// `start` (zero-padded, so the parts list in order), told apart from a
    /// racing request's by `part`.
    pub fn upload_part(tenant: &Tenant, upload: &UploadId, start: u64, part: &str) -> Self {
        Self(format!(
            "{}/{start:020}-{part}",
            Self::upload_prefix(tenant, upload).as_str()
        ))
    }

    /// A resumable upload's one file when its bytes are kept on this host's
    /// disk: every request writes what it receives into it at its offset,
    /// so the file is whole, with nothing to concatenate, once the last
    /// byte arrives.
    pub fn upload_file(tenant: &Tenant, upload: &UploadId) -> Self {
        Self(format!(
            "{}/file",
            Self::upload_prefix(tenant, upload).as_str()
        ))
    }

    /// The object a direct upload's parts are assembled into by the store,
    /// under the upload's prefix until its format is known and it is copied
    /// to its item's original.
    pub fn direct_upload(tenant: &Tenant, upload: &UploadId) -> Self {
        Self(format!(
            "{}/assembled",
            Self::upload_prefix(tenant, upload).as_str()
        ))
    }

    /// Everything a resumable upload holds before it completes (its parts,
    /// and any a crashed request left uncommitted).
    pub fn upload_prefix(tenant: &Tenant, upload: &UploadId) -> Self {
        Self(format!("{}/uploads/{upload}", Self::tenant_prefix(tenant)))
    }

    fn tenant_prefix(tenant: &Tenant) -> String {
        format!("{}/{}", tenant.agency_id, tenant.environment.as_str())
    }

    fn media_prefix(tenant: &Tenant, media: &MediaId) -> String {
        format!("{}/{media}", Self::tenant_prefix(tenant))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as the object store names it.
    pub fn to_path(&self) -> ObjectPath {
        ObjectPath::from(self.0.as_str())
    }
}

impl fmt::Display for StorageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Environment;
    use crate::ids::AgencyId;

    #[test]
    fn keys_start_with_the_tenant_and_keep_the_layout() {
        let agency = AgencyId::generate();
        let tenant = Tenant::new(agency.clone(), Environment::Sandbox);
        let media = MediaId::generate();
        let operation = OperationId::generate();
        assert_eq!(
            StorageKey::original(&tenant, &media, "jpg").as_str(),
            format!("{agency}/sandbox/{media}/original.jpg")
        );
        assert_eq!(
            StorageKey::variant(&tenant, &media, "web", "webp").as_str(),
            format!("{agency}/sandbox/{media}/web.webp")
        );
        assert_eq!(
            StorageKey::archive(&tenant, &operation, "shoot")
                .to_path()
                .as_ref(),
            format!("{agency}/sandbox/archives/{operation}/shoot.zip")
        );
    }
}
