//! Media: uploads (streamed to the object store, or resumable by tus), their progress as
//! server-sent events, and signed downloads of stored variants.

pub mod archive;
pub mod downloads;
pub mod item;
pub mod progress;
pub mod resumable;
pub mod upload;
