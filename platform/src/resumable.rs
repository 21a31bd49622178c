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
use crate::media_stores::MediaStores;
use crate::progress::MediaStep;
use crate::{Platform, PushOptions};

/// How long a completed upload's row stays, so its URL still answers with
/// its offset and media item to a client that asks late.
pub const COMPLETED_UPLOAD_KEPT_SECONDS: i64 = 86_400;

/// Parts of the original the object store writes at once.
const STORE_CONCURRENCY: usize = 4;

/// The running sha256 of a tus upload's bytes, carried from one request to
/// the next as the hash's serialized state, so the completion knows the
/// file's digest without reading the file back.
pub mod running_digest {
    use sha2::digest::common::hazmat::{SerializableState, SerializedState};
    use sha2::{Digest, Sha256};

    /// The hash to go on with from `offset`: a fresh one at the start, the
    /// carried state after it; `None` when no state was carried (the
    /// completion then reads the file to hash it).
    pub fn resume(state: Option<&[u8]>, offset: i64) -> Option<Sha256> {
        if offset == 0 {
            return Some(Sha256::new());
        }
        let state = SerializedState::<Sha256>::try_from(state?).ok()?;
        Sha256::deserialize(&state).ok()
    }

    /// The state to carry on.
    pub fn save(hash: &Sha256) -> Vec<u8> {
        hash.serialize().to_vec()
    }

    /// The digest (hex) of a carried state.
    pub fn finish(state: &[u8]) -> Option<String> {
        let state = SerializedState::<Sha256>::try_from(state).ok()?;
        Some(hex::encode(Sha256::deserialize(&state).ok()?.finalize()))
    }
}

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
    // As it stands now: the caller's copy may predate the last part's
    // commit, and with it the running digest over every byte.
    let upload = &media.resumable(tenant, &upload.id).await?;
    if upload.state == UploadState::Completed {
        return Ok(media.item(tenant, &upload.media_id).await?);
    }
    let stores = platform.media.as_ref().ok_or(CompletionError::NoStore)?;
    let parts = media.upload_parts(tenant, &upload.id).await?;
    let composed = compose(stores, tenant, upload, &parts).await;
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
    Ok(hand_over(platform, stores, tenant, upload, &new_item).await?)
}

/// Hands a completed upload's original (`new_item`) to the media pipeline,
/// whichever door its bytes came through: the item recorded queued in its
/// batch and the upload completed, in one conditional transaction; then the
/// upload's objects deleted and the item's job pushed. Returns the item
/// (that of a racer that recorded it first, if one did).
pub(crate) async fn hand_over(
    platform: &Platform,
    stores: &MediaStores,
    tenant: &Tenant,
    upload: &Upload,
    new_item: &NewMediaItem,
) -> Result<MediaItem, storage::StorageError> {
    let media = platform.store.media();
    let forget_at = platform
        .store
        .clock()
        .now()
        .plus_seconds(COMPLETED_UPLOAD_KEPT_SECONDS);
    let recorded = media
        .complete_resumable(tenant, upload, new_item, forget_at)
        .await?;
    let Some(item) = recorded else {
        return media.item(tenant, &upload.media_id).await;
    };
    if let Err(err) = stores.delete_upload_parts(tenant, &upload.id, None).await {
        // The expiry sweep deletes them when it forgets the upload.
        tracing::warn!(%err, upload = %upload.id, "a completed upload's objects were not deleted");
    }
    queue_processing(platform, tenant, upload, &item).await;
    Ok(item)
}

/// Announces the item and pushes its job. A failed push is retried in the
/// background; should this process stop first, the media sweep pushes it.
async fn queue_processing(platform: &Platform, tenant: &Tenant, upload: &Upload, item: &MediaItem) {
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

/// Makes the original of the upload from its parts: on this host's files,
/// when the running hash was carried to the end, by giving the upload's one
/// file the original's name too (a hard link: nothing is copied), or by
/// concatenating part files into it where the upload has parts of their
/// own (the kernel copies; nothing is read back); otherwise by reading the
/// parts in order into the original on every target store, hashing them on
/// the way.
async fn compose(
    stores: &MediaStores,
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
    let parts_store = &stores.parts();
    let file = StorageKey::upload_file(tenant, &upload.id);
    let media_type = sniff(parts_store, parts, &file).await?;
    let key = StorageKey::original(tenant, &upload.media_id, media_type.extension());
    let digest = upload
        .sha256_state
        .as_deref()
        .and_then(running_digest::finish);
    let files = stores
        .only_local_file(upload.storage_strategy, &key)
        .and_then(|original| {
            let part_files: Option<Vec<_>> = parts
                .iter()
                .map(|part| {
                    let path = stores.cloud().local_file(&part.object_key.to_path())?;
                    Some((path, part.range_in_object(&file)))
                })
                .collect();
            Some((part_files?, original))
        });
    if let (Some(digest), Some((part_files, original))) = (&digest, files) {
        let whole_file = parts.iter().all(|part| part.object_key == file);
        tokio::task::spawn_blocking(move || {
            if whole_file {
                name_original(&part_files[0].0, upload_length(&part_files), &original)
            } else {
                concatenate(&part_files, &original)
            }
        })
        .await
        .map_err(|err| std::io::Error::other(err.to_string()))
        .and_then(|done| done)
        .map_err(|err| {
            CompletionError::Store(object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(err),
            })
        })?;
        return Ok(NewMediaItem {
            id: upload.media_id.clone(),
            filename: upload.filename.clone(),
            size_bytes: upload.length,
            media_type,
            content_sha256: digest.clone(),
            object_key: key,
        });
    }
    let targets = stores.targets(upload.storage_strategy);
    stream_parts(parts_store, &targets, key, media_type, upload, parts, &file).await
}

