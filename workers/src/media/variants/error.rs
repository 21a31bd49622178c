//! The engine's error type: why an upload could not be turned into variants,
//! with a stable machine code and the client-or-server split.

use std::fmt;

use super::spec::VariantName;

/// Why an upload could not be turned into variants. `Display` gives a reason
/// suitable for an API client; [`VariantError::code`] a stable machine code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariantError {
    /// The bytes are not a JPEG, PNG, GIF or WebP file.
    #[error("unsupported image format: {reason}")]
    UnsupportedFormat {
        /// What was found instead.
        reason: String,
    },
    /// The declared dimensions exceed the configured limits.
    #[error(
        "image is {width}x{height} pixels, more than the limit of {max_pixels} pixels (or a side over the maximum)"
    )]
    TooManyPixels {
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// The configured pixel limit.
        max_pixels: u64,
    },
    /// Decoding would need more memory or input than allowed.
    #[error("image exceeds a resource limit: {reason}")]
    LimitExceeded {
        /// Which limit.
        reason: String,
    },
    /// The file is truncated or corrupt.
    #[error("image data is corrupt or truncated: {reason}")]
    Corrupt {
        /// Decoder message.
        reason: String,
    },
    /// A variant could not be encoded.
    #[error("could not encode the {variant} variant: {reason}")]
    Encode {
        /// The variant that failed.
        variant: VariantName,
        /// Encoder message.
        reason: String,
    },
    /// The input file could not be read.
    #[error("could not read the image file: {reason}")]
    Io {
        /// OS message.
        reason: String,
    },
    /// An internal invariant failed (a bug, not the client's fault).
    #[error("internal error while processing the image: {reason}")]
    Internal {
        /// Details for the logs.
        reason: String,
    },
}

impl VariantError {
    /// Stable snake_case code for API responses (`"corrupt"`, `"too_large"`, ...).
    pub const fn code(&self) -> &'static str {
        match self {
            VariantError::UnsupportedFormat { .. } => "unsupported_format",
            VariantError::TooManyPixels { .. } => "too_many_pixels",
            VariantError::LimitExceeded { .. } => "limit_exceeded",
            VariantError::Corrupt { .. } => "corrupt",
            VariantError::Encode { .. } => "encode_failed",
            VariantError::Io { .. } => "io",
            VariantError::Internal { .. } => "internal",
        }
    }

    /// True when the upload itself is at fault (HTTP 4xx rather than 5xx).
    pub const fn is_client_error(&self) -> bool {
        matches!(
            self,
            VariantError::UnsupportedFormat { .. }
                | VariantError::TooManyPixels { .. }
                | VariantError::LimitExceeded { .. }
                | VariantError::Corrupt { .. }
        )
    }

    /// A [`VariantError::Internal`] carrying `reason`.
    pub(super) fn internal(reason: impl fmt::Display) -> Self {
        VariantError::Internal {
            reason: reason.to_string(),
        }
    }
}
