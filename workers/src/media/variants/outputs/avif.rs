//! AVIF outputs, bounded: rav1e's memory grows with the frame it encodes
//! (sharp used 2.5 GB for one large image, lovell/sharp#2597), so an AVIF
//! output is encoded at most [`MAX_PIXELS`] pixels (a larger box keeps its
//! aspect at that area), on two threads, at speed [`SPEED`]. The bound is
//! measured in `bench avif` and by the engine's test of a 24 MP photo.

use ravif::{Encoder, Img, RGB8, RGBA8};

use super::super::raster::Raster;

/// The most pixels an AVIF output is encoded at: 4.2 MP (2560 x 1640), a
/// web hero's size.
pub(crate) const MAX_PIXELS: u64 = 2560 * 1640;

/// rav1e's speed preset: 1 is slowest, 10 fastest; 7 is within a few per
/// cent of the smallest files at a fraction of the time.
const SPEED: u8 = 7;

/// Threads one AVIF encode uses.
const THREADS: usize = 2;

/// `(width, height)` shrunk, aspect kept, to at most [`MAX_PIXELS`].
pub(crate) fn bounded(width: u32, height: u32) -> (u32, u32) {
    let pixels = u64::from(width) * u64::from(height);
    if pixels <= MAX_PIXELS {
        return (width, height);
    }
    let scale = (MAX_PIXELS as f64 / pixels as f64).sqrt();
    (
        ((f64::from(width) * scale).floor() as u32).max(1),
        ((f64::from(height) * scale).floor() as u32).max(1),
    )
}

/// An AVIF of `r` at `quality` (1 to 100), with `exif` (a TIFF block) when
/// given. `r` is at most [`MAX_PIXELS`]: the caller bounds it.
pub(crate) fn encode(r: &Raster, quality: u8, exif: Option<&[u8]>) -> Result<Vec<u8>, String> {
    if u64::from(r.width) * u64::from(r.height) > MAX_PIXELS {
        return Err(format!(
            "{}x{} is more than the {MAX_PIXELS} pixels an AVIF output is encoded at",
            r.width, r.height
        ));
    }
    let mut encoder = Encoder::new()
        .with_quality(f32::from(quality.clamp(1, 100)))
        .with_speed(SPEED)
        .with_num_threads(Some(THREADS));
    if let Some(exif) = exif {
        encoder = encoder.with_exif(exif.to_vec());
    }
    let (w, h) = (r.width as usize, r.height as usize);
    let encoded = if r.channels == 4 {
        let pixels: Vec<RGBA8> = r
            .data
            .chunks_exact(4)
            .map(|p| RGBA8::new(p[0], p[1], p[2], p[3]))
            .collect();
        encoder.encode_rgba(Img::new(&pixels[..], w, h))
    } else {
        let pixels: Vec<RGB8> = r
            .data
            .chunks_exact(3)
            .map(|p| RGB8::new(p[0], p[1], p[2]))
            .collect();
        encoder.encode_rgb(Img::new(&pixels[..], w, h))
    };
    encoded
        .map(|image| image.avif_file)
        .map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_box_is_encoded_at_the_bound_with_its_aspect() {
        assert_eq!(bounded(2048, 1365), (2048, 1365));
        let (w, h) = bounded(6000, 4000);
        assert!(u64::from(w) * u64::from(h) <= MAX_PIXELS);
        assert!((f64::from(w) / f64::from(h) - 1.5).abs() < 0.01, "{w}x{h}");
    }

    #[test]
    fn an_avif_is_written() {
        let r = Raster {
            width: 64,
            height: 48,
            channels: 3,
            data: (0..64 * 48 * 3).map(|i| (i % 251) as u8).collect(),
        };
        let avif = encode(&r, 60, None).unwrap();
        assert_eq!(&avif[4..12], b"ftypavif");
    }
}
