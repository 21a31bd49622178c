//! The tus 1.0 headers: what a request must carry, what every answer
//! carries, `Upload-Metadata` and `Upload-Checksum`.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::Digest;
use storage::Timestamp;

use crate::error::{ApiError, UploadRefusal};

/// The `Tus-Resumable` header's one value, as the document declares it.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub enum TusResumable {
    /// tus 1.0.0.
    #[serde(rename = "1.0.0")]
    V1,
}

/// The protocol version served.
pub const TUS_VERSION: &str = "1.0.0";
/// The extensions served.
pub const TUS_EXTENSIONS: &str = "creation,creation-with-upload,termination,expiration,checksum";
/// The checksum algorithms `Upload-Checksum` may name.
pub const TUS_CHECKSUM_ALGORITHMS: &str = "sha1,sha256";
/// The content type of an upload's bytes.
pub const OFFSET_OCTET_STREAM: &str = "application/offset+octet-stream";
/// Longest `Upload-Metadata` accepted.
pub const MAX_METADATA_BYTES: usize = 4096;

/// `Tus-Resumable`.
pub const TUS_RESUMABLE: HeaderName = HeaderName::from_static("tus-resumable");
/// `Tus-Version`.
pub const TUS_VERSION_HEADER: HeaderName = HeaderName::from_static("tus-version");
/// `Tus-Extension`.
pub const TUS_EXTENSION: HeaderName = HeaderName::from_static("tus-extension");
/// `Tus-Max-Size`.
pub const TUS_MAX_SIZE: HeaderName = HeaderName::from_static("tus-max-size");
/// `Tus-Checksum-Algorithm`.
pub const TUS_CHECKSUM_ALGORITHM: HeaderName = HeaderName::from_static("tus-checksum-algorithm");
/// `Upload-Offset`.
pub const UPLOAD_OFFSET: HeaderName = HeaderName::from_static("upload-offset");
/// `Upload-Length`.
pub const UPLOAD_LENGTH: HeaderName = HeaderName::from_static("upload-length");
/// `Upload-Metadata`.
pub const UPLOAD_METADATA: HeaderName = HeaderName::from_static("upload-metadata");
/// `Upload-Expires`.
pub const UPLOAD_EXPIRES: HeaderName = HeaderName::from_static("upload-expires");
/// `Upload-Checksum`.
pub const UPLOAD_CHECKSUM: HeaderName = HeaderName::from_static("upload-checksum");
/// `Upload-Defer-Length`.
pub const UPLOAD_DEFER_LENGTH: HeaderName = HeaderName::from_static("upload-defer-length");
/// `Upload-Concat`.
pub const UPLOAD_CONCAT: HeaderName = HeaderName::from_static("upload-concat");
/// The batch (operation) an upload belongs to.
pub const UPLOAD_BATCH_ID: HeaderName = HeaderName::from_static("upload-batch-id");
/// The batch's progress stream, with its token.
pub const UPLOAD_PROGRESS_URL: HeaderName = HeaderName::from_static("upload-progress-url");
/// The media item a completed upload became.
pub const UPLOAD_MEDIA_ID: HeaderName = HeaderName::from_static("upload-media-id");

/// The headers a replayed creation repeats (besides `Location`).
pub const REPLAYED_HEADERS: [HeaderName; 6] = [
    TUS_RESUMABLE,
    UPLOAD_OFFSET,
    UPLOAD_EXPIRES,
    UPLOAD_BATCH_ID,
    UPLOAD_PROGRESS_URL,
    UPLOAD_MEDIA_ID,
];

fn refused(refusal: UploadRefusal, message: impl Into<String>) -> ApiError {
    ApiError::Upload {
        refusal,
        message: message.into(),
    }
}

