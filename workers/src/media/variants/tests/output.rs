//! The six variants of good input: sizes, formats and qualities, EXIF
//! orientation, no upscaling, and identical output on one or two threads.

use crate::media::variants::{VariantLimits, VariantName, make_variants};

use super::fixtures::{jpeg, photo, with_metadata};
use super::inspect::{assert_formats, by_name, dims, is_red, rgb_at};

/// A JPEG with EXIF/GPS/XMP gives the six variants at the right sizes,
/// formats and qualities, with the image content in place. 2880x720 is wider
/// than the 2560 box (so `web` is a real downscale) but only 2 megapixels.
#[test]
fn six_variants_with_right_formats_sizes_and_quality() {
    let input = with_metadata(&jpeg(&photo(2880, 720, 200)), 1);
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    assert_formats(&variants);
    use VariantName::*;
    assert_eq!(
        dims(&variants),
        vec![
            (Thumbnail, 150, 150),
            (Web, 2560, 640),
            (Mls, 1280, 320),
            (Print, 2880, 720),
            (WebpWeb, 2560, 640),
            (WebpThumb, 400, 400),
        ]
    );
    assert!(is_red(rgb_at(by_name(&variants, Print), 5, 5)));
    assert!(is_red(rgb_at(by_name(&variants, Web), 5, 5)));
}

/// EXIF orientation 6 is applied: every output is upright (portrait, with the
/// stored top-left block at the top-right).
#[test]
fn exif_orientation_6_comes_out_upright() {
    // Stored 640x480 with red in the stored top-left; orientation 6 means
    // "rotate 90 degrees clockwise to display", so red ends up top-right.
    let input = with_metadata(&jpeg(&photo(640, 480, 160)), 6);
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    assert_formats(&variants);
    use VariantName::*;
    assert_eq!(
        dims(&variants),
        vec![
            (Thumbnail, 150, 150),
            (Web, 480, 640),
            (Mls, 480, 640),
            (Print, 480, 640),
            (WebpWeb, 480, 640),
            (WebpThumb, 400, 400),
        ]
    );
    for v in &variants {
        let top_right = rgb_at(v, v.width - 3, 2);
        let top_left = rgb_at(v, 2, 2);
        let bottom_right = rgb_at(v, v.width - 3, v.height - 3);
        assert!(is_red(top_right), "{}: top-right {top_right:?}", v.name);
        assert!(!is_red(top_left), "{}: top-left {top_left:?}", v.name);
        assert!(
            !is_red(bottom_right),
            "{}: bottom-right {bottom_right:?}",
            v.name
        );
    }
}

/// Images smaller than a variant's box keep their size; crop-to-fill on a
/// small image gives the largest centred square at native resolution.
#[test]
fn small_images_are_never_upscaled() {
    let input = jpeg(&photo(120, 80, 10));
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    assert_formats(&variants);
    use VariantName::*;
    assert_eq!(
        dims(&variants),
        vec![
            (Thumbnail, 80, 80),
            (Web, 120, 80),
            (Mls, 120, 80),
            (Print, 120, 80),
            (WebpWeb, 120, 80),
            (WebpThumb, 80, 80),
        ]
    );
    // A panorama narrower than the thumbnail box keeps its native height.
    let input = jpeg(&photo(1000, 100, 10));
    let variants = make_variants(&input, &VariantLimits::default()).expect("variants");
    assert_eq!(
        (
            by_name(&variants, Thumbnail).width,
            by_name(&variants, Thumbnail).height
        ),
        (100, 100)
    );
    assert_eq!(
        (
            by_name(&variants, Web).width,
            by_name(&variants, Web).height
        ),
        (1000, 100)
    );
}

/// One thread and two threads produce byte-identical variants.
/// Stored 480x2720 with orientation 8: upright 2720x480, so `print` is
/// encoded in several strips and the intermediate resized in two bands.
#[test]
fn parallel_and_sequential_runs_are_identical() {
    let input = with_metadata(&jpeg(&photo(480, 2720, 300)), 8);
    let one = VariantLimits {
        threads: 1,
        ..VariantLimits::default()
    };
    let two = VariantLimits {
        threads: 2,
        ..VariantLimits::default()
    };
    let a = make_variants(&input, &one).expect("sequential");
    let b = make_variants(&input, &two).expect("parallel");
    assert_eq!(a, b);
    assert_formats(&a);
}
