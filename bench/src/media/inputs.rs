//! The libvips reference's inputs: its 24 MP JPEG and orientation-6 twin,
//! made by its own `make_input.py` when missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, ensure};

/// The reference's two 24 MP inputs in `input_dir`, made by its
/// `make_input.py` (in `vips_dir`) when missing.
pub(super) fn reference_pair(vips_dir: &Path, input_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let inputs = vec![
        input_dir.join("input_24mp.jpg"),
        input_dir.join("input_24mp_orient6.jpg"),
    ];
    if inputs.iter().all(|p| p.exists()) {
        return Ok(inputs);
    }
    let script = vips_dir.join("make_input.py");
    eprintln!("generating the inputs with {}", script.display());
    let status = Command::new("python3")
        .arg(&script)
        .arg(input_dir)
        .status()
        .context("running python3 (needs pillow and numpy)")?;
    ensure!(status.success(), "{} failed: {status}", script.display());
    Ok(inputs)
}

/// The reference's upright 24 MP input (see [`reference_pair`]).
pub fn reference_input(vips_dir: &Path, input_dir: &Path) -> anyhow::Result<PathBuf> {
    let mut inputs = reference_pair(vips_dir, input_dir)?;
    Ok(inputs.swap_remove(0))
}
