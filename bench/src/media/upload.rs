//! `bench upload`: the API's RSS before and during one streamed ~1 GB
//! multipart upload, and the `upload-client` child that sends it.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use clap::Args;
use serde_json::{Value, json};

use super::api_server::{ApiArgs, start_api};
use super::launch::{read_line_json, start_client};
use super::multipart::MultipartBody;
use super::rss::{RssSampler, status_kb};
use crate::figures::{mib, round};

/// Settings of the upload benchmark.
#[derive(Debug, Clone, Args)]
pub struct UploadArgs {
    /// The server.
    #[command(flatten)]
    api: ApiArgs,
    /// Files in the request (at most 200).
    #[arg(long, default_value_t = 20)]
    files: u64,
    /// Bytes per file (at most 50 MiB; the request at most 1 GiB of files).
    #[arg(long, default_value_t = 50 * 1024 * 1024 - 64 * 1024)]
    file_bytes: u64,
}

/// `bench upload-client` (a child on core 1).
#[derive(Debug, Clone, Args)]
pub struct UploadClientArgs {
    /// The upload URL.
    #[arg(long)]
    url: String,
    /// The API key.
    #[arg(long)]
    key: String,
    /// Files in the request.
    #[arg(long)]
    files: u64,
    /// Bytes per file.
    #[arg(long)]
    file_bytes: u64,
}

/// `bench upload-client`: streams the body (never held in memory) and prints
/// the status, the time and the answer.
pub async fn upload_client(args: UploadClientArgs) -> anyhow::Result<()> {
    let boundary = format!("bench-boundary-{}", ulid::Ulid::generate());
    let body = MultipartBody::new(boundary.clone(), args.files, args.file_bytes);
    let length = body.len();
    let client = reqwest::Client::builder().http1_only().build()?;
    let started = Instant::now();
    let response = client
        .post(&args.url)
        .header("x-api-key", &args.key)
        .header("x-idempotency-key", ulid::Ulid::generate().to_string())
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .header("content-length", length)
        .body(reqwest::Body::wrap_stream(futures::stream::iter(body)))
        .send()
        .await?;
    let status = response.status().as_u16();
    let text = response.text().await?;
    let seconds = started.elapsed().as_secs_f64();
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    println!(
        "{}",
        json!({"status": status, "seconds": seconds, "body_bytes": length, "answer": answer})
    );
    Ok(())
}

/// `bench upload`: the API's RSS before and during one ~1 GB upload.
pub async fn upload(args: UploadArgs) -> anyhow::Result<()> {
    let (server, key) = start_api(&args.api).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before_kb = status_kb(server.pid, "VmRSS")?;
    let hwm_before_kb = status_kb(server.pid, "VmHWM")?;
    let sampler = RssSampler::start(server.pid);
    let mut client = start_client(
        args.api.nofile()?,
        &[
            "upload-client".to_owned(),
            "--url".into(),
            format!("{}/api/v1/media/upload", server.base_url),
            "--key".into(),
            key,
            "--files".into(),
            args.files.to_string(),
            "--file-bytes".into(),
            args.file_bytes.to_string(),
        ],
    )?;
    let result = tokio::task::spawn_blocking(move || {
        let line = read_line_json(&mut client);
        let status = client.wait();
        (line, status)
    })
    .await?;
    let peak_kb = sampler.finish();
    let hwm_after_kb = status_kb(server.pid, "VmHWM")?;
    let after_kb = status_kb(server.pid, "VmRSS")?;
    let (line, status) = result;
    let outcome = line?;
    ensure!(status?.success(), "the upload client failed");
    let stored = outcome["answer"]["files"].as_array().map_or(0, Vec::len);
    if outcome["status"] != 200 || stored as u64 != args.files {
        bail!("the upload was not accepted: {outcome}");
    }
    let seconds = outcome["seconds"].as_f64().unwrap_or(f64::NAN);
    let body_bytes = outcome["body_bytes"].as_u64().unwrap_or(0);
    let growth_kb = peak_kb.saturating_sub(before_kb);
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "scenario": "upload",
            "goal": "API RSS growth during a 1 GB upload <= 64 MB",
            "files": args.files,
            "file_bytes": args.file_bytes,
            "body_bytes": body_bytes,
            "upload_seconds": round(seconds, 2),
            "mb_per_second": round(body_bytes as f64 / 1e6 / seconds, 1),
            "rss_before_mib": mib(before_kb),
            "rss_peak_sampled_mib": mib(peak_kb),
            "rss_after_mib": mib(after_kb),
            "vm_hwm_before_mib": mib(hwm_before_kb),
            "vm_hwm_after_mib": mib(hwm_after_kb),
            "growth_mib": mib(growth_kb),
            "growth_mb": round(growth_kb as f64 * 1024.0 / 1e6, 1),
            "operation_id": outcome["answer"]["operation_id"],
        }))?
    );
    drop(server);
    Ok(())
}
