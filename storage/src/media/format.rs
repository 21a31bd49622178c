//! The formats an upload may carry, told by their magic bytes, never by the
//! client's file name or content type. ISO base media files (MP4, but also
//! HEIC, AVIF, QuickTime and audio-only M4A) share the `ftyp` box, so an MP4
//! is recognised by its brands: only those of MP4 video are accepted, and a
//! file the workers could not make a poster frame of is refused at upload.

/// The formats an upload may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    /// JPEG image.
    Jpeg,
    /// PNG image.
    Png,
    /// WebP image.
    Webp,
    /// GIF image.
    Gif,
    /// MP4 video.
    Mp4,
    /// PDF document.
    Pdf,
}

/// `ftyp` brands of MP4 video (ISO base media, MPEG-4 parts 12 and 14, the
/// DASH, Apple and Adobe profiles of it).
const MP4_BRANDS: [&[u8; 4]; 19] = [
    b"isom", b"iso2", b"iso3", b"iso4", b"iso5", b"iso6", b"iso7", b"iso8", b"iso9", b"mp41",
    b"mp42", b"avc1", b"dash", b"M4V ", b"M4VH", b"M4VP", b"mmp4", b"MSNV", b"f4v ",
];

/// `ftyp` brands of ISO base media that is not MP4 video: HEIF/HEIC and AVIF
/// images and sequences, QuickTime, audio and audio books, JPEG 2000, camera
/// raw. A file naming one of them as its major brand is refused even when it
/// lists an MP4 brand as compatible (an M4A names `isom` and `mp42`).
const OTHER_BRANDS: [&[u8; 4]; 17] = [
    b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1", b"miaf", b"avif",
    b"avis", b"qt  ", b"M4A ", b"M4B ", b"M4P ", b"jp2 ", b"crx ",
];

impl MediaType {
    /// Bytes of a file's start that [`MediaType::detect`] needs: enough for
    /// an `ftyp` box with a dozen compatible brands.
    pub const SNIFF_LEN: usize = 64;

    /// The format of a file whose first bytes are `head`, by magic numbers.
    pub fn detect(head: &[u8]) -> Option<Self> {
        if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if head.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if head.len() >= 12 && &head[0..4] == b"RIFF" && &head[8..12] == b"WEBP" {
            Some(Self::Webp)
        } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
            Some(Self::Gif)
        } else if head.len() >= 12 && &head[4..8] == b"ftyp" {
            is_mp4_video(head).then_some(Self::Mp4)
        } else if head.starts_with(b"%PDF-") {
            Some(Self::Pdf)
        } else {
            None
        }
    }

    /// Whether it is a photo (a focal point and delivery outputs are a
    /// photo's; a video's poster and a PDF's page get the six variants).
    pub const fn is_image(self) -> bool {
        matches!(self, Self::Jpeg | Self::Png | Self::Webp | Self::Gif)
    }

    /// The column and wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::Webp => "webp",
            Self::Gif => "gif",
            Self::Mp4 => "mp4",
            Self::Pdf => "pdf",
        }
    }

    /// Parses a column value.
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Jpeg,
            Self::Png,
            Self::Webp,
            Self::Gif,
            Self::Mp4,
            Self::Pdf,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }

    /// The IANA media type.
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
            Self::Webp => "image/webp",
            Self::Gif => "image/gif",
            Self::Mp4 => "video/mp4",
            Self::Pdf => "application/pdf",
        }
    }

    /// The file extension of the stored original.
    pub const fn extension(self) -> &'static str {
        match self {
            Self::Jpeg => "jpg",
            Self::Png => "png",
            Self::Webp => "webp",
            Self::Gif => "gif",
            Self::Mp4 => "mp4",
            Self::Pdf => "pdf",
        }
    }
}

