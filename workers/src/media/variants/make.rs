//! The entry points: decode an upload once, run the two stages, and hand
//! the variants back in the order they were asked for.

use std::path::Path;

use super::decode::{self, detect_format};
use super::encode::{encode_err, stitch_strips};
use super::error::VariantError;
use super::pipeline::{stage_one, stage_two};
use super::spec::{Variant, VariantLimits, VariantName, VariantSpec};

/// Renders all six [`VariantName::ALL`] variants of an uploaded image, in
/// that order, using up to `limits.threads` threads.
pub fn make_variants(input: &[u8], limits: &VariantLimits) -> Result<Vec<Variant>, VariantError> {
    let specs = VariantName::ALL.map(VariantName::spec);
    make_variants_with(input, &specs, limits)
}

/// Like [`make_variants`], reading the upload from a file.
pub fn make_variants_from_path(
    path: &Path,
    limits: &VariantLimits,
) -> Result<Vec<Variant>, VariantError> {
    let io_err = |e: std::io::Error| VariantError::Io {
        reason: e.to_string(),
    };
    let len = std::fs::metadata(path).map_err(io_err)?.len();
    check_input_len(len, limits)?;
    let bytes = std::fs::read(path).map_err(io_err)?;
    make_variants(&bytes, limits)
}

/// Renders the given variant specs (in order); [`make_variants`] passes the
/// six standard ones. Fill and fit boxes are derived from the largest `Fit`
/// spec when it is big enough, otherwise from the full-size image.
pub fn make_variants_with(
    input: &[u8],
    specs: &[VariantSpec],
    limits: &VariantLimits,
) -> Result<Vec<Variant>, VariantError> {
    check_input_len(input.len() as u64, limits)?;
    let format = detect_format(input)?;
    let (full, orientation) = decode::decode(input, format, limits)?;
    let threads = limits.threads.max(1);
    let one = stage_one(&full, orientation, specs, threads)?;
    drop(full); // the largest buffer goes before anything else is allocated
    let mid = one.mid.oriented(orientation)?;
    let mut out = one.done;
    for (spec, layout, strips) in one.originals {
        let bytes = stitch_strips(strips, layout.height).map_err(encode_err(spec.name))?;
        let (width, height) = (u32::from(layout.width), u32::from(layout.height));
        out.push(Variant {
            name: spec.name,
            format: spec.format,
            width,
            height,
            bytes,
        });
    }
    let later = stage_two(&mid, specs, &out, threads)?;
    drop(mid);
    out.extend(later);
    let mut ordered = Vec::with_capacity(specs.len());
    for spec in specs {
        let pos = out.iter().position(|v| v.name == spec.name);
        let variant = pos.map(|p| out.swap_remove(p));
        ordered.push(variant.ok_or_else(|| VariantError::internal("variant missing"))?);
    }
    Ok(ordered)
}

fn check_input_len(len: u64, limits: &VariantLimits) -> Result<(), VariantError> {
    if len > limits.max_input_bytes {
        return Err(VariantError::LimitExceeded {
            reason: format!("file is {len} bytes, limit is {}", limits.max_input_bytes),
        });
    }
    Ok(())
}
