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
}

impl UploadRefusal {
    /// Its status and code, read from one table.
    const fn describe(self) -> (StatusCode, &'static str) {
        use StatusCode as S;
        match self {
            Self::Malformed => (S::BAD_REQUEST, "upload.malformed"),
            Self::NoFiles => (S::BAD_REQUEST, "upload.no_files"),
            Self::TooManyFiles => (S::BAD_REQUEST, "upload.too_many_files"),
            Self::UnsupportedFormat => (S::BAD_REQUEST, "upload.unsupported_format"),
            Self::FilenameTooLong => (S::BAD_REQUEST, "upload.filename_too_long"),
            Self::FileTooLarge => (S::PAYLOAD_TOO_LARGE, "upload.file_too_large"),
            Self::RequestTooLarge => (S::PAYLOAD_TOO_LARGE, "upload.request_too_large"),
            Self::Timeout => (S::REQUEST_TIMEOUT, "upload.timeout"),
            Self::StorageUnavailable => (S::INTERNAL_SERVER_ERROR, "upload.storage_unavailable"),
        }
    }

    /// The HTTP status.
    pub const fn status(self) -> StatusCode {
        self.describe().0
    }

    /// The error code.
    pub const fn code(self) -> &'static str {
        self.describe().1
    }
}