/// An answer of the protocol: `Tus-Resumable` and no caching.
pub fn answer(status: StatusCode) -> Response {
    let mut response = status.into_response();
    let headers = response.headers_mut();
    headers.insert(TUS_RESUMABLE, HeaderValue::from_static(TUS_VERSION));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An error of the protocol: the specification's envelope, with the
/// protocol's headers (`Tus-Version` when the version was the trouble).
pub fn error(err: ApiError) -> Response {
    let version = matches!(
        err,
        ApiError::Upload {
            refusal: UploadRefusal::TusVersion,
            ..
        }
    );
    let mut response = err.into_response();
    let headers = response.headers_mut();
    headers.insert(TUS_RESUMABLE, HeaderValue::from_static(TUS_VERSION));
    if version {
        headers.insert(TUS_VERSION_HEADER, HeaderValue::from_static(TUS_VERSION));
    }
    response
}

/// Puts a number in a header.
pub fn set_number(response: &mut Response, name: HeaderName, value: i64) {
    response
        .headers_mut()
        .insert(name, HeaderValue::from(value));
}

/// Puts text in a header (dropped if it cannot be one).
pub fn set_text(response: &mut Response, name: HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

/// `Upload-Expires`: an HTTP date.
pub fn set_expires(response: &mut Response, at: Timestamp) {
    let date = at
        .to_datetime()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string();
    set_text(response, UPLOAD_EXPIRES, &date);
}

/// Refuses a request without `Tus-Resumable: 1.0.0`.
pub fn check_version(headers: &HeaderMap) -> Result<(), ApiError> {
    match headers.get(TUS_RESUMABLE).map(HeaderValue::to_str) {
        Some(Ok(TUS_VERSION)) => Ok(()),
        Some(_) => Err(refused(
            UploadRefusal::TusVersion,
            format!("This server speaks tus {TUS_VERSION}; send Tus-Resumable: {TUS_VERSION}."),
        )),
        None => Err(refused(
            UploadRefusal::TusVersion,
            format!("A resumable upload's request carries Tus-Resumable: {TUS_VERSION}."),
        )),
    }
}

/// A non-negative number header, `None` when absent.
pub fn number(headers: &HeaderMap, name: &HeaderName) -> Result<Option<i64>, ApiError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|text| text.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(|| {
            refused(
                UploadRefusal::LengthRequired,
                format!("The {name} header must be a non-negative whole number of bytes."),
            )
        })
}

/// Whether the request's body is an upload's bytes (and refuses any other
/// body type).
pub fn check_bytes_content_type(headers: &HeaderMap, required: bool) -> Result<bool, ApiError> {
    match headers.get(header::CONTENT_TYPE) {
        Some(value)
            if value
                .to_str()
                .is_ok_and(|text| text.trim().eq_ignore_ascii_case(OFFSET_OCTET_STREAM)) =>
        {
            Ok(true)
        }
        None if !required => Ok(false),
        _ => Err(refused(
            UploadRefusal::ContentType,
            format!("An upload's bytes are sent as Content-Type: {OFFSET_OCTET_STREAM}."),
        )),
    }
}

/// `Upload-Metadata`: comma-separated `key base64(value)` pairs (or a key
/// alone). Keys are unique; values are UTF-8 text here.
pub fn metadata(headers: &HeaderMap) -> Result<(String, BTreeMap<String, String>), ApiError> {
    let Some(value) = headers.get(UPLOAD_METADATA) else {
        return Ok((String::new(), BTreeMap::new()));
    };
    let malformed =
        |why: String| refused(UploadRefusal::Malformed, format!("Upload-Metadata {why}."));
    let raw = value
        .to_str()
        .map_err(|_| malformed("must be visible ASCII text".to_owned()))?;
    if raw.len() > MAX_METADATA_BYTES {
        return Err(malformed(format!(
            "is longer than {MAX_METADATA_BYTES} bytes"
        )));
    }
    let mut pairs = BTreeMap::new();
    for pair in raw
        .split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
    {
        let mut words = pair.split(' ').filter(|word| !word.is_empty());
        let key = words.next().unwrap_or_default();
        let encoded = words.next().unwrap_or_default();
        if words.next().is_some() {
            return Err(malformed(format!(
                "pair {key:?} must be a key and one base64 value"
            )));
        }
        let decoded = STANDARD
            .decode(encoded)
            .map_err(|_| malformed(format!("value of {key:?} is not base64")))?;
        let text = String::from_utf8(decoded)
            .map_err(|_| malformed(format!("value of {key:?} is not UTF-8 text")))?;
        if pairs.insert(key.to_owned(), text).is_some() {
            return Err(malformed(format!("names {key:?} twice")));
        }
    }
    Ok((raw.to_owned(), pairs))
}

/// An `Upload-Checksum`: the algorithm and the digest the bytes must have.
#[derive(Clone, Debug)]
pub struct Checksum {
    algorithm: Algorithm,
    expected: Vec<u8>,
}

#[derive(Clone, Copy, Debug)]
enum Algorithm {
    Sha1,
    Sha256,
}

/// A running digest of a request's bytes, for its `Upload-Checksum`.
pub enum Digester {
    /// sha1.
    Sha1(sha1::Sha1),
    /// sha256.
    Sha256(sha2::Sha256),
}

impl Checksum {
    /// Parses the header, `None` when absent.
    pub fn parse(headers: &HeaderMap) -> Result<Option<Self>, ApiError> {
        let Some(value) = headers.get(UPLOAD_CHECKSUM) else {
            return Ok(None);
        };
        let unsupported = || {
            refused(
                UploadRefusal::ChecksumAlgorithm,
                format!(
                    "Upload-Checksum must be ALGORITHM BASE64-DIGEST with an algorithm of {TUS_CHECKSUM_ALGORITHMS}."
                ),
            )
        };
        let text = value.to_str().map_err(|_| unsupported())?;
        let (name, digest) = text.trim().split_once(' ').ok_or_else(unsupported)?;
        let algorithm = match name.to_ascii_lowercase().as_str() {
            "sha1" => Algorithm::Sha1,
            "sha256" => Algorithm::Sha256,
            _ => return Err(unsupported()),
        };
        let expected = STANDARD.decode(digest.trim()).map_err(|_| unsupported())?;
        let length = match algorithm {
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
        };
        if expected.len() != length {
            return Err(unsupported());
        }
        Ok(Some(Self {
            algorithm,
            expected,
        }))
    }

    /// A digest to feed the bytes.
    pub fn digester(&self) -> Digester {
        match self.algorithm {
            Algorithm::Sha1 => Digester::Sha1(sha1::Sha1::new()),
            Algorithm::Sha256 => Digester::Sha256(sha2::Sha256::new()),
        }
    }

    /// Whether the bytes fed to `digester` have the expected digest.
    pub fn matches(&self, digester: Digester) -> bool {
        let actual = match digester {
            Digester::Sha1(hasher) => hasher.finalize().to_vec(),
            Digester::Sha256(hasher) => hasher.finalize().to_vec(),
        };
        actual == self.expected
    }
}

impl Digester {
    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha1(hasher) => hasher.update(bytes),
            Self::Sha256(hasher) => hasher.update(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("header"));
        }
        map
    }

    #[test]
    fn metadata_decodes_pairs_and_bare_keys() {
        let (raw, pairs) = metadata(&headers(&[(
            "upload-metadata",
            "filename a2l0Y2hlbi5qcGc=,is_confidential, listing_number TEktMQ==",
        )]))
        .expect("parses");
        assert!(raw.starts_with("filename"));
        assert_eq!(pairs["filename"], "kitchen.jpg");
        assert_eq!(pairs["is_confidential"], "");
        assert_eq!(pairs["listing_number"], "LI-1");
    }

    #[test]
    fn metadata_refuses_bad_base64_and_repeated_keys() {
        for bad in ["filename !!!", "a YQ==,a Yg==", "a YQ== extra"] {
            let err = metadata(&headers(&[("upload-metadata", bad)])).expect_err(bad);
            assert!(matches!(
                err,
                ApiError::Upload {
                    refusal: UploadRefusal::Malformed,
                    ..
                }
            ));
        }
    }

    #[test]
    fn checksums_of_sha1_and_sha256_are_checked() {
        let body = b"hello";
        for (name, digest) in [
            ("sha1", sha1::Sha1::digest(body).to_vec()),
            ("sha256", sha2::Sha256::digest(body).to_vec()),
        ] {
            let value = format!("{name} {}", STANDARD.encode(&digest));
            let checksum = Checksum::parse(&headers(&[("upload-checksum", &value)]))
                .expect("parses")
                .expect("present");
            let mut digester = checksum.digester();
            digester.update(body);
            assert!(checksum.matches(digester));
            let mut wrong = checksum.digester();
            wrong.update(b"hellO");
            assert!(!checksum.matches(wrong));
        }
        assert!(Checksum::parse(&headers(&[("upload-checksum", "md5 AAAA")])).is_err());
        assert!(Checksum::parse(&headers(&[("upload-checksum", "sha256 AAAA")])).is_err());
    }
}