/// The upload's length, from the end of its last part.
fn upload_length(parts: &[(std::path::PathBuf, std::ops::Range<u64>)]) -> u64 {
    parts.last().map_or(0, |(_, range)| range.end)
}

/// Gives the upload's one file the original's name as well (a hard link,
/// so nothing is copied; the upload's name goes with its prefix once the
/// item is recorded). The file was synced by every request that wrote to
/// it; the link is synced here. A second completion finds the link made.
/// Where the two names cannot share the file (another file system), the
/// file is copied instead.
fn name_original(
    file: &std::path::Path,
    length: u64,
    original: &std::path::Path,
) -> std::io::Result<()> {
    if std::fs::metadata(file)?.len() != length {
        return Err(std::io::Error::other(format!(
            "{} does not hold the upload's {length} bytes",
            file.display()
        )));
    }
    if let Some(dir) = original.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::hard_link(file, original) {
        Ok(()) => {}
        // Made by an earlier completion, unless it is another file.
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            use std::os::unix::fs::MetadataExt;
            let (ours, there) = (std::fs::metadata(file)?, std::fs::metadata(original)?);
            if (ours.dev(), ours.ino()) != (there.dev(), there.ino()) {
                std::fs::remove_file(original)?;
                std::fs::hard_link(file, original)?;
            }
        }
        Err(err) if err.kind() == std::io::ErrorKind::CrossesDevices => {
            return concatenate(&[(file.to_owned(), 0..length)], original);
        }
        Err(err) => return Err(err),
    }
    sync_parent(original)
}

/// Syncs the directory that holds `path`, so that a name just given to a
/// file there survives a power loss.
pub fn sync_parent(path: &std::path::Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => std::fs::File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}

/// Concatenates the bytes of `parts` (each a file and where in it they
/// lie) into `original` (a file of its own beside it first, then renamed
/// into place, so a racer or a crash never leaves half a file under the
/// original's name).
fn concatenate(
    parts: &[(std::path::PathBuf, std::ops::Range<u64>)],
    original: &std::path::Path,
) -> std::io::Result<()> {
    use std::io::{Read, Seek};
    if let Some(dir) = original.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let staged = original.with_file_name(format!(".composing-{}", ulid::Ulid::generate()));
    let written = (|| {
        let mut out = std::fs::File::create(&staged)?;
        for (path, range) in parts {
            let mut file = std::fs::File::open(path)?;
            file.seek(std::io::SeekFrom::Start(range.start))?;
            let copied = std::io::copy(&mut file.take(range.end - range.start), &mut out)?;
            if copied != range.end - range.start {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("{} ends before the upload's bytes do", path.display()),
                ));
            }
        }
        // The parts are deleted once the item is recorded: the original
        // must be on disk before it takes its name.
        out.sync_data()
    })();
    let named = written.and_then(|()| {
        std::fs::rename(&staged, original)?;
        sync_parent(original)
    });
    match named {
        Ok(()) => Ok(()),
        Err(err) => {
            let _ = std::fs::remove_file(&staged);
            Err(err)
        }
    }
}

