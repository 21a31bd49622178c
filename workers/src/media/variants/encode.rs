//! Encoding: one raster to a metadata-free JPEG (`jpeg-encoder`) or lossy
//! WebP (`webp`), and the full-size JPEG encoded in parallel strips that are
//! stitched into one baseline file with restart markers.

use image::metadata::Orientation;

use super::error::VariantError;
use super::markers::find_marker;
use super::raster::{Raster, flatten_pixel};
use super::spec::{OutputFormat, Variant, VariantName, VariantSpec};

/// Maps an encoder message to a [`VariantError::Encode`] for `name`.
pub(super) fn encode_err(name: VariantName) -> impl Fn(String) -> VariantError {
    move |reason| VariantError::Encode {
        variant: name,
        reason,
    }
}

/// Encodes an upright, already sized raster as the variant `spec`.
pub(super) fn encode(spec: &VariantSpec, r: &Raster) -> Result<Variant, VariantError> {
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
    encode_jpeg_with(r, quality, None)
}

/// A JPEG of `r` (transparency flattened onto white), with `exif` (a TIFF
/// block) as its only metadata when given.
pub(super) fn encode_jpeg_with(
    r: &Raster,
    quality: u8,
    exif: Option<&[u8]>,
) -> Result<Vec<u8>, String> {
    let rgb = r.flattened();
    let rgb = rgb.get();
    let (w, h) = jpeg_dims(rgb.width, rgb.height)?;
    let mut out = Vec::with_capacity(rgb.data.len() / 4);
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, quality);
    if let Some(exif) = exif {
        let mut segment = b"Exif\0\0".to_vec();
        segment.extend_from_slice(exif);
        encoder
            .add_app_segment(1, segment)
            .map_err(|e| e.to_string())?;
    }
    encoder
        .encode(&rgb.data, w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

pub(super) fn encode_webp(r: &Raster, quality: u8) -> Result<Vec<u8>, String> {
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

/// How a full-size JPEG is split into independently encoded strips.
#[derive(Debug, Clone, Copy)]
pub(super) struct StripLayout {
    /// Upright width of the whole image.
    pub(super) width: u16,
    /// Upright height of the whole image.
    pub(super) height: u16,
    quality: u8,
    /// Rows per strip: a multiple of 8 MCU rows, so restart-marker numbering
    /// (mod 8) continues seamlessly from strip to strip.
    strip_rows: u32,
    /// Restart interval = MCUs per MCU row.
    mcus_per_row: u16,
}

impl StripLayout {
    /// About four strips per thread for an upright `width x height` image.
    pub(super) fn new(
        width: u32,
        height: u32,
        quality: u8,
        threads: usize,
    ) -> Result<Self, String> {
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

    /// Upright row ranges of the strips, top to bottom.
    pub(super) fn strips(&self) -> Vec<(u32, u32)> {
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
pub(super) fn encode_strip(
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
pub(super) fn stitch_strips(strips: Vec<Vec<u8>>, height: u16) -> Result<Vec<u8>, String> {
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
    let (first, &(header_end, _)) = strips.first().zip(parts.first()).ok_or_else(bad)?;
    let total: usize = parts.iter().map(|(a, b)| b - a + 2).sum::<usize>() + header_end;
    let mut out = Vec::with_capacity(total + 2);
    out.extend_from_slice(&first[..header_end]);
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

#[cfg(test)]
mod tests {
    use super::super::raster::oriented_dims;
    use super::*;

    #[test]
    fn orientation_mapping_matches_image_crate() {
        let src = Raster::test_pattern(5, 3);
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
}
