//! Completing a direct upload: the client sent its file's parts straight to
//! the object store (S3 multipart, by pre-signed URLs) and names the ETags
//! the store answered. The store assembles the parts; the API reads back
//! only the object's size (a `HEAD`) and its first bytes (to judge the
//! format), copies it inside the store to its item's original, and hands the
//! item to the media pipeline exactly as a tus upload's completion does. The
//! sha256 the client declared becomes the item's, and the worker that reads
//! every byte to make the variants checks it before it derives anything.
//!
//! Completion is idempotent: a retry after the store assembled the parts
//! (and the API stopped, or the answer was lost) finds the assembled object
//! and goes on from there; a retry after the item was recorded answers it.

use object_store::ObjectStoreExt;
use storage::Tenant;
use storage::media::{
    DirectPlan, MediaItem, MediaType, NewMediaItem, StorageKey, Upload, UploadState,
};
use storage::objects::StoredPart;

use crate::Platform;
use crate::resumable::hand_over;

/// Why a direct upload could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum DirectCompletionError {
    /// The parts in the store are not the upload's plan (one missing, one
    /// of another size), or the store refused to assemble them (an ETag
    /// that is not the part's): the upload still takes parts, and
    /// completing again may succeed.
    #[error("the parts are not all there: {0}")]
    PartsRefused(String),
    /// The store holds no multipart upload and no assembled file for it
    /// (aborted by the bucket's lifecycle rule, say): it can not complete.
    #[error("the object store no longer holds the upload's parts")]
    PartsGone,
    /// The assembled file is not the size the upload declared; it is
    /// deleted and the upload can not complete.
    #[error("the file in the store is {stored} bytes, not the {declared} the upload declared")]
    SizeMismatch {
        /// Declared at creation.
        declared: i64,
        /// What the store holds.
        stored: u64,
    },
    /// Its content is none of the accepted formats; it is deleted.
    #[error("the content is not JPEG, PNG, WebP, GIF, MP4 or PDF")]
    UnsupportedFormat,
    /// A tus upload, or no object store that takes direct uploads.
    #[error("the upload is not a direct upload of an object store that takes them")]
    NotDirect,
    /// The object store failed; completing again may succeed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
}

