//! Decoding: the input format sniffed from magic bytes, the truncated-JPEG
//! check, and one decode under the configured limits into a [`Raster`].

use std::io::Cursor;

use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, Limits};

use super::colour::convert_to_srgb;
use super::error::VariantError;
use super::markers::find_marker;
use super::raster::Raster;
use super::spec::{SourceFormat, VariantLimits};

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

impl VariantError {
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

/// Decodes `input` once, in stored (unrotated) orientation, and returns the
/// pixels in sRGB with the EXIF orientation still to be applied.
pub(super) fn decode(
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

/// The EXIF block `input` carries (a TIFF block), if it can be read: only
/// its headers are parsed, no pixel is decoded.
pub(super) fn exif(input: &[u8], format: SourceFormat) -> Option<Vec<u8>> {
    let reader = ImageReader::with_format(Cursor::new(input), format.image_format());
    let mut decoder = reader.into_decoder().ok()?;
    decoder.exif_metadata().ok().flatten()
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
