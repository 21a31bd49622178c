//! `PosterError`: why a poster image could not be made.

use std::io;

/// Why a poster image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PosterError {
    /// The named external program is not installed (not found on `PATH`).
    #[error("{0} is not installed on the media worker")]
    ToolMissing(&'static str),
    /// The upload is corrupt or not of the expected kind; the reason is safe
    /// to show to an API client (it never contains server paths).
    #[error("the file cannot be read: {0}")]
    Unreadable(String),
    /// The external program ran longer than allowed and was killed.
    #[error("{tool} did not finish within {seconds} s")]
    TimedOut {
        /// The program that was killed.
        tool: &'static str,
        /// The time limit that was exceeded.
        seconds: u64,
    },
    /// The external program produced more output than allowed.
    #[error("{tool} produced more than {limit} bytes of output")]
    OutputTooLarge {
        /// The program whose output was rejected.
        tool: &'static str,
        /// The output limit in bytes.
        limit: usize,
    },
    /// Starting or talking to the external program failed.
    #[error("running {tool} failed: {source}")]
    Io {
        /// The program that could not be run.
        tool: &'static str,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
}
