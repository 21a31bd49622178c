//! A watermark laid over an output: the agency's image scaled to a share of
//! the output's width, placed at one of nine positions with a margin, and
//! blended with its own alpha times the profile's opacity.

use fast_image_resize as fr;
use storage::rules::delivery_profiles::{Watermark, WatermarkPosition};

use super::super::error::VariantError;
use super::super::raster::Raster;

/// The margin between a watermark and the output's edges, as a share of
/// the output's shorter side.
const MARGIN: f64 = 0.03;

/// Lays `logo` (upright, RGB or RGBA) over `out` as `watermark` says.
pub(crate) fn apply(
    out: &mut Raster,
    logo: &Raster,
    watermark: &Watermark,
) -> Result<(), VariantError> {
    let (ow, oh) = (f64::from(out.width), f64::from(out.height));
    let aspect = f64::from(logo.height) / f64::from(logo.width);
    let mut width = (ow * watermark.scale).round().max(1.0);
    let mut height = (width * aspect).round().max(1.0);
    if height > oh {
        height = oh;
        width = (height / aspect).round().max(1.0);
    }
    let scaled = resized(logo, width as u32, height as u32)?;
    let margin = (ow.min(oh) * MARGIN).round();
    let span = |outer: f64, inner: f64, at: u8| {
        match at {
            0 => margin,
            1 => ((outer - inner) / 2.0).round(),
            _ => outer - inner - margin,
        }
        .clamp(0.0, (outer - inner).max(0.0)) as u32
    };
    use WatermarkPosition as P;
    let (column, row) = match watermark.position {
        P::TopLeft => (0, 0),
        P::Top => (1, 0),
        P::TopRight => (2, 0),
        P::Left => (0, 1),
        P::Center => (1, 1),
        P::Right => (2, 1),
        P::BottomLeft => (0, 2),
        P::Bottom => (1, 2),
        P::BottomRight => (2, 2),
    };
    let left = span(ow, f64::from(scaled.width), column);
    let top = span(oh, f64::from(scaled.height), row);
    blend(out, &scaled, left, top, watermark.opacity as f32);
    Ok(())
}

/// `src` resized to exactly `width x height` (a small logo may be enlarged).
fn resized(src: &Raster, width: u32, height: u32) -> Result<Raster, VariantError> {
    let from = fr::images::ImageRef::new(src.width, src.height, &src.data, src.pixel_type())
        .map_err(VariantError::internal)?;
    let mut data = vec![0; width as usize * height as usize * src.channels];
    let mut to = fr::images::Image::from_slice_u8(width, height, &mut data, src.pixel_type())
        .map_err(VariantError::internal)?;
    let options =
        fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3));
    fr::Resizer::new()
        .resize(&from, &mut to, &options)
        .map_err(VariantError::internal)?;
    Ok(Raster {
        width,
        height,
        channels: src.channels,
        data,
    })
}

/// Blends `logo` over `out` at (`left`, `top`), Porter-Duff "over" with the
/// logo's alpha times `opacity`.
fn blend(out: &mut Raster, logo: &Raster, left: u32, top: u32, opacity: f32) {
    let (oc, lc) = (out.channels, logo.channels);
    for y in 0..logo.height.min(out.height.saturating_sub(top)) {
        for x in 0..logo.width.min(out.width.saturating_sub(left)) {
            let l = &logo.data[(y * logo.width + x) as usize * lc..][..lc];
            let a = opacity
                * if lc == 4 {
                    f32::from(l[3]) / 255.0
                } else {
                    1.0
                };
            if a <= 0.0 {
                continue;
            }
            let at = ((top + y) * out.width + left + x) as usize * oc;
            let o = &mut out.data[at..at + oc];
            let under = if oc == 4 {
                f32::from(o[3]) / 255.0
            } else {
                1.0
            };
            let alpha = a + under * (1.0 - a);
            for c in 0..3 {
                let value = (f32::from(l[c]) * a + f32::from(o[c]) * under * (1.0 - a)) / alpha;
                o[c] = value.round().clamp(0.0, 255.0) as u8;
            }
            if oc == 4 {
                o[3] = (alpha * 255.0).round() as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use storage::ids::MediaId;

    use super::*;

    fn plain(width: u32, height: u32, channels: usize, pixel: &[u8]) -> Raster {
        Raster {
            width,
            height,
            channels,
            data: pixel.repeat((width * height) as usize),
        }
    }

    #[test]
    fn the_logo_lands_in_its_corner_at_its_scale_and_opacity() {
        let mut out = plain(1000, 500, 3, &[255, 255, 255]);
        let logo = plain(100, 50, 4, &[0, 0, 0, 255]);
        let watermark = Watermark {
            media_id: MediaId::generate(),
            position: WatermarkPosition::BottomRight,
            scale: 0.2,
            opacity: 0.5,
        };
        apply(&mut out, &logo, &watermark).unwrap();
        let at = |x: u32, y: u32| out.data[((y * 1000 + x) * 3) as usize];
        // 200 x 100 logo, 15 px margin from the right and bottom edges.
        assert_eq!(at(800, 400), 128, "half black over white");
        assert_eq!(at(784, 384), 255, "outside, left of it");
        assert_eq!(at(990, 490), 255, "in the margin");
        assert_eq!(at(10, 10), 255, "the opposite corner");
    }

    #[test]
    fn a_transparent_logo_leaves_the_photo() {
        let mut out = plain(400, 300, 3, &[10, 20, 30]);
        let logo = plain(50, 50, 4, &[255, 0, 0, 0]);
        let watermark = Watermark {
            media_id: MediaId::generate(),
            position: WatermarkPosition::Center,
            scale: 0.5,
            opacity: 1.0,
        };
        apply(&mut out, &logo, &watermark).unwrap();
        assert!(out.data.chunks_exact(3).all(|p| p == [10, 20, 30]));
    }
}
