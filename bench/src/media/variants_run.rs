//! Our side of the variant benchmark: the `bench variants-run` child, which
//! renders the six variants (and, with `--set`, delivery profile outputs in
//! the same decode, or one AVIF output alone) with the engine and writes
//! them.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use clap::ValueEnum;
use serde_json::json;
use storage::rules::delivery_profiles::{
    Fit, MetadataPolicy, ProfileFormat, ProfileOutput, templates,
};
use workers::media::variants::{OutputRequest, VariantLimits, VariantName, render_media};

/// What a run renders besides (or instead of) the six variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputSet {
    /// The six variants of the specification.
    #[default]
    None,
    /// The six variants and the unbranded MLS template's outputs (2048 px
    /// under 3 MB, 840 x 525 under 300 KB), from one decode.
    Mls,
    /// One AVIF output of the `web` box (2560 x 1700, quality 60), alone.
    Avif,
}

impl OutputSet {
    /// The profile outputs of this set.
    pub fn outputs(self) -> Vec<ProfileOutput> {
        match self {
            Self::None => Vec::new(),
            Self::Mls => templates()
                .into_iter()
                .find(|t| t.key == "mls_unbranded")
                .map(|t| t.draft.outputs)
                .unwrap_or_default(),
            Self::Avif => vec![ProfileOutput {
                name: "web_avif".to_owned(),
                fit: Fit::Contain,
                width: 2560,
                height: 1700,
                format: ProfileFormat::Avif,
                quality: Some(AVIF_QUALITY),
                max_bytes: None,
                metadata: MetadataPolicy::Strip,
                watermark: None,
            }],
        }
    }

    /// Whether the six variants are rendered too.
    pub fn with_variants(self) -> bool {
        self != Self::Avif
    }

    /// How many files a run writes.
    pub fn files(self) -> usize {
        let variants = if self.with_variants() { 6 } else { 0 };
        variants + self.outputs().len()
    }
}

/// The AVIF output's quality, the reference's `Q` too.
pub const AVIF_QUALITY: u8 = 60;

/// `bench variants-run` (the child): read, render, write; prints the
/// engine's time and each file's size. Runs without an async runtime.
pub fn variants_run(input: &Path, out: &Path, set: OutputSet) -> anyhow::Result<()> {
    let bytes = std::fs::read(input).with_context(|| input.display().to_string())?;
    let started = Instant::now();
    let specs = if set.with_variants() {
        VariantName::ALL.map(VariantName::spec).to_vec()
    } else {
        Vec::new()
    };
    let outputs = set.outputs();
    let requests: Vec<OutputRequest<'_>> = outputs
        .iter()
        .map(|output| OutputRequest {
            output,
            watermark: None,
        })
        .collect();
    let rendered = render_media(&bytes, &specs, &requests, None, &VariantLimits::default())?;
    let engine_ms = started.elapsed().as_secs_f64() * 1e3;
    drop(bytes);
    std::fs::create_dir_all(out)?;
    let mut files = Vec::new();
    for v in &rendered.variants {
        let name = format!("{}.{}", v.name, v.format.extension());
        std::fs::write(out.join(&name), &v.bytes)?;
        files.push(
            json!({"file": name, "width": v.width, "height": v.height, "bytes": v.bytes.len()}),
        );
    }
    for (output, made) in outputs.iter().zip(rendered.outputs) {
        let made = made?;
        let name = format!("{}.{}", output.name, output.format.as_str());
        std::fs::write(out.join(&name), &made.bytes)?;
        files.push(
            json!({"file": name, "width": made.width, "height": made.height,
                          "bytes": made.bytes.len(), "quality": made.quality}),
        );
    }
    println!("{}", json!({"engine_ms": engine_ms, "files": files}));
    Ok(())
}
