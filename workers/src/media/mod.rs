//! Media processing: the delivery variants of images, poster frames of videos
//! and first pages of PDFs.

pub mod poster;
pub mod stores;
#[cfg(test)]
mod variant_tests;
pub mod variants;
