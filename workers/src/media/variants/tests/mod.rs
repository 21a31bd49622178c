//! End-to-end tests of the image-variant engine ([`super`]) through its
//! public entry points, ported from the scratch crate's integration tests so
//! CI runs them.
//!
//! Every output is decoded and checked for format and dimensions; JPEG
//! quality is read back from the DQT tables (q95 for `mls`/`print`, q75 for
//! `thumbnail`) and the three WebP outputs must be lossy (`VP8 `, not `VP8L`).
//! Also covered: EXIF orientation 6 comes out upright, no EXIF/XMP/GPS survives,
//! decompression bombs and truncated files give typed errors, nothing is
//! upscaled, PNG alpha and GIF input are handled, and Display P3 is converted
//! to sRGB.
//!
//! All fixtures are generated in code. Images are kept small (a few
//! megapixels at most) because the engine runs unoptimised in `cargo test`.

mod fixtures;
mod inspect;
mod output;
mod profiles;
mod rejects;
mod sources;
