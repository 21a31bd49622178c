//! `bench sse`: the API's RSS with 10,000 open progress streams, and the
//! `sse-client` child that holds them.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::{Value, json};

use super::api_server::{ApiArgs, ApiServer, start_api};
use super::launch::start_client;
use super::rss::{RssSampler, status_kb};
use crate::figures::{mib, round};

/// Settings of the progress-stream benchmark.
#[derive(Debug, Clone, Args)]
pub struct SseArgs {
    /// The server.
    #[command(flatten)]
    api: ApiArgs,
    /// Streams held open at once.
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// Streams being opened at once.
    #[arg(long, default_value_t = 128)]
    opening: usize,
}

/// `bench sse-client` (a child on core 1).
#[derive(Debug, Clone, Args)]
pub struct SseClientArgs {
    /// The progress URL (with its token).
    #[arg(long)]
    url: String,
    /// Streams held open at once.
    #[arg(long)]
    streams: usize,
    /// Streams being opened at once.
    #[arg(long)]
    opening: usize,
}

/// Opens one stream and waits for its first event.
async fn open_stream(client: &reqwest::Client, url: &str) -> anyhow::Result<reqwest::Response> {
    let mut response = client
        .get(url)
        .header("accept", "text/event-stream")
        .send()
        .await?;
    ensure!(
        response.status().is_success(),
        "status {}",
        response.status()
    );
    // The stream may open with its `retry:` field alone; the first event
    // proper is the snapshot.
    let mut opening = Vec::new();
    while !opening.windows(8).any(|w| w == b"snapshot") {
        ensure!(
            !opening.windows(5).any(|w| w == b"data:"),
            "first event: {:?}",
            String::from_utf8_lossy(&opening)
        );
        let chunk = response.chunk().await?.with_context(|| {
            format!(
                "stream ended before its snapshot: {:?}",
                String::from_utf8_lossy(&opening)
            )
        })?;
        opening.extend_from_slice(&chunk);
    }
    Ok(response)
}

/// `bench sse-client`: opens the streams, one HTTP/1.1 connection each,
/// prints how many are open, and holds them until stdin closes.
pub async fn sse_client(args: SseClientArgs) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(0)
        .build()?;
    let permits = Arc::new(tokio::sync::Semaphore::new(args.opening.max(1)));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.streams {
        let permit = permits.clone().acquire_owned().await?;
        let (client, url) = (client.clone(), args.url.clone());
        tasks.spawn(async move {
            let opened = open_stream(&client, &url).await;
            drop(permit);
            opened
        });
    }
    let mut open = Vec::with_capacity(args.streams);
    let mut errors: Vec<String> = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined? {
            Ok(response) => open.push(response),
            Err(err) => errors.push(format!("{err:#}")),
        }
    }
    errors.sort();
    errors.dedup();
    // The streams stay open until the parent has measured and closes stdin.
    crate::process::announce_and_wait(&json!({
        "open": open.len(),
        "failed": args.streams - open.len(),
        "errors": errors.iter().take(5).collect::<Vec<_>>(),
        "seconds": started.elapsed().as_secs_f64(),
    }))
    .await?;
    drop(open);
    Ok(())
}

/// One small upload, for an operation to follow; returns its progress URL.
async fn one_operation(server: &ApiServer, key: &str) -> anyhow::Result<Value> {
    let boundary = "bench-sse-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"one.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&[0xFF, 0xD8, 0xFF, 0xE0]);
    body.extend_from_slice(&[0x5A; 4096]);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/media/upload", server.base_url))
        .header("x-api-key", key)
        .header("x-idempotency-key", ulid::Ulid::generate().to_string())
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await?;
    let status = response.status();
    let answer: Value = response.json().await?;
    ensure!(status.is_success(), "upload: {status} {answer}");
    Ok(answer)
}

/// Open file descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// `bench sse`: the API's RSS with 10,000 progress streams open.
pub async fn sse(args: SseArgs) -> anyhow::Result<()> {
    let nofile = args.api.nofile()?;
    ensure!(
        nofile >= args.streams as u64 + 256,
        "a file-descriptor limit of {nofile} is too low for {} streams",
        args.streams
    );
    let (server, key) = start_api(&args.api).await?;
    let answer = one_operation(&server, &key).await?;
    let progress_url = answer["progress_url"].as_str().context("progress_url")?;
    let path = &progress_url[progress_url
        .find("/v1/progress/")
        .context("progress path")?..];
    let url = format!("{}{path}", server.base_url);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before_kb = status_kb(server.pid, "VmRSS")?;
    let fds_before = open_fds(server.pid);
    let sampler = RssSampler::start(server.pid);
    let mut client = start_client(
        args.api.nofile()?,
        &[
            "sse-client".to_owned(),
            "--url".into(),
            url,
            "--streams".into(),
            args.streams.to_string(),
            "--opening".into(),
            args.opening.to_string(),
        ],
    )?;
    let opened = tokio::task::spawn_blocking({
        let stdout = client.stdout.take().context("client stdout")?;
        move || -> anyhow::Result<Value> {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line)?;
            serde_json::from_str(line.trim()).with_context(|| format!("client said {line:?}"))
        }
    })
    .await??;
    // Let the streams settle, then read the figures with all of them open.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let open_kb = status_kb(server.pid, "VmRSS")?;
    let fds_open = open_fds(server.pid);
    let peak_kb = sampler.finish();
    let hwm_kb = status_kb(server.pid, "VmHWM")?;
    drop(client.stdin.take());
    let status = tokio::task::spawn_blocking(move || client.wait()).await??;
    ensure!(status.success(), "the SSE client failed: {status}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_kb = status_kb(server.pid, "VmRSS")?;
    let open = opened["open"].as_u64().unwrap_or(0);
    let kib_per_stream = if open > 0 {
        round(open_kb.saturating_sub(before_kb) as f64 / open as f64, 1)
    } else {
        f64::NAN
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "scenario": "sse",
            "goal": "API RSS with 10,000 open progress streams <= 500 MB",
            "streams_requested": args.streams,
            "client": opened,
            "api_open_fds_before": fds_before,
            "api_open_fds_with_streams": fds_open,
            "rss_before_mib": mib(before_kb),
            "rss_with_streams_open_mib": mib(open_kb),
            "rss_with_streams_open_mb": round(open_kb as f64 * 1024.0 / 1e6, 1),
            "rss_peak_sampled_mib": mib(peak_kb),
            "vm_hwm_mib": mib(hwm_kb),
            "rss_after_close_mib": mib(after_kb),
            "kib_per_stream": kib_per_stream,
        }))?
    );
    ensure!(
        open == args.streams as u64,
        "only {open} of {} streams opened",
        args.streams
    );
    drop(server);
    Ok(())
}
