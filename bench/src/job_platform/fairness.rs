//! `bench fairness`: agency B's single photo while agency A's big upload is
//! processing, against the same photo on the idle server.

use std::io::Cursor;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Args;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::figures::median;
use crate::jobs::Redis;
use crate::media::api_server::{ApiArgs, ApiServer, ServerOptions, start_server};

/// Agency B's photo behind agency A's upload.
#[derive(Debug, Clone, Args)]
pub struct FairnessArgs {
    /// Photos in agency A's upload.
    #[arg(long, default_value_t = 200)]
    backlog: usize,
    /// Samples of B's photo, on the idle server and during A's upload.
    #[arg(long, default_value_t = 5)]
    samples: usize,
    /// The photos' size in pixels.
    #[arg(long, default_value_t = 3000)]
    width: u32,
    /// The photos' size in pixels.
    #[arg(long, default_value_t = 2000)]
    height: u32,
    /// `embedded` (SQLite queue), `redis` (the queue on Redis).
    #[arg(long, value_delimiter = ',', default_value = "embedded,redis")]
    profiles: Vec<String>,
    /// The API binary.
    #[command(flatten)]
    api: ApiArgs,
}

/// A photo: a smooth gradient with some grain, as JPEG.
pub(crate) fn photo(width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        let grain = ((x.wrapping_mul(7919) ^ y.wrapping_mul(104_729)) % 23) as u8;
        image::Rgb([
            ((x * 255 / width.max(1)) as u8).saturating_add(grain),
            ((y * 255 / height.max(1)) as u8).saturating_add(grain),
            (((x + y) * 127 / (width + height).max(1)) as u8).saturating_add(grain),
        ])
    });
    let mut bytes = Cursor::new(Vec::new());
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 85).encode_image(&image)?;
    Ok(bytes.into_inner())
}

/// A multipart body of `count` copies of `jpeg`.
fn multipart(boundary: &str, jpeg: &[u8], count: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity((jpeg.len() + 200) * count);
    for n in 0..count {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"photo-{n}.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(jpeg);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// Uploads `count` photos with `key`; returns the local progress URL.
async fn upload(
    client: &reqwest::Client,
    server: &ApiServer,
    key: &str,
    jpeg: &[u8],
    count: usize,
) -> anyhow::Result<String> {
    let boundary = format!("bench-{}", ulid::Ulid::generate());
    let response = client
        .post(format!("{}/api/v1/media/upload", server.base_url))
        .header("x-api-key", key)
        .header("x-idempotency-key", ulid::Ulid::generate().to_string())
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(multipart(&boundary, jpeg, count))
        .send()
        .await?;
    let status = response.status();
    let answer: Value = response.json().await?;
    ensure!(status.is_success(), "upload: {status} {answer}");
    let url = answer["progress_url"].as_str().context("progress_url")?;
    let path = url.split_once("/v1/progress/").context("a progress URL")?.1;
    Ok(format!("{}/v1/progress/{path}", server.base_url))
}

/// Follows a progress stream to its end, calling `seen` with each event's
/// name as it arrives.
async fn follow(
    client: &reqwest::Client,
    url: &str,
    mut seen: impl FnMut(&str),
) -> anyhow::Result<()> {
    let response = client.get(url).send().await?;
    ensure!(
        response.status().is_success(),
        "stream: {}",
        response.status()
    );
    let mut chunks = response.bytes_stream();
    let mut pending = String::new();
    while let Some(chunk) = chunks.next().await {
        pending.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = pending.find("\n\n") {
            let block: String = pending.drain(..end + 2).collect();
            if let Some(name) = block.lines().find_map(|line| line.strip_prefix("event:")) {
                let name = name.trim();
                seen(name);
                if name == "completed" {
                    return Ok(());
                }
            }
        }
    }
    bail!("the stream ended before `completed`")
}

/// Where one photo of B's time went.
pub(crate) struct PhotoTimes {
    /// Upload request to `completed`.
    pub(crate) total: Duration,
    /// Upload request to its answer.
    pub(crate) answered: Duration,
    /// Answer to `processing` (the wait for a worker slot).
    pub(crate) waited: Duration,
    /// `processing` to `file_done` (the job).
    pub(crate) job: Duration,
}

/// One photo of B: upload to `completed`.
pub(crate) async fn single_photo(
    client: &reqwest::Client,
    server: &ApiServer,
    key: &str,
    jpeg: &[u8],
) -> anyhow::Result<PhotoTimes> {
    let begun = Instant::now();
    let url = upload(client, server, key, jpeg, 1).await?;
    let answered = begun.elapsed();
    let (mut processing, mut file_done) = (None, None);
    follow(client, &url, |name| match name {
        "processing" => processing = processing.or(Some(Instant::now())),
        "file_done" | "failed" => file_done = Some(Instant::now()),
        _ => {}
    })
    .await?;
    let total = begun.elapsed();
    let Some(file_done) = file_done else {
        bail!("no file_done state");
    };
    // A job that started before the stream opened shows no `processing`
    // event (the stream opens on a snapshot): count from the answer, when
    // it was queued at the latest.
    let processing = processing.unwrap_or(begun + answered);
    Ok(PhotoTimes {
        total,
        answered,
        waited: processing.duration_since(begun).saturating_sub(answered),
        job: file_done.duration_since(processing),
    })
}

pub(crate) fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1000.0).round()
}

