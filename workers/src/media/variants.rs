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

use std::collections::VecDeque;
use std::fmt;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use fast_image_resize as fr;
use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, Limits};

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

impl SourceFormat {
    const fn image_format(self) -> ImageFormat {
        match self {
            SourceFormat::Jpeg => ImageFormat::Jpeg,
            SourceFormat::Png => ImageFormat::Png,
            SourceFormat::Gif => ImageFormat::Gif,
            SourceFormat::WebP => ImageFormat::WebP,
        }
    }
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

impl VariantLimits {
    fn image_limits(&self) -> Limits {
        let mut limits = Limits::default();
        limits.max_image_width = Some(self.max_dimension);
        limits.max_image_height = Some(self.max_dimension);
        limits.max_alloc = Some(self.max_alloc_bytes);
        limits
    }

    fn check_dimensions(&self, width: u32, height: u32) -> Result<(), VariantError> {
        let pixels = u64::from(width) * u64::from(height);
        if pixels > self.max_pixels || width > self.max_dimension || height > self.max_dimension {
            return Err(VariantError::TooManyPixels {
                width,
                height,
                max_pixels: self.max_pixels,
            });
        }
        if width == 0 || height == 0 {
            return Err(VariantError::Corrupt {
                reason: "image has zero width or height".into(),
            });
        }
        Ok(())
    }
}

/// Why an upload could not be turned into variants. `Display` gives a reason
/// suitable for an API client; [`VariantError::code`] a stable machine code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariantError {
    /// The bytes are not a JPEG, PNG, GIF or WebP file.
    #[error("unsupported image format: {reason}")]
    UnsupportedFormat {
        /// What was found instead.
        reason: String,
    },
    /// The declared dimensions exceed the configured limits.
    #[error(
        "image is {width}x{height} pixels, more than the limit of {max_pixels} pixels (or a side over the maximum)"
    )]
    TooManyPixels {
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// The configured pixel limit.
        max_pixels: u64,
    },
    /// Decoding would need more memory or input than allowed.
    #[error("image exceeds a resource limit: {reason}")]
    LimitExceeded {
        /// Which limit.
        reason: String,
    },
    /// The file is truncated or corrupt.
    #[error("image data is corrupt or truncated: {reason}")]
    Corrupt {
        /// Decoder message.
        reason: String,
    },
    /// A variant could not be encoded.
    #[error("could not encode the {variant} variant: {reason}")]
    Encode {
        /// The variant that failed.
        variant: VariantName,
        /// Encoder message.
        reason: String,
    },
    /// The input file could not be read.
    #[error("could not read the image file: {reason}")]
    Io {
        /// OS message.
        reason: String,
    },
    /// An internal invariant failed (a bug, not the client's fault).
    #[error("internal error while processing the image: {reason}")]
    Internal {
        /// Details for the logs.
        reason: String,
    },
}

impl VariantError {
    /// Stable snake_case code for API responses (`"corrupt"`, `"too_large"`, ...).
    pub const fn code(&self) -> &'static str {
        match self {
            VariantError::UnsupportedFormat { .. } => "unsupported_format",
            VariantError::TooManyPixels { .. } => "too_many_pixels",
            VariantError::LimitExceeded { .. } => "limit_exceeded",
            VariantError::Corrupt { .. } => "corrupt",
            VariantError::Encode { .. } => "encode_failed",
            VariantError::Io { .. } => "io",
            VariantError::Internal { .. } => "internal",
        }
    }

    /// True when the upload itself is at fault (HTTP 4xx rather than 5xx).
    pub const fn is_client_error(&self) -> bool {
        matches!(
            self,
            VariantError::UnsupportedFormat { .. }
                | VariantError::TooManyPixels { .. }
                | VariantError::LimitExceeded { .. }
                | VariantError::Corrupt { .. }
        )
    }

    fn from_decode(err: ImageError) -> Self {
        match err {
            ImageError::Limits(e) => VariantError::LimitExceeded {
                reason: e.to_string(),
            },
            ImageError::Unsupported(e) => VariantError::UnsupportedFormat {
                reason: e.to_string(),
            },
            other => VariantError::Corrupt {
                reason: other.to_string(),
            },
        }
    }

    fn internal(reason: impl fmt::Display) -> Self {
        VariantError::Internal {
            reason: reason.to_string(),
        }
    }
}

