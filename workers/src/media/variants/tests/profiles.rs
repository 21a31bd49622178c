//! The delivery templates rendered on every kind of source the service
//! takes: a 24 MP JPEG carrying GPS, XMP and a copyright notice, a PNG with
//! alpha, a portrait photo stored sideways (EXIF orientation 6), a CMYK JPEG
//! and Display P3 pixels. Each output is checked for its box or aspect, its
//! byte cap, its metadata policy (no GPS anywhere; the copyright kept only
//! where asked) and, by its pixels, the watermark: present in the branded
//! set, absent from the unbranded one. A `cover` crop holds the subject.

use image::{DynamicImage, GenericImageView, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use storage::ids::MediaId;
use storage::rules::delivery_profiles::{
    Fit, MetadataPolicy, ProfileFormat, ProfileOutput, template_watermark, templates,
};

use super::fixtures::{encode, jpeg, photo, with_exif_and_xmp, with_icc};
use super::inspect::webp_chunks;
use crate::media::variants::outputs::exif::read_ascii_tags;
use crate::media::variants::{
    OutputRequest, VariantLimits, VariantName, WatermarkImage, render_media,
};

const COPYRIGHT: &[u8] = b"(c) 2026 Northside Media";

/// A TIFF block: Orientation, Copyright and a GPS IFD (latitude ref).
fn exif_with_gps(orientation: u16) -> Vec<u8> {
    let mut t = b"II*\0\x08\0\0\0".to_vec();
    let entry = |t: &mut Vec<u8>, tag: u16, typ: u16, count: u32, value: [u8; 4]| {
        t.extend_from_slice(&tag.to_le_bytes());
        t.extend_from_slice(&typ.to_le_bytes());
        t.extend_from_slice(&count.to_le_bytes());
        t.extend_from_slice(&value);
    };
    let ifd_end = 8 + 2 + 3 * 12 + 4;
    let gps_ifd = ifd_end + COPYRIGHT.len() + 1 + (COPYRIGHT.len() + 1) % 2;
    t.extend_from_slice(&3u16.to_le_bytes());
    let o = orientation.to_le_bytes();
    entry(&mut t, 0x0112, 3, 1, [o[0], o[1], 0, 0]);
    entry(
        &mut t,
        0x8298,
        2,
        COPYRIGHT.len() as u32 + 1,
        (ifd_end as u32).to_le_bytes(),
    );
    entry(&mut t, 0x8825, 4, 1, (gps_ifd as u32).to_le_bytes());
    t.extend_from_slice(&0u32.to_le_bytes());
    t.extend_from_slice(COPYRIGHT);
    t.push(0);
    if t.len() % 2 == 1 {
        t.push(0);
    }
    assert_eq!(t.len(), gps_ifd);
    t.extend_from_slice(&1u16.to_le_bytes());
    entry(&mut t, 0x0001, 2, 2, *b"N\0\0\0");
    t.extend_from_slice(&0u32.to_le_bytes());
    t
}

/// `jpeg` with an EXIF block (orientation, copyright, GPS) and XMP.
fn with_exif(jpeg: &[u8], orientation: u16) -> Vec<u8> {
    with_exif_and_xmp(jpeg, &exif_with_gps(orientation))
}

/// A CMYK JPEG of `img` (Adobe's inverted CMYK, as Photoshop writes it).
fn cmyk_jpeg(img: &RgbImage) -> Vec<u8> {
    let cmyk: Vec<u8> = img
        .pixels()
        .flat_map(|p| {
            let max = u32::from(p.0.iter().copied().max().unwrap_or(0));
            let ink = |c: u8| {
                ((max - u32::from(c)) * 255)
                    .checked_div(max)
                    .map_or(0, |v| v as u8)
            };
            // Stored inverted, as Adobe's CMYK JPEGs are.
            [255 - ink(p[0]), 255 - ink(p[1]), 255 - ink(p[2]), max as u8]
        })
        .collect();
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 90)
        .encode(
            &cmyk,
            img.width() as u16,
            img.height() as u16,
            jpeg_encoder::ColorType::Cmyk,
        )
        .expect("cmyk fixture");
    out
}

