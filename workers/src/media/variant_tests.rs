//! End-to-end tests of the image-variant engine ([`super::variants`]),
//! ported from the scratch crate's integration tests so CI runs them.
//!
//! Every output is decoded and checked for format and dimensions; JPEG
//! quality is read back from the DQT tables (q95 for `mls`/`print`, q75 for
//! `thumbnail`) and the three WebP outputs must be lossy (`VP8 `, not `VP8L`).
//! Also covered: EXIF orientation 6 comes out upright, no EXIF/XMP/GPS survives,
//! decompression bombs and truncated files give typed errors, nothing is
//! upscaled, PNG alpha and GIF input are handled, and Display P3 is converted
//! to sRGB.
//!
//! All fixtures are generated in code. Images are kept small (a few
//! megapixels at most) because the engine runs unoptimised in `cargo test`.

use std::io::Cursor;

use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

use super::variants::*;

// ----------------------------------------------------------------- fixtures

/// Encodes `img` with the `image` crate's default encoder for `format`.
fn encode(img: &image::DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encode fixture");
    out.into_inner()
}

/// Smooth gradient with a solid red block of `block` px in the stored top-left.
fn photo(width: u32, height: u32, block: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        if x < block && y < block {
            Rgb([255, 0, 0])
        } else {
            Rgb([
                0,
                (x * 120 / width) as u8 + 40,
                200 - (y * 100 / height) as u8,
            ])
        }
    })
}

/// Encodes `img` as a quality-90 JPEG (the usual camera/upload input).
fn jpeg(img: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode_image(img)
        .expect("jpeg fixture");
    out
}

/// A little-endian TIFF/EXIF block: Make, Orientation and a GPS IFD.
fn exif_tiff(orientation: u16) -> Vec<u8> {
    let mut t = b"II*\0\x08\0\0\0".to_vec();
    let entry = |t: &mut Vec<u8>, tag: u16, typ: u16, count: u32, value: [u8; 4]| {
        t.extend_from_slice(&tag.to_le_bytes());
        t.extend_from_slice(&typ.to_le_bytes());
        t.extend_from_slice(&count.to_le_bytes());
        t.extend_from_slice(&value);
    };
    t.extend_from_slice(&3u16.to_le_bytes()); // IFD0 at 8: 3 entries
    entry(&mut t, 0x010F, 2, 4, *b"Cam\0"); // Make
    let o = orientation.to_le_bytes();
    entry(&mut t, 0x0112, 3, 1, [o[0], o[1], 0, 0]); // Orientation
    let gps_ifd = 8 + 2 + 3 * 12 + 4;
    entry(&mut t, 0x8825, 4, 1, (gps_ifd as u32).to_le_bytes()); // GPS IFD pointer
    t.extend_from_slice(&0u32.to_le_bytes()); // no IFD1
    t.extend_from_slice(&2u16.to_le_bytes()); // GPS IFD: 2 entries
    entry(&mut t, 0x0000, 1, 4, [2, 2, 0, 0]); // GPSVersionID
    entry(&mut t, 0x0001, 2, 2, *b"N\0\0\0"); // GPSLatitudeRef
    t.extend_from_slice(&0u32.to_le_bytes());
    t
}

/// Inserts an APP1 Exif segment and an APP1 XMP segment right after SOI.
fn with_metadata(jpeg: &[u8], orientation: u16) -> Vec<u8> {
    let mut exif = b"Exif\0\0".to_vec();
    exif.extend(exif_tiff(orientation));
    let xmp = b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><exif:GPSLatitude>51,30N</exif:GPSLatitude></x:xmpmeta>";
    let mut out = jpeg[..2].to_vec();
    for payload in [&exif[..], &xmp[..]] {
        out.extend_from_slice(&[0xFF, 0xE1]);
        out.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
        out.extend_from_slice(payload);
    }
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// CRC-32 (IEEE) as used by PNG chunks.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A tiny PNG whose header declares `width x height` RGB pixels.
fn png_declaring(width: u32, height: u32) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let chunk = |png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]| {
        png.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        png.extend_from_slice(&body);
        png.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    // zlib stream of a few zero bytes (a real bomb would be much longer).
    chunk(
        &mut png,
        b"IDAT",
        &[0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01],
    );
    chunk(&mut png, b"IEND", &[]);
    png
}