/// Detects the input format from its magic bytes.
pub fn detect_format(bytes: &[u8]) -> Result<SourceFormat, VariantError> {
    match bytes {
        [0xFF, 0xD8, 0xFF, ..] => Ok(SourceFormat::Jpeg),
        [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, ..] => Ok(SourceFormat::Png),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Ok(SourceFormat::Gif),
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => Ok(SourceFormat::WebP),
        _ => Err(VariantError::UnsupportedFormat {
            reason: "not a JPEG, PNG, GIF or WebP file (unrecognised magic bytes)".into(),
        }),
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
    let (full, orientation) = decode(input, format, limits)?;
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

// ---------------------------------------------------------------------------
// Decoding

/// Interleaved 8-bit RGB (3 channels) or RGBA (4 channels) pixels.
#[derive(Debug, Clone)]
struct Raster {
    width: u32,
    height: u32,
    channels: usize,
    data: Vec<u8>,
}

impl Raster {
    fn pixel_type(&self) -> fr::PixelType {
        if self.channels == 4 {
            fr::PixelType::U8x4
        } else {
            fr::PixelType::U8x3
        }
    }

    fn row_bytes(&self) -> usize {
        self.width as usize * self.channels
    }

    fn from_dynamic(img: DynamicImage) -> Self {
        let (width, height) = (img.width(), img.height());
        match img {
            DynamicImage::ImageRgb8(b) => Raster {
                width,
                height,
                channels: 3,
                data: b.into_raw(),
            },
            DynamicImage::ImageRgba8(b) => Raster {
                width,
                height,
                channels: 4,
                data: b.into_raw(),
            }
            .drop_opaque_alpha(),
            other if other.color().has_alpha() => Raster::from_dynamic(other.into_rgba8().into()),
            other => Raster {
                width,
                height,
                channels: 3,
                data: other.into_rgb8().into_raw(),
            },
        }
    }

    fn into_dynamic(self) -> Result<DynamicImage, VariantError> {
        let bad = || VariantError::internal("raster size mismatch");
        Ok(if self.channels == 4 {
            image::RgbaImage::from_raw(self.width, self.height, self.data)
                .ok_or_else(bad)?
                .into()
        } else {
            image::RgbImage::from_raw(self.width, self.height, self.data)
                .ok_or_else(bad)?
                .into()
        })
    }

    /// RGBA whose alpha is 255 everywhere becomes RGB (in place).
    fn drop_opaque_alpha(mut self) -> Self {
        if self.channels != 4 || self.data.chunks_exact(4).any(|p| p[3] != 255) {
            return self;
        }
        let pixels = self.data.len() / 4;
        for i in 0..pixels {
            self.data.copy_within(i * 4..i * 4 + 3, i * 3);
        }
        self.data.truncate(pixels * 3);
        self.data.shrink_to_fit();
        self.channels = 3;
        self
    }

    /// Applies an EXIF orientation (rotating/flipping the pixels).
    fn oriented(self, orientation: Orientation) -> Result<Self, VariantError> {
        if orientation == Orientation::NoTransforms {
            return Ok(self);
        }
        let mut img = self.into_dynamic()?;
        img.apply_orientation(orientation);
        Ok(Raster::from_dynamic(img))
    }

    /// RGB copy with transparency composited onto white (JPEG has no alpha).
    fn flattened(&self) -> Cow3<'_> {
        if self.channels == 3 {
            return Cow3::Borrowed(self);
        }
        let mut data = Vec::with_capacity(self.width as usize * self.height as usize * 3);
        for p in self.data.chunks_exact(4) {
            data.extend_from_slice(&flatten_pixel(p));
        }
        Cow3::Owned(Raster {
            width: self.width,
            height: self.height,
            channels: 3,
            data,
        })
    }
}

/// An RGB raster, borrowed when the source already was RGB.
enum Cow3<'a> {
    Borrowed(&'a Raster),
    Owned(Raster),
}

impl Cow3<'_> {
    fn get(&self) -> &Raster {
        match self {
            Cow3::Borrowed(r) => r,
            Cow3::Owned(r) => r,
        }
    }
}