/// Reads the parts in order into the original on every target store,
/// hashing them.
async fn stream_parts(
    parts_store: &Arc<dyn ObjectStore>,
    targets: &[Arc<dyn ObjectStore>],
    key: StorageKey,
    media_type: MediaType,
    upload: &Upload,
    parts: &[UploadPart],
    file: &StorageKey,
) -> Result<NewMediaItem, CompletionError> {
    let mut writers = Vec::with_capacity(targets.len());
    for store in targets {
        writers.push(WriteMultipart::new(
            store.put_multipart(&key.to_path()).await?,
        ));
    }
    let mut hasher = Sha256::new();
    let written: Result<(), CompletionError> = async {
        for part in parts {
            let options = object_store::GetOptions {
                range: Some(part.range_in_object(file).into()),
                ..Default::default()
            };
            let mut stream = parts_store
                .get_opts(&part.object_key.to_path(), options)
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
    file: &StorageKey,
) -> Result<MediaType, CompletionError> {
    let mut head = Vec::with_capacity(MediaType::SNIFF_LEN);
    for part in parts {
        if head.len() >= MediaType::SNIFF_LEN {
            break;
        }
        let wanted = (MediaType::SNIFF_LEN - head.len()).min(part.length as usize) as u64;
        let start = part.range_in_object(file).start;
        let bytes = parts_store
            .get_range(&part.object_key.to_path(), start..start + wanted)
            .await?;
        head.extend_from_slice(&bytes);
    }
    MediaType::detect(&head).ok_or(CompletionError::UnsupportedFormat)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::{concatenate, name_original, running_digest};

    #[test]
    fn a_digest_carried_across_parts_is_the_files() {
        let file: Vec<u8> = (0..10_000u32).map(|n| (n % 251) as u8).collect();
        let mut state: Option<Vec<u8>> = None;
        let mut offset = 0;
        for part in file.chunks(3_333) {
            let mut hash = running_digest::resume(state.as_deref(), offset).unwrap();
            hash.update(part);
            state = Some(running_digest::save(&hash));
            offset += part.len() as i64;
        }
        assert_eq!(
            running_digest::finish(&state.unwrap()).unwrap(),
            hex::encode(Sha256::digest(&file))
        );
        // Past the start, no carried state is no hash (the file is read).
        assert!(running_digest::resume(None, 10).is_none());
        assert!(running_digest::resume(Some(b"not a state"), 10).is_none());
    }

    #[test]
    fn parts_are_concatenated_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut parts: Vec<_> = ["one ", "two "]
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let path = dir.path().join(format!("part-{index}"));
                std::fs::write(&path, text).unwrap();
                (path, 0..text.len() as u64)
            })
            .collect();
        // An upload that went on in its one file: its bytes from offset 8.
        let file = dir.path().join("file");
        std::fs::write(&file, "\0\0\0\0\0\0\0\0three").unwrap();
        parts.push((file, 8..13));
        let original = dir.path().join("media/original.jpg");
        concatenate(&parts, &original).unwrap();
        assert_eq!(std::fs::read_to_string(&original).unwrap(), "one two three");
        // A part whose file ends early, or is missing, leaves nothing under
        // the original's name.
        let short = dir.path().join("short/original.jpg");
        assert!(concatenate(&[(dir.path().join("part-0"), 0..9)], &short).is_err());
        assert!(!short.exists());
        let missing = dir.path().join("other/original.jpg");
        assert!(concatenate(&[(dir.path().join("nowhere"), 0..4)], &missing).is_err());
        assert!(!missing.exists());
        assert_eq!(
            std::fs::read_dir(missing.parent().unwrap())
                .unwrap()
                .count(),
            0
        );
    }

    #[test]
    fn the_uploads_file_becomes_the_original_without_a_copy() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("uploads/u/file");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "one two three").unwrap();
        let original = dir.path().join("media/original.jpg");
        name_original(&file, 13, &original).unwrap();
        assert_eq!(std::fs::read_to_string(&original).unwrap(), "one two three");
        let inode = |path: &std::path::Path| std::fs::metadata(path).unwrap().ino();
        assert_eq!(inode(&file), inode(&original));
        // A second completion finds the name given.
        name_original(&file, 13, &original).unwrap();
        assert_eq!(inode(&file), inode(&original));
        // Another file under the original's name is replaced by the link.
        let stray = dir.path().join("media/stray.jpg");
        std::fs::write(&stray, "one two three").unwrap();
        name_original(&file, 13, &stray).unwrap();
        assert_eq!(inode(&file), inode(&stray));
        std::fs::remove_file(&stray).unwrap();
        std::fs::write(&stray, "another file!").unwrap();
        name_original(&file, 13, &stray).unwrap();
        assert_eq!(std::fs::read_to_string(&stray).unwrap(), "one two three");
        // The upload's name goes; the original stays.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(std::fs::read_to_string(&original).unwrap(), "one two three");
        // A file short of the upload's length is refused.
        std::fs::write(&file, "one two").unwrap();
        let other = dir.path().join("media/other.jpg");
        assert!(name_original(&file, 13, &other).is_err());
        assert!(!other.exists());
    }
}
