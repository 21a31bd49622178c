//! Receiving one request's bytes of a resumable upload: streamed into an
//! object of their own (a part), checked against the request's
//! `Upload-Checksum`, and committed, which moves the upload's offset.
//!
//! The work runs in a task of its own, so a request whose client hangs up
//! (or goes silent past the idle limit) still keeps and commits the bytes
//! that arrived: a client that comes back resumes from them, losing at most
//! what was in flight. A request that named a checksum keeps nothing unless
//! every byte arrived and matches.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use platform::Platform;
use storage::Tenant;
use storage::media::{MediaType, Upload, UploadPart, UploadState};
use ulid::Ulid;

use super::protocol::Checksum;
use crate::error::{ApiError, UploadRefusal};
use storage::media::StorageKey;

/// Parts of one part's object the store writes at once.
const STORE_CONCURRENCY: usize = 4;

/// What a request's bytes came to.
#[derive(Debug)]
pub enum Received {
    /// Bytes were committed; the upload's offset is now this.
    Committed(i64),
    /// No byte was kept (none arrived, or the cut request named a checksum).
    Nothing,
}

/// What receiving needs besides the body.
pub struct PartRequest {
    /// The platform (store and object stores).
    pub platform: Platform,
    /// Whose upload.
    pub tenant: Tenant,
    /// The upload, as read when the request began.
    pub upload: Upload,
    /// The checksum the bytes must have.
    pub checksum: Option<Checksum>,
    /// How long a silent client is waited for.
    pub idle: Duration,
    /// How long the upload waits for more bytes after these.
    pub expiry: Duration,
}

fn refused(refusal: UploadRefusal, message: impl Into<String>) -> ApiError {
    ApiError::Upload {
        refusal,
        message: message.into(),
    }
}

fn store_failed(err: object_store::Error) -> ApiError {
    tracing::error!(%err, "object store write of an upload's part failed");
    refused(
        UploadRefusal::StorageUnavailable,
        "Storage is unavailable; send the bytes again from the upload's offset (HEAD tells it).",
    )
}

/// Receives the body as the part starting at the upload's offset, in a
/// task that outlives the request.
pub async fn receive(request: PartRequest, body: Body) -> Result<Received, ApiError> {
    let task = tokio::spawn(receive_in_task(request, body));
    task.await.unwrap_or_else(|err| {
        Err(ApiError::internal(format!(
            "an upload's part failed: {err}"
        )))
    })
}

async fn receive_in_task(request: PartRequest, body: Body) -> Result<Received, ApiError> {
    let Some(stores) = request.platform.media.as_ref() else {
        return Err(ApiError::internal("no object store is configured"));
    };
    let store = stores.parts();
    let upload = &request.upload;
    let start = upload.offset;
    let key = StorageKey::upload_part(
        &request.tenant,
        &upload.id,
        u64::try_from(start).unwrap_or_default(),
        &Ulid::generate().to_string(),
    );
    let local_file = stores.cloud().local_file(&key.to_path());
    let mut writer: Option<Sink> = None;
    let mut digester = request.checksum.as_ref().map(Checksum::digester);
    let mut running =
        platform::resumable::running_digest::resume(upload.sha256_state.as_deref(), start);
    let mut head: Vec<u8> = Vec::new();
    let mut received: i64 = 0;
    let mut cut = false;
    let mut stream = body.into_data_stream();
    let outcome: Result<(), ApiError> = async {
        loop {
            let chunk = match tokio::time::timeout(request.idle, stream.next()).await {
                Ok(Some(Ok(chunk))) => chunk,
                Ok(None) => break,
                // The client hung up, or went silent: keep what arrived.
                Ok(Some(Err(_))) | Err(_) => {
                    cut = true;
                    break;
                }
            };
            if chunk.is_empty() {
                continue;
            }
            let length = i64::try_from(chunk.len()).unwrap_or(i64::MAX);
            if start + received + length > upload.length {
                return Err(refused(
                    UploadRefusal::LengthExceeded,
                    format!(
                        "The bytes go past the upload's length of {} bytes.",
                        upload.length
                    ),
                ));
            }
            if start == 0 && head.len() < MediaType::SNIFF_LEN {
                let wanted = MediaType::SNIFF_LEN - head.len();
                head.extend_from_slice(&chunk[..wanted.min(chunk.len())]);
                let whole = head.len() as i64 == upload.length;
                if (head.len() == MediaType::SNIFF_LEN || whole)
                    && MediaType::detect(&head).is_none()
                {
                    return Err(unsupported(upload));
                }
            }
            if let Some(digester) = &mut digester {
                digester.update(&chunk);
            }
            if let Some(running) = &mut running {
                sha2::Digest::update(running, &chunk);
            }
            let writer = match &mut writer {
                Some(writer) => writer,
                None => writer.insert(Sink::open(&store, &key, local_file.as_deref()).await?),
            };
            writer.write(&chunk).await?;
            received += length;
        }
        Ok(())
    }
    .await;
    if let Err(err) = outcome {
        abort(writer).await;
        return Err(err);
    }
    let keep = received > 0 && !(cut && request.checksum.is_some());
    if !keep {
        abort(writer).await;
        return Ok(Received::Nothing);
    }
    if let (Some(checksum), Some(digester)) = (&request.checksum, digester)
        && !checksum.matches(digester)
    {
        abort(writer).await;
        return Err(refused(
            UploadRefusal::ChecksumMismatch,
            "The bytes do not have the Upload-Checksum the request named; none was kept. Send them again.",
        ));
    }
    let Some(writer) = writer else {
        return Ok(Received::Nothing);
    };
    writer.finish().await?;
    let part = UploadPart {
        start,
        length: received,
        object_key: key,
    };
    let carried = running
        .as_ref()
        .map(platform::resumable::running_digest::save);
    commit(&request, &store, part, carried.as_deref()).await
}

