//! `bench variants`: our engine against the libvips reference, alternating
//! which goes first, reported as medians and ratios. `--set mls` adds the
//! unbranded MLS profile's outputs to both sides (ours in the same decode;
//! `bench/reference/vips_mls.sh` with a quality search to the same byte
//! caps); `--set avif` compares one AVIF output of the `web` box with
//! `bench/reference/vips_avif.sh` (`heifsave`, AV1).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::ensure;
use clap::Args;
use serde_json::json;

use super::inputs::reference_pair;
use super::timing::{Sample, timed, wait_idle};
use super::variants_run::{AVIF_QUALITY, OutputSet};
use crate::figures::{median, round};

/// Settings of the variant benchmark.
#[derive(Debug, Clone, Args)]
pub struct VariantArgs {
    /// A JPEG to render. Default: the reference's 24 MP input and its
    /// orientation-6 twin, made by its `make_input.py` when missing.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Runs of each side; medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Directory of the libvips reference (`vips_six.sh`, `make_input.py`).
    #[arg(long, default_value = "../shared/bench/vips")]
    vips_dir: PathBuf,
    /// Where the generated inputs are kept between runs.
    #[arg(long, default_value = "/tmp/media-anchor")]
    input_dir: PathBuf,
    /// What both sides render besides (or instead of) the six variants.
    #[arg(long, value_enum, default_value = "none")]
    set: OutputSet,
    /// Directory of our own reference scripts for the profile sets.
    #[arg(long, default_value = "bench/reference")]
    reference_dir: PathBuf,
}

/// The `set` argument's value on the command line.
fn set_name(set: OutputSet) -> &'static str {
    match set {
        OutputSet::None => "none",
        OutputSet::Mls => "mls",
        OutputSet::Avif => "avif",
    }
}

/// Width and height of an AVIF file, from its `ispe` property.
fn avif_size(path: &Path) -> anyhow::Result<(u32, u32)> {
    let bytes = std::fs::read(path)?;
    let at = bytes
        .windows(4)
        .position(|w| w == b"ispe")
        .ok_or_else(|| anyhow::anyhow!("no ispe box in {}", path.display()))?;
    let word = |offset: usize| -> anyhow::Result<u32> {
        let field = bytes
            .get(at + offset..at + offset + 4)
            .ok_or_else(|| anyhow::anyhow!("a short ispe box"))?;
        Ok(u32::from_be_bytes(field.try_into()?))
    };
    // After the type: version and flags, then width and height.
    Ok((word(8)?, word(12)?))
}

/// Each written file's size, by name.
fn sizes(dir: &Path) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let mut sizes = serde_json::Map::new();
    for name in outputs(dir)? {
        sizes.insert(
            name.clone(),
            std::fs::metadata(dir.join(&name))?.len().into(),
        );
    }
    Ok(sizes)
}

/// Makes the reference's inputs with its own script when they are missing.
fn reference_inputs(args: &VariantArgs) -> anyhow::Result<Vec<PathBuf>> {
    reference_pair(&args.vips_dir, &args.input_dir)
}

