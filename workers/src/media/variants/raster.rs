//! The engine's pixel buffer, [`Raster`]: interleaved 8-bit RGB or RGBA, and
//! how EXIF orientation and transparency are applied to it.

use fast_image_resize as fr;
use image::DynamicImage;
use image::metadata::Orientation;

use super::error::VariantError;

/// Interleaved 8-bit RGB (3 channels) or RGBA (4 channels) pixels.
#[derive(Debug, Clone)]
pub(super) struct Raster {
    /// Width in pixels.
    pub(super) width: u32,
    /// Height in pixels.
    pub(super) height: u32,
    /// 3 (RGB) or 4 (RGBA).
    pub(super) channels: usize,
    /// `width * height * channels` bytes, row by row.
    pub(super) data: Vec<u8>,
}

impl Raster {
    /// The resizer's pixel type for this raster's channel count.
    pub(super) fn pixel_type(&self) -> fr::PixelType {
        if self.channels == 4 {
            fr::PixelType::U8x4
        } else {
            fr::PixelType::U8x3
        }
    }

    /// Bytes per row.
    pub(super) fn row_bytes(&self) -> usize {
        self.width as usize * self.channels
    }

    /// Takes over a decoded image as RGB, or as RGBA when it has alpha.
    pub(super) fn from_dynamic(img: DynamicImage) -> Self {
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
    pub(super) fn oriented(self, orientation: Orientation) -> Result<Self, VariantError> {
        if orientation == Orientation::NoTransforms {
            return Ok(self);
        }
        let mut img = self.into_dynamic()?;
        img.apply_orientation(orientation);
        Ok(Raster::from_dynamic(img))
    }

    /// RGB copy with transparency composited onto white (JPEG has no alpha).
    pub(super) fn flattened(&self) -> Cow3<'_> {
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
pub(super) enum Cow3<'a> {
    /// The source itself (it had no alpha).
    Borrowed(&'a Raster),
    /// A flattened copy.
    Owned(Raster),
}

impl Cow3<'_> {
    /// The RGB raster.
    pub(super) fn get(&self) -> &Raster {
        match self {
            Cow3::Borrowed(r) => r,
            Cow3::Owned(r) => r,
        }
    }
}

/// Composites one RGBA pixel onto white.
pub(super) fn flatten_pixel(p: &[u8]) -> [u8; 3] {
    let a = u32::from(p[3]);
    let blend = |c: u8| ((u32::from(c) * a + 255 * (255 - a) + 127) / 255) as u8;
    [blend(p[0]), blend(p[1]), blend(p[2])]
}

/// True when `orientation` turns the image by a quarter (width and height swap).
pub(super) fn swaps_axes(orientation: Orientation) -> bool {
    matches!(
        orientation,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    )
}

/// Upright size of a `width x height` image stored with `orientation`.
pub(super) fn oriented_dims(width: u32, height: u32, orientation: Orientation) -> (u32, u32) {
    if swaps_axes(orientation) {
        (height, width)
    } else {
        (width, height)
    }
}

#[cfg(test)]
impl Raster {
    /// A deterministic RGB pattern, for the unit tests of the stages.
    pub(super) fn test_pattern(width: u32, height: u32) -> Raster {
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
}
