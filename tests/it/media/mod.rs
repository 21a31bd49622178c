//! Media: uploads streamed to the object store and their refusals and limits,
//! formats told by content, the processing job's variants, progress as
//! server-sent events, downloads, archives, storage strategies and recovery.
//! The shared fixtures are in [`fixtures`], [`context`] and [`bucket`]; each
//! other module covers one behaviour.

mod archives;
mod bucket;
mod context;
mod direct_uploads;
mod downloads;
mod fixtures;
mod formats;
mod idempotency;
mod limits;
mod optimization;
mod profile_outputs;
mod profiles;
mod progress;
mod progress_access;
mod property_page;
mod recovery;
mod refusals;
mod resumable;
mod resumable_clients;
mod resume;
mod session_uploads;
mod strategies;
mod variants;

/// What other areas upload with: a listing context whose key uploads, and
/// photos to upload.
pub(crate) use context::{Media, listing_media, upload_alone_and_wait, upload_and_wait};
pub(crate) use fixtures::{Part, jpeg};
pub(crate) use profile_outputs::{magenta_logo, photo_with_red_door};

use context::read_events;
use fixtures::{BOUNDARY, minimal_pdf, multipart, png, stored_files};
