//! The two-stage pipeline: stage one (everything that needs the full-size
//! pixels) and stage two (everything rendered from the shared
//! intermediate), each run as parallel jobs (`parallel`).

use image::metadata::Orientation;

use super::encode::{StripLayout, encode, encode_err, encode_strip};
use super::error::VariantError;
use super::parallel::{Job, run_jobs};
use super::plan::{BAND_ROWS, SourceResize, plan, render, resize_band};
use super::raster::{Raster, oriented_dims};
use super::spec::{Geometry, OutputFormat, Variant, VariantSpec};

/// Output of a stage-one job.
enum StageOne {
    Band,
    Strip(Vec<u8>),
    Done(Variant),
}

/// What stage one leaves for the caller once the full-size pixels are gone.
pub(super) struct StageOneOutput {
    /// The shared intermediate, still in stored (unrotated) orientation.
    pub(super) mid: Raster,
    /// Variants rendered from the full-size pixels.
    pub(super) done: Vec<Variant>,
    /// `Original` variants as encoded strips, to be stitched.
    pub(super) originals: Vec<(VariantSpec, StripLayout, Vec<Vec<u8>>)>,
}

/// Stage one needs the full-size pixels: the `Original` variants (strip
/// encoded), the shared intermediate and any variant the intermediate is too
/// small for.
/// The intermediate is `mid_box` (at least [`mid_geometry`] of the specs).
pub(super) fn stage_one(
    full: &Raster,
    orientation: Orientation,
    specs: &[VariantSpec],
    mid_box: Geometry,
    threads: usize,
) -> Result<StageOneOutput, VariantError> {
    let (ow, oh) = oriented_dims(full.width, full.height, orientation);
    let mid_plan = plan(mid_box, ow, oh);
    let mid_resize = SourceResize::new(full, orientation, mid_plan);
    let mut mid = Raster {
        width: mid_resize.out_w,
        height: mid_resize.out_h,
        channels: full.channels,
        data: vec![0; mid_resize.out_w as usize * mid_resize.out_h as usize * full.channels],
    };
    let mut jobs: Vec<Job<'_, StageOne>> = Vec::new();
    let row_bytes = mid.row_bytes();
    for (rows, chunk) in mid_resize
        .bands()
        .into_iter()
        .zip(mid.data.chunks_mut(BAND_ROWS as usize * row_bytes))
    {
        let r = &mid_resize;
        jobs.push(Box::new(move || {
            resize_band(full, r, rows, chunk).map(|()| StageOne::Band)
        }));
    }
    let mid_dims = (mid_plan.out_w, mid_plan.out_h);
    let mut originals = Vec::new();
    for spec in specs {
        let p = plan(spec.geometry, ow, oh);
        if spec.geometry == Geometry::Original {
            let layout =
                StripLayout::new(ow, oh, spec.quality, threads).map_err(encode_err(spec.name))?;
            for rows in layout.strips() {
                jobs.push(Box::new(move || {
                    encode_strip(full, orientation, &layout, rows)
                        .map(StageOne::Strip)
                        .map_err(encode_err(spec.name))
                }));
            }
            originals.push((*spec, layout));
        } else if !p.rescaled((ow, oh), mid_dims).is_downscale() {
            jobs.push(Box::new(move || {
                render(full, orientation, p)
                    .and_then(|r| encode(spec, &r))
                    .map(StageOne::Done)
            }));
        }
    }
    let results = run_jobs(jobs, threads)?;
    let mut done = Vec::new();
    let mut strips = Vec::new();
    for r in results {
        match r {
            StageOne::Band => {}
            StageOne::Strip(s) => strips.push(s),
            StageOne::Done(v) => done.push(v),
        }
    }
    let originals = originals
        .into_iter()
        .map(|(spec, layout)| {
            let rest = strips.split_off(layout.strips().len().min(strips.len()));
            (spec, layout, std::mem::replace(&mut strips, rest))
        })
        .collect();
    Ok(StageOneOutput {
        mid,
        done,
        originals,
    })
}

/// The largest `Fit` box among the specs (the shared intermediate).
pub(super) fn mid_geometry(specs: &[VariantSpec]) -> Geometry {
    specs
        .iter()
        .filter_map(|s| match s.geometry {
            Geometry::Fit(w, h) => Some((u64::from(w) * u64::from(h), s.geometry)),
            _ => None,
        })
        .max_by_key(|(area, _)| *area)
        .map_or(Geometry::Original, |(_, g)| g)
}

/// Stage two renders every variant not finished in stage one from the
/// upright intermediate `mid`, most expensive first.
pub(super) fn stage_two(
    mid: &Raster,
    specs: &[VariantSpec],
    done: &[Variant],
    threads: usize,
) -> Result<Vec<Variant>, VariantError> {
    let mut todo: Vec<&VariantSpec> = specs
        .iter()
        .filter(|s| !done.iter().any(|v| v.name == s.name))
        .collect();
    todo.sort_by_key(|s| std::cmp::Reverse(job_cost(s, mid)));
    let jobs: Vec<Job<'_, Variant>> = todo
        .into_iter()
        .map(|spec| -> Job<'_, Variant> {
            Box::new(move || {
                let p = plan(spec.geometry, mid.width, mid.height);
                if p.is_identity(mid.width, mid.height) {
                    encode(spec, mid)
                } else {
                    encode(spec, &render(mid, Orientation::NoTransforms, p)?)
                }
            })
        })
        .collect();
    run_jobs(jobs, threads)
}

/// Rough relative cost of a stage-two job (output pixels, WebP ~3x JPEG).
fn job_cost(spec: &VariantSpec, mid: &Raster) -> u64 {
    let p = plan(spec.geometry, mid.width, mid.height);
    let px = u64::from(p.out_w) * u64::from(p.out_h);
    let weight = match spec.format {
        OutputFormat::WebP => 3,
        OutputFormat::Jpeg => 1,
    };
    px * weight * 100 + u64::from(spec.quality)
}
