//! What is asked and what is made: the six variants and their specs, the
//! output and source formats, the limits a decode is held to, and a
//! rendered variant.

use std::fmt;

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
