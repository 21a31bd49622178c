//! The entry points: decode an upload once, run the two stages, and hand
//! the variants back in the order they were asked for.

use std::path::Path;

use storage::rules::delivery_profiles::MetadataPolicy;

use super::decode::{self, detect_format};
use super::encode::{encode_err, stitch_strips};
use super::error::VariantError;
use super::outputs::{self, OutputRequest, RenderedOutput, exif, needed_scale, render_output};
use super::parallel::{Job, run_jobs};
use super::pipeline::{mid_geometry, stage_one, stage_two};
use super::plan::plan;
use super::raster::oriented_dims;
use super::spec::{Geometry, Variant, VariantLimits, VariantName, VariantSpec};

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
    Ok(render_media(input, specs, &[], Some((0.5, 0.5)), limits)?.variants)
}

/// What one decode of a photo gave: its variants, its profiles' outputs
/// (each made or failed on its own) and its focal point.
#[derive(Debug)]
pub struct Rendered {
    /// The variants asked for, in order.
    pub variants: Vec<Variant>,
    /// The outputs asked for, in order.
    pub outputs: Vec<Result<RenderedOutput, VariantError>>,
    /// The focal point the crops were made around: the one given, or the
    /// saliency measure's.
    pub focal_point: (f64, f64),
}

/// Decodes `input` once and renders `specs` (the variants) and `outputs`
/// (delivery profiles' outputs, cropped around `focal_point`, or around the
/// photo's measured focal point when `None`). The shared intermediate is
/// the largest of the variants' box and what each output needs, so both
/// render from it; the full-size pixels are gone before the outputs are
/// encoded.
pub fn render_media(
    input: &[u8],
    specs: &[VariantSpec],
    outputs: &[OutputRequest<'_>],
    focal_point: Option<(f64, f64)>,
    limits: &VariantLimits,
) -> Result<Rendered, VariantError> {
    check_input_len(input.len() as u64, limits)?;
    let format = detect_format(input)?;
    let copyright = outputs
        .iter()
        .any(|r| r.output.metadata == MetadataPolicy::Copyright)
        .then(|| decode::exif(input, format))
        .flatten()
        .and_then(|tiff| exif::copyright_block(&tiff));
    let (full, orientation) = decode::decode(input, format, limits)?;
    let threads = limits.threads.max(1);
    let (ow, oh) = oriented_dims(full.width, full.height, orientation);
    let mid_box = intermediate(specs, outputs, ow, oh);
    let one = stage_one(&full, orientation, specs, mid_box, threads)?;
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
    out.extend(later);
    let mut variants = Vec::with_capacity(specs.len());
    for spec in specs {
        let pos = out.iter().position(|v| v.name == spec.name);
        let variant = pos.map(|p| out.swap_remove(p));
        variants.push(variant.ok_or_else(|| VariantError::internal("variant missing"))?);
    }
    let focus = focal_point.unwrap_or_else(|| outputs::focal_point(&mid));
    let jobs: Vec<Job<'_, Result<RenderedOutput, VariantError>>> = outputs
        .iter()
        .map(|request| -> Job<'_, Result<RenderedOutput, VariantError>> {
            let (mid, copyright) = (&mid, copyright.as_deref());
            Box::new(move || Ok(render_output(mid, (ow, oh), request, focus, copyright)))
        })
        .collect();
    let outputs = run_jobs(jobs, threads)?;
    Ok(Rendered {
        variants,
        outputs,
        focal_point: focus,
    })
}

/// The shared intermediate's box on an upright `width x height` photo: the
/// variants' (their largest `Fit`), grown to what each output needs, and
/// for outputs alone (a re-render) no larger than they need.
fn intermediate(
    specs: &[VariantSpec],
    outputs: &[OutputRequest<'_>],
    width: u32,
    height: u32,
) -> Geometry {
    let variants = if specs.is_empty() {
        // The focal point's measure wants little: a re-render's outputs set
        // the size.
        f64::from(FOCAL_SIDE) / f64::from(width.max(height))
    } else {
        let p = plan(mid_geometry(specs), width, height);
        f64::from(p.out_w) / f64::from(width)
    };
    let scale = outputs
        .iter()
        .map(|r| needed_scale(r.output, width, height))
        .fold(variants, f64::max)
        .min(1.0);
    if scale >= 1.0 {
        return Geometry::Original;
    }
    Geometry::Fit(
        ((f64::from(width) * scale).ceil() as u32).max(1),
        ((f64::from(height) * scale).ceil() as u32).max(1),
    )
}

/// The intermediate's long edge when only outputs are rendered and they
/// need less (the focal point is measured on it).
const FOCAL_SIDE: u32 = 512;

fn check_input_len(len: u64, limits: &VariantLimits) -> Result<(), VariantError> {
    if len > limits.max_input_bytes {
        return Err(VariantError::LimitExceeded {
            reason: format!("file is {len} bytes, limit is {}", limits.max_input_bytes),
        });
    }
    Ok(())
}
