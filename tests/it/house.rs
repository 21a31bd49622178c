//! The house's own rules, held by the suite: no source file grows past the
//! size a reader takes in at once (`docs/architecture.md`, "Rooms that
//! fit"). A file that outgrows it is split by what its parts are about.

use std::path::{Path, PathBuf};

/// The most lines a Rust source file of the workspace may have.
const MOST_LINES: usize = 800;

/// Every `.rs` file under `dir`, leaving out build output, tools and
/// hidden folders.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let skipped =
                name.starts_with('.') || name.starts_with("target") || name == "node_modules";
            if !skipped {
                sources(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_eight_hundred_lines() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = Vec::new();
    sources(workspace, &mut found);
    assert!(found.len() > 100, "the workspace's sources were not found");
    let mut over: Vec<String> = found
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            let shown = path.strip_prefix(workspace).unwrap().display();
            (lines > MOST_LINES).then(|| format!("{shown}: {lines} lines"))
        })
        .collect();
    over.sort();
    assert!(
        over.is_empty(),
        "split these by what their parts are about (at most {MOST_LINES} lines a file):\n{}",
        over.join("\n")
    );
}
