//! Input the engine refuses, each with its typed error: decompression bombs,
//! oversized decodes, truncated or corrupt files and unknown formats.

use image::ImageFormat;

use crate::media::variants::{VariantError, VariantLimits, make_variants};

use super::fixtures::{encode, jpeg, photo, png_declaring};

/// A tiny PNG declaring 50000x50000 pixels fails with `TooManyPixels`
/// without being decoded.
#[test]
fn decompression_bomb_is_rejected_before_decoding() {
    let err = make_variants(&png_declaring(50_000, 50_000), &VariantLimits::default())
        .expect_err("bomb must fail");
    assert!(
        matches!(
            err,
            VariantError::TooManyPixels {
                width: 50_000,
                height: 50_000,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "too_many_pixels");
    assert!(err.is_client_error());
    assert!(err.to_string().contains("50000x50000"), "{err}");
}

/// A decode larger than `max_alloc_bytes` fails with `LimitExceeded`.
#[test]
fn allocation_limit_is_enforced() {
    let limits = VariantLimits {
        max_alloc_bytes: 64 << 20,
        ..VariantLimits::default()
    };
    let err = make_variants(&png_declaring(9_000, 9_000), &limits).expect_err("too big to decode");
    assert!(matches!(err, VariantError::LimitExceeded { .. }), "{err:?}");
    assert_eq!(err.code(), "limit_exceeded");
}

/// Truncated JPEG/PNG files and garbage after a PNG signature fail with
/// `Corrupt` (a client error).
#[test]
fn truncated_and_corrupt_inputs_fail_with_typed_errors() {
    let good = jpeg(&photo(400, 300, 50));
    for cut in [good.len() / 2, good.len() - 2, 200, 10, 3] {
        let err = make_variants(&good[..cut], &VariantLimits::default()).expect_err("truncated");
        assert!(
            matches!(err, VariantError::Corrupt { .. }),
            "cut {cut}: {err:?}"
        );
        assert!(err.is_client_error());
    }
    let png = encode(&photo(64, 64, 8).into(), ImageFormat::Png);
    let err = make_variants(&png[..png.len() / 2], &VariantLimits::default()).expect_err("png");
    assert!(matches!(err, VariantError::Corrupt { .. }), "{err:?}");
    let mut garbage = b"\x89PNG\r\n\x1a\n".to_vec();
    garbage.extend_from_slice(&[0xAB; 100]);
    let err = make_variants(&garbage, &VariantLimits::default()).expect_err("garbage");
    assert!(matches!(err, VariantError::Corrupt { .. }), "{err:?}");
}

/// BMP, TIFF, text and empty input fail with `UnsupportedFormat`.
#[test]
fn unknown_formats_are_rejected_by_magic_bytes() {
    let bmp = b"BM\x46\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0";
    let tiff = b"II*\0\x08\0\0\0";
    for input in [&bmp[..], &tiff[..], b"not an image at all", b""] {
        let err = make_variants(input, &VariantLimits::default()).expect_err("unsupported");
        assert!(
            matches!(err, VariantError::UnsupportedFormat { .. }),
            "{err:?}"
        );
        assert_eq!(err.code(), "unsupported_format");
    }
}