/// Every kind of source, with its upright size.
fn sources() -> Vec<(&'static str, Vec<u8>, (u32, u32))> {
    let p3 = moxcms::ColorProfile::new_display_p3()
        .encode()
        .expect("icc");
    let alpha = RgbaImage::from_fn(1600, 1200, |x, y| {
        if x < 160 && y < 160 {
            Rgba([255, 0, 0, 255])
        } else if x > 1200 {
            Rgba([0, 0, 0, 0])
        } else {
            Rgba([0, 120, (y / 8) as u8, 255])
        }
    });
    vec![
        (
            "24 MP JPEG",
            with_exif(&jpeg(&photo(6000, 4000, 600)), 1),
            (6000, 4000),
        ),
        (
            "PNG with alpha",
            encode(&DynamicImage::ImageRgba8(alpha), ImageFormat::Png),
            (1600, 1200),
        ),
        (
            "portrait, orientation 6",
            with_exif(&jpeg(&photo(2400, 1800, 240)), 6),
            (1800, 2400),
        ),
        (
            "CMYK JPEG",
            cmyk_jpeg(&photo(1600, 1200, 160)),
            (1600, 1200),
        ),
        (
            "Display P3",
            with_icc(&jpeg(&photo(1600, 1200, 160)), &p3),
            (1600, 1200),
        ),
    ]
}

/// The tags of IFD0 of a TIFF block.
fn ifd0_tags(tiff: &[u8]) -> Vec<u16> {
    assert_eq!(&tiff[..4], b"II*\0", "we write little-endian EXIF");
    let at = u32::from_le_bytes(tiff[4..8].try_into().unwrap()) as usize;
    let count = u16::from_le_bytes(tiff[at..at + 2].try_into().unwrap()) as usize;
    (0..count)
        .map(|i| u16::from_le_bytes(tiff[at + 2 + i * 12..at + 4 + i * 12].try_into().unwrap()))
        .collect()
}

/// The EXIF block and whether any XMP is in a JPEG or WebP output.
fn metadata_of(bytes: &[u8], format: ProfileFormat) -> (Option<Vec<u8>>, bool) {
    match format {
        ProfileFormat::Jpeg => {
            let mut exif = None;
            let mut xmp = false;
            let mut pos = 2;
            while pos + 4 <= bytes.len() && bytes[pos] == 0xFF && bytes[pos + 1] != 0xDA {
                let len = u16::from_be_bytes([bytes[pos + 2], bytes[pos + 3]]) as usize;
                let body = &bytes[pos + 4..pos + 2 + len];
                if bytes[pos + 1] == 0xE1 {
                    if let Some(tiff) = body.strip_prefix(b"Exif\0\0") {
                        exif = Some(tiff.to_vec());
                    } else {
                        xmp = true;
                    }
                }
                pos += 2 + len;
            }
            (exif, xmp)
        }
        ProfileFormat::Webp => {
            let chunks = webp_chunks(bytes);
            let exif = chunks.contains(b"EXIF").then(|| {
                let at = bytes.windows(4).position(|w| w == b"EXIF").unwrap();
                let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
                bytes[at + 8..at + 8 + len].to_vec()
            });
            (exif, chunks.contains(b"XMP "))
        }
        ProfileFormat::Avif => (None, false),
    }
}

fn is_magenta(p: Rgba<u8>) -> bool {
    p[0] > 200 && p[1] < 80 && p[2] > 200
}

