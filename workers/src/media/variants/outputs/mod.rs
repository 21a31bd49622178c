//! Delivery profiles' outputs, rendered from the upright intermediate the
//! six variants share (so a new upload is decoded once for both): a box
//! (`contain`) or an exact aspect cropped around the focal point (`cover`),
//! never enlarged; an optional watermark; JPEG, WebP or AVIF at a quality,
//! or searched down to a byte cap; no metadata, or the copyright and author
//! alone. One output that cannot be made fails alone.
//!
//! The byte cap: the output is encoded at its starting quality; when that
//! is over the cap, a binary search finds the highest quality from 30 up
//! that fits. When even quality 30 does not fit, the photo is made a tenth
//! smaller and searched again, down to [`MIN_SIDE`] pixels: a too-small cap
//! gives a smaller photo, never a failed one.

mod avif;
pub(super) mod exif;
mod focal;
mod watermark;

use storage::rules::delivery_profiles::{
    Fit, MIN_SIDE, MetadataPolicy, ProfileFormat, ProfileOutput,
};

use super::encode::{encode_jpeg_with, encode_webp};
use super::error::VariantError;
use super::plan::{Plan, plan, render};
use super::raster::Raster;
use super::spec::Geometry;

pub(super) use focal::focal_point;

/// One output to render, with its watermark's image when it has one.
pub struct OutputRequest<'a> {
    /// What the profile asks for.
    pub output: &'a ProfileOutput,
    /// The watermark's image, decoded and upright.
    pub watermark: Option<&'a WatermarkImage>,
}

/// A watermark's image, decoded once for every output that lays it.
pub struct WatermarkImage(pub(super) Raster);

/// One rendered output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedOutput {
    /// Its encoding.
    pub format: ProfileFormat,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// The quality it was encoded at.
    pub quality: u8,
    /// The file.
    pub bytes: Vec<u8>,
}

/// The output's plan on an upright `width x height` photo whose subject is
/// at `focus`.
fn output_plan(output: &ProfileOutput, width: u32, height: u32, focus: (f64, f64)) -> Plan {
    match output.fit {
        Fit::Contain => plan(Geometry::Fit(output.width, output.height), width, height),
        Fit::Cover => {
            plan(Geometry::Fill(output.width, output.height), width, height).around(focus)
        }
    }
}

/// The share of the upright photo's size the intermediate needs for
/// `output` to be rendered from it without enlarging (at most 1).
pub(super) fn needed_scale(output: &ProfileOutput, width: u32, height: u32) -> f64 {
    let p = output_plan(output, width, height, (0.5, 0.5));
    let (crop_w, _) = p.crop_size();
    (f64::from(p.out_w) / crop_w).min(1.0)
}

/// Renders `request` from `mid`, the upright intermediate of a photo whose
/// upright size is `full`, around `focus`; `copyright` is the TIFF block an
/// output that keeps the copyright carries.
pub(super) fn render_output(
    mid: &Raster,
    full: (u32, u32),
    request: &OutputRequest<'_>,
    focus: (f64, f64),
    copyright: Option<&[u8]>,
) -> Result<RenderedOutput, VariantError> {
    let output = request.output;
    let p = output_plan(output, full.0, full.1, focus).rescaled(full, (mid.width, mid.height));
    let mut raster = render(mid, image::metadata::Orientation::NoTransforms, p)?;
    if output.format == ProfileFormat::Avif {
        let (w, h) = avif::bounded(raster.width, raster.height);
        if (w, h) != (raster.width, raster.height) {
            raster = shrunk_to(&raster, w, h)?;
        }
    }
    if let (Some(watermark), Some(image)) = (&output.watermark, request.watermark) {
        watermark::apply(&mut raster, &image.0, watermark)?;
    }
    let exif = match output.metadata {
        MetadataPolicy::Strip => None,
        MetadataPolicy::Copyright => copyright,
    };
    let failed = |reason: String| VariantError::Internal {
        reason: format!("output {}: {reason}", output.name),
    };
    let encode = |r: &Raster, quality: u8| -> Result<Vec<u8>, String> {
        match output.format {
            ProfileFormat::Jpeg => encode_jpeg_with(r, quality, exif),
            ProfileFormat::Webp => {
                let webp = encode_webp(r, quality)?;
                Ok(match exif {
                    Some(tiff) => exif::webp_with_exif(webp, tiff, r.width, r.height),
                    None => webp,
                })
            }
            ProfileFormat::Avif => avif::encode(r, quality, exif),
        }
    };
    let (raster, quality, bytes) = within_cap(raster, output, encode).map_err(failed)?;
    Ok(RenderedOutput {
        format: output.format,
        width: raster.width,
        height: raster.height,
        quality,
        bytes,
    })
}

