//! Our side of the variant benchmark: the `bench variants-run` child, which
//! renders the six variants with the engine and writes them.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;
use workers::media::variants::{VariantLimits, make_variants};

/// `bench variants-run` (the child): read, render the six variants, write
/// them; prints the engine's time. Runs without an async runtime.
pub fn variants_run(input: &Path, out: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(input).with_context(|| input.display().to_string())?;
    let started = Instant::now();
    let variants = make_variants(&bytes, &VariantLimits::default())?;
    let engine_ms = started.elapsed().as_secs_f64() * 1e3;
    drop(bytes);
    std::fs::create_dir_all(out)?;
    for v in &variants {
        std::fs::write(
            out.join(format!("{}.{}", v.name, v.format.extension())),
            &v.bytes,
        )?;
    }
    println!("{}", json!({"engine_ms": engine_ms}));
    Ok(())
}