/// Files a variant run wrote, sorted.
fn outputs(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// `bench variants`: ours against vips, alternating, medians and ratios.
pub fn variants(args: VariantArgs) -> anyhow::Result<()> {
    ensure!(args.runs > 0, "--runs must be at least 1");
    let script = args.vips_dir.join("vips_six.sh");
    ensure!(
        script.exists(),
        "no libvips reference at {}",
        script.display()
    );
    let inputs = match &args.input {
        Some(input) => vec![input.clone()],
        None => reference_inputs(&args)?,
    };
    let exe = std::env::current_exe()?;
    let bash = PathBuf::from("bash");
    let mut results = Vec::new();
    for input in &inputs {
        let work = tempfile::tempdir()?;
        let ours_dir = work.path().join("ours");
        let vips_dir = work.path().join("vips");
        let time_file = work.path().join("time.txt");
        let ours_args: Vec<OsString> = vec![
            "variants-run".into(),
            "--input".into(),
            input.into(),
            "--out".into(),
            ours_dir.clone().into(),
            "--set".into(),
            set_name(args.set).into(),
        ];
        let vips_args: Vec<OsString> = match args.set {
            OutputSet::None => vec![
                script.clone().into(),
                input.into(),
                vips_dir.clone().into(),
                "parallel".into(),
            ],
            OutputSet::Mls => vec![
                args.reference_dir.join("vips_mls.sh").into(),
                input.into(),
                vips_dir.clone().into(),
                script.clone().into(),
            ],
            OutputSet::Avif => {
                // Both encode the same pixels: the size our bounded output has.
                timed(&exe, &ours_args, &time_file)?;
                let (width, height) = avif_size(&ours_dir.join("web_avif.avif"))?;
                vec![
                    args.reference_dir.join("vips_avif.sh").into(),
                    input.into(),
                    vips_dir.clone().into(),
                    format!("{width}x{height}").into(),
                    AVIF_QUALITY.to_string().into(),
                ]
            }
        };
        let (mut ours, mut vips) = (Vec::new(), Vec::new());
        for run in 0..args.runs {
            // Alternate which side goes first so neither always meets a warm cache.
            wait_idle();
            if run % 2 == 0 {
                ours.push(timed(&exe, &ours_args, &time_file)?);
                vips.push(timed(&bash, &vips_args, &time_file)?);
            } else {
                vips.push(timed(&bash, &vips_args, &time_file)?);
                ours.push(timed(&exe, &ours_args, &time_file)?);
            }
            let (o, v) = (ours[run], vips[run]);
            eprintln!(
                "{} run {run}: ours {:.3} s {} KiB | vips {:.3} s {} KiB",
                input.display(),
                o.wall,
                o.max_rss_kb,
                v.wall,
                v.max_rss_kb
            );
        }
        let (ours_files, vips_files) = (outputs(&ours_dir)?, outputs(&vips_dir)?);
        let files = args.set.files();
        ensure!(
            ours_files.len() == files && vips_files.len() == files,
            "expected {files} outputs each: {ours_files:?} {vips_files:?}"
        );
        let wall = |s: &[Sample]| median(s.iter().map(|x| x.wall).collect());
        let rss = |s: &[Sample]| median(s.iter().map(|x| x.max_rss_kb as f64).collect()) / 1024.0;
        let (ow, vw, or, vr) = (wall(&ours), wall(&vips), rss(&ours), rss(&vips));
        results.push(json!({
            "input": input,
            "input_bytes": std::fs::metadata(input)?.len(),
            "runs": args.runs,
            "ours": {"median_wall_s": round(ow, 3), "median_peak_rss_mib": round(or, 1),
                     "wall_s": ours.iter().map(|s| round(s.wall, 3)).collect::<Vec<_>>(),
                     "peak_rss_kib": ours.iter().map(|s| s.max_rss_kb).collect::<Vec<_>>()},
            "vips_parallel": {"median_wall_s": round(vw, 3), "median_peak_rss_mib": round(vr, 1),
                     "wall_s": vips.iter().map(|s| round(s.wall, 3)).collect::<Vec<_>>(),
                     "peak_rss_kib": vips.iter().map(|s| s.max_rss_kb).collect::<Vec<_>>()},
            "ratio": {"wall": round(ow / vw, 2), "peak_rss": round(or / vr, 2)},
            "bytes": {"ours": sizes(&ours_dir)?, "vips": sizes(&vips_dir)?},
        }));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "scenario": "variants",
            "set": set_name(args.set),
            "goal": match args.set {
                OutputSet::None => "wall <= 0.7x and peak RSS <= 1.0x of vips_six.sh parallel",
                OutputSet::Mls => "wall <= 1.0x and peak RSS <= 1.0x of vips_mls.sh",
                OutputSet::Avif => "peak RSS <= 1.0x of vips_avif.sh (heifsave, AV1); wall reported",
            },
            "results": results,
        }))?
    );
    Ok(())
}