// ------------------------------------------------------------ inspection

/// The variant called `name`; panics if it is missing.
fn by_name(variants: &[Variant], name: VariantName) -> &Variant {
    variants
        .iter()
        .find(|v| v.name == name)
        .expect("variant present")
}

/// (marker, payload) of every JPEG segment before the first scan.
fn jpeg_segments(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    assert_eq!(&bytes[..2], &[0xFF, 0xD8], "SOI");
    let mut out = Vec::new();
    let mut pos = 2;
    while pos + 4 <= bytes.len() {
        assert_eq!(bytes[pos], 0xFF, "marker at {pos}");
        let marker = bytes[pos + 1];
        let len = usize::from(u16::from_be_bytes([bytes[pos + 2], bytes[pos + 3]]));
        out.push((marker, bytes[pos + 4..pos + 2 + len].to_vec()));
        if marker == 0xDA {
            break;
        }
        pos += 2 + len;
    }
    out
}

/// Zigzag scan order: the `n`th DQT entry is natural-order coefficient `ZIGZAG[n]`.
const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];
/// ITU T.81 Annex K luminance quantisation table, natural order.
const STD_LUMA: [u32; 64] = [
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113,
    92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
];
/// ITU T.81 Annex K chrominance quantisation table, natural order.
const STD_CHROMA: [u32; 64] = [
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99, 99,
    47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
];

/// Annex K table scaled like libjpeg's `jpeg_set_quality`, in zigzag order.
fn scaled_table(base: &[u32; 64], quality: u32) -> Vec<u8> {
    let scale = if quality < 50 {
        5000 / quality
    } else {
        200 - 2 * quality
    };
    ZIGZAG
        .iter()
        .map(|&i| ((base[i] * scale + 50) / 100).clamp(1, 255) as u8)
        .collect()
}

/// Checks a JPEG variant: no APP1-APP15/COM segments, DQT tables equal to
/// libjpeg's tables at `quality`, baseline SOF0 with 4:4:4 (q >= 90) or 4:2:0
/// sampling, and it decodes at the advertised size.
fn assert_jpeg(v: &Variant, quality: u32) {
    let segments = jpeg_segments(&v.bytes);
    let markers: Vec<u8> = segments.iter().map(|s| s.0).collect();
    assert!(
        markers
            .iter()
            .all(|&m| m == 0xE0 || !(0xE1..=0xEF).contains(&m)),
        "{}: APPn {markers:x?}",
        v.name
    );
    assert!(!markers.contains(&0xFE), "{}: no COM segment", v.name);
    let tables: Vec<&Vec<u8>> = segments
        .iter()
        .filter(|s| s.0 == 0xDB)
        .map(|s| &s.1)
        .collect();
    let mut found = Vec::new();
    for t in tables {
        for table in t.chunks(65) {
            found.push((table[0], table[1..].to_vec()));
        }
    }
    assert_eq!(found.len(), 2, "{}: two 8-bit quantisation tables", v.name);
    assert_eq!(
        found[0],
        (0, scaled_table(&STD_LUMA, quality)),
        "{}: luma table q{quality}",
        v.name
    );
    assert_eq!(
        found[1],
        (1, scaled_table(&STD_CHROMA, quality)),
        "{}: chroma table q{quality}",
        v.name
    );
    let sof = &segments
        .iter()
        .find(|s| s.0 == 0xC0)
        .expect("baseline SOF0")
        .1;
    let sampling = sof[7];
    assert_eq!(
        sampling,
        if quality >= 90 { 0x11 } else { 0x22 },
        "{}: luma sampling",
        v.name
    );
    let decoded =
        image::load_from_memory_with_format(&v.bytes, ImageFormat::Jpeg).expect("decodes");
    assert_eq!(
        (decoded.width(), decoded.height()),
        (v.width, v.height),
        "{}",
        v.name
    );
}

