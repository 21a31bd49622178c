//! Reading outputs back: JPEG segments and quantisation tables, WebP chunks,
//! decoded pixels, and the format checks every variant must pass.

use image::ImageFormat;

use crate::media::variants::{OutputFormat, Variant, VariantName};

/// The variant called `name`; panics if it is missing.
pub(super) fn by_name(variants: &[Variant], name: VariantName) -> &Variant {
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
pub(super) fn webp_chunks(bytes: &[u8]) -> Vec<[u8; 4]> {
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
pub(super) fn assert_formats(variants: &[Variant]) {
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
pub(super) fn rgb_at(v: &Variant, x: u32, y: u32) -> [u8; 3] {
    image::load_from_memory(&v.bytes)
        .expect("decodes")
        .to_rgb8()
        .get_pixel(x, y)
        .0
}

/// Whether `p` is (lossy-compressed) pure red.
pub(super) fn is_red(p: [u8; 3]) -> bool {
    p[0] > 200 && p[1] < 60 && p[2] < 60
}

/// `(name, width, height)` of every variant, in order.
pub(super) fn dims(variants: &[Variant]) -> Vec<(VariantName, u32, u32)> {
    variants
        .iter()
        .map(|v| (v.name, v.width, v.height))
        .collect()
}

/// Decodes an encoded image and returns the RGB pixel at `(x, y)`.
pub(super) fn rgb_at_bytes(bytes: &[u8], x: u32, y: u32) -> [u8; 3] {
    image::load_from_memory(bytes)
        .expect("decodes")
        .to_rgb8()
        .get_pixel(x, y)
        .0
}