/// Encodes `raster` at the output's starting quality, or at the highest
/// quality (from 30) under its byte cap, shrinking the photo by a tenth at
/// a time while even 30 is over it.
fn within_cap(
    mut raster: Raster,
    output: &ProfileOutput,
    encode: impl Fn(&Raster, u8) -> Result<Vec<u8>, String>,
) -> Result<(Raster, u8, Vec<u8>), String> {
    let start = output.starting_quality();
    let first = encode(&raster, start)?;
    let Some(cap) = output.max_bytes else {
        return Ok((raster, start, first));
    };
    let fits = |bytes: &[u8]| bytes.len() as u64 <= cap;
    if fits(&first) {
        return Ok((raster, start, first));
    }
    let floor = ProfileOutput::quality_floor().min(start);
    loop {
        let lowest = encode(&raster, floor)?;
        if fits(&lowest) {
            let mut best = (floor, lowest);
            let (mut low, mut high) = (floor + 1, start.saturating_sub(1));
            while low <= high {
                let middle = low + (high - low) / 2;
                let bytes = encode(&raster, middle)?;
                if fits(&bytes) {
                    best = (middle, bytes);
                    low = middle + 1;
                } else {
                    high = middle - 1;
                }
            }
            return Ok((raster, best.0, best.1));
        }
        let (w, h) = (raster.width * 9 / 10, raster.height * 9 / 10);
        if w < MIN_SIDE || h < MIN_SIDE {
            return Err(format!(
                "no encoding fits in {cap} bytes, even at {}x{} and quality {floor}",
                raster.width, raster.height
            ));
        }
        raster = shrunk_to(&raster, w, h).map_err(|err| err.to_string())?;
    }
}

/// `r` resized to `width x height` (smaller, aspect kept by the caller).
fn shrunk_to(r: &Raster, width: u32, height: u32) -> Result<Raster, VariantError> {
    render(
        r,
        image::metadata::Orientation::NoTransforms,
        plan(Geometry::Fit(width, height), r.width, r.height),
    )
}

impl WatermarkImage {
    /// Decodes an uploaded image (upright, in sRGB) to lay over outputs.
    pub fn decode(input: &[u8], limits: &super::VariantLimits) -> Result<Self, VariantError> {
        let format = super::detect_format(input)?;
        let (raster, orientation) = super::decode::decode(input, format, limits)?;
        Ok(Self(raster.oriented(orientation)?))
    }
}

#[cfg(test)]
mod tests {
    use storage::rules::delivery_profiles::MetadataPolicy;

    use super::*;

    fn output(fit: Fit, width: u32, height: u32, max_bytes: Option<u64>) -> ProfileOutput {
        ProfileOutput {
            name: "o".into(),
            fit,
            width,
            height,
            format: ProfileFormat::Jpeg,
            quality: None,
            max_bytes,
            metadata: MetadataPolicy::Strip,
            watermark: None,
        }
    }

    #[test]
    fn a_cover_crop_keeps_its_aspect_around_the_focus() {
        let p = output_plan(&output(Fit::Cover, 840, 525, None), 6000, 4000, (0.9, 0.1));
        assert_eq!((p.out_w, p.out_h), (840, 525));
        let (cw, ch) = p.crop_size();
        assert!((cw / ch - 1.6).abs() < 1e-9);
        let (left, top) = p.crop_origin(6000.0, 4000.0);
        assert_eq!(
            (left + cw, top),
            (6000.0, 0.0),
            "pushed into the corner, inside the photo"
        );
        let contain = output_plan(
            &output(Fit::Contain, 2048, 2048, None),
            6000,
            4000,
            (0.9, 0.1),
        );
        assert_eq!((contain.out_w, contain.out_h), (2048, 1365));
    }

    #[test]
    fn the_intermediate_is_large_enough_for_each_output() {
        assert!(
            (needed_scale(&output(Fit::Contain, 2048, 2048, None), 6000, 4000) - 2048.0 / 6000.0)
                .abs()
                < 1e-3
        );
        // A 1:1 cover of 1080 from a 6000x4000 photo crops 4000x4000.
        assert!(
            (needed_scale(&output(Fit::Cover, 1080, 1080, None), 6000, 4000) - 0.27).abs() < 1e-9
        );
        assert_eq!(
            needed_scale(&output(Fit::Contain, 8000, 8000, None), 600, 400),
            1.0
        );
    }

    #[test]
    fn a_byte_cap_lowers_the_quality_then_the_size() {
        let noisy = Raster {
            width: 400,
            height: 300,
            channels: 3,
            data: (0..400 * 300 * 3u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect(),
        };
        let encode = |r: &Raster, q: u8| encode_jpeg_with(r, q, None);
        let (_, quality, bytes) = within_cap(
            noisy.clone(),
            &output(Fit::Contain, 400, 300, Some(60_000)),
            encode,
        )
        .unwrap();
        assert!(
            bytes.len() <= 60_000 && (30..90).contains(&quality),
            "{quality} {}",
            bytes.len()
        );
        let (small, quality, bytes) = within_cap(
            noisy.clone(),
            &output(Fit::Contain, 400, 300, Some(10_000)),
            encode,
        )
        .unwrap();
        assert!(bytes.len() <= 10_000, "{}", bytes.len());
        assert!(
            small.width < 400 && quality >= 30,
            "made smaller: {}x{}",
            small.width,
            small.height
        );
        let (kept, quality, _) =
            within_cap(noisy, &output(Fit::Contain, 400, 300, None), encode).unwrap();
        assert_eq!((kept.width, quality), (400, 85));
    }
}