/// Composites one RGBA pixel onto white.
fn flatten_pixel(p: &[u8]) -> [u8; 3] {
    let a = u32::from(p[3]);
    let blend = |c: u8| ((u32::from(c) * a + 255 * (255 - a) + 127) / 255) as u8;
    [blend(p[0]), blend(p[1]), blend(p[2])]
}

fn decode(
    input: &[u8],
    format: SourceFormat,
    limits: &VariantLimits,
) -> Result<(Raster, Orientation), VariantError> {
    if format == SourceFormat::Jpeg {
        check_jpeg_complete(input)?;
    }
    let mut reader = ImageReader::with_format(Cursor::new(input), format.image_format());
    reader.limits(limits.image_limits());
    let mut decoder = reader.into_decoder().map_err(VariantError::from_decode)?;
    let (width, height) = decoder.dimensions();
    limits.check_dimensions(width, height)?;
    if decoder.total_bytes() > limits.max_alloc_bytes {
        return Err(VariantError::LimitExceeded {
            reason: format!(
                "decoding needs {} bytes, limit is {}",
                decoder.total_bytes(),
                limits.max_alloc_bytes
            ),
        });
    }
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    // A broken ICC profile is ignored (treated as sRGB) rather than fatal.
    let icc = decoder.icc_profile().ok().flatten();
    let img = DynamicImage::from_decoder(decoder).map_err(VariantError::from_decode)?;
    let mut raster = Raster::from_dynamic(img);
    if let Some(icc) = icc {
        convert_to_srgb(&mut raster, &icc, limits.threads.max(1))?;
    }
    Ok((raster, orientation))
}

/// Converts pixels tagged with a non-sRGB RGB ICC profile (Display P3, Adobe
/// RGB, ...) to sRGB, in parallel row bands. sRGB-like, non-RGB or
/// unparseable profiles leave the pixels untouched.
fn convert_to_srgb(r: &mut Raster, icc: &[u8], threads: usize) -> Result<(), VariantError> {
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

/// Rejects JPEG data with no end-of-image marker after the first scan
/// (truncated uploads, which lenient decoders would pad with grey).
fn check_jpeg_complete(input: &[u8]) -> Result<(), VariantError> {
    let sos = find_marker(input, 2, 0xDA);
    let has_eoi = sos.is_some_and(|pos| input[pos..].windows(2).any(|w| w == [0xFF, 0xD9]));
    if has_eoi {
        Ok(())
    } else {
        Err(VariantError::Corrupt {
            reason: "JPEG is truncated (no end-of-image marker)".into(),
        })
    }
}

/// Walks JPEG marker segments from `start` and returns the offset of the
/// first `marker` (its 0xFF byte); stops at SOS.
fn find_marker(data: &[u8], start: usize, marker: u8) -> Option<usize> {
    let mut pos = start;
    while pos + 4 <= data.len() {
        if data[pos] != 0xFF {
            return None;
        }
        let m = data[pos + 1];
        if m == 0xFF {
            pos += 1; // fill byte
            continue;
        }
        if m == marker {
            return Some(pos);
        }
        if m == 0xDA {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]]));
        pos += 2 + len;
    }
    None
}

// ---------------------------------------------------------------------------
// Geometry

fn swaps_axes(orientation: Orientation) -> bool {
    matches!(
        orientation,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    )
}

fn oriented_dims(width: u32, height: u32, orientation: Orientation) -> (u32, u32) {
    if swaps_axes(orientation) {
        (height, width)
    } else {
        (width, height)
    }
}

/// A centred crop (in upright source pixels, possibly fractional) resized to
/// `out_w x out_h`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Plan {
    crop_w: f64,
    crop_h: f64,
    out_w: u32,
    out_h: u32,
}

impl Plan {
    /// The same crop expressed in a uniformly rescaled copy of the source.
    fn rescaled(self, from: (u32, u32), to: (u32, u32)) -> Plan {
        Plan {
            crop_w: self.crop_w * f64::from(to.0) / f64::from(from.0),
            crop_h: self.crop_h * f64::from(to.1) / f64::from(from.1),
            ..self
        }
    }

    /// True when the crop has at least the output's resolution (within half a pixel).
    fn is_downscale(self) -> bool {
        self.crop_w + 0.5 >= f64::from(self.out_w) && self.crop_h + 0.5 >= f64::from(self.out_h)
    }

