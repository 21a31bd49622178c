//! JPEG marker segments: where a marker sits in a JPEG's header (decoding
//! checks that an upload is complete; encoding stitches strips).

/// Walks JPEG marker segments from `start` and returns the offset of the
/// first `marker` (its 0xFF byte); stops at SOS.
pub(super) fn find_marker(data: &[u8], start: usize, marker: u8) -> Option<usize> {
    let mut pos = start;
    while pos + 4 <= data.len() {
        if data[pos] != 0xFF {
            return None;
        }
        let m = data[pos + 1];
        if m == 0xFF {
            pos += 1; // fill byte
            continue;
        }
        if m == marker {
            return Some(pos);
        }
        if m == 0xDA {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([data[pos + 2], data[pos + 3]]));
        pos += 2 + len;
    }
    None
}
