//! Test inputs generated in code: gradient photos as JPEG, EXIF/XMP and ICC
//! segments spliced into a JPEG, and PNG headers that declare huge images.

use std::io::Cursor;

use image::{ImageFormat, Rgb, RgbImage};

/// Encodes `img` with the `image` crate's default encoder for `format`.
pub(super) fn encode(img: &image::DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encode fixture");
    out.into_inner()
}

/// Smooth gradient with a solid red block of `block` px in the stored top-left.
pub(super) fn photo(width: u32, height: u32, block: u32) -> RgbImage {
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
pub(super) fn jpeg(img: &RgbImage) -> Vec<u8> {
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
pub(super) fn with_metadata(jpeg: &[u8], orientation: u16) -> Vec<u8> {
    with_exif_and_xmp(jpeg, &exif_tiff(orientation))
}

/// Inserts `tiff` as an APP1 Exif segment, and an APP1 XMP segment naming a
/// location, right after SOI.
pub(super) fn with_exif_and_xmp(jpeg: &[u8], tiff: &[u8]) -> Vec<u8> {
    let mut exif = b"Exif\0\0".to_vec();
    exif.extend_from_slice(tiff);
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
pub(super) fn png_declaring(width: u32, height: u32) -> Vec<u8> {
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

/// Inserts an APP2 ICC_PROFILE segment right after SOI.
pub(super) fn with_icc(jpeg: &[u8], icc: &[u8]) -> Vec<u8> {
    let mut payload = b"ICC_PROFILE\0\x01\x01".to_vec();
    payload.extend_from_slice(icc);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE2]);
    out.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(&payload);
    out.extend_from_slice(&jpeg[2..]);
    out
}
