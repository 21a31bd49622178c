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
mod make;
mod markers;
mod outputs;
mod parallel;
mod pipeline;
mod plan;
mod raster;
mod spec;
#[cfg(test)]
mod tests;

pub use decode::detect_format;
pub use error::VariantError;
pub use make::{
    Rendered, make_variants, make_variants_from_path, make_variants_with, render_media,
};
pub use outputs::{OutputRequest, RenderedOutput, WatermarkImage};
pub use spec::{
    Geometry, OutputFormat, SourceFormat, Variant, VariantLimits, VariantName, VariantSpec,
};
