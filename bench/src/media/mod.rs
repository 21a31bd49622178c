//! Media benchmarks (issue 7).
//!
//! - `variants`: the six delivery variants of a 24-megapixel JPEG with our
//!   engine ([`workers::media::variants::make_variants`], in a child process
//!   of this binary) against the libvips reference
//!   (`../shared/bench/vips/vips_six.sh INPUT OUTDIR parallel`). Both run
//!   under `/usr/bin/time -f %M` (GNU time's peak RSS: the largest single
//!   process of the command) and are timed from here, spawn to exit, so wall
//!   time and peak RSS are measured the same way for both. Runs alternate
//!   which side goes first, after waiting for an idle machine; medians are
//!   reported. Neither side is pinned: the reference's `parallel` mode is two
//!   lanes for a two-core box, and our engine uses every core.
//! - `upload`: the release `api serve` (embedded profile, `--no-workers`)
//!   pinned to core 0 receives one streamed ~1 GB multipart upload from a
//!   client pinned to core 1; the API's `VmRSS` is sampled before and during.
//! - `sse`: the same server holds 10,000 open progress streams
//!   (`/v1/progress/{operation_id}?token=…`, one HTTP/1.1 connection each)
//!   from a client on core 1; the API's `VmRSS` is read with all of them open.
//!
//! Layout: `variants` runs the comparison, `variants_run` is our child,
//! `inputs` makes the reference's inputs, `timing` measures one command;
//! `upload` and `sse` drive the `api_server` through `launch`ed clients
//! (`multipart` generates the upload body) and read its memory with `rss`;
//! `figures` rounds what is reported.

pub(crate) mod api_server;
mod inputs;
mod launch;
mod multipart;
mod rss;
mod sse;
mod timing;
mod upload;
mod variants;
mod variants_run;

pub use inputs::reference_input;
pub use sse::{SseArgs, SseClientArgs, sse, sse_client};
pub use upload::{UploadArgs, UploadClientArgs, upload, upload_client};
pub use variants::{VariantArgs, variants};
pub use variants_run::{OutputSet, variants_run};
