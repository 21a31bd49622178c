//! `media_variants`: makes the six delivery variants of one uploaded item
//! (from the image itself, a video's poster frame or a PDF's first page),
//! stores them beside the original, and reports each step under the upload's
//! operation. A file that cannot be read fails alone, with a reason; the
//! worker and the other files go on. The last item to finish completes the
//! upload and emits `media.upload.completed` through the outbox.

use std::path::PathBuf;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use platform::Job;
use platform::kinds::ProcessMedia;
use platform::progress::MediaStep;
use storage::ids::OperationId;
use storage::media::{MediaItem, MediaStatus, MediaType, StorageKey, Variant};
use storage::{StorageError, Tenant};

use super::{Handler, JobError, WorkerState};
use crate::media::outputs::OutputPlan;
use crate::media::poster;
use crate::media::variants::{Rendered, VariantLimits, VariantName, render_media};

impl Handler for ProcessMedia {
    /// Runs one item's processing.
    async fn run(&self, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
        run(self, state, attempt).await
    }

    async fn give_up(&self, state: &WorkerState) {
        give_up(self, state).await;
    }
}

/// The failure reason of an item whose job was given up on.
pub const GIVEN_UP_REASON: &str = "processing failed";

/// Records a job given up on (its last attempt failed, or its worker died
/// during each): the item fails, so its upload can complete, instead of
/// staying `processing` for ever. Best effort: an error is only logged.
async fn give_up(job: &ProcessMedia, state: &WorkerState) {
    if let Err(err) = fail_for_good(job, state).await {
        tracing::error!(%err, media_id = %job.media_id, "a media job given up on is not recorded");
    }
}