#[test]
fn each_template_on_each_kind_of_source_keeps_every_rule() {
    let logo_png = encode(
        &DynamicImage::ImageRgb8(RgbImage::from_pixel(300, 120, Rgb([255, 0, 255]))),
        ImageFormat::Png,
    );
    let logo = WatermarkImage::decode(&logo_png, &VariantLimits::default()).expect("logo");
    let mut outputs: Vec<(bool, ProfileOutput)> = Vec::new();
    for template in templates() {
        for mut output in template.draft.outputs {
            if template.needs_watermark {
                output.watermark = Some(template_watermark(MediaId::generate()));
            }
            outputs.push((template.needs_watermark, output));
        }
    }
    let requests: Vec<OutputRequest<'_>> = outputs
        .iter()
        .map(|(branded, output)| OutputRequest {
            output,
            watermark: branded.then_some(&logo),
        })
        .collect();
    let specs = VariantName::ALL.map(VariantName::spec);
    for (kind, input, (width, height)) in sources() {
        let rendered = render_media(&input, &specs, &requests, None, &VariantLimits::default())
            .unwrap_or_else(|err| panic!("{kind}: {err}"));
        assert_eq!(rendered.variants.len(), 6, "{kind}");
        for ((branded, output), made) in outputs.iter().zip(&rendered.outputs) {
            let made = made
                .as_ref()
                .unwrap_or_else(|err| panic!("{kind} {}: {err}", output.name));
            let what = format!("{kind}, {}", output.name);
            let image =
                image::load_from_memory(&made.bytes).unwrap_or_else(|err| panic!("{what}: {err}"));
            assert_eq!(
                (image.width(), image.height()),
                (made.width, made.height),
                "{what}"
            );
            assert!(
                made.width <= output.width && made.height <= output.height,
                "{what}"
            );
            match output.fit {
                Fit::Contain => {
                    let source = f64::from(width) / f64::from(height);
                    let got = f64::from(made.width) / f64::from(made.height);
                    assert!(
                        (source - got).abs() < 0.01,
                        "{what}: aspect {got}, source {source}"
                    );
                }
                Fit::Cover => {
                    let asked = f64::from(output.width) / f64::from(output.height);
                    let got = f64::from(made.width) / f64::from(made.height);
                    assert!(
                        (asked - got).abs() < 0.01,
                        "{what}: aspect {got}, asked {asked}"
                    );
                }
            }
            if let Some(cap) = output.max_bytes {
                assert!(
                    made.bytes.len() as u64 <= cap,
                    "{what}: {} bytes",
                    made.bytes.len()
                );
            }
            let (exif, xmp) = metadata_of(&made.bytes, output.format);
            assert!(!xmp, "{what}: XMP copied");
            match (output.metadata, &exif) {
                (MetadataPolicy::Strip, exif) => assert!(exif.is_none(), "{what}: EXIF kept"),
                (MetadataPolicy::Copyright, Some(tiff)) => {
                    assert_eq!(ifd0_tags(tiff), [0x8298], "{what}: only the copyright");
                    assert_eq!(read_ascii_tags(tiff, &[0x8298])[0].1, COPYRIGHT, "{what}");
                }
                (MetadataPolicy::Copyright, None) => {
                    // Only the JPEG sources carry a copyright notice.
                    assert!(
                        !kind.contains("24 MP") && !kind.contains("orientation"),
                        "{what}: copyright lost"
                    );
                }
            }
            if let Some(tiff) = &exif {
                assert!(!ifd0_tags(tiff).contains(&0x8825), "{what}: GPS kept");
            }
            let magenta = image.pixels().filter(|(_, _, p)| is_magenta(*p)).count();
            if *branded {
                let corner = image.get_pixel(
                    made.width - made.width / 20 - 4,
                    made.height - made.height / 20 - 4,
                );
                assert!(
                    magenta > 0 && is_magenta(corner),
                    "{what}: the logo at the bottom right ({corner:?})"
                );
            } else {
                assert_eq!(magenta, 0, "{what}: a watermark in the unbranded set");
            }
        }
        // The red block at the stored top left is the subject: the crops
        // around the measured focal point hold it (not for CMYK, whose
        // colours are the converter's).
        if !kind.contains("CMYK") {
            for ((_, output), made) in outputs.iter().zip(&rendered.outputs) {
                if output.fit == Fit::Cover && output.watermark.is_none() {
                    let image = image::load_from_memory(&made.as_ref().unwrap().bytes).unwrap();
                    let red = image
                        .pixels()
                        .any(|(_, _, p)| p[0] > 180 && p[1] < 70 && p[2] < 70);
                    assert!(red, "{kind}, {}: the subject is in the crop", output.name);
                }
            }
        }
    }
}
