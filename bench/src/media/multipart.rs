//! The streamed upload body: a multipart request generated chunk by chunk,
//! never held in memory.

use bytes::Bytes;

/// Generates a multipart body lazily, chunk by chunk: `files` parts whose
/// content is a JPEG magic followed by pseudo-random bytes.
pub(super) struct MultipartBody {
    boundary: String,
    files: u64,
    file_bytes: u64,
    file: u64,
    written: u64,
    header_sent: bool,
    done: bool,
    rng: u64,
}

/// Bytes per generated content chunk.
const CHUNK: u64 = 256 * 1024;

impl MultipartBody {
    /// A body of `files` parts of `file_bytes` each, between `boundary` lines.
    pub(super) fn new(boundary: String, files: u64, file_bytes: u64) -> Self {
        Self {
            boundary,
            files,
            file_bytes,
            file: 0,
            written: 0,
            header_sent: false,
            done: false,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Total length of the body.
    pub(super) fn len(&self) -> u64 {
        let header = |i: u64| self.part_header(i).len() as u64;
        (0..self.files)
            .map(|i| header(i) + self.file_bytes + 2)
            .sum::<u64>()
            + self.closing().len() as u64
    }

    fn part_header(&self, i: u64) -> String {
        format!(
            "--{}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"photo-{i:03}.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n",
            self.boundary
        )
    }

    fn closing(&self) -> String {
        format!("--{}--\r\n", self.boundary)
    }

    fn random_chunk(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            // xorshift64*
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            out.extend_from_slice(&self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

impl Iterator for MultipartBody {
    type Item = Result<Bytes, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.file == self.files {
            self.done = true;
            return Some(Ok(Bytes::from(self.closing())));
        }
        if !self.header_sent {
            self.header_sent = true;
            return Some(Ok(Bytes::from(self.part_header(self.file))));
        }
        let left = self.file_bytes - self.written;
        let mut chunk = self.random_chunk(usize::try_from(left.min(CHUNK)).ok()?);
        if self.written == 0 {
            let magic = [0xFF, 0xD8, 0xFF, 0xE0];
            let n = magic.len().min(chunk.len());
            chunk[..n].copy_from_slice(&magic[..n]);
        }
        self.written += chunk.len() as u64;
        if self.written == self.file_bytes {
            chunk.extend_from_slice(b"\r\n");
            self.file += 1;
            self.written = 0;
            self.header_sent = false;
        }
        Some(Ok(Bytes::from(chunk)))
    }
}
