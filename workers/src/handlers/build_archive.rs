//! `media_archive`: packs the originals of an archive operation's media into
//! one ZIP and writes it to the object store. The ZIP is built in a scratch
//! file (one original in memory at a time, at most 50 MB) and streamed to the
//! store in parts, so an archive of any size never sits in memory. Images and
//! videos are stored as they are (already compressed); PDFs are deflated.

use std::collections::HashSet;
use std::io::Write;

use object_store::{ObjectStoreExt, WriteMultipart};
use platform::kinds::BuildArchive;
use platform::progress::MediaStep;
use storage::ids::DeliveryProfileId;
use storage::media::{MediaItem, MediaType, OutputStatus, StorageKey, StorageStrategy};
use tokio::io::AsyncReadExt;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::process_media::{ScratchFile, publish};
use super::{Handler, JobError, WorkerState};

/// Bytes read from the scratch file per store write.
const UPLOAD_CHUNK: usize = 5 * 1024 * 1024;

impl Handler for BuildArchive {
    /// Runs one archive.
    async fn run(&self, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
        run(self, state, attempt).await
    }

    async fn give_up(&self, state: &WorkerState) {
        give_up(self, state).await;
    }
}

/// Records an archive job given up on: the archive failed, and its progress
/// ends (`completed`, the operation's status `failed`). Best effort: an
/// error is only logged.
async fn give_up(job: &BuildArchive, state: &WorkerState) {
    let failed = async {
        let (tenant, operation) = (job.tenant(), job.operation_id.clone());
        if state
            .platform
            .store
            .media()
            .finish_archive(&tenant, &operation, None)
            .await?
        {
            tracing::warn!(operation_id = %operation, "archive failed: its job was given up on");
            let ended = MediaStep::Completed {
                size_bytes: None,
                reason: Some("archive failed".to_owned()),
            };
            publish(state, &tenant, &operation, ended).await?;
        }
        Ok::<_, JobError>(())
    };
    if let Err(err) = failed.await {
        tracing::error!(%err, operation_id = %job.operation_id, "an archive job given up on is not recorded");
    }
}

/// What an item puts in the archive: its original under its own name, or
/// (for an archive of a profile's outputs) each ready output of the
/// profile in a folder of the output's name, the file named after the
/// original (`mls_small/front.jpg`). Photos are stored as they are (they
/// are compressed already); a PDF is deflated.
fn entries(
    item: &MediaItem,
    profile: Option<&DeliveryProfileId>,
    used: &mut HashSet<String>,
) -> Vec<(String, StorageKey, CompressionMethod)> {
    let Some(profile) = profile else {
        let method = if item.media_type == MediaType::Pdf {
            CompressionMethod::Deflated
        } else {
            CompressionMethod::Stored
        };
        return vec![(
            unique_name(&item.filename, used),
            item.object_key.clone(),
            method,
        )];
    };
    let stem: String = item
        .filename
        .rsplit_once('.')
        .map_or(item.filename.as_str(), |(stem, _)| stem)
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | '\0') {
                '_'
            } else {
                c
            }
        })
        .collect();
    item.outputs
        .iter()
        .filter(|o| o.profile_id == *profile && o.status == OutputStatus::Ready)
        .filter_map(|o| {
            let key = o.object_key.clone()?;
            let extension = key.as_str().rsplit_once('.').map_or("", |(_, e)| e);
            let mut name = format!("{}/{stem}.{extension}", o.name);
            let mut counter = 2;
            while !used.insert(name.clone()) {
                name = format!("{}/{stem} ({counter}).{extension}", o.name);
                counter += 1;
            }
            Some((name, key, CompressionMethod::Stored))
        })
        .collect()
}

/// A name for `filename` not yet used in the archive (`photo (2).jpg`).
fn unique_name(filename: &str, used: &mut HashSet<String>) -> String {
    let clean: String = filename
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | '\0') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let (stem, extension) = match clean.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => (stem.to_owned(), format!(".{extension}")),
        _ => (clean.clone(), String::new()),
    };
    let mut candidate = clean;
    let mut counter = 2;
    while !used.insert(candidate.clone()) {
        candidate = format!("{stem} ({counter}){extension}");
        counter += 1;
    }
    candidate
}