    fn is_identity(self, width: u32, height: u32) -> bool {
        (self.out_w, self.out_h) == (width, height)
            && self.crop_w == f64::from(width)
            && self.crop_h == f64::from(height)
    }
}

fn plan(geometry: Geometry, width: u32, height: u32) -> Plan {
    let (w, h) = (f64::from(width), f64::from(height));
    let full = |out_w, out_h| Plan {
        crop_w: w,
        crop_h: h,
        out_w,
        out_h,
    };
    match geometry {
        Geometry::Original => full(width, height),
        Geometry::Fit(bw, bh) => {
            let s = (f64::from(bw) / w).min(f64::from(bh) / h).min(1.0);
            full(scaled(w, s, bw), scaled(h, s, bh))
        }
        Geometry::Fill(bw, bh) => plan_fill(f64::from(bw), f64::from(bh), w, h),
    }
}

fn scaled(len: f64, s: f64, max: u32) -> u32 {
    ((len * s).round() as u32).clamp(1, max.max(1))
}

fn plan_fill(bw: f64, bh: f64, w: f64, h: f64) -> Plan {
    let s = (bw / w).max(bh / h);
    if s <= 1.0 {
        return Plan {
            crop_w: bw / s,
            crop_h: bh / s,
            out_w: bw as u32,
            out_h: bh as u32,
        };
    }
    // Too small to fill the box: largest centred crop with the box's aspect
    // ratio, kept at native resolution.
    let (cw, ch) = if w / h > bw / bh {
        (((h * bw / bh).round()).max(1.0), h)
    } else {
        (w, ((w * bh / bw).round()).max(1.0))
    };
    Plan {
        crop_w: cw,
        crop_h: ch,
        out_w: cw as u32,
        out_h: ch as u32,
    }
}

// ---------------------------------------------------------------------------
// Resizing

const FILTER: fr::ResizeAlg = fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3);
/// Filter support of Lanczos3 in source pixels per unit of scale, plus slack.
const FILTER_SUPPORT: f64 = 3.0;
/// Row bands used when resizing a large image (bounds scratch memory).
const BAND_ROWS: u32 = 448;

/// Resize geometry in the *stored* (unrotated) coordinates of `src`.
#[derive(Debug, Clone, Copy)]
struct SourceResize {
    left: f64,
    top: f64,
    crop_w: f64,
    crop_h: f64,
    out_w: u32,
    out_h: u32,
}

impl SourceResize {
    /// Maps an upright centred-crop plan into stored coordinates of `src`.
    fn new(src: &Raster, orientation: Orientation, p: Plan) -> Self {
        let (crop_w, crop_h, out_w, out_h) = if swaps_axes(orientation) {
            (p.crop_h, p.crop_w, p.out_h, p.out_w)
        } else {
            (p.crop_w, p.crop_h, p.out_w, p.out_h)
        };
        let left = (f64::from(src.width) - crop_w) / 2.0;
        let top = (f64::from(src.height) - crop_h) / 2.0;
        SourceResize {
            left,
            top,
            crop_w,
            crop_h,
            out_w,
            out_h,
        }
    }

    fn bands(&self) -> Vec<(u32, u32)> {
        let step = BAND_ROWS.max(1);
        (0..self.out_h.div_ceil(step))
            .map(|i| (i * step, ((i + 1) * step).min(self.out_h)))
            .collect()
    }
}

/// Resizes destination rows `rows` of `r` from `src` into `dst` (exactly
/// those rows). Only the source rows under the filter are handed to the
/// resizer, so scratch memory (and alpha premultiplication) stays per band.
fn resize_band(
    src: &Raster,
    r: &SourceResize,
    rows: (u32, u32),
    dst: &mut [u8],
) -> Result<(), VariantError> {
    let scale_y = r.crop_h / f64::from(r.out_h);
    let top = r.top + f64::from(rows.0) * scale_y;
    let height = f64::from(rows.1 - rows.0) * scale_y;
    let margin = FILTER_SUPPORT * scale_y.max(1.0) + 2.0;
    let y0 = (top - margin).floor().max(0.0) as u32;
    let y1 = ((top + height + margin).ceil() as u32).min(src.height);
    let window = &src.data[y0 as usize * src.row_bytes()..y1 as usize * src.row_bytes()];
    let src_img = fr::images::ImageRef::new(src.width, y1 - y0, window, src.pixel_type())
        .map_err(VariantError::internal)?;
    let mut dst_img =
        fr::images::Image::from_slice_u8(r.out_w, rows.1 - rows.0, dst, src.pixel_type())
            .map_err(VariantError::internal)?;
    // Clamp against floating-point drift at the image edges.
    let top_in_window = (top - f64::from(y0)).max(0.0);
    let height = height.min(f64::from(y1 - y0) - top_in_window);
    let left = r.left.max(0.0);
    let width = r.crop_w.min(f64::from(src.width) - left);
    let opts = fr::ResizeOptions::new()
        .resize_alg(FILTER)
        .crop(left, top_in_window, width, height);
    fr::Resizer::new()
        .resize(&src_img, &mut dst_img, &opts)
        .map_err(VariantError::internal)
}

