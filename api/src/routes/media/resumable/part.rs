//! Receiving one request's bytes of a resumable upload: streamed into the
//! upload's one file at their offset (on this host's disk) or into an
//! object of their own (in an object store), checked against the request's
//! `Upload-Checksum`, and committed as a part, which moves the upload's
//! offset.
//!
//! The work runs in a task of its own, so a request whose client hangs up
//! (or goes silent past the idle limit) still keeps and commits the bytes
//! that arrived: a client that comes back resumes from them, losing at most
//! what was in flight. A request that named a checksum keeps nothing unless
//! every byte arrived and matches.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

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
    // On this host's disk the bytes go into the upload's one file; in an
    // object store, into an object of their own.
    let file = StorageKey::upload_file(&request.tenant, &upload.id);
    let local_file = stores.cloud().local_file(&file.to_path());
    // One request at a time writes the file (`writers`); whoever held it
    // may have moved the offset meanwhile.
    let mut lease = None;
    if local_file.is_some() {
        lease = Some(super::writers::take(&upload.id).await);
        let current = request
            .platform
            .store
            .media()
            .resumable(&request.tenant, &upload.id)
            .await?;
        if current.state != UploadState::Receiving || current.offset != start {
            return Err(conflict(&current));
        }
    }
    let key = match local_file {
        Some(_) => file,
        None => StorageKey::upload_part(
            &request.tenant,
            &upload.id,
            u64::try_from(start).unwrap_or_default(),
            &Ulid::generate().to_string(),
        ),
    };
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
            // `None` once the client went silent, or another request asked
            // for the upload.
            let next = tokio::select! {
                next = tokio::time::timeout(request.idle, stream.next()) => next.ok(),
                () = asked_to_let_go(lease.as_mut()) => None,
            };
            let chunk = match next {
                Some(Some(Ok(chunk))) => chunk,
                Some(None) => break,
                // The client hung up, or went silent, or another request
                // asked for the upload: keep what arrived.
                Some(Some(Err(_))) | None => {
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
                None => writer.insert(
                    Sink::open(
                        &store,
                        &key,
                        local_file.as_deref(),
                        u64::try_from(start).unwrap_or_default(),
                    )
                    .await?,
                ),
            };
            writer.write(chunk).await?;
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
    let shared = local_file.is_some();
    commit(&request, &store, part, carried.as_deref(), shared).await
}

