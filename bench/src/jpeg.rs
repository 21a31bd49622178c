//! `bench jpeg-encoders`: the JPEG encoders we could have used for the `mls`
//! and `print` variants, on the same pixels at the same quality: jpeg-encoder
//! (ours), the image crate's own encoder, libjpeg-turbo (Debian's, through the
//! turbojpeg crate) and mozjpeg (bundled C, built without SIMD). Each gets
//! the decoded 24 MP input and its 1280×850 `mls` box; medians of the runs,
//! output size, and PSNR against the pixels encoded, so speed is never bought
//! with quality unseen.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, ensure};
use image::RgbImage;
use image::imageops::FilterType;
use serde_json::{Value, json};

use crate::figures::median;

/// `bench jpeg-encoders`.
#[derive(Debug, clap::Args)]
pub struct JpegArgs {
    /// A JPEG whose pixels are encoded. Default: the libvips reference's 24 MP
    /// input (made by its `make_input.py` when missing, as `bench variants` does).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Runs per encoder and size; medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// JPEG quality, as the `mls` and `print` variants use.
    #[arg(long, default_value_t = 95)]
    quality: u8,
    /// Directory of the libvips reference (`make_input.py`).
    #[arg(long, default_value = "../shared/bench/vips")]
    vips_dir: PathBuf,
    /// Where the generated input is kept between runs.
    #[arg(long, default_value = "/tmp/media-anchor")]
    input_dir: PathBuf,
}

/// One encoder under test.
#[derive(Clone, Copy)]
enum Candidate {
    JpegEncoderCrate,
    ImageCrate,
    LibjpegTurbo,
    Mozjpeg,
}

impl Candidate {
    const ALL: [Self; 4] = [
        Self::JpegEncoderCrate,
        Self::ImageCrate,
        Self::LibjpegTurbo,
        Self::Mozjpeg,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::JpegEncoderCrate => "jpeg-encoder 0.7 (ours, AVX2)",
            Self::ImageCrate => "image 0.25 JpegEncoder",
            Self::LibjpegTurbo => "libjpeg-turbo (Debian, turbojpeg crate)",
            Self::Mozjpeg => "mozjpeg (bundled, no SIMD, fastest defaults)",
        }
    }

    /// Encodes `pixels` at `quality`. Chroma is kept at full resolution from
    /// quality 90 up, as jpeg-encoder does (the `image` crate's encoder does
    /// not offer the choice).
    fn encode(self, pixels: &RgbImage, quality: u8) -> anyhow::Result<Vec<u8>> {
        let (width, height) = pixels.dimensions();
        let full_chroma = quality >= 90;
        Ok(match self {
            Self::JpegEncoderCrate => {
                let mut out = Vec::new();
                jpeg_encoder::Encoder::new(&mut out, quality).encode(
                    pixels.as_raw(),
                    u16::try_from(width)?,
                    u16::try_from(height)?,
                    jpeg_encoder::ColorType::Rgb,
                )?;
                out
            }
            Self::ImageCrate => {
                let mut out = Vec::new();
                image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
                    .encode_image(pixels)?;
                out
            }
            Self::LibjpegTurbo => {
                let mut compressor = turbojpeg::Compressor::new()?;
                compressor.set_quality(i32::from(quality));
                compressor.set_subsamp(if full_chroma {
                    turbojpeg::Subsamp::None
                } else {
                    turbojpeg::Subsamp::Sub2x2
                });
                let image = turbojpeg::Image {
                    pixels: pixels.as_raw().as_slice(),
                    width: width as usize,
                    pitch: width as usize * 3,
                    height: height as usize,
                    format: turbojpeg::PixelFormat::RGB,
                };
                compressor.compress_to_vec(image)?
            }
            Self::Mozjpeg => {
                let mut compress = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
                compress.set_fastest_defaults();
                compress.set_quality(f32::from(quality));
                compress.set_size(width as usize, height as usize);
                if full_chroma {
                    for component in compress.components_mut() {
                        component.h_samp_factor = 1;
                        component.v_samp_factor = 1;
                    }
                }
                let mut started = compress.start_compress(Vec::new())?;
                started.write_scanlines(pixels.as_raw())?;
                started.finish()?
            }
        })
    }
}

/// Peak signal-to-noise ratio of `encoded` against `original`, in dB.
fn psnr(original: &RgbImage, encoded: &[u8]) -> anyhow::Result<f64> {
    let decoded = image::load_from_memory(encoded)?.into_rgb8();
    ensure!(
        decoded.dimensions() == original.dimensions(),
        "size changed"
    );
    let squared: f64 = original
        .as_raw()
        .iter()
        .zip(decoded.as_raw())
        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
        .sum();
    let mse = squared / original.as_raw().len() as f64;
    Ok(10.0 * (255.0 * 255.0 / mse).log10())
}

/// `bench jpeg-encoders`: every encoder on the print-size and the mls-size
/// pixels, ratios against ours.
pub fn jpeg_encoders(args: JpegArgs) -> anyhow::Result<()> {
    ensure!(args.runs > 0, "--runs must be at least 1");
    let input = match &args.input {
        Some(input) => input.clone(),
        None => crate::media::reference_input(&args.vips_dir, &args.input_dir)?,
    };
    let bytes = std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?;
    let print = image::load_from_memory(&bytes)?.into_rgb8();
    // The `mls` box (1280×850), kept in proportion, as the variant is.
    let mls = image::DynamicImage::ImageRgb8(print.clone())
        .resize(1280, 850, FilterType::Lanczos3)
        .into_rgb8();
    let mut results = Vec::new();
    for (variant, pixels) in [("print", &print), ("mls", &mls)] {
        let mut rows: Vec<Value> = Vec::new();
        let mut ours_ms = f64::NAN;
        for encoder in Candidate::ALL {
            let mut times = Vec::with_capacity(args.runs);
            let mut encoded = Vec::new();
            for _ in 0..args.runs {
                let started = Instant::now();
                encoded = encoder.encode(pixels, args.quality)?;
                times.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            let ms = median(times);
            if matches!(encoder, Candidate::JpegEncoderCrate) {
                ours_ms = ms;
            }
            let psnr = psnr(pixels, &encoded)?;
            eprintln!(
                "{variant} {}: {ms:.1} ms, {} bytes, {psnr:.2} dB",
                encoder.name(),
                encoded.len()
            );
            rows.push(json!({
                "encoder": encoder.name(),
                "median_ms": (ms * 10.0).round() / 10.0,
                "bytes": encoded.len(),
                "psnr_db": (psnr * 100.0).round() / 100.0,
                "time_vs_ours": (ms / ours_ms * 100.0).round() / 100.0,
            }));
        }
        results.push(json!({
            "variant": variant,
            "width": pixels.width(),
            "height": pixels.height(),
            "encoders": rows,
        }));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "scenario": "jpeg-encoders",
            "input": input,
            "quality": args.quality,
            "runs": args.runs,
            "results": results,
        }))?
    );
    Ok(())
}