async fn run(job: &BuildArchive, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
    let (tenant, operation) = (job.tenant(), job.operation_id.clone());
    let stores = state
        .platform
        .media
        .as_ref()
        .ok_or_else(|| JobError("no object store is configured".to_owned()))?;
    let record = state
        .platform
        .store
        .media()
        .operation(&tenant, &operation)
        .await?;
    if record.status != "processing" {
        return Ok(());
    }
    let name = record.archive_name.unwrap_or_else(|| "archive".to_owned());
    let items = state
        .platform
        .store
        .media()
        .archive_items(&tenant, &operation)
        .await?;
    publish(
        state,
        &tenant,
        &operation,
        MediaStep::Processing { media_id: None },
    )
    .await?;
    let scratch = ScratchFile(std::env::temp_dir().join(format!("listing-api-{operation}.zip")));
    let file = std::fs::File::create(&scratch.0)
        .map_err(|err| JobError(format!("scratch file: {err}")))?;
    let mut writer = ZipWriter::new(file);
    let mut used = HashSet::new();
    let profile = state
        .platform
        .store
        .media()
        .archive_profile(&tenant, &operation)
        .await?;
    for item in &items {
        for (entry, key, method) in entries(item, profile.as_ref(), &mut used) {
            let bytes = stores
                .primary(item.storage_strategy)
                .get(&key.to_path())
                .await?
                .bytes()
                .await?;
            writer = tokio::task::spawn_blocking(move || {
                let options = SimpleFileOptions::default()
                    .compression_method(method)
                    .large_file(bytes.len() > u32::MAX as usize / 2);
                writer.start_file(entry, options)?;
                writer.write_all(&bytes)?;
                Ok::<_, zip::result::ZipError>(writer)
            })
            .await
            .map_err(|err| JobError(format!("archive writer stopped: {err}")))?
            .map_err(|err| JobError(format!("archive entry: {err}")))?;
        }
        let packed = MediaStep::FileDone {
            media_id: item.id.clone(),
        };
        publish(state, &tenant, &operation, packed).await?;
    }
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .map_err(|err| JobError(format!("archive writer stopped: {err}")))?
        .map_err(|err| JobError(format!("archive: {err}")))?;
    let key = StorageKey::archive(&tenant, &operation, &name);
    let size = upload(stores.targets(StorageStrategy::Cloud), &scratch.0, &key).await?;
    state
        .platform
        .store
        .media()
        .finish_archive(&tenant, &operation, Some((&key, size)))
        .await?;
    tracing::info!(operation_id = %operation, files = items.len(), size, attempt, "archive written");
    let written = MediaStep::Completed {
        size_bytes: Some(size),
        reason: None,
    };
    publish(state, &tenant, &operation, written).await?;
    Ok(())
}

/// Streams the finished ZIP to the store(s) in parts; returns its size.
async fn upload(
    stores: Vec<std::sync::Arc<dyn object_store::ObjectStore>>,
    path: &std::path::Path,
    key: &StorageKey,
) -> Result<i64, JobError> {
    let mut size = 0;
    for store in stores {
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|err| JobError(format!("scratch file: {err}")))?;
        let mut writer = WriteMultipart::new(store.put_multipart(&key.to_path()).await?);
        let mut buffer = vec![0u8; UPLOAD_CHUNK];
        size = 0;
        loop {
            let read = file
                .read(&mut buffer)
                .await
                .map_err(|err| JobError(format!("scratch file: {err}")))?;
            if read == 0 {
                break;
            }
            size += read as i64;
            writer.wait_for_capacity(2).await?;
            writer.write(&buffer[..read]);
        }
        writer.finish().await?;
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_unique_and_path_free() {
        let mut used = HashSet::new();
        assert_eq!(unique_name("front.jpg", &mut used), "front.jpg");
        assert_eq!(unique_name("front.jpg", &mut used), "front (2).jpg");
        assert_eq!(unique_name("front.jpg", &mut used), "front (3).jpg");
        assert_eq!(unique_name("../etc/passwd", &mut used), ".._etc_passwd");
        assert_eq!(unique_name("README", &mut used), "README");
        assert_eq!(unique_name("README", &mut used), "README (2)");
    }
}
