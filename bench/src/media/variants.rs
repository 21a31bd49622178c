//! `bench variants`: our engine against the libvips reference, alternating
//! which goes first, reported as medians and ratios.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::ensure;
use clap::Args;
use serde_json::json;

use super::inputs::reference_pair;
use super::timing::{Sample, timed, wait_idle};
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
        ];
        let vips_args: Vec<OsString> = vec![
            script.clone().into(),
            input.into(),
            vips_dir.clone().into(),
            "parallel".into(),
        ];
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
        ensure!(
            ours_files.len() == 6 && vips_files.len() == 6,
            "expected six outputs each: {ours_files:?} {vips_files:?}"
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
        }));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "scenario": "variants",
            "goal": "wall <= 1.0x and peak RSS <= 1.5x of vips_six.sh parallel",
            "results": results,
        }))?
    );
    Ok(())
}