async fn fail_for_good(job: &ProcessMedia, state: &WorkerState) -> Result<(), JobError> {
    let (tenant, id, operation) = (job.tenant(), job.media_id.clone(), job.operation_id.clone());
    let item = match state.platform.store.media().item(&tenant, &id).await {
        Ok(item) => item,
        Err(StorageError::NotFound(_)) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    if matches!(item.status, MediaStatus::Queued | MediaStatus::Processing) {
        tracing::warn!(media_id = %id, "media item failed: its job was given up on");
        state
            .platform
            .store
            .media()
            .fail_item(&tenant, &id, GIVEN_UP_REASON)
            .await?;
        // The upload completes even if this state is lost.
        let failed = MediaStep::Failed {
            media_id: id.clone(),
            reason: GIVEN_UP_REASON.to_owned(),
        };
        let published = publish(state, &tenant, &operation, failed).await;
        if let Err(err) = published {
            tracing::warn!(%err, media_id = %id, "a failed item's state not published");
        }
    }
    finish_upload(state, &tenant, &operation, true).await
}

/// Completes the upload if no item is left, and publishes `completed`. With
/// `again`, an upload found completed already gets its `completed` once
/// more: the run that completed it may have failed before publishing it.
async fn finish_upload(
    state: &WorkerState,
    tenant: &Tenant,
    operation: &OperationId,
    again: bool,
) -> Result<(), JobError> {
    let media = state.platform.store.media();
    let completed = media.complete_upload_if_done(tenant, operation).await?;
    tracing::debug!(operation_id = %operation, completed = completed.is_some(), "upload checked for completion");
    let finished = completed.is_some()
        || (again && media.operation(tenant, operation).await?.status != "processing");
    if finished {
        publish(state, tenant, operation, MediaStep::completed()).await?;
    }
    Ok(())
}

impl From<object_store::Error> for JobError {
    fn from(err: object_store::Error) -> Self {
        Self(format!("object store: {err}"))
    }
}

/// Publishes a step of the operation (with its snapshot).
pub(crate) async fn publish(
    state: &WorkerState,
    tenant: &Tenant,
    operation: &OperationId,
    step: MediaStep,
) -> Result<(), JobError> {
    state
        .platform
        .progress
        .publish_step(tenant, operation, step)
        .await?;
    Ok(())
}

async fn run(job: &ProcessMedia, state: &WorkerState, attempt: usize) -> Result<(), JobError> {
    let (tenant, id, operation) = (job.tenant(), job.media_id.clone(), job.operation_id.clone());
    let item = match state.platform.store.media().item(&tenant, &id).await {
        Ok(item) => item,
        // The upload's rows are gone (never committed): nothing to do.
        Err(StorageError::NotFound(_)) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    tracing::debug!(media_id = %id, status = item.status.as_str(), "processing a media item");
    // A retry finding its item finished: an earlier run got this far.
    let finished_before = !matches!(item.status, MediaStatus::Queued | MediaStatus::Processing);
    if !finished_before {
        state
            .platform
            .store
            .media()
            .start_processing(&tenant, &id)
            .await?;
        let processing = MediaStep::Processing {
            media_id: Some(id.clone()),
        };
        publish(state, &tenant, &operation, processing).await?;
        let outcome = match make_item_variants(state, &tenant, &operation, &item).await {
            Err(ItemError::Storage(reason)) if attempt < ProcessMedia::MAX_ATTEMPTS => {
                // The store, not the file: the job runs again.
                return Err(JobError(reason));
            }
            Err(ItemError::Storage(reason)) => Err(Unprocessable(format!(
                "storage stayed unavailable: {reason}"
            ))),
            Err(ItemError::Content(unprocessable)) => Err(unprocessable),
            Ok(made) => Ok(made),
        };
        match outcome {
            Ok((variants, duration)) => {
                state
                    .platform
                    .store
                    .media()
                    .finish_item(&tenant, &id, &variants, duration)
                    .await?;
                let done = MediaStep::FileDone {
                    media_id: id.clone(),
                };
                publish(state, &tenant, &operation, done).await?;
            }
            Err(Unprocessable(reason)) => {
                tracing::info!(media_id = %id, %reason, "media item failed");
                state
                    .platform
                    .store
                    .media()
                    .fail_item(&tenant, &id, &reason)
                    .await?;
                let failed = MediaStep::Failed {
                    media_id: id.clone(),
                    reason,
                };
                publish(state, &tenant, &operation, failed).await?;
            }
        }
    }
    finish_upload(state, &tenant, &operation, finished_before).await
}

/// Why an item cannot be processed: its content, not the worker.
struct Unprocessable(String);

/// What stopped an item: its content (final) or the object store (retried).
enum ItemError {
    Content(Unprocessable),
    Storage(String),
}

impl From<Unprocessable> for ItemError {
    fn from(err: Unprocessable) -> Self {
        Self::Content(err)
    }
}

/// A temporary file (a copy of an original for the external tools, an
/// archive being built), removed on drop.
pub(crate) struct ScratchFile(pub(crate) PathBuf);

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The image the variants are made from, and a video's duration.
async fn source_image(
    item: &MediaItem,
    original: Vec<u8>,
) -> Result<(Vec<u8>, Option<f64>), Unprocessable> {
    let unreadable = |err: poster::PosterError| Unprocessable(err.to_string());
    match item.media_type {
        MediaType::Jpeg | MediaType::Png | MediaType::Webp | MediaType::Gif => Ok((original, None)),
        MediaType::Mp4 | MediaType::Pdf => {
            let path = std::env::temp_dir().join(format!(
                "listing-api-{}.{}",
                item.id,
                item.media_type.extension()
            ));
            let scratch = ScratchFile(path);
            tokio::fs::write(&scratch.0, &original)
                .await
                .map_err(|err| Unprocessable(format!("could not stage the file: {err}")))?;
            if item.media_type == MediaType::Pdf {
                let page = poster::pdf_first_page(&scratch.0)
                    .await
                    .map_err(unreadable)?;
                Ok((page, None))
            } else {
                let info = poster::probe_video(&scratch.0).await.map_err(unreadable)?;
                let frame = poster::video_poster(&scratch.0, &info)
                    .await
                    .map_err(unreadable)?;
                Ok((frame, Some(info.duration_secs)))
            }
        }
    }
}

/// Reads the original, makes and stores the variants. Object store failures
/// are the worker's (the job retries); content failures are the item's.
async fn make_item_variants(
    state: &WorkerState,
    tenant: &Tenant,
    operation: &OperationId,
    item: &MediaItem,
) -> Result<(Vec<Variant>, Option<f64>), ItemError> {
    let stores = state
        .platform
        .media
        .as_ref()
        .ok_or_else(|| ItemError::Storage("no object store is configured".to_owned()))?;
    let path = item.object_key.to_path();
    let original = read_original(stores.primary(item.storage_strategy), &path)
        .await
        .map_err(|err| ItemError::Storage(format!("the stored original cannot be read: {err}")))?;
    check_content(item, &original)?;
    let (image, duration) = source_image(item, original).await?;
    tracing::debug!(media_id = %item.id, bytes = image.len(), "making variants");
    if !item.enable_optimization {
        return Ok((Vec::new(), duration));
    }
    // A photo's delivery outputs are rendered from the same decode; a
    // video's poster or a PDF's page gets the variants alone.
    let photo = item.media_type.is_image();
    let plan = if photo {
        OutputPlan::for_item(state, tenant, item, None)
            .await
            .map_err(|err| ItemError::Storage(err.0))?
    } else {
        OutputPlan::none()
    };
    let focal = match (photo, item.focal_point) {
        (false, _) => Some((0.5, 0.5)),
        (true, Some(point)) => Some((point.x, point.y)),
        (true, None) => None,
    };
    // At background priority: the render yields the cores to API requests
    // and other jobs' short work in this process.
    let specs = VariantName::ALL.map(VariantName::spec);
    let (rendered, plan) = crate::media::background::render(move || {
        let rendered = render_media(
            &image,
            &specs,
            &plan.requests(),
            focal,
            &VariantLimits::default(),
        );
        (rendered, plan)
    })
    .await
    .map_err(|err| Unprocessable(format!("image processing stopped: {err}")))?;
    let Rendered {
        variants: encoded,
        outputs,
        focal_point,
    } = rendered.map_err(|err| Unprocessable(err.to_string()))?;
    if photo {
        plan.store(state, tenant, item, outputs, focal_point)
            .await
            .map_err(|err| ItemError::Storage(err.0))?;
    }
    tracing::debug!(media_id = %item.id, count = encoded.len(), "variants made");
    let stores = state
        .platform
        .media
        .as_ref()
        .ok_or_else(|| ItemError::Storage("no object store is configured".to_owned()))?;
    let mut variants = Vec::with_capacity(encoded.len());
    for variant in encoded {
        let key = StorageKey::variant(
            tenant,
            &item.id,
            variant.name.as_str(),
            variant.format.extension(),
        );
        let size = variant.bytes.len();
        let payload = PutPayload::from(variant.bytes);
        for store in stores.targets(item.storage_strategy) {
            store
                .put(&key.to_path(), payload.clone())
                .await
                .map_err(|err| ItemError::Storage(format!("storing a variant failed: {err}")))?;
        }
        tracing::debug!(media_id = %item.id, %key, "variant stored");
        let done = MediaStep::VariantDone {
            media_id: item.id.clone(),
            variant: variant.name.as_str().to_owned(),
            width: variant.width,
            height: variant.height,
        };
        publish(state, tenant, operation, done)
            .await
            .map_err(|err| ItemError::Storage(err.0))?;
        variants.push(Variant {
            name: variant.name.as_str().to_owned(),
            object_key: key,
            format: match variant.format.extension() {
                "jpg" => "jpeg".to_owned(),
                other => other.to_owned(),
            },
            width: i32::try_from(variant.width).unwrap_or(i32::MAX),
            height: i32::try_from(variant.height).unwrap_or(i32::MAX),
            size_bytes: i64::try_from(size).unwrap_or(i64::MAX),
        });
    }
    Ok((variants, duration))
}

/// Checks the original's bytes against the sha256 its item records before
/// anything is derived from them. An upload through the API hashed the
/// bytes it stored; a direct upload's client declared the hash of bytes it
/// sent to the store itself, and this is where the two are compared.
fn check_content(item: &MediaItem, original: &[u8]) -> Result<(), Unprocessable> {
    use sha2::{Digest, Sha256};
    let stored = hex::encode(Sha256::digest(original));
    if stored.eq_ignore_ascii_case(&item.content_sha256) {
        Ok(())
    } else {
        Err(Unprocessable(format!(
            "the stored file's sha256 is {stored}, not the {} its upload declared; upload the file again",
            item.content_sha256
        )))
    }
}

async fn read_original(
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    path: &ObjectPath,
) -> Result<Vec<u8>, object_store::Error> {
    Ok(store.get(path).await?.bytes().await?.to_vec())
}
