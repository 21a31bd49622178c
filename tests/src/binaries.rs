//! The workspace binaries, for tests that run them as separate processes. They
//! are built once per test process with `cargo build --workspace --bins`, whose
//! feature set matches the test build's, so this only links what is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::services::workspace_root;

static BUILT: OnceLock<PathBuf> = OnceLock::new();

fn target_debug_dir() -> &'static Path {
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = Command::new(cargo)
            .args([
                "build",
                "--workspace",
                "--bins",
                "--message-format=json-render-diagnostics",
            ])
            .current_dir(workspace_root())
            .output()
            .expect("running cargo build");
        assert!(
            output.status.success(),
            "cargo build --workspace --bins failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The directory of any built executable is the one we want.
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|message| message["executable"].as_str().map(PathBuf::from))
            .find_map(|executable| executable.parent().map(Path::to_path_buf))
            .expect("cargo reported no executable")
    })
}

/// The path of the workspace binary `name` (`api`, `workers`).
pub fn binary(name: &str) -> PathBuf {
    let path = target_debug_dir().join(name);
    assert!(path.exists(), "binary {} not built", path.display());
    path
}
