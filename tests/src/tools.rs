//! The pinned tools of the suite that are not Rust: Python packages from
//! `tests/tools/requirements.txt` in a virtual environment, and npm packages
//! from `tests/tools/package.json`, both installed by `scripts/test` under
//! `target/test-tools` (or `$TEST_TOOLS_DIR`).

use std::path::PathBuf;

use crate::services::workspace_root;

/// Where the tools are installed.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("TEST_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/test-tools"))
}

/// A command of the Python tools' virtual environment, e.g. `schemathesis`.
pub fn python_tool(name: &str) -> PathBuf {
    let path = tools_dir().join("venv/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `scripts/test`, which installs the pinned tools of \
         tests/tools/requirements.txt into {}",
        path.display(),
        tools_dir().join("venv").display()
    );
    path
}

/// The npm packages' directory (`node_modules` inside), for Node scripts.
pub fn node_tools() -> PathBuf {
    let dir = tools_dir().join("node");
    assert!(
        dir.join("node_modules").is_dir(),
        "{} is missing: run `scripts/test`, which installs the pinned packages of \
         tests/tools/package.json there",
        dir.join("node_modules").display()
    );
    dir
}