/// Resolves once another request asks for the upload (never without a lease).
async fn asked_to_let_go(lease: Option<&mut super::writers::Lease>) {
    match lease {
        Some(lease) => lease.asked_to_let_go().await,
        None => std::future::pending().await,
    }
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

/// Where one request's bytes go as they arrive: on this host's disk, into
/// the upload's one file at their offset (so the file is whole when the
/// last byte arrives, and the completion copies nothing); in an object
/// store, a multipart write of an object of their own.
enum Sink {
    File(UploadFile),
    Store(WriteMultipart),
}

/// The upload's one file, written at the request's offsets as its chunks
/// arrive: each chunk by a short task of the blocking pool that takes the
/// chunk as received (no copy into a buffer of the runtime's) and holds no
/// thread between chunks, so a slow client ties up none. The bytes reach
/// the disk as they come: every [`SYNC_EVERY`] bytes a sync starts in a
/// task of its own while the writing goes on (one at a time), and the
/// request waits for the last one before it commits, because the offset it
/// moves is acknowledged to the client and must survive a power loss as
/// the database's commit does.
///
/// Bytes a request wrote past the offset and did not commit (a checksum
/// that did not match, a racing request that lost) are written over by
/// the next request; two requests racing from the same offset of the same
/// upload carry the same bytes of the same file.
struct UploadFile {
    file: Arc<std::fs::File>,
    position: u64,
    unsynced: u64,
    syncing: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// Bytes written between two syncs of the upload's file.
const SYNC_EVERY: u64 = 1024 * 1024;

impl UploadFile {
    async fn open(path: &Path, start: u64) -> Result<Self, ApiError> {
        let path = path.to_owned();
        let file = blocking(move || {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let (file, created) = open_upload_file(&path)?;
            // A new file's name must survive a power loss too.
            if created {
                platform::resumable::sync_parent(&path)?;
            }
            Ok(file)
        })
        .await?;
        Ok(Self {
            file: Arc::new(file),
            position: start,
            unsynced: 0,
            syncing: None,
        })
    }

    async fn write(&mut self, chunk: Bytes) -> Result<(), ApiError> {
        let file = self.file.clone();
        let position = self.position;
        let length = chunk.len() as u64;
        blocking(move || file.write_all_at(&chunk, position)).await?;
        self.position += length;
        self.unsynced += length;
        let idle = self
            .syncing
            .as_ref()
            .is_none_or(tokio::task::JoinHandle::is_finished);
        if self.unsynced >= SYNC_EVERY && idle {
            if let Some(done) = self.syncing.take() {
                joined(done).await?;
            }
            let file = self.file.clone();
            self.syncing = Some(tokio::task::spawn_blocking(move || file.sync_data()));
            self.unsynced = 0;
        }
        Ok(())
    }

    /// Waits until every byte written is on disk.
    async fn finish(mut self) -> Result<(), ApiError> {
        if let Some(done) = self.syncing.take() {
            joined(done).await?;
        }
        let file = self.file.clone();
        blocking(move || file.sync_data()).await
    }
}

/// Runs `work` on the blocking pool; its failure is the storage's.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    joined(tokio::task::spawn_blocking(work)).await
}

async fn joined<T>(task: tokio::task::JoinHandle<std::io::Result<T>>) -> Result<T, ApiError> {
    match task.await {
        Ok(done) => done.map_err(file_failed),
        Err(err) => Err(file_failed(std::io::Error::other(err))),
    }
}

/// Opens the upload's file for writing, creating it if it is new (and
/// saying so: its directory entry is then synced).
fn open_upload_file(path: &Path) -> std::io::Result<(std::fs::File, bool)> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    match options.clone().create_new(true).open(path) {
        Ok(file) => Ok((file, true)),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok((options.open(path)?, false))
        }
        Err(err) => Err(err),
    }
}

impl Sink {
    async fn open(
        store: &Arc<dyn ObjectStore>,
        key: &StorageKey,
        local_file: Option<&Path>,
        start: u64,
    ) -> Result<Self, ApiError> {
        match local_file {
            Some(path) => Ok(Self::File(UploadFile::open(path, start).await?)),
            None => Ok(Self::Store(WriteMultipart::new(
                store
                    .put_multipart(&key.to_path())
                    .await
                    .map_err(store_failed)?,
            ))),
        }
    }

    async fn write(&mut self, chunk: Bytes) -> Result<(), ApiError> {
        match self {
            Self::File(file) => file.write(chunk).await,
            Self::Store(writer) => {
                writer
                    .wait_for_capacity(STORE_CONCURRENCY)
                    .await
                    .map_err(store_failed)?;
                writer.put(chunk);
                Ok(())
            }
        }
    }

    async fn finish(self) -> Result<(), ApiError> {
        match self {
            Self::File(file) => file.finish().await,
            Self::Store(writer) => writer.finish().await.map(|_| ()).map_err(store_failed),
        }
    }

    /// Drops what was received: an object of its own is aborted; bytes in
    /// the upload's file past its offset are left for the next request to
    /// write over.
    async fn abort(self) {
        match self {
            // Its sync, if one runs, ends by itself.
            Self::File(_) => {}
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
/// was carried). A part of its own that lost its race is deleted; the
/// upload's one file (`shared`) only once the upload is known to have
/// ended.
async fn commit(
    request: &PartRequest,
    store: &Arc<dyn ObjectStore>,
    part: UploadPart,
    sha256_state: Option<&[u8]>,
    shared: bool,
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
            let current = media.resumable(&request.tenant, &request.upload.id).await;
            // The upload's one file holds every committed byte: it goes only
            // once the upload is known to have ended (never on an error; the
            // expiry deletes it with the upload's prefix in any case).
            let ended = current
                .as_ref()
                .is_ok_and(|current| current.state != UploadState::Receiving);
            if (!shared || ended)
                && let Err(err) = store.delete(&part.object_key.to_path()).await
            {
                tracing::warn!(%err, "could not delete an upload part that was not committed");
            }
            let current = current?;
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