/// The refusal of content that is none of the formats.
pub fn unsupported(upload: &Upload) -> ApiError {
    refused(
        UploadRefusal::UnsupportedFormat,
        format!(
            "{} is not JPEG, PNG, WebP, GIF, MP4 or PDF (judged by its content); the upload was ended.",
            upload.filename
        ),
    )
}

async fn abort(writer: Option<Sink>) {
    if let Some(writer) = writer {
        writer.abort().await;
    }
}

/// Where one part's bytes go as they arrive: on this host's files, a file
/// written a chunk at a time beside the part's name and renamed to it when
/// complete (so only a finished part bears its name, and what a crash
/// leaves lies under the upload's prefix, which the expiry deletes); in an
/// object store, a multipart write.
enum Sink {
    File {
        file: tokio::fs::File,
        staged: std::path::PathBuf,
        path: std::path::PathBuf,
    },
    Store(WriteMultipart),
}

impl Sink {
    async fn open(
        store: &Arc<dyn ObjectStore>,
        key: &StorageKey,
        local_file: Option<&std::path::Path>,
    ) -> Result<Self, ApiError> {
        match local_file {
            Some(path) => {
                let staged = path.with_extension("partial");
                if let Some(dir) = path.parent() {
                    tokio::fs::create_dir_all(dir).await.map_err(file_failed)?;
                }
                let file = tokio::fs::File::create(&staged)
                    .await
                    .map_err(file_failed)?;
                Ok(Self::File {
                    file,
                    staged,
                    path: path.to_owned(),
                })
            }
            None => Ok(Self::Store(WriteMultipart::new(
                store
                    .put_multipart(&key.to_path())
                    .await
                    .map_err(store_failed)?,
            ))),
        }
    }

    async fn write(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        match self {
            Self::File { file, .. } => tokio::io::AsyncWriteExt::write_all(file, chunk)
                .await
                .map_err(file_failed),
            Self::Store(writer) => {
                writer
                    .wait_for_capacity(STORE_CONCURRENCY)
                    .await
                    .map_err(store_failed)?;
                writer.write(chunk);
                Ok(())
            }
        }
    }

    async fn finish(self) -> Result<(), ApiError> {
        match self {
            Self::File {
                mut file,
                staged,
                path,
            } => {
                tokio::io::AsyncWriteExt::flush(&mut file)
                    .await
                    .map_err(file_failed)?;
                drop(file);
                tokio::fs::rename(&staged, &path).await.map_err(file_failed)
            }
            Self::Store(writer) => writer.finish().await.map(|_| ()).map_err(store_failed),
        }
    }

    async fn abort(self) {
        match self {
            Self::File { file, staged, .. } => {
                drop(file);
                if let Err(err) = tokio::fs::remove_file(&staged).await {
                    tracing::warn!(%err, "could not remove an upload part's unfinished file");
                }
            }
            Self::Store(writer) => {
                if let Err(err) = writer.abort().await {
                    tracing::warn!(%err, "could not abort an upload part's object");
                }
            }
        }
    }
}

fn file_failed(err: std::io::Error) -> ApiError {
    tracing::error!(%err, "writing an upload's part to its file failed");
    refused(
        UploadRefusal::StorageUnavailable,
        "Storage is unavailable; send the bytes again from the upload's offset (HEAD tells it).",
    )
}

/// Commits the stored part (with the running hash up to its end, when it
/// was carried); a part that lost its race is deleted.
async fn commit(
    request: &PartRequest,
    store: &Arc<dyn ObjectStore>,
    part: UploadPart,
    sha256_state: Option<&[u8]>,
) -> Result<Received, ApiError> {
    let media = request.platform.store.media();
    let expires_at = request
        .platform
        .store
        .clock()
        .now()
        .plus_seconds(i64::try_from(request.expiry.as_secs()).unwrap_or(i64::MAX));
    let committed = media
        .commit_upload_part(
            &request.tenant,
            &request.upload.id,
            &part,
            sha256_state,
            expires_at,
        )
        .await;
    match committed {
        Ok(true) => Ok(Received::Committed(part.start + part.length)),
        Ok(false) | Err(_) => {
            if let Err(err) = store.delete(&part.object_key.to_path()).await {
                tracing::warn!(%err, "could not delete an upload part that was not committed");
            }
            let current = media.resumable(&request.tenant, &request.upload.id).await?;
            committed?;
            Err(conflict(&current))
        }
    }
}

/// The refusal of bytes sent to an upload that moved on or ended.
pub fn conflict(current: &Upload) -> ApiError {
    match current.state {
        UploadState::Receiving | UploadState::Completed => refused(
            UploadRefusal::OffsetMismatch,
            format!(
                "The upload's offset is {}; send the bytes from there (HEAD tells it).",
                current.offset
            ),
        ),
        UploadState::Terminated | UploadState::Expired => gone(current),
    }
}

/// The refusal of a request to an ended upload.
pub fn gone(upload: &Upload) -> ApiError {
    let how = match upload.state {
        UploadState::Expired => "expired (no bytes arrived in time) and its bytes were deleted",
        UploadState::Terminated => "was terminated and its bytes were deleted",
        UploadState::Completed => "is complete; its bytes are media item ",
        UploadState::Receiving => "is receiving",
    };
    let media = if upload.state == UploadState::Completed {
        upload.media_id.as_str()
    } else {
        ""
    };
    refused(
        UploadRefusal::Gone,
        format!("The upload {how}{media}. Create a new upload to send the file again."),
    )
}
