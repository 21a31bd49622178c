//! Photo-like JPEGs to upload: smooth light with fine grain, so they encode
//! and resize like photographs, each one different.

use std::io::Cursor;

/// A `width`×`height` JPEG, different for each `seed`.
pub fn photo(width: u32, height: u32, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        // xorshift grain over a diagonal sky-to-ground gradient.
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let grain = (state % 24) as i32 - 12;
        let sky = (y * 200 / height.max(1)) as i32;
        let sun = ((x + seed * 37) % width.max(1) * 120 / width.max(1)) as i32;
        let channel = |base: i32| (base + grain).clamp(0, 255) as u8;
        image::Rgb([channel(60 + sun), channel(90 + sky / 2), channel(200 - sky)])
    });
    let mut out = Cursor::new(Vec::new());
    // Writing an in-memory RGB image as JPEG cannot fail.
    let _ = image::DynamicImage::ImageRgb8(image).write_to(&mut out, image::ImageFormat::Jpeg);
    out.into_inner()
}

/// A multipart body with one file part (and the listing it belongs to).
pub fn upload_body(boundary: &str, listing_number: &str, filename: &str, jpeg: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"listing_number\"\r\n\r\n\
         {listing_number}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; \
         filename=\"{filename}\"\r\nContent-Type: image/jpeg\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(jpeg);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}
