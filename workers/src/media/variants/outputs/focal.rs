//! The automatic focal point: frequency-tuned saliency (Achanta, Hemami,
//! Estrada and Süsstrunk, CVPR 2009). The photo is shrunk to about 96
//! pixels on its long edge and taken to CIE L*a*b*; a pixel is salient by
//! how far its slightly blurred colour lies from the photo's mean colour.
//! The focal point is the centroid of the salient pixels, each weighed by
//! the square of how much more salient than average it is, so that what
//! stands out most (a subject) outweighs a broad, mild deviation (a sky's
//! gradient). It returns coordinates (sharp's
//! `attention` crop does not), costs a few thousand pixels' work, and finds
//! what stands out of a room or a façade: a lit window, a red door, the
//! house against its sky. A photo where nothing stands out gets its centre.

use fast_image_resize as fr;

use super::super::raster::{Raster, flatten_pixel};

/// The long edge the saliency is measured at.
const SIDE: u32 = 96;

/// Where `photo`'s (upright) subject is: x and y from 0 to 1, from its top
/// left.
pub(in crate::media::variants) fn focal_point(photo: &Raster) -> (f64, f64) {
    let Some(small) = shrunk(photo) else {
        return (0.5, 0.5);
    };
    let (w, h) = (small.width as usize, small.height as usize);
    let lab: Vec<[f32; 3]> = small
        .data
        .chunks_exact(small.channels)
        .map(|p| {
            let rgb = if p.len() == 4 {
                flatten_pixel(p)
            } else {
                [p[0], p[1], p[2]]
            };
            to_lab(rgb)
        })
        .collect();
    let n = lab.len() as f32;
    let mean = lab.iter().fold([0.0f32; 3], |acc, p| {
        [acc[0] + p[0] / n, acc[1] + p[1] / n, acc[2] + p[2] / n]
    });
    let blurred = blur(&lab, w, h);
    let saliency: Vec<f32> = blurred
        .iter()
        .map(|p| (0..3).map(|c| (p[c] - mean[c]).powi(2)).sum::<f32>())
        .collect();
    let average = saliency.iter().sum::<f32>() / n;
    let (mut sx, mut sy, mut total) = (0.0f64, 0.0f64, 0.0f64);
    for (i, s) in saliency.iter().enumerate() {
        let weight = f64::from((s - average).max(0.0)).powi(2);
        sx += weight * ((i % w) as f64 + 0.5);
        sy += weight * ((i / w) as f64 + 0.5);
        total += weight;
    }
    if total <= f64::EPSILON {
        return (0.5, 0.5);
    }
    (
        (sx / total / w as f64).clamp(0.0, 1.0),
        (sy / total / h as f64).clamp(0.0, 1.0),
    )
}

/// `photo` at [`SIDE`] pixels on its long edge (or its own size).
fn shrunk(photo: &Raster) -> Option<Raster> {
    let scale = (f64::from(SIDE) / f64::from(photo.width.max(photo.height))).min(1.0);
    let width = ((f64::from(photo.width) * scale).round() as u32).max(1);
    let height = ((f64::from(photo.height) * scale).round() as u32).max(1);
    let src = fr::images::ImageRef::new(photo.width, photo.height, &photo.data, photo.pixel_type())
        .ok()?;
    let mut data = vec![0; width as usize * height as usize * photo.channels];
    let mut dst =
        fr::images::Image::from_slice_u8(width, height, &mut data, photo.pixel_type()).ok()?;
    let options =
        fr::ResizeOptions::new().resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Box));
    fr::Resizer::new().resize(&src, &mut dst, &options).ok()?;
    Some(Raster {
        width,
        height,
        channels: photo.channels,
        data,
    })
}

/// A separable binomial blur (1 4 6 4 1) of a Lab image, edges clamped.
fn blur(lab: &[[f32; 3]], w: usize, h: usize) -> Vec<[f32; 3]> {
    const KERNEL: [f32; 5] = [1.0 / 16.0, 4.0 / 16.0, 6.0 / 16.0, 4.0 / 16.0, 1.0 / 16.0];
    let pass = |src: &[[f32; 3]], horizontal: bool| -> Vec<[f32; 3]> {
        let mut out = vec![[0.0f32; 3]; src.len()];
        for y in 0..h {
            for x in 0..w {
                let mut acc = [0.0f32; 3];
                for (k, weight) in KERNEL.iter().enumerate() {
                    let offset = k as isize - 2;
                    let (sx, sy) = if horizontal {
                        ((x as isize + offset).clamp(0, w as isize - 1) as usize, y)
                    } else {
                        (x, (y as isize + offset).clamp(0, h as isize - 1) as usize)
                    };
                    let p = src[sy * w + sx];
                    for c in 0..3 {
                        acc[c] += weight * p[c];
                    }
                }
                out[y * w + x] = acc;
            }
        }
        out
    };
    pass(&pass(lab, true), false)
}

/// sRGB (D65) to CIE L*a*b*.
fn to_lab(rgb: [u8; 3]) -> [f32; 3] {
    let linear = |c: u8| {
        let c = f32::from(c) / 255.0;
        if c <= 0.040_45 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let (r, g, b) = (linear(rgb[0]), linear(rgb[1]), linear(rgb[2]));
    let x = (0.412_456_4 * r + 0.357_576_1 * g + 0.180_437_5 * b) / 0.950_47;
    let y = 0.212_672_9 * r + 0.715_152_2 * g + 0.072_175 * b;
    let z = (0.019_333_9 * r + 0.119_192 * g + 0.950_304_1 * b) / 1.088_83;
    let f = |t: f32| {
        if t > 0.008_856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sky-to-lawn gradient with a red door at (`x`, `y`) (fractions).
    fn scene(width: u32, height: u32, at: (f64, f64)) -> Raster {
        let mut data = Vec::with_capacity((width * height * 3) as usize);
        let half = f64::from(width.min(height)) * 0.06;
        let (cx, cy) = (at.0 * f64::from(width), at.1 * f64::from(height));
        for y in 0..height {
            for x in 0..width {
                let inside = (f64::from(x) - cx).abs() < half && (f64::from(y) - cy).abs() < half;
                let t = f64::from(y) / f64::from(height);
                let pixel = if inside {
                    [200, 30, 30]
                } else {
                    [
                        (150.0 - 60.0 * t) as u8,
                        (180.0 - 20.0 * t) as u8,
                        (220.0 - 130.0 * t) as u8,
                    ]
                };
                data.extend_from_slice(&pixel);
            }
        }
        Raster {
            width,
            height,
            channels: 3,
            data,
        }
    }

    #[test]
    fn the_subject_off_centre_is_found() {
        for at in [(0.8, 0.3), (0.15, 0.7), (0.5, 0.5)] {
            let (x, y) = focal_point(&scene(900, 600, at));
            assert!(
                (x - at.0).abs() < 0.06 && (y - at.1).abs() < 0.06,
                "{at:?} → ({x}, {y})"
            );
        }
    }

    #[test]
    fn a_plain_photo_centres() {
        let plain = Raster {
            width: 300,
            height: 200,
            channels: 3,
            data: vec![128; 300 * 200 * 3],
        };
        assert_eq!(focal_point(&plain), (0.5, 0.5));
    }
}
