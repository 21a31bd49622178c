//! Source kinds other than an sRGB JPEG: PNG with alpha, animated GIF, WebP
//! and greyscale input, and Display P3 pixels converted to sRGB.

use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

use crate::media::variants::{VariantLimits, VariantName, make_variants};

use super::fixtures::{encode, jpeg, photo, with_icc};
use super::inspect::{assert_formats, by_name, is_red, rgb_at, rgb_at_bytes, webp_chunks};

/// A PNG with transparency is flattened onto white for JPEG and keeps its
/// alpha plane (`ALPH` chunk) in WebP.
#[test]
fn png_with_alpha_is_flattened_for_jpeg_and_kept_for_webp() {
    let img = RgbaImage::from_fn(600, 400, |x, _| {
        if x < 300 {
            Rgba([0, 0, 255, 255])
        } else {
            Rgba([0, 0, 0, 0])
        }
    });
    let input = encode(&img.into(), ImageFormat::Png);
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    assert_formats(&variants);
    let print = by_name(&variants, VariantName::Print);
    let [r, g, b] = rgb_at(print, 590, 200);
    assert!(
        r > 245 && g > 245 && b > 245,
        "transparent -> white, got {:?}",
        [r, g, b]
    );
    assert!(rgb_at(print, 10, 200)[2] > 230);
    let web = by_name(&variants, VariantName::Web);
    assert!(
        webp_chunks(&web.bytes).contains(b"ALPH"),
        "alpha plane kept"
    );
    let decoded = image::load_from_memory(&web.bytes)
        .expect("decodes")
        .to_rgba8();
    assert_eq!(decoded.get_pixel(590, 200)[3], 0);
    assert_eq!(decoded.get_pixel(10, 200)[3], 255);
}

/// An animated GIF is rendered from its first frame.
#[test]
fn gif_uses_the_first_frame() {
    let frame = |c: [u8; 4]| image::Frame::new(RgbaImage::from_pixel(200, 100, Rgba(c)));
    let mut gif = Vec::new();
    {
        let mut enc = image::codecs::gif::GifEncoder::new(&mut gif);
        enc.encode_frames([frame([255, 0, 0, 255]), frame([0, 255, 0, 255])])
            .expect("gif");
    }
    let variants = make_variants(&gif, &VariantLimits::default()).expect("variants");
    assert_formats(&variants);
    for v in &variants {
        assert!(is_red(rgb_at(v, v.width / 2, v.height / 2)), "{}", v.name);
    }
    assert_eq!(
        (
            by_name(&variants, VariantName::Thumbnail).width,
            by_name(&variants, VariantName::Thumbnail).height
        ),
        (100, 100)
    );
}

/// Lossy WebP input and greyscale JPEG input produce valid variants.
#[test]
fn webp_and_grayscale_inputs_are_handled() {
    let img = photo(500, 300, 40);
    let webp = webp::Encoder::from_rgb(img.as_raw(), 500, 300)
        .encode(80.0)
        .to_vec();
    let variants = make_variants(&webp, &VariantLimits::default()).expect("webp input");
    assert_formats(&variants);
    let gray = image::DynamicImage::ImageRgb8(img).into_luma8();
    let input = encode(&gray.into(), ImageFormat::Jpeg);
    let variants = make_variants(&input, &VariantLimits::default()).expect("gray input");
    assert_formats(&variants);
}

/// Display P3-tagged pixels are converted to sRGB; sRGB-tagged pixels are
/// left as decoded.
#[test]
fn display_p3_pixels_are_converted_to_srgb_and_srgb_left_alone() {
    let colour = [200u8, 100, 50];
    let flat = jpeg(&RgbImage::from_pixel(300, 200, Rgb(colour)));
    let p3 = moxcms::ColorProfile::new_display_p3();
    let srgb = moxcms::ColorProfile::new_srgb();
    let t = p3
        .create_transform_8bit(
            moxcms::Layout::Rgb,
            &srgb,
            moxcms::Layout::Rgb,
            Default::default(),
        )
        .expect("transform");
    let as_decoded = rgb_at_bytes(&flat, 150, 100);
    let mut expected = [0u8; 3];
    t.transform(&as_decoded, &mut expected)
        .expect("transform pixel");
    assert!(
        expected[0] > as_decoded[0] + 5,
        "P3 orange is more saturated in sRGB"
    );

    let input = with_icc(&flat, &p3.encode().expect("icc bytes"));
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    assert_formats(&variants);
    for v in &variants {
        let got = rgb_at(v, v.width / 2, v.height / 2);
        let diff = got.iter().zip(expected).map(|(a, b)| a.abs_diff(b)).max();
        assert!(
            diff <= Some(4),
            "{}: got {got:?}, expected {expected:?}",
            v.name
        );
    }

    let input = with_icc(&flat, &srgb.encode().expect("icc bytes"));
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    let got = rgb_at(by_name(&variants, VariantName::Print), 150, 100);
    let diff = got.iter().zip(as_decoded).map(|(a, b)| a.abs_diff(b)).max();
    assert!(
        diff <= Some(2),
        "sRGB-tagged input unchanged: {got:?} vs {as_decoded:?}"
    );
}
