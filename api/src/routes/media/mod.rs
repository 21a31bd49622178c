//! Media: uploads (streamed to the object store), their progress as
//! server-sent events, and signed downloads of stored variants.

pub mod archive;
pub mod downloads;
pub mod progress;
pub mod upload;
