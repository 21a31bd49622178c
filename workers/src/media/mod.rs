//! Media processing: the delivery variants of images, poster frames of videos
//! and first pages of PDFs.

pub mod background;
pub(crate) mod outputs;
pub mod poster;
pub mod variants;
