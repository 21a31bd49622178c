//! The idempotency fingerprint of a multipart body: every part's name, file
//! name, size and SHA-256, in order. The upload handler computes it while it
//! streams the parts to the object store; the idempotency layer computes it
//! the same way when a retry must be compared with a completed request.

use axum::extract::{FromRequest, Multipart, Request};
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// A multipart body's fingerprint, built part by part.
#[derive(Default)]
pub struct PartsFingerprint {
    parts: Sha256,
    current: Option<(String, Option<String>, Sha256, u64)>,
}

/// The fingerprint a handler computed for its multipart body, handed to the
/// idempotency layer as a response extension.
#[derive(Clone, Debug)]
pub struct BodyFingerprint(pub String);

impl PartsFingerprint {
    /// Starts a part.
    pub fn begin(&mut self, name: &str, filename: Option<&str>) {
        self.end();
        self.current = Some((
            name.to_owned(),
            filename.map(str::to_owned),
            Sha256::new(),
            0,
        ));
    }

    /// Adds bytes of the current part.
    pub fn update(&mut self, bytes: &[u8]) {
        if let Some((_, _, hasher, size)) = &mut self.current {
            hasher.update(bytes);
            *size += bytes.len() as u64;
        }
    }

    /// Ends the current part (also done by `begin` and `finish`).
    pub fn end(&mut self) {
        if let Some((name, filename, hasher, size)) = self.current.take() {
            let line = format!(
                "{name}\n{}\n{size}\n{}\n",
                filename.unwrap_or_default(),
                hex::encode(hasher.finalize())
            );
            self.parts.update(line.as_bytes());
        }
    }

    /// The fingerprint of every part so far.
    pub fn finish(mut self) -> String {
        self.end();
        hex::encode(self.parts.finalize())
    }
}

/// Reads a multipart request to its end and returns its fingerprint, holding
/// no more than one chunk in memory. Used to compare a retry with the
/// request that completed under the same idempotency key.
pub async fn fingerprint_request(request: Request, max_bytes: u64) -> Result<String, ApiError> {
    let mut multipart = Multipart::from_request(request, &())
        .await
        .map_err(|err| ApiError::MalformedBody(err.body_text()))?;
    let mut fingerprint = PartsFingerprint::default();
    let mut total: u64 = 0;
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|err| ApiError::MalformedBody(err.body_text()))?
    {
        fingerprint.begin(field.name().unwrap_or_default(), field.file_name());
        while let Some(chunk) = field
            .chunk()
            .await
            .map_err(|err| ApiError::MalformedBody(err.body_text()))?
        {
            total += chunk.len() as u64;
            if total > max_bytes {
                return Err(ApiError::PayloadTooLarge);
            }
            fingerprint.update(&chunk);
        }
    }
    Ok(fingerprint.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part: name, file name, chunks.
    type TestPart<'a> = (&'a str, Option<&'a str>, &'a [&'a [u8]]);

    fn of(parts: &[TestPart<'_>]) -> String {
        let mut fingerprint = PartsFingerprint::default();
        for (name, filename, chunks) in parts {
            fingerprint.begin(name, *filename);
            for chunk in *chunks {
                fingerprint.update(chunk);
            }
        }
        fingerprint.finish()
    }

    #[test]
    fn chunking_does_not_matter_but_names_files_and_content_do() {
        let base = of(&[("files", Some("a.jpg"), &[b"abcdef"])]);
        assert_eq!(base, of(&[("files", Some("a.jpg"), &[b"abc", b"def"])]));
        assert_ne!(base, of(&[("files", Some("b.jpg"), &[b"abcdef"])]));
        assert_ne!(base, of(&[("photos", Some("a.jpg"), &[b"abcdef"])]));
        assert_ne!(base, of(&[("files", Some("a.jpg"), &[b"abcdeg"])]));
        assert_ne!(
            base,
            of(&[("files", Some("a.jpg"), &[b"abcdef"]), ("x", None, &[])])
        );
    }
}