/// Whether a file starting with an `ftyp` box is MP4 video: its major brand
/// is an MP4 one, or it is unknown and the compatible brands (as far as
/// `head` holds them) name an MP4 one and nothing else known.
fn is_mp4_video(head: &[u8]) -> bool {
    let major = &head[8..12];
    let known = |brands: &[&[u8; 4]], brand: &[u8]| brands.iter().any(|b| b.as_slice() == brand);
    if known(&MP4_BRANDS, major) {
        return true;
    }
    if known(&OTHER_BRANDS, major) {
        return false;
    }
    // The box's size bounds its brand list (after the minor version).
    let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if size < 16 {
        return false;
    }
    let compatible: Vec<&[u8]> = head
        .get(16..size.min(head.len()))
        .unwrap_or_default()
        .chunks_exact(4)
        .collect();
    compatible.iter().any(|brand| known(&MP4_BRANDS, brand))
        && !compatible.iter().any(|brand| known(&OTHER_BRANDS, brand))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `ftyp` box with `major` and `compatible` brands.
    fn ftyp(major: &[u8; 4], compatible: &[&[u8; 4]]) -> Vec<u8> {
        let size = u32::try_from(16 + 4 * compatible.len()).unwrap_or(u32::MAX);
        let mut head = size.to_be_bytes().to_vec();
        head.extend_from_slice(b"ftyp");
        head.extend_from_slice(major);
        head.extend_from_slice(&[0, 0, 2, 0]);
        for brand in compatible {
            head.extend_from_slice(*brand);
        }
        head.extend_from_slice(b"\0\0\0\x08free");
        head
    }

    #[test]
    fn formats_are_told_by_their_magic_bytes() {
        let cases: [(&[u8], Option<MediaType>); 8] = [
            (b"\xFF\xD8\xFF\xE0\0\x10JFIF\0", Some(MediaType::Jpeg)),
            (b"\x89PNG\r\n\x1a\n\0\0\0\x0d", Some(MediaType::Png)),
            (b"RIFF\x10\0\0\0WEBPVP8 ", Some(MediaType::Webp)),
            (b"GIF89a\x01\0\x01\0\0\0", Some(MediaType::Gif)),
            (b"\0\0\0\x18ftypmp42\0\0", Some(MediaType::Mp4)),
            (b"%PDF-1.7\n%\xe2\xe3\xcf", Some(MediaType::Pdf)),
            (b"<html><body>", None),
            (b"RIFF\x10\0\0\0WAVEfmt ", None),
        ];
        for (head, expected) in cases {
            assert_eq!(MediaType::detect(head), expected, "{head:?}");
        }
        assert_eq!(MediaType::detect(b""), None);
    }

    #[test]
    fn only_mp4_video_brands_are_mp4() {
        let mp4 = [
            // What ffmpeg writes by default.
            ftyp(b"isom", &[b"isom", b"iso2", b"avc1", b"mp41"]),
            ftyp(b"mp42", &[b"mp42", b"isom"]),
            ftyp(b"M4V ", &[b"M4V ", b"M4A ", b"mp42", b"isom"]),
            ftyp(b"dash", &[b"iso6", b"mp41"]),
            // An unknown major brand vouched for by a compatible one.
            ftyp(b"XAVC", &[b"XAVC", b"mp42", b"iso2"]),
        ];
        for head in &mp4 {
            assert_eq!(MediaType::detect(head), Some(MediaType::Mp4), "{head:?}");
        }
        let other = [
            ftyp(b"heic", &[b"mif1", b"heic"]),
            ftyp(b"heix", &[b"mif1", b"heix"]),
            ftyp(b"mif1", &[b"mif1", b"heic"]),
            ftyp(b"avif", &[b"avif", b"mif1", b"miaf"]),
            ftyp(b"qt  ", &[b"qt  "]),
            ftyp(b"M4A ", &[b"M4A ", b"mp42", b"isom"]),
            // Unknown major brands: nothing MP4, or an image brand too.
            ftyp(b"abcd", &[b"abcd"]),
            ftyp(b"abcd", &[b"isom", b"mif1"]),
            // A box too small to hold brands.
            b"\0\0\0\x08ftypabcd".to_vec(),
        ];
        for head in &other {
            assert_eq!(MediaType::detect(head), None, "{head:?}");
        }
    }
}