/// Renders an upright plan from `src` (stored with `orientation`).
fn render(src: &Raster, orientation: Orientation, p: Plan) -> Result<Raster, VariantError> {
    let (ow, oh) = oriented_dims(src.width, src.height, orientation);
    if p.is_identity(ow, oh) {
        return src.clone().oriented(orientation);
    }
    let r = SourceResize::new(src, orientation, p);
    let mut out = Raster {
        width: r.out_w,
        height: r.out_h,
        channels: src.channels,
        data: vec![0; r.out_w as usize * r.out_h as usize * src.channels],
    };
    let row_bytes = out.row_bytes();
    for (rows, chunk) in r
        .bands()
        .into_iter()
        .zip(out.data.chunks_mut(BAND_ROWS as usize * row_bytes))
    {
        resize_band(src, &r, rows, chunk)?;
    }
    out.oriented(orientation)
}

// ---------------------------------------------------------------------------
// Encoding

fn encode_err(name: VariantName) -> impl Fn(String) -> VariantError {
    move |reason| VariantError::Encode {
        variant: name,
        reason,
    }
}

fn encode(spec: &VariantSpec, r: &Raster) -> Result<Variant, VariantError> {
    let bytes = match spec.format {
        OutputFormat::Jpeg => encode_jpeg(r, spec.quality).map_err(encode_err(spec.name))?,
        OutputFormat::WebP => encode_webp(r, spec.quality).map_err(encode_err(spec.name))?,
    };
    Ok(Variant {
        name: spec.name,
        format: spec.format,
        width: r.width,
        height: r.height,
        bytes,
    })
}

fn jpeg_dims(width: u32, height: u32) -> Result<(u16, u16), String> {
    match (u16::try_from(width), u16::try_from(height)) {
        (Ok(w), Ok(h)) => Ok((w, h)),
        _ => Err(format!(
            "{width}x{height} is larger than JPEG allows (65535)"
        )),
    }
}

