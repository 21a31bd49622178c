//! Test fixtures shared by the poster tests: a scratch directory, the check
//! that the tools are installed, and the assertion that a failure is a
//! client-safe `Unreadable`.

use std::path::PathBuf;

use super::error::PosterError;

/// A scratch directory removed when the test ends (the crate has no
/// `tempfile` dev-dependency).
pub(super) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(super) fn new(test: &str) -> Self {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("poster-test-{pid}-{test}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub(super) fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether every program answers `-v`. `.ci/run` installs ffmpeg and
/// poppler-utils, so a missing one fails the test rather than skipping it.
pub(super) fn installed(programs: &[&str]) -> bool {
    let missing: Vec<&&str> = programs
        .iter()
        .filter(|program| {
            std::process::Command::new(program)
                .arg("-v")
                .output()
                .is_err()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{missing:?} not installed: .ci/run installs ffmpeg and poppler-utils"
    );
    true
}

/// Asserts `result` is [`PosterError::Unreadable`] with a reason that does
/// not name the scratch directory.
pub(super) fn assert_unreadable<T: std::fmt::Debug>(
    result: Result<T, PosterError>,
    dir: &ScratchDir,
) {
    match result {
        Err(PosterError::Unreadable(reason)) => {
            assert!(!reason.is_empty());
            let dir = dir.0.to_string_lossy();
            assert!(!reason.contains(dir.as_ref()), "path leaked: {reason}");
        }
        other => panic!("expected Unreadable, got {other:?}"),
    }
}