/// Checks the parts the store holds against the upload's plan: every part
/// from 1 to its count, each of `part_size` bytes but the last, which holds
/// the rest. What is missing or of another size is named, so the client
/// sends just that again.
fn check_parts(
    plan: &DirectPlan,
    length: i64,
    parts: &[StoredPart],
) -> Result<(), DirectCompletionError> {
    let count = plan.part_count(length);
    let mut problems = Vec::new();
    for number in 1..=count {
        let expected = plan.part_size.min(length - (number - 1) * plan.part_size);
        match parts.iter().find(|part| part.part_number == number) {
            None => problems.push(format!("part {number} is missing")),
            Some(part) if part.size != expected => problems.push(format!(
                "part {number} is {} bytes, not {expected}",
                part.size
            )),
            Some(_) => {}
        }
    }
    if let Some(extra) = parts.iter().find(|part| part.part_number > count) {
        problems.push(format!(
            "part {} is beyond the upload's {count}",
            extra.part_number
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(DirectCompletionError::PartsRefused(problems.join("; ")))
    }
}

/// Completes the direct upload `upload` from its parts' ETags (part 1
/// first) and returns its item (this call's, or that of a racer that
/// completed it first).
pub async fn complete(
    platform: &Platform,
    tenant: &Tenant,
    upload: &Upload,
    etags: Vec<String>,
) -> Result<MediaItem, DirectCompletionError> {
    let media = platform.store.media();
    if upload.state == UploadState::Completed {
        return Ok(media.item(tenant, &upload.media_id).await?);
    }
    let (Some(plan), Some(stores)) = (&upload.direct, &platform.media) else {
        return Err(DirectCompletionError::NotDirect);
    };
    let store = stores.parts();
    let assembled = StorageKey::direct_upload(tenant, &upload.id).to_path();
    let listed = stores
        .cloud()
        .direct_upload_parts(&assembled, &plan.store_upload_id)
        .await;
    let stored = match listed {
        // Not as planned: unless an earlier call assembled them already
        // (a store may list a completed upload's parts as none).
        Ok(parts) if check_parts(plan, upload.length, &parts).is_err() => {
            match store.head(&assembled).await {
                Ok(meta) => meta,
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(check_parts(plan, upload.length, &parts)
                        .err()
                        .unwrap_or(DirectCompletionError::PartsGone));
                }
                Err(err) => return Err(err.into()),
            }
        }
        Ok(_) => {
            let completed = stores
                .cloud()
                .complete_direct_upload(&assembled, &plan.store_upload_id, etags)
                .await;
            match (completed, store.head(&assembled).await) {
                (_, Ok(meta)) => meta,
                (Err(refused), Err(object_store::Error::NotFound { .. })) => {
                    return Err(DirectCompletionError::PartsRefused(format!(
                        "the store did not assemble them: {refused}"
                    )));
                }
                (_, Err(err)) => return Err(err.into()),
            }
        }
        // No multipart upload: assembled by an earlier call whose answer
        // was lost, or gone from the store (aborted).
        Err(object_store::Error::NotFound { .. }) => match store.head(&assembled).await {
            Ok(meta) => meta,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(DirectCompletionError::PartsGone);
            }
            Err(err) => return Err(err.into()),
        },
        Err(err) => return Err(err.into()),
    };
    if i64::try_from(stored.size).ok() != Some(upload.length) {
        return Err(DirectCompletionError::SizeMismatch {
            declared: upload.length,
            stored: stored.size,
        });
    }
    let head_len = stored.size.min(MediaType::SNIFF_LEN as u64);
    let head = store.get_range(&assembled, 0..head_len).await?;
    let media_type = MediaType::detect(&head).ok_or(DirectCompletionError::UnsupportedFormat)?;
    let key = StorageKey::original(tenant, &upload.media_id, media_type.extension());
    // Inside the store: no byte of the file passes through this process.
    store.copy(&assembled, &key.to_path()).await?;
    let new_item = NewMediaItem {
        id: upload.media_id.clone(),
        filename: upload.filename.clone(),
        size_bytes: upload.length,
        media_type,
        content_sha256: plan.declared_sha256.clone(),
        object_key: key,
    };
    Ok(hand_over(platform, stores, tenant, upload, &new_item).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(part_size: i64) -> DirectPlan {
        DirectPlan {
            store_upload_id: "u".into(),
            part_size,
            declared_sha256: "0".repeat(64),
        }
    }

    fn part(part_number: i64, size: i64) -> StoredPart {
        StoredPart { part_number, size }
    }

    #[test]
    fn the_parts_must_be_the_plan() {
        let plan = plan(10);
        assert!(check_parts(&plan, 25, &[part(1, 10), part(2, 10), part(3, 5)]).is_ok());
        assert!(check_parts(&plan, 10, &[part(1, 10)]).is_ok());
        let refused = |parts: &[StoredPart]| match check_parts(&plan, 25, parts) {
            Err(DirectCompletionError::PartsRefused(reason)) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(&[part(1, 10), part(3, 5)]), "part 2 is missing");
        assert_eq!(
            refused(&[part(1, 10), part(2, 9), part(3, 6)]),
            "part 2 is 9 bytes, not 10; part 3 is 6 bytes, not 5"
        );
        assert_eq!(
            refused(&[part(1, 10), part(2, 10), part(3, 5), part(4, 1)]),
            "part 4 is beyond the upload's 3"
        );
        assert_eq!(
            refused(&[]),
            "part 1 is missing; part 2 is missing; part 3 is missing"
        );
    }
}