/// RIFF chunk ids of a WebP file.
fn webp_chunks(bytes: &[u8]) -> Vec<[u8; 4]> {
    assert_eq!(&bytes[..4], b"RIFF");
    assert_eq!(&bytes[8..12], b"WEBP");
    let mut out = Vec::new();
    let mut pos = 12;
    while pos + 8 <= bytes.len() {
        let id = [bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]];
        let len = u32::from_le_bytes([
            bytes[pos + 4],
            bytes[pos + 5],
            bytes[pos + 6],
            bytes[pos + 7],
        ]);
        out.push(id);
        pos += 8 + len as usize + (len as usize & 1);
    }
    out
}

/// Checks a WebP variant: lossy `VP8 ` bitstream, no `VP8L`/EXIF/XMP/ICC
/// chunks, and it decodes at the advertised size.
fn assert_webp(v: &Variant) {
    let chunks = webp_chunks(&v.bytes);
    assert!(
        chunks.contains(b"VP8 "),
        "{}: lossy VP8 chunk in {chunks:?}",
        v.name
    );
    for bad in [b"VP8L", b"EXIF", b"XMP ", b"ICCP"] {
        assert!(
            !chunks.contains(bad),
            "{}: unexpected chunk in {chunks:?}",
            v.name
        );
    }
    let decoded =
        image::load_from_memory_with_format(&v.bytes, ImageFormat::WebP).expect("decodes");
    assert_eq!(
        (decoded.width(), decoded.height()),
        (v.width, v.height),
        "{}",
        v.name
    );
}

/// Checks all six variants: order, format and quality per spec, and that no
/// EXIF, XMP, GPS or camera-make bytes leaked into any output.
fn assert_formats(variants: &[Variant]) {
    let names: Vec<VariantName> = variants.iter().map(|v| v.name).collect();
    assert_eq!(names, VariantName::ALL);
    for v in variants {
        match v.format {
            OutputFormat::Jpeg => assert_jpeg(v, u32::from(v.name.spec().quality)),
            OutputFormat::WebP => assert_webp(v),
        }
        assert_eq!(v.format, v.name.spec().format);
        for needle in [&b"Exif\0"[..], b"ns.adobe.com/xap", b"GPS", b"Cam\0"] {
            assert!(
                !v.bytes.windows(needle.len()).any(|w| w == needle),
                "{}: metadata leaked",
                v.name
            );
        }
    }
}

/// Decodes `v` and returns the RGB pixel at `(x, y)`.
fn rgb_at(v: &Variant, x: u32, y: u32) -> [u8; 3] {
    image::load_from_memory(&v.bytes)
        .expect("decodes")
        .to_rgb8()
        .get_pixel(x, y)
        .0
}

/// Whether `p` is (lossy-compressed) pure red.
fn is_red(p: [u8; 3]) -> bool {
    p[0] > 200 && p[1] < 60 && p[2] < 60
}

/// `(name, width, height)` of every variant, in order.
fn dims(variants: &[Variant]) -> Vec<(VariantName, u32, u32)> {
    variants
        .iter()
        .map(|v| (v.name, v.width, v.height))
        .collect()
}

// ----------------------------------------------------------------- tests

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

/// Inserts an APP2 ICC_PROFILE segment right after SOI.
fn with_icc(jpeg: &[u8], icc: &[u8]) -> Vec<u8> {
    let mut payload = b"ICC_PROFILE\0\x01\x01".to_vec();
    payload.extend_from_slice(icc);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE2]);
    out.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(&payload);
    out.extend_from_slice(&jpeg[2..]);
    out
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

/// Decodes an encoded image and returns the RGB pixel at `(x, y)`.
fn rgb_at_bytes(bytes: &[u8], x: u32, y: u32) -> [u8; 3] {
    image::load_from_memory(bytes)
        .expect("decodes")
        .to_rgb8()
        .get_pixel(x, y)
        .0
}
