//! Image-variant engine: decodes an uploaded image once and renders the six
//! delivery variants described by [`VariantName`].
//!
//! Pipeline (see [`make_variants`]):
//! 1. The format is sniffed from magic bytes ([`detect_format`]); JPEG input
//!    must contain an end-of-image marker (truncated uploads are rejected).
//! 2. The image is decoded once with `image`'s decoders under
//!    [`image::Limits`] plus a pixel limit, converted to 8-bit RGB or RGBA.
//!    The EXIF orientation is read but the full-size pixels are *not* rotated.
//! 3. Stage one (parallel jobs): the `print` JPEG is encoded in horizontal
//!    strips that are stitched into one baseline JPEG with restart markers
//!    (orientation applied while reading pixels), and a shared intermediate
//!    ("mid", the largest fit-inside box) is resized in row bands.
//! 4. The full-size pixels are dropped; stage two (parallel jobs) encodes the
//!    remaining variants from the intermediate, longest job first.
//!
//! Policies: outputs carry no metadata (no EXIF, GPS, XMP or ICC segments are
//! ever written) and are 8-bit sRGB (pixels tagged with another RGB ICC
//! profile, e.g. Display P3, are converted with `moxcms`); transparent pixels are flattened onto
//! white for JPEG and kept for WebP. Nothing is ever enlarged: a fit-inside
//! box keeps the image's size when it already fits, and a crop-to-fill box on
//! an image too small to fill it yields the largest centred crop with the
//! box's aspect ratio at native resolution (e.g. a 100x300 image gives a
//! 100x100 `thumbnail`).
//!
//! This file holds the public types and entry points. The work is done by
//! `decode` (sniffing, limited decoding, the truncated-JPEG check), `raster`
//! (the pixel buffer, orientation, flattening), `colour` (ICC to sRGB),
//! `plan` (box geometry and banded resizing), `encode` (JPEG, WebP and the
//! strip-parallel JPEG) and `pipeline` (the job runner and the two stages).

mod colour;
mod decode;
mod encode;
mod error;
mod markers;
mod parallel;
mod pipeline;
mod plan;
mod raster;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;

pub use decode::detect_format;
pub use error::VariantError;

use encode::{encode_err, stitch_strips};
use pipeline::{stage_one, stage_two};

/// The delivery variants produced for every upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VariantName {
    /// 150x150 centre-cropped JPEG, quality 75.
    Thumbnail,
    /// Fit inside 2560x1700, lossy WebP quality 90.
    Web,
    /// Fit inside 1280x850, JPEG quality 95.
    Mls,
    /// Original size, JPEG quality 95.
    Print,
    /// Fit inside 2560x1700, lossy WebP quality 75.
    WebpWeb,
    /// 400x400 centre-cropped lossy WebP, quality 75.
    WebpThumb,
}

impl VariantName {
    /// All variants, in the order [`make_variants`] returns them.
    pub const ALL: [VariantName; 6] = [
        VariantName::Thumbnail,
        VariantName::Web,
        VariantName::Mls,
        VariantName::Print,
        VariantName::WebpWeb,
        VariantName::WebpThumb,
    ];

    /// Stable lower-case identifier (`"thumbnail"`, `"webp_web"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            VariantName::Thumbnail => "thumbnail",
            VariantName::Web => "web",
            VariantName::Mls => "mls",
            VariantName::Print => "print",
            VariantName::WebpWeb => "webp_web",
            VariantName::WebpThumb => "webp_thumb",
        }
    }

    /// Output format, quality and geometry of this variant.
    pub const fn spec(self) -> VariantSpec {
        let (format, quality, geometry) = match self {
            VariantName::Thumbnail => (OutputFormat::Jpeg, 75, Geometry::Fill(150, 150)),
            VariantName::Web => (OutputFormat::WebP, 90, Geometry::Fit(2560, 1700)),
            VariantName::Mls => (OutputFormat::Jpeg, 95, Geometry::Fit(1280, 850)),
            VariantName::Print => (OutputFormat::Jpeg, 95, Geometry::Original),
            VariantName::WebpWeb => (OutputFormat::WebP, 75, Geometry::Fit(2560, 1700)),
            VariantName::WebpThumb => (OutputFormat::WebP, 75, Geometry::Fill(400, 400)),
        };
        VariantSpec {
            name: self,
            format,
            quality,
            geometry,
        }
    }
}

impl fmt::Display for VariantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Encoded output format of a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputFormat {
    /// Baseline JPEG (4:4:4 at quality >= 90, 4:2:0 below).
    Jpeg,
    /// Lossy WebP (VP8), with an alpha plane if the source has transparency.
    WebP,
}

impl OutputFormat {
    /// MIME type, e.g. `image/jpeg`.
    pub const fn mime_type(self) -> &'static str {
        match self {
            OutputFormat::Jpeg => "image/jpeg",
            OutputFormat::WebP => "image/webp",
        }
    }

    /// File extension without the dot.
    pub const fn extension(self) -> &'static str {
        match self {
            OutputFormat::Jpeg => "jpg",
            OutputFormat::WebP => "webp",
        }
    }
}

/// How a variant's size is derived from the (upright) source size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Geometry {
    /// Fit inside `(width, height)`, keep aspect ratio, never enlarge.
    Fit(u32, u32),
    /// Centre-crop to fill `(width, height)`; never enlarge (see module docs).
    Fill(u32, u32),
    /// Keep the original size.
    Original,
}

/// Full description of one variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VariantSpec {
    /// Which variant this is.
    pub name: VariantName,
    /// Encoded format.
    pub format: OutputFormat,
    /// Encoder quality, 1-100.
    pub quality: u8,
    /// Size rule.
    pub geometry: Geometry,
}

/// One encoded delivery variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Which variant this is.
    pub name: VariantName,
    /// Encoded format of `bytes`.
    pub format: OutputFormat,
    /// Width in pixels (upright).
    pub width: u32,
    /// Height in pixels (upright).
    pub height: u32,
    /// The encoded file, metadata-free.
    pub bytes: Vec<u8>,
}

/// Input formats accepted by the engine, detected from magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceFormat {
    /// JPEG (`FF D8 FF`).
    Jpeg,
    /// PNG (`89 50 4E 47 0D 0A 1A 0A`).
    Png,
    /// GIF87a / GIF89a; only the first frame is used.
    Gif,
    /// WebP (`RIFF....WEBP`), lossy or lossless; only the first frame is used.
    WebP,
}

/// Resource limits and parallelism for [`make_variants`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantLimits {
    /// Largest accepted `width * height` of the source (default 100 megapixels).
    pub max_pixels: u64,
    /// Largest accepted width or height of the source (default 65 500, the
    /// JPEG limit, so `print` can always be written).
    pub max_dimension: u32,
    /// Largest single decode allocation in bytes (default 512 MiB), passed to
    /// the decoders as [`image::Limits::max_alloc`].
    pub max_alloc_bytes: u64,
    /// Largest accepted input file in bytes (default 256 MiB).
    pub max_input_bytes: u64,
    /// Worker threads; 1 runs everything on the calling thread
    /// (default: the number of available cores).
    pub threads: usize,
}

impl Default for VariantLimits {
    fn default() -> Self {
        Self {
            max_pixels: 100_000_000,
            max_dimension: 65_500,
            max_alloc_bytes: 512 << 20,
            max_input_bytes: 256 << 20,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

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
