//! Extractors that answer in our envelope: `ApiJson`, `ApiQuery` and `ApiPath`
//! replace axum's `Json`, `Query` and `Path`, whose rejections are plain text.
//!
//! Unparseable input is 400 `request.malformed`; input that parses but does not
//! fit the schema is 422 `validation.failed` naming each field in
//! `details.fields`. Unknown fields and parameters are refused, not ignored.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The field name used when the whole body (not one field) has the wrong shape.
const BODY_FIELD: &str = "body";

/// Turns a serde data error at `path` into a (field, reason) pair, naming the
/// missing or unknown field itself rather than its parent.
fn field_error(path: &str, message: &str) -> (String, String) {
    // serde_json appends " at line L column C"; the field name says more.
    let message = message
        .rsplit_once(" at line ")
        .map_or(message, |(head, _)| head);
    let join = |name: &str| {
        if path.is_empty() || path == "." {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let quoted = |rest: &str| rest.split('`').nth(1).map(str::to_owned);
    if let Some(name) = message.strip_prefix("missing field ").and_then(quoted) {
        return (join(&name), "is required".to_owned());
    }
    if let Some(name) = message.strip_prefix("unknown field ").and_then(quoted) {
        // The path already ends at the unknown field itself.
        let field = if path.is_empty() || path == "." {
            name
        } else {
            path.to_owned()
        };
        return (field, "is not a known field".to_owned());
    }
    let field = if path.is_empty() || path == "." {
        BODY_FIELD.to_owned()
    } else {
        path.to_owned()
    };
    (field, message.to_owned())
}

/// A JSON body that parsed into `T`, or an envelope error.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> ApiJson<T> {
    /// Parses `bytes` as JSON into `T`.
    pub fn parse(bytes: &[u8]) -> Result<T, ApiError> {
        // Syntax first, over the whole body, so trailing garbage is "malformed"
        // even when the typed parse would stop earlier at a schema error.
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
            .map_err(|err| ApiError::MalformedBody(err.to_string()))?;
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            match inner.classify() {
                serde_json::error::Category::Data => {
                    let (field, reason) = field_error(&path, &inner.to_string());
                    ApiError::field(field, reason)
                }
                _ => ApiError::MalformedBody(inner.to_string()),
            }
        })?;
        deserializer
            .end()
            .map_err(|err| ApiError::MalformedBody(err.to_string()))?;
        Ok(value)
    }
}

fn is_json_content_type(request: &Request) -> bool {
    let Some(value) = request.headers().get(header::CONTENT_TYPE) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBody(bytes) = JsonBody::from_request(request, state).await?;
        Self::parse(&bytes).map(ApiJson)
    }
}

/// The request body, or the envelope error of a body too large or cut short.
async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::MalformedBody(rejection.body_text())
            }
        })
}

/// A JSON request body, read but not yet parsed: for handlers that must check
/// the path (a section name, say) before judging the body.
pub struct JsonBody(pub Bytes);

impl JsonBody {
    /// Parses the body into `T`, as `ApiJson` would.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        ApiJson::<T>::parse(&self.0)
    }
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json_content_type(&request) {
            return Err(ApiError::UnsupportedMediaType(
                "The request body must be JSON, sent with Content-Type: application/json.".into(),
            ));
        }
        let bytes = body_bytes(request, state).await?;
        Ok(JsonBody(bytes))
    }
}

/// A JSON body that may be left out: `None` for an empty body (with or
/// without a content type) or `null`, else parsed as [`ApiJson`] would.
pub struct OptionalJson<T>(pub Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json_content_type(&request);
        let bytes = body_bytes(request, state).await?;
        if bytes.is_empty() {
            return Ok(Self(None));
        }
        if !json {
            return Err(ApiError::UnsupportedMediaType(
                "The request body must be JSON, sent with Content-Type: application/json.".into(),
            ));
        }
        // `null` is no body too.
        ApiJson::<Option<T>>::parse(&bytes).map(Self)
    }
}

/// Query parameters that parsed into `T`, or an envelope error.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned> ApiQuery<T> {
    /// Parses a query string into `T`.
    pub fn parse(query: &str) -> Result<T, ApiError> {
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let path = err.path().to_string();
            let (field, reason) = field_error(&path, &err.into_inner().to_string());
            let reason = reason.replace("is not a known field", "is not a known parameter");
            ApiError::field(field, reason)
        })
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Self::parse(parts.uri.query().unwrap_or("")).map(ApiQuery)
    }
}

/// Path parameters that parsed into `T`, or an envelope error.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(PathRejection::FailedToDeserializePathParams(err)) => {
                Err(ApiError::field("path", err.body_text()))
            }
            Err(other) => Err(ApiError::internal(other.body_text())),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        address: String,
        nested: Option<Nested>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Nested {
        count: u32,
    }

    fn fields(err: ApiError) -> Vec<(String, String)> {
        match err {
            ApiError::Validation(fields) => fields.into_iter().collect(),
            other => panic!("expected validation.failed, got {other:?}"),
        }
    }

    #[test]
    fn syntax_errors_are_malformed() {
        for bad in [
            &b"{"[..],
            b"{\"address\": }",
            b"not json",
            b"",
            b"{} trailing",
        ] {
            let err = ApiJson::<Body>::parse(bad).unwrap_err();
            assert_eq!(err.code(), "request.malformed", "{bad:?}");
        }
    }

    #[test]
    fn schema_errors_name_the_field() {
        let missing = fields(ApiJson::<Body>::parse(b"{}").unwrap_err());
        assert_eq!(
            missing,
            vec![("address".to_owned(), "is required".to_owned())]
        );
        let unknown = fields(ApiJson::<Body>::parse(br#"{"address":"a","extra":1}"#).unwrap_err());
        assert_eq!(unknown[0].0, "extra");
        let wrong_type = fields(ApiJson::<Body>::parse(br#"{"address":5}"#).unwrap_err());
        assert_eq!(wrong_type[0].0, "address");
        assert!(
            wrong_type[0].1.starts_with("invalid type"),
            "{}",
            wrong_type[0].1
        );
        let nested = fields(
            ApiJson::<Body>::parse(br#"{"address":"a","nested":{"count":-1}}"#).unwrap_err(),
        );
        assert_eq!(nested[0].0, "nested.count");
        let not_object = fields(ApiJson::<Body>::parse(b"[]").unwrap_err());
        assert_eq!(not_object[0].0, "body");
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Params {
        limit: Option<u32>,
    }

    #[test]
    fn query_errors_name_the_parameter() {
        assert!(ApiQuery::<Params>::parse("limit=5").is_ok());
        let bad = fields(ApiQuery::<Params>::parse("limit=abc").unwrap_err());
        assert_eq!(bad[0].0, "limit");
        let unknown = fields(ApiQuery::<Params>::parse("colour=red").unwrap_err());
        assert_eq!(
            unknown[0],
            ("colour".to_owned(), "is not a known parameter".to_owned())
        );
    }
}
