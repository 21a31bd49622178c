//! Why an upload was refused while it streamed, and its status and code.

use axum::http::StatusCode;

/// Why an upload was refused while it streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadRefusal {
    /// 400 `upload.malformed`: not a multipart body, or a broken one.
    Malformed,
    /// 400 `upload.no_files`: no `files` part.
    NoFiles,
    /// 400 `upload.too_many_files`: more than 200 files.
    TooManyFiles,
    /// 400 `upload.unsupported_format`: content that is none of the formats.
    UnsupportedFormat,
    /// 400 `upload.filename_too_long`: a file name over 255 bytes of UTF-8.
    FilenameTooLong,
    /// 413 `upload.file_too_large`: a file over 50 MB.
    FileTooLarge,
    /// 413 `upload.request_too_large`: the request over 1 GB.
    RequestTooLarge,
    /// 408 `upload.timeout`: the body did not arrive within 60 seconds.
    Timeout,
    /// 500 `upload.storage_unavailable`: the object store failed.
    StorageUnavailable,
    /// 412 `upload.tus_version_unsupported`: a resumable upload's request
    /// without `Tus-Resumable: 1.0.0`.
    TusVersion,
    /// 415 `upload.content_type_unsupported`: bytes of a resumable upload
    /// not sent as `application/offset+octet-stream`.
    ContentType,
    /// 400 `upload.length_required`: a resumable upload created without a
    /// valid `Upload-Length`, or a request without a valid `Upload-Offset`.
    LengthRequired,
    /// 409 `upload.offset_mismatch`: bytes sent from another offset than
    /// the upload's (the answer carries the upload's `Upload-Offset`).
    OffsetMismatch,
    /// 413 `upload.length_exceeded`: bytes past the upload's length.
    LengthExceeded,
    /// 400 `upload.checksum_algorithm_unsupported`: an `Upload-Checksum` of
    /// another algorithm than sha1 or sha256, or not `ALGORITHM BASE64`.
    ChecksumAlgorithm,
    /// 460 `upload.checksum_mismatch`: the bytes do not have the checksum
    /// the request named; none of them was kept.
    ChecksumMismatch,
    /// 410 `upload.gone`: the upload expired or was terminated.
    Gone,
    /// 409 `upload.batch_full`: the batch has every upload it announced.
    BatchFull,
    /// 409 `upload.batch_ended`: the batch's uploads all ended.
    BatchEnded,
    /// 409 `upload.direct_unavailable`: a direct upload where media are
    /// kept in local files, which no client reaches.
    DirectUnavailable,
    /// 409 `upload.parts_refused`: the object store does not hold the parts
    /// a direct upload's completion named (missing, or another ETag).
    PartsRefused,
    /// 502 `upload.assembly_failed`: the object store assembled a direct
    /// upload's checked parts into a file of another size; the upload
    /// ended, and the client starts a new one.
    AssemblyFailed,
}

impl UploadRefusal {
    /// Its status and code, read from one table.
    const fn describe(self) -> (u16, &'static str) {
        match self {
            Self::Malformed => (400, "upload.malformed"),
            Self::NoFiles => (400, "upload.no_files"),
            Self::TooManyFiles => (400, "upload.too_many_files"),
            Self::UnsupportedFormat => (400, "upload.unsupported_format"),
            Self::FilenameTooLong => (400, "upload.filename_too_long"),
            Self::FileTooLarge => (413, "upload.file_too_large"),
            Self::RequestTooLarge => (413, "upload.request_too_large"),
            Self::Timeout => (408, "upload.timeout"),
            Self::StorageUnavailable => (500, "upload.storage_unavailable"),
            Self::TusVersion => (412, "upload.tus_version_unsupported"),
            Self::ContentType => (415, "upload.content_type_unsupported"),
            Self::LengthRequired => (400, "upload.length_required"),
            Self::OffsetMismatch => (409, "upload.offset_mismatch"),
            Self::LengthExceeded => (413, "upload.length_exceeded"),
            Self::ChecksumAlgorithm => (400, "upload.checksum_algorithm_unsupported"),
            // tus's own status for it: the checksum extension's 460.
            Self::ChecksumMismatch => (460, "upload.checksum_mismatch"),
            Self::Gone => (410, "upload.gone"),
            Self::BatchFull => (409, "upload.batch_full"),
            Self::BatchEnded => (409, "upload.batch_ended"),
            Self::DirectUnavailable => (409, "upload.direct_unavailable"),
            Self::PartsRefused => (409, "upload.parts_refused"),
            // The store, upstream of the API, answered wrongly; unlike
            // `storage_unavailable` (500), completing again cannot help.
            Self::AssemblyFailed => (502, "upload.assembly_failed"),
        }
    }

    /// The HTTP status.
    pub fn status(self) -> StatusCode {
        StatusCode::from_u16(self.describe().0).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The error code.
    pub const fn code(self) -> &'static str {
        self.describe().1
    }
}
