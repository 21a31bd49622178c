//! `ApiError`: every failure a handler or middleware can answer with, and the
//! specification's error envelope it becomes.
//!
//! An `ApiError` turns into a response carrying its status, its headers and an
//! [`ErrorBody`] extension; the envelope middleware (`middleware::envelope`)
//! writes the JSON body with the request id. The same middleware wraps any bare
//! 4xx/5xx produced outside our code (axum's 405, a body-limit 413) in the
//! envelope, so no client ever sees an error without one.
//!
//! What each error answers (status, code, message, whether it is the
//! request's decided outcome) is one table, `ApiError::answer`
//! (`api_error.rs`); its structured details and headers are beside it.

mod api_error;
mod conversions;
mod envelope;
mod resource;
mod upload;

pub use api_error::{Answer, ApiError, FieldErrors};
pub use envelope::{ErrorBody, ErrorEnvelope, ErrorObject};
pub use resource::Resource;
pub use upload::UploadRefusal;
