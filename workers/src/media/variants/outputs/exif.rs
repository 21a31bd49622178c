//! The one piece of metadata an output may carry: the original's copyright
//! notice and author (EXIF `Copyright`, 0x8298, and `Artist`, 0x013B),
//! written as a TIFF block of those two tags alone. Nothing else of the
//! original's EXIF (location, camera serials, dates) is ever copied.

/// `Artist`.
const ARTIST: u16 = 0x013B;
/// `Copyright`.
const COPYRIGHT: u16 = 0x8298;
/// TIFF's ASCII type.
const ASCII: u16 = 2;

/// The copyright notice and author of an original's EXIF (a TIFF block,
/// with or without the `Exif\0\0` prefix), as a new TIFF block holding only
/// them; `None` when the original names neither.
pub(in crate::media::variants) fn copyright_block(exif: &[u8]) -> Option<Vec<u8>> {
    let tiff = exif.strip_prefix(b"Exif\0\0").unwrap_or(exif);
    let tags = read_ascii_tags(tiff, &[ARTIST, COPYRIGHT]);
    (!tags.is_empty()).then(|| write_ascii_tags(&tags))
}

/// The ASCII values of `wanted` in IFD0 of `tiff`, in tag order; a tag that
/// is missing, of another type or out of bounds is left out.
pub(in crate::media::variants) fn read_ascii_tags(
    tiff: &[u8],
    wanted: &[u16],
) -> Vec<(u16, Vec<u8>)> {
    let little = match tiff.get(..4) {
        Some(b"II*\0") => true,
        Some(b"MM\0*") => false,
        _ => return Vec::new(),
    };
    let u16_at = |at: usize| -> Option<u16> {
        let b: [u8; 2] = tiff.get(at..at + 2)?.try_into().ok()?;
        Some(if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        })
    };
    let u32_at = |at: usize| -> Option<u32> {
        let b: [u8; 4] = tiff.get(at..at + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let Some(ifd) = u32_at(4).map(|o| o as usize) else {
        return Vec::new();
    };
    let count = u16_at(ifd).unwrap_or(0) as usize;
    let mut found = Vec::new();
    for entry in (0..count).map(|i| ifd + 2 + i * 12) {
        let (Some(tag), Some(kind), Some(len)) =
            (u16_at(entry), u16_at(entry + 2), u32_at(entry + 4))
        else {
            break;
        };
        if !wanted.contains(&tag) || kind != ASCII {
            continue;
        }
        let len = len as usize;
        let start = if len <= 4 {
            entry + 8
        } else {
            match u32_at(entry + 8) {
                Some(offset) => offset as usize,
                None => continue,
            }
        };
        if let Some(value) = tiff.get(start..start.saturating_add(len)) {
            let text: Vec<u8> = value.iter().copied().take_while(|b| *b != 0).collect();
            if !text.is_empty() {
                found.push((tag, text));
            }
        }
    }
    found.sort_by_key(|(tag, _)| *tag);
    found
}

/// A little-endian TIFF block whose IFD0 holds `tags` (sorted, ASCII).
fn write_ascii_tags(tags: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut out = b"II*\0".to_vec();
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend_from_slice(&(tags.len() as u16).to_le_bytes());
    let mut data_at = 8 + 2 + tags.len() * 12 + 4;
    let mut data = Vec::new();
    for (tag, text) in tags {
        let mut value = text.clone();
        value.push(0);
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&ASCII.to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        if value.len() <= 4 {
            value.resize(4, 0);
            out.extend_from_slice(&value);
        } else {
            out.extend_from_slice(&(data_at as u32).to_le_bytes());
            data_at += value.len() + value.len() % 2;
            if value.len() % 2 == 1 {
                value.push(0);
            }
            data.extend_from_slice(&value);
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&data);
    out
}

/// Adds `tiff` as the EXIF chunk of a WebP file (RIFF), turning a simple
/// file into an extended one (`VP8X`) when it is not one already.
pub(in crate::media::variants) fn webp_with_exif(
    webp: Vec<u8>,
    tiff: &[u8],
    width: u32,
    height: u32,
) -> Vec<u8> {
    if webp.len() < 20 || &webp[..4] != b"RIFF" || &webp[8..12] != b"WEBP" {
        return webp;
    }
    let mut out = webp[..12].to_vec();
    let body = &webp[12..];
    if &body[..4] == b"VP8X" {
        let mut extended = body.to_vec();
        extended[8] |= 0x08;
        out.extend_from_slice(&extended);
    } else {
        out.extend_from_slice(b"VP8X");
        out.extend_from_slice(&10u32.to_le_bytes());
        out.extend_from_slice(&[0x08, 0, 0, 0]);
        out.extend_from_slice(&(width - 1).to_le_bytes()[..3]);
        out.extend_from_slice(&(height - 1).to_le_bytes()[..3]);
        out.extend_from_slice(body);
    }
    out.extend_from_slice(b"EXIF");
    out.extend_from_slice(&(tiff.len() as u32).to_le_bytes());
    out.extend_from_slice(tiff);
    if tiff.len() % 2 == 1 {
        out.push(0);
    }
    let riff_size = (out.len() - 8) as u32;
    out[4..8].copy_from_slice(&riff_size.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A big-endian TIFF with Artist, Copyright, a GPS pointer and a Make.
    fn original() -> Vec<u8> {
        let mut tiff = b"MM\0*".to_vec();
        tiff.extend_from_slice(&8u32.to_be_bytes());
        let entries: [(u16, u16, u32, u32); 4] = [
            (0x010F, ASCII, 4, u32::from_be_bytes(*b"Cam\0")),
            (ARTIST, ASCII, 9, 62),
            (COPYRIGHT, ASCII, 14, 72),
            (0x8825, 4, 1, 200),
        ];
        tiff.extend_from_slice(&(entries.len() as u16).to_be_bytes());
        for (tag, kind, count, value) in entries {
            tiff.extend_from_slice(&tag.to_be_bytes());
            tiff.extend_from_slice(&kind.to_be_bytes());
            tiff.extend_from_slice(&count.to_be_bytes());
            tiff.extend_from_slice(&value.to_be_bytes());
        }
        tiff.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(tiff.len(), 62);
        tiff.extend_from_slice(b"Jane Doe\0\0");
        tiff.extend_from_slice(b"(c) 2026 Acme\0");
        tiff
    }

    #[test]
    fn only_the_copyright_and_the_author_are_kept() {
        let block = copyright_block(&original()).unwrap();
        let kept = read_ascii_tags(&block, &[0x010F, ARTIST, COPYRIGHT, 0x8825]);
        assert_eq!(
            kept,
            vec![
                (ARTIST, b"Jane Doe".to_vec()),
                (COPYRIGHT, b"(c) 2026 Acme".to_vec())
            ]
        );
        let mut prefixed = b"Exif\0\0".to_vec();
        prefixed.extend(original());
        assert_eq!(copyright_block(&prefixed), Some(block));
        assert_eq!(copyright_block(b"II*\0\x08\0\0\0\0\0\0\0\0\0"), None);
        assert_eq!(copyright_block(b"garbage"), None);
    }

    #[test]
    fn a_webp_gets_its_exif_chunk_and_the_extended_header() {
        let simple = {
            let mut file = b"RIFF\0\0\0\0WEBPVP8 ".to_vec();
            file.extend_from_slice(&4u32.to_le_bytes());
            file.extend_from_slice(&[1, 2, 3, 4]);
            let size = (file.len() - 8) as u32;
            file[4..8].copy_from_slice(&size.to_le_bytes());
            file
        };
        let tiff = copyright_block(&original()).unwrap();
        let out = webp_with_exif(simple, &tiff, 640, 480);
        assert_eq!(&out[12..16], b"VP8X");
        assert_eq!(out[20] & 0x08, 0x08, "the EXIF flag");
        assert_eq!(
            u32::from_le_bytes(out[4..8].try_into().unwrap()) as usize,
            out.len() - 8
        );
        let at = out.windows(4).position(|w| w == b"EXIF").unwrap();
        assert_eq!(&out[at + 8..at + 8 + tiff.len()], &tiff[..]);
    }
}
