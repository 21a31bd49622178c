//! How the upload's path is handed to the tools: never readable as another
//! protocol, an option or stdin.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The path as an ffmpeg URL with the `file` protocol, so that a name such as
/// `concat:…` or `http:…` is never taken as another protocol.
pub(super) fn file_url(path: &Path) -> OsString {
    let mut url = OsString::from("file:");
    url.push(path.as_os_str());
    url
}

/// The path as a program argument that cannot be read as an option or as
/// `-` (stdin): relative paths get a `./` prefix.
pub(super) fn local_arg(path: &Path) -> PathBuf {
    if path.is_relative() {
        Path::new(".").join(path)
    } else {
        path.to_path_buf()
    }
}
