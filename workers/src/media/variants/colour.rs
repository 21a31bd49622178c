//! Colour management: pixels tagged with a non-sRGB RGB ICC profile (Display
//! P3, Adobe RGB, ...) are converted to sRGB with `moxcms`.

use super::error::VariantError;
use super::parallel::{Job, run_jobs};
use super::raster::Raster;

/// Converts pixels tagged with a non-sRGB RGB ICC profile (Display P3, Adobe
/// RGB, ...) to sRGB, in parallel row bands. sRGB-like, non-RGB or
/// unparseable profiles leave the pixels untouched.
pub(super) fn convert_to_srgb(
    r: &mut Raster,
    icc: &[u8],
    threads: usize,
) -> Result<(), VariantError> {
    let Ok(profile) = moxcms::ColorProfile::new_from_slice(icc) else {
        return Ok(());
    };
    let srgb = moxcms::ColorProfile::new_srgb();
    if profile.color_space != moxcms::DataColorSpace::Rgb || same_primaries(&profile, &srgb) {
        return Ok(());
    }
    let layout = if r.channels == 4 {
        moxcms::Layout::Rgba
    } else {
        moxcms::Layout::Rgb
    };
    let options = moxcms::TransformOptions::default();
    let Ok(transform) = profile.create_transform_8bit(layout, &srgb, layout, options) else {
        return Ok(());
    };
    let rows_per_job = (r.height as usize).div_ceil(threads * 4).max(1);
    let chunk_bytes = rows_per_job * r.row_bytes();
    let jobs: Vec<Job<'_, ()>> = r
        .data
        .chunks_mut(chunk_bytes)
        .map(|chunk| -> Job<'_, ()> {
            let t = &transform;
            Box::new(move || {
                let src = chunk.to_vec();
                t.transform(&src, chunk).map_err(VariantError::internal)
            })
        })
        .collect();
    run_jobs(jobs, threads).map(|_| ())
}

/// True when both profiles have (nearly) the same RGB primaries.
fn same_primaries(a: &moxcms::ColorProfile, b: &moxcms::ColorProfile) -> bool {
    let close = |x: moxcms::Xyzd, y: moxcms::Xyzd| {
        (x.x - y.x).abs() < 0.003 && (x.y - y.y).abs() < 0.003 && (x.z - y.z).abs() < 0.003
    };
    close(a.red_colorant, b.red_colorant)
        && close(a.green_colorant, b.green_colorant)
        && close(a.blue_colorant, b.blue_colorant)
}