fn encode_jpeg(r: &Raster, quality: u8) -> Result<Vec<u8>, String> {
    let rgb = r.flattened();
    let rgb = rgb.get();
    let (w, h) = jpeg_dims(rgb.width, rgb.height)?;
    let mut out = Vec::with_capacity(rgb.data.len() / 4);
    jpeg_encoder::Encoder::new(&mut out, quality)
        .encode(&rgb.data, w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

fn encode_webp(r: &Raster, quality: u8) -> Result<Vec<u8>, String> {
    if r.width > 16383 || r.height > 16383 {
        return Err(format!(
            "{}x{} is larger than WebP allows (16383)",
            r.width, r.height
        ));
    }
    let layout = if r.channels == 4 {
        webp::PixelLayout::Rgba
    } else {
        webp::PixelLayout::Rgb
    };
    let encoder = webp::Encoder::new(&r.data, layout, r.width, r.height);
    let mut config =
        webp::WebPConfig::new().map_err(|()| "cannot initialise WebP config".to_string())?;
    config.lossless = 0;
    config.quality = f32::from(quality);
    config.method = 4;
    let mem = encoder
        .encode_advanced(&config)
        .map_err(|e| format!("{e:?}"))?;
    Ok(mem.to_vec())
}

// --- strip-parallel JPEG ---------------------------------------------------

/// How a full-size JPEG is split into independently encoded strips.
#[derive(Debug, Clone, Copy)]
struct StripLayout {
    width: u16,
    height: u16,
    quality: u8,
    /// Rows per strip: a multiple of 8 MCU rows, so restart-marker numbering
    /// (mod 8) continues seamlessly from strip to strip.
    strip_rows: u32,
    /// Restart interval = MCUs per MCU row.
    mcus_per_row: u16,
}

impl StripLayout {
    fn new(width: u32, height: u32, quality: u8, threads: usize) -> Result<Self, String> {
        let (w, h) = jpeg_dims(width, height)?;
        let mcu = if quality < 90 { 16 } else { 8 }; // jpeg-encoder: 4:2:0 below q90
        let unit = 8 * mcu;
        let target = height.div_ceil((threads as u32).max(1) * 4);
        let strip_rows = target.div_ceil(unit).max(1) * unit;
        let mcus_per_row = u16::try_from(width.div_ceil(mcu)).map_err(|e| e.to_string())?;
        Ok(StripLayout {
            width: w,
            height: h,
            quality,
            strip_rows,
            mcus_per_row,
        })
    }

    fn strips(&self) -> Vec<(u32, u32)> {
        let h = u32::from(self.height);
        (0..h.div_ceil(self.strip_rows))
            .map(|i| (i * self.strip_rows, ((i + 1) * self.strip_rows).min(h)))
            .collect()
    }
}

/// Upright view of rows `y0..y0+height` of a stored raster, for jpeg-encoder.
struct OrientedStrip<'a> {
    src: &'a Raster,
    orientation: Orientation,
    y0: u32,
    width: u16,
    height: u16,
}

impl OrientedStrip<'_> {
    /// Stored coordinates of upright pixel `(x, y)`.
    fn source_xy(&self, x: u32, y: u32) -> (u32, u32) {
        let (w, h) = (self.src.width, self.src.height);
        match self.orientation {
            Orientation::NoTransforms => (x, y),
            Orientation::Rotate90 => (y, h - 1 - x),
            Orientation::Rotate180 => (w - 1 - x, h - 1 - y),
            Orientation::Rotate270 => (w - 1 - y, x),
            Orientation::FlipHorizontal => (w - 1 - x, y),
            Orientation::FlipVertical => (x, h - 1 - y),
            Orientation::Rotate90FlipH => (y, x),
            Orientation::Rotate270FlipH => (w - 1 - y, h - 1 - x),
        }
    }

    fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let (sx, sy) = self.source_xy(x, y);
        let c = self.src.channels;
        let i = (sy as usize * self.src.width as usize + sx as usize) * c;
        let p = &self.src.data[i..i + c];
        if c == 4 {
            flatten_pixel(p)
        } else {
            [p[0], p[1], p[2]]
        }
    }
}

impl jpeg_encoder::ImageBuffer for OrientedStrip<'_> {
    fn get_jpeg_color_type(&self) -> jpeg_encoder::JpegColorType {
        jpeg_encoder::JpegColorType::Ycbcr
    }

    fn width(&self) -> u16 {
        self.width
    }

    fn height(&self) -> u16 {
        self.height
    }

    fn fill_buffers(&self, y: u16, buffers: &mut [Vec<u8>; 4]) {
        let y = self.y0 + u32::from(y);
        for x in 0..u32::from(self.width) {
            let [r, g, b] = self.pixel(x, y);
            let (l, cb, cr) = jpeg_encoder::rgb_to_ycbcr(r, g, b);
            buffers[0].push(l);
            buffers[1].push(cb);
            buffers[2].push(cr);
        }
    }
}