/// One profile's figures.
async fn one_profile(
    args: &FairnessArgs,
    jpeg: &[u8],
    redis_url: Option<String>,
) -> anyhow::Result<Value> {
    let options = ServerOptions {
        workers: true,
        redis_url,
        agencies: 2,
    };
    let (server, agencies) = start_server(&args.api, &options).await?;
    let (busy, quiet) = (&agencies[0], &agencies[1]);
    let client = reqwest::Client::new();
    // Warm the server (first upload, first variants) before measuring.
    single_photo(&client, &server, &quiet.key, jpeg).await?;
    let (mut idle, mut jobs) = (Vec::new(), Vec::new());
    for _ in 0..args.samples {
        let times = single_photo(&client, &server, &quiet.key, jpeg).await?;
        idle.push(times.total.as_secs_f64() * 1000.0);
        jobs.push(times.job.as_secs_f64() * 1000.0);
    }

    // A's upload, followed in the background: how many of its files are done.
    let busy_done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let uploaded = Instant::now();
    let busy_url = upload(&client, &server, &busy.key, jpeg, args.backlog).await?;
    let upload_ms = uploaded.elapsed().as_secs_f64() * 1000.0;
    let counter = busy_done.clone();
    let (client_a, url_a) = (client.clone(), busy_url.clone());
    let backlog = tokio::spawn(async move {
        let started = Instant::now();
        follow(&client_a, &url_a, |name| {
            if name == "file_done" || name == "failed" {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
        .await?;
        anyhow::Ok(started.elapsed())
    });
    // B's photos while A's backlog is processing.
    let mut loaded = Vec::new();
    let mut busy_left = Vec::new();
    let mut parts = Vec::new();
    for _ in 0..args.samples {
        let times = single_photo(&client, &server, &quiet.key, jpeg).await?;
        let total = times.total;
        parts.push(json!({
            "answered_ms": ms(times.answered),
            "waited_ms": ms(times.waited),
            "job_ms": ms(times.job),
        }));
        let done = busy_done.load(std::sync::atomic::Ordering::Relaxed);
        ensure!(
            done < args.backlog,
            "A's upload finished before B's photo: use a bigger --backlog"
        );
        loaded.push(total.as_secs_f64() * 1000.0);
        busy_left.push(args.backlog - done);
    }
    let backlog_ms = backlog.await??.as_secs_f64() * 1000.0;
    let in_order: Vec<f64> = loaded.iter().copied().map(f64::round).collect();
    let worst_ms = loaded.iter().copied().fold(0.0, f64::max);
    let (idle_ms, job_ms, loaded_ms) = (median(idle), median(jobs), median(loaded));
    let goal_ms = 2.0 * idle_ms + job_ms;
    let round = |value: f64| value.round();
    Ok(json!({
        "idle_ms": round(idle_ms),
        "job_ms": round(job_ms),
        "during_backlog_ms": round(loaded_ms),
        "during_backlog_max_ms": round(worst_ms),
        "goal_ms": round(goal_ms),
        "ratio_to_goal": (loaded_ms / goal_ms * 100.0).round() / 100.0,
        "max_ratio_to_goal": (worst_ms / goal_ms * 100.0).round() / 100.0,
        "during_backlog_samples_ms": in_order,
        "during_backlog_parts": parts,
        "busy_files_left_when_b_finished": busy_left,
        "busy_upload_ms": round(upload_ms),
        "busy_processing_ms": round(backlog_ms),
    }))
}

/// `bench fairness`.
pub async fn fairness(args: FairnessArgs) -> anyhow::Result<()> {
    let jpeg = photo(args.width, args.height)?;
    eprintln!(
        "photo {}×{}, {} KB; backlog {} photos",
        args.width,
        args.height,
        jpeg.len() / 1024,
        args.backlog
    );
    let mut report = Vec::new();
    for profile in &args.profiles {
        let redis = super::profile_redis(profile)?;
        let mut row = one_profile(&args, &jpeg, redis.as_ref().map(Redis::url)).await?;
        row["profile"] = json!(profile);
        println!("{row}");
        report.push(row);
    }
    println!("{}", json!({ "fairness": report }));
    Ok(())
}
