//! Completing a resumable upload: its parts, read in order, become the
//! original of its media item (hashed, its format judged by its first
//! bytes, written to every store of its strategy), the item is recorded
//! queued in the upload's batch and its processing job pushed, and the parts
//! are deleted. From there on the item is one like any of `POST
//! /media/upload`: the same job, variants, progress and event.
//!
//! Completion is idempotent and may race (the request that sent the last
//! bytes, a client's `HEAD` after a crash, the expiry sweep): every racer
//! writes the same bytes to the same key, and the recording is conditional,
//! so one item is recorded; a loser answers with the winner's item.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use sha2::{Digest, Sha256};
use storage::Tenant;
use storage::media::{
    MediaItem, MediaType, NewMediaItem, StorageKey, Upload, UploadPart, UploadState,
};

use crate::kinds::ProcessMedia;
use crate::progress::MediaStep;
use crate::{Platform, PushOptions};

/// How long a completed upload's row stays, so its URL still answers with
/// its offset and media item to a client that asks late.
pub const COMPLETED_UPLOAD_KEPT_SECONDS: i64 = 86_400;

/// Parts of the original the object store writes at once.
const STORE_CONCURRENCY: usize = 4;

/// Why an upload could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum CompletionError {
    /// Its content is none of the accepted formats: it never will complete.
    #[error("the content is not JPEG, PNG, WebP, GIF, MP4 or PDF")]
    UnsupportedFormat,
    /// Its parts do not add up to its length (a part is missing).
    #[error("the upload's parts do not cover its length")]
    Incomplete,
    /// No object store is configured.
    #[error("no object store is configured")]
    NoStore,
    /// The object store failed; completing again may succeed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// The database failed.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
}

/// Completes `upload`, whose every byte arrived, and returns its item
/// (this call's, or that of the racer that completed it first).
pub async fn complete(
    platform: &Platform,
    tenant: &Tenant,
    upload: &Upload,
) -> Result<MediaItem, CompletionError> {
    let media = platform.store.media();
    if upload.state == UploadState::Completed {
        return Ok(media.item(tenant, &upload.media_id).await?);
    }
    let stores = platform.media.as_ref().ok_or(CompletionError::NoStore)?;
    let parts = media.upload_parts(tenant, &upload.id).await?;
    let composed = compose(
        &stores.parts(),
        &stores.targets(upload.storage_strategy),
        tenant,
        upload,
        &parts,
    )
    .await;
    let new_item = match composed {
        Ok(item) => item,
        Err(err) => {
            // A racer may have completed it and deleted the parts meanwhile.
            let now = media.resumable(tenant, &upload.id).await?;
            if now.state == UploadState::Completed {
                return Ok(media.item(tenant, &upload.media_id).await?);
            }
            return Err(err);
        }
    };
    let forget_at = platform
        .store
        .clock()
        .now()
        .plus_seconds(COMPLETED_UPLOAD_KEPT_SECONDS);
    let recorded = media
        .complete_resumable(tenant, upload, &new_item, forget_at)
        .await?;
    let Some(item) = recorded else {
        return Ok(media.item(tenant, &upload.media_id).await?);
    };
    if let Err(err) = stores.delete_upload_parts(tenant, &upload.id, None).await {
        // The expiry sweep deletes them when it forgets the upload.
        tracing::warn!(%err, upload = %upload.id, "a completed upload's parts were not deleted");
    }
    queue_processing(platform, tenant, upload, &item).await;
    Ok(item)
}

/// Announces the item and pushes its job. A failed push is retried in the
/// background; should this process stop first, the media sweep pushes it.
pub(crate) async fn queue_processing(
    platform: &Platform,
    tenant: &Tenant,
    upload: &Upload,
    item: &MediaItem,
) {
    let queued = platform
        .progress
        .publish_step(tenant, &upload.operation_id, MediaStep::Queued)
        .await;
    if let Err(err) = queued {
        tracing::warn!(%err, operation_id = %upload.operation_id, "upload's queued state not published");
    }
    let jobs = vec![(
        ProcessMedia::new(tenant, &upload.operation_id, &item.id),
        PushOptions::default(),
    )];
    if let Err(err) = platform.queue.push_many(jobs.clone()).await {
        tracing::warn!(%err, media_id = %item.id, "an upload's processing job not queued yet; retrying");
        let patience = ProcessMedia::LOST_PUSH_AFTER_SECONDS.unsigned_abs();
        platform
            .queue
            .keep_pushing(jobs, Duration::from_secs(patience));
    }
}

/// Reads the parts in order into the original on every target store.
async fn compose(
    parts_store: &Arc<dyn ObjectStore>,
    targets: &[Arc<dyn ObjectStore>],
    tenant: &Tenant,
    upload: &Upload,
    parts: &[UploadPart],
) -> Result<NewMediaItem, CompletionError> {
    let mut expected = 0;
    for part in parts {
        if part.start != expected {
            return Err(CompletionError::Incomplete);
        }
        expected += part.length;
    }
    if expected != upload.length {
        return Err(CompletionError::Incomplete);
    }
    let media_type = sniff(parts_store, parts).await?;
    let key = StorageKey::original(tenant, &upload.media_id, media_type.extension());
    let mut writers = Vec::with_capacity(targets.len());
    for store in targets {
        writers.push(WriteMultipart::new(
            store.put_multipart(&key.to_path()).await?,
        ));
    }
    let mut hasher = Sha256::new();
    let written: Result<(), CompletionError> = async {
        for part in parts {
            let mut stream = parts_store
                .get(&part.object_key.to_path())
                .await?
                .into_stream();
            while let Some(chunk) = stream.try_next().await? {
                hasher.update(&chunk);
                for writer in &mut writers {
                    writer.wait_for_capacity(STORE_CONCURRENCY).await?;
                    writer.write(&chunk);
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(err) = written {
        for writer in writers {
            let _ = writer.abort().await;
        }
        return Err(err);
    }
    for writer in writers {
        writer.finish().await?;
    }
    Ok(NewMediaItem {
        id: upload.media_id.clone(),
        filename: upload.filename.clone(),
        size_bytes: upload.length,
        media_type,
        content_sha256: hex::encode(hasher.finalize()),
        object_key: key,
    })
}

/// The format of the upload, judged by its first bytes.
async fn sniff(
    parts_store: &Arc<dyn ObjectStore>,
    parts: &[UploadPart],
) -> Result<MediaType, CompletionError> {
    let mut head = Vec::with_capacity(MediaType::SNIFF_LEN);
    for part in parts {
        if head.len() >= MediaType::SNIFF_LEN {
            break;
        }
        let wanted = (MediaType::SNIFF_LEN - head.len()).min(part.length as usize) as u64;
        let bytes = parts_store
            .get_range(&part.object_key.to_path(), 0..wanted)
            .await?;
        head.extend_from_slice(&bytes);
    }
    MediaType::detect(&head).ok_or(CompletionError::UnsupportedFormat)
}