/// Encodes upright rows `rows` of `src` as a standalone JPEG whose restart
/// interval is one MCU row.
fn encode_strip(
    src: &Raster,
    orientation: Orientation,
    layout: &StripLayout,
    rows: (u32, u32),
) -> Result<Vec<u8>, String> {
    let height = u16::try_from(rows.1 - rows.0).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(src.row_bytes() * usize::from(height) / 5);
    let mut enc = jpeg_encoder::Encoder::new(&mut out, layout.quality);
    enc.set_restart_interval(layout.mcus_per_row);
    if orientation == Orientation::NoTransforms && src.channels == 3 {
        let rb = src.row_bytes();
        let data = &src.data[rows.0 as usize * rb..rows.1 as usize * rb];
        enc.encode(data, layout.width, height, jpeg_encoder::ColorType::Rgb)
    } else {
        let view = OrientedStrip {
            src,
            orientation,
            y0: rows.0,
            width: layout.width,
            height,
        };
        enc.encode_image(view)
    }
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Joins strip JPEGs into one: the first strip's headers (with the frame
/// height patched), then every strip's entropy-coded data separated by RST7.
fn stitch_strips(strips: Vec<Vec<u8>>, height: u16) -> Result<Vec<u8>, String> {
    let bad = || "strip is not a JPEG from jpeg-encoder".to_string();
    let mut parts = Vec::with_capacity(strips.len());
    for s in &strips {
        let sos = find_marker(s, 2, 0xDA).ok_or_else(bad)?;
        let len = usize::from(u16::from_be_bytes([s[sos + 2], s[sos + 3]]));
        if !s.ends_with(&[0xFF, 0xD9]) {
            return Err(bad());
        }
        parts.push((sos + 2 + len, s.len() - 2));
    }
    let total: usize = parts.iter().map(|(a, b)| b - a + 2).sum::<usize>() + parts[0].0;
    let mut out = Vec::with_capacity(total + 2);
    let first = strips.first().ok_or_else(bad)?;
    out.extend_from_slice(&first[..parts[0].0]);
    let sof = find_marker(&out, 2, 0xC0).ok_or_else(bad)?;
    out[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    for (i, (s, (a, b))) in strips.into_iter().zip(parts).enumerate() {
        if i > 0 {
            out.extend_from_slice(&[0xFF, 0xD7]);
        }
        out.extend_from_slice(&s[a..b]);
        drop(s); // keep at most one strip alongside the output
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    Ok(out)
}

// ---------------------------------------------------------------------------
// Scheduling

type Job<'s, T> = Box<dyn FnOnce() -> Result<T, VariantError> + Send + 's>;

/// Runs jobs on up to `threads` scoped threads, in list order (put the
/// longest first); returns results in list order or the first error.
fn run_jobs<T: Send>(jobs: Vec<Job<'_, T>>, threads: usize) -> Result<Vec<T>, VariantError> {
    let n = jobs.len();
    let workers = threads.min(n);
    if workers <= 1 {
        return jobs.into_iter().map(|job| job()).collect();
    }
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<VecDeque<_>>());
    let results = Mutex::new((0..n).map(|_| None).collect::<Vec<_>>());
    let work = || loop {
        let next = queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some((i, job)) = next else { break };
        let r = job();
        results.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(r);
    };
    let panicked = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers).map(|_| s.spawn(work)).collect();
        handles
            .into_iter()
            .map(|h| h.join().is_err())
            .fold(false, |a, b| a | b)
    });
    if panicked {
        return Err(VariantError::internal("a worker thread panicked"));
    }
    let results = results.into_inner().unwrap_or_else(PoisonError::into_inner);
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(VariantError::internal("job lost"))))
        .collect()
}

/// Output of a stage-one job.
enum StageOne {
    Band,
    Strip(Vec<u8>),
    Done(Variant),
}

/// What stage one leaves for the caller once the full-size pixels are gone.
struct StageOneOutput {
    /// The shared intermediate, still in stored (unrotated) orientation.
    mid: Raster,
    /// Variants rendered from the full-size pixels.
    done: Vec<Variant>,
    /// `Original` variants as encoded strips, to be stitched.
    originals: Vec<(VariantSpec, StripLayout, Vec<Vec<u8>>)>,
}

