//! Geometry planning (fit-inside and crop-to-fill boxes, never enlarging) and
//! rendering a plan with a Lanczos3 resize in row bands.

use fast_image_resize as fr;
use image::metadata::Orientation;

use super::error::VariantError;
use super::raster::{Raster, oriented_dims, swaps_axes};
use super::spec::Geometry;

/// A crop (in upright source pixels, possibly fractional) resized to
/// `out_w x out_h`: centred, or around a focal point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Plan {
    crop_w: f64,
    crop_h: f64,
    /// Where the crop centres, as fractions of the upright source (0.5,
    /// 0.5 for a centred crop); the crop is kept inside the source.
    focus: (f64, f64),
    /// Output width.
    pub(super) out_w: u32,
    /// Output height.
    pub(super) out_h: u32,
}

impl Plan {
    /// The same crop expressed in a uniformly rescaled copy of the source.
    pub(super) fn rescaled(self, from: (u32, u32), to: (u32, u32)) -> Plan {
        Plan {
            crop_w: self.crop_w * f64::from(to.0) / f64::from(from.0),
            crop_h: self.crop_h * f64::from(to.1) / f64::from(from.1),
            ..self
        }
    }

    /// The same plan with its crop centred on `focus` (fractions of the
    /// upright source, from the top left), as far as the source allows.
    pub(super) fn around(self, focus: (f64, f64)) -> Plan {
        Plan {
            focus: (focus.0.clamp(0.0, 1.0), focus.1.clamp(0.0, 1.0)),
            ..self
        }
    }

    /// The crop's top left corner in a `width x height` upright source.
    pub(super) fn crop_origin(self, width: f64, height: f64) -> (f64, f64) {
        let place = |len: f64, crop: f64, focus: f64| {
            (focus * len - crop / 2.0).clamp(0.0, (len - crop).max(0.0))
        };
        (
            place(width, self.crop_w, self.focus.0),
            place(height, self.crop_h, self.focus.1),
        )
    }

    /// The crop's size in upright source pixels.
    pub(super) fn crop_size(self) -> (f64, f64) {
        (self.crop_w, self.crop_h)
    }

    /// True when the crop has at least the output's resolution (within half a pixel).
    pub(super) fn is_downscale(self) -> bool {
        self.crop_w + 0.5 >= f64::from(self.out_w) && self.crop_h + 0.5 >= f64::from(self.out_h)
    }

    /// True when the plan is the whole `width x height` image at its own size.
    pub(super) fn is_identity(self, width: u32, height: u32) -> bool {
        (self.out_w, self.out_h) == (width, height)
            && self.crop_w == f64::from(width)
            && self.crop_h == f64::from(height)
    }
}

/// The centre of a source, where crops centre unless told otherwise.
const CENTRE: (f64, f64) = (0.5, 0.5);

/// The plan for `geometry` on an upright `width x height` source.
pub(super) fn plan(geometry: Geometry, width: u32, height: u32) -> Plan {
    let (w, h) = (f64::from(width), f64::from(height));
    let full = |out_w, out_h| Plan {
        crop_w: w,
        crop_h: h,
        focus: CENTRE,
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
            focus: CENTRE,
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
        focus: CENTRE,
        out_w: cw as u32,
        out_h: ch as u32,
    }
}

const FILTER: fr::ResizeAlg = fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3);
/// Filter support of Lanczos3 in source pixels per unit of scale, plus slack.
const FILTER_SUPPORT: f64 = 3.0;
/// Row bands used when resizing a large image (bounds scratch memory).
pub(super) const BAND_ROWS: u32 = 448;

/// Resize geometry in the *stored* (unrotated) coordinates of `src`.
#[derive(Debug, Clone, Copy)]
pub(super) struct SourceResize {
    left: f64,
    top: f64,
    crop_w: f64,
    crop_h: f64,
    /// Output width, stored orientation.
    pub(super) out_w: u32,
    /// Output height, stored orientation.
    pub(super) out_h: u32,
}

impl SourceResize {
    /// Maps an upright plan into stored coordinates of `src`. A crop around
    /// a focal point is made from an upright source only (the delivery
    /// outputs render from the upright intermediate); a stored one is
    /// cropped centred.
    pub(super) fn new(src: &Raster, orientation: Orientation, p: Plan) -> Self {
        let (crop_w, crop_h, out_w, out_h) = if swaps_axes(orientation) {
            (p.crop_h, p.crop_w, p.out_h, p.out_w)
        } else {
            (p.crop_w, p.crop_h, p.out_w, p.out_h)
        };
        let (left, top) = if orientation == Orientation::NoTransforms {
            p.crop_origin(f64::from(src.width), f64::from(src.height))
        } else {
            debug_assert_eq!(p.focus, CENTRE, "a focal crop from a stored orientation");
            (
                (f64::from(src.width) - crop_w) / 2.0,
                (f64::from(src.height) - crop_h) / 2.0,
            )
        };
        SourceResize {
            left,
            top,
            crop_w,
            crop_h,
            out_w,
            out_h,
        }
    }

    /// Destination row ranges of [`BAND_ROWS`] rows each (the last may be shorter).
    pub(super) fn bands(&self) -> Vec<(u32, u32)> {
        let step = BAND_ROWS.max(1);
        (0..self.out_h.div_ceil(step))
            .map(|i| (i * step, ((i + 1) * step).min(self.out_h)))
            .collect()
    }
}

/// Resizes destination rows `rows` of `r` from `src` into `dst` (exactly
/// those rows). Only the source rows under the filter are handed to the
/// resizer, so scratch memory (and alpha premultiplication) stays per band.
pub(super) fn resize_band(
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
pub(super) fn render(
    src: &Raster,
    orientation: Orientation,
    p: Plan,
) -> Result<Raster, VariantError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banded_resize_matches_whole_resize() {
        let src = Raster::test_pattern(1500, 1100);
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