/// Stage one needs the full-size pixels: the `Original` variants (strip
/// encoded), the shared intermediate and any variant the intermediate is too
/// small for.
fn stage_one(
    full: &Raster,
    orientation: Orientation,
    specs: &[VariantSpec],
    threads: usize,
) -> Result<StageOneOutput, VariantError> {
    let (ow, oh) = oriented_dims(full.width, full.height, orientation);
    let mid_plan = plan(mid_geometry(specs), ow, oh);
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
fn mid_geometry(specs: &[VariantSpec]) -> Geometry {
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
fn stage_two(
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

#[cfg(test)]
mod unit_tests {
    use super::*;

    fn raster(width: u32, height: u32) -> Raster {
        let data = (0..width * height * 3)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        Raster {
            width,
            height,
            channels: 3,
            data,
        }
    }

    #[test]
    fn orientation_mapping_matches_image_crate() {
        let src = raster(5, 3);
        for o in [
            Orientation::NoTransforms,
            Orientation::Rotate90,
            Orientation::Rotate180,
            Orientation::Rotate270,
            Orientation::FlipHorizontal,
            Orientation::FlipVertical,
            Orientation::Rotate90FlipH,
            Orientation::Rotate270FlipH,
        ] {
            let expected = src.clone().oriented(o).expect("orient");
            let (w, h) = oriented_dims(5, 3, o);
            assert_eq!((expected.width, expected.height), (w, h));
            let view = OrientedStrip {
                src: &src,
                orientation: o,
                y0: 0,
                width: w as u16,
                height: h as u16,
            };
            for y in 0..h {
                for x in 0..w {
                    let i = ((y * w + x) * 3) as usize;
                    assert_eq!(view.pixel(x, y), expected.data[i..i + 3], "{o:?} {x},{y}");
                }
            }
        }
    }

    #[test]
    fn banded_resize_matches_whole_resize() {
        let src = raster(1500, 1100);
        let p = plan(Geometry::Fit(640, 480), 1500, 1100);
        let r = SourceResize::new(&src, Orientation::NoTransforms, p);
        let mut whole = vec![0u8; (r.out_w * r.out_h * 3) as usize];
        resize_band(&src, &r, (0, r.out_h), &mut whole).expect("whole");
        let mut banded = vec![0u8; whole.len()];
        let rb = (r.out_w * 3) as usize;
        for rows in [(0, 100), (100, 101), (101, r.out_h)] {
            let chunk = &mut banded[rows.0 as usize * rb..rows.1 as usize * rb];
            resize_band(&src, &r, rows, chunk).expect("band");
        }
        let max_diff = whole.iter().zip(&banded).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(max_diff <= Some(1), "max diff {max_diff:?}");
    }

    fn decode_rgb(bytes: &[u8]) -> Vec<u8> {
        image::load_from_memory(bytes)
            .expect("decode")
            .to_rgb8()
            .into_raw()
    }

    #[test]
    fn stitched_strips_decode_like_one_pass() {
        let mut seed = 7u32;
        let data = (0..701 * 1531 * 3)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (seed >> 24) as u8
            })
            .collect();
        let src = Raster {
            width: 701,
            height: 1531,
            channels: 3,
            data,
        };
        for o in [
            Orientation::NoTransforms,
            Orientation::Rotate90,
            Orientation::Rotate270FlipH,
        ] {
            let (w, h) = oriented_dims(701, 1531, o);
            let layout = StripLayout::new(w, h, 95, 2).expect("layout");
            assert!(layout.strips().len() > 2);
            let strips = layout
                .strips()
                .into_iter()
                .map(|rows| encode_strip(&src, o, &layout, rows))
                .collect::<Result<Vec<_>, _>>()
                .expect("strips");
            let stitched = stitch_strips(strips, layout.height).expect("stitch");
            let single = encode_jpeg(&src.clone().oriented(o).expect("orient"), 95).expect("jpeg");
            let (a, b) = (decode_rgb(&stitched), decode_rgb(&single));
            assert_eq!(a.len(), b.len());
            let max = a
                .iter()
                .zip(&b)
                .map(|(x, y)| x.abs_diff(*y))
                .max()
                .unwrap_or(0);
            let limit = if o == Orientation::NoTransforms { 0 } else { 3 };
            assert!(max <= limit, "{o:?}: max diff {max}");
        }
    }

    #[test]
    fn plans_never_upscale() {
        let p = plan(Geometry::Fit(2560, 1700), 6000, 4000);
        assert_eq!((p.out_w, p.out_h), (2550, 1700));
        let p = plan(Geometry::Fit(2560, 1700), 800, 600);
        assert_eq!((p.out_w, p.out_h), (800, 600));
        let p = plan(Geometry::Fill(150, 150), 100, 300);
        assert_eq!(
            (p.out_w, p.out_h, p.crop_w, p.crop_h),
            (100, 100, 100.0, 100.0)
        );
        let p = plan(Geometry::Fill(400, 400), 1000, 100);
        assert_eq!((p.out_w, p.out_h), (100, 100));
        let p = plan(Geometry::Fill(150, 150), 6000, 4000);
        assert_eq!(
            (p.out_w, p.out_h, p.crop_w, p.crop_h),
            (150, 150, 4000.0, 4000.0)
        );
    }
}
