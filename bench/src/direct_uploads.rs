//! `bench direct-uploads`: the same shoot (20 files of 50 MB) sent to the
//! API on the S3 profile (an `s3s-fs` server on loopback) by its two doors,
//! tus through the API and direct uploads to the bucket, with every byte
//! between the client and the API counted by a link in front of it. The
//! figures: each door's throughput, and the API's traffic (both ways) per
//! gigabyte uploaded, the direct door's as a ratio of the tus door's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::uploads::{Server, address_of, free_port, link, send_shoot, shoot, start_api, through};

/// The binary `scripts/test` installs for the suite's S3 tests.
const S3S_FS_BINARY: &str = "/opt/s3s-fs/bin/s3s-fs";

/// Options of `bench direct-uploads`.
#[derive(Debug, Args)]
pub struct DirectArgs {
    /// Files in the shoot.
    #[arg(long, default_value_t = 20)]
    files: usize,
    /// Size of each file, in MB.
    #[arg(long, default_value_t = 50)]
    file_mb: u64,
    /// Bytes per part (direct) and per PATCH (tus), in MB.
    #[arg(long, default_value_t = 8)]
    part_mb: u64,
    /// Parts of one file sent at once (direct).
    #[arg(long, default_value_t = 4)]
    parallel: usize,
}

/// `s3s-fs` on a free port with one bucket, killed when dropped.
struct Bucket {
    child: Child,
    env: Vec<(String, String)>,
}

impl Drop for Bucket {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_bucket(root: &Path) -> anyhow::Result<Bucket> {
    let binary = std::env::var("S3S_FS_BINARY").unwrap_or_else(|_| S3S_FS_BINARY.to_owned());
    std::fs::create_dir_all(root.join("media"))?;
    let port = free_port()?;
    let secret = format!("bench-{}", ulid::Ulid::generate());
    let child = Command::new(&binary)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", "bench", "--secret-key", &secret])
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("run {binary} (S3S_FS_BINARY names another)"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("s3s-fs did not listen on {port}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let env = [
        ("OBJECT_STORE_URL", "s3://media".to_owned()),
        ("AWS_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        ("AWS_ACCESS_KEY_ID", "bench".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_REGION", "us-east-1".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    Ok(Bucket { child, env })
}

fn api_request(
    client: &Client,
    server: &Server,
    method: reqwest::Method,
    url: &str,
) -> reqwest::RequestBuilder {
    let mut builder = client
        .request(method, url)
        .header("X-Idempotency-Key", ulid::Ulid::generate().to_string());
    for (name, value) in &server.headers {
        builder = builder.header(name, value);
    }
    builder
}

/// Sends one file by the direct door: its creation and completion through
/// `api` (the counted link), its parts straight to the bucket.
async fn send_direct(
    client: &Client,
    server: &Server,
    api: &str,
    path: &Path,
    args: &DirectArgs,
) -> anyhow::Result<()> {
    let bytes = tokio::fs::read(path).await?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("p.jpg");
    let created = api_request(
        client,
        server,
        reqwest::Method::POST,
        &format!("{api}/api/v1/direct-uploads"),
    )
    .json(&json!({
        "filename": name,
        "size_bytes": bytes.len(),
        "sha256": hex::encode(Sha256::digest(&bytes)),
        "part_size": args.part_mb * 1024 * 1024,
    }))
    .send()
    .await?;
    if created.status() != StatusCode::CREATED {
        bail!(
            "creation answered {}: {}",
            created.status(),
            created.text().await?
        );
    }
    let upload: Value = created.json().await?;
    let parts = upload["parts"].as_array().context("parts")?.clone();
    let bytes = &bytes;
    let sent: Vec<anyhow::Result<Value>> = futures::stream::iter(parts)
        .map(|part| async move {
            let offset = part["offset"].as_u64().context("offset")? as usize;
            let size = part["size_bytes"].as_u64().context("size")? as usize;
            let answer = client
                .put(part["url"].as_str().context("url")?)
                .body(bytes[offset..offset + size].to_vec())
                .send()
                .await?;
            if answer.status() != StatusCode::OK {
                bail!("part {} answered {}", part["part_number"], answer.status());
            }
            let etag = answer.headers()["etag"].to_str()?.to_owned();
            Ok(json!({"part_number": part["part_number"], "etag": etag}))
        })
        .buffer_unordered(args.parallel)
        .collect()
        .await;
    let sent = sent.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let upload_id = upload["upload_id"].as_str().context("upload_id")?;
    let completed = api_request(
        client,
        server,
        reqwest::Method::POST,
        &format!("{api}/api/v1/direct-uploads/{upload_id}/complete"),
    )
    .json(&json!({ "parts": sent }))
    .send()
    .await?;
    if completed.status() != StatusCode::OK {
        bail!(
            "completion answered {}: {}",
            completed.status(),
            completed.text().await?
        );
    }
    Ok(())
}

/// Runs both doors and prints the figures.
pub async fn compare(args: DirectArgs) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let file_bytes = args.file_mb * 1024 * 1024;
    eprintln!(
        "writing the shoot: {} files of {} MB",
        args.files, args.file_mb
    );
    let files: Vec<PathBuf> = shoot(work.path(), args.files, file_bytes)?;
    let total = file_bytes * args.files as u64;
    let gigabytes = total as f64 / (1024.0 * 1024.0 * 1024.0);
    let bucket = start_bucket(&work.path().join("bucket"))?;
    let client = Client::builder().build()?;
    let server = start_api(&client, &work.path().join("api"), &bucket.env).await?;
    let base = server
        .endpoint
        .strip_suffix("/api/v1/uploads")
        .context("the API's base")?
        .to_owned();

    let tus_link = link(address_of(&server.endpoint)?, None).await?;
    let tus_endpoint = through(&server.endpoint, tus_link.address)?;
    let began = Instant::now();
    send_shoot(
        &client,
        &server,
        &tus_endpoint,
        &files,
        args.part_mb * 1024 * 1024,
    )
    .await?;
    let tus_rate = total as f64 / (1024.0 * 1024.0) / began.elapsed().as_secs_f64();
    let tus_bytes = tus_link.up.load(Ordering::SeqCst) + tus_link.down.load(Ordering::SeqCst);
    eprintln!("tus: {tus_rate:.1} MB/s, {tus_bytes} bytes through the API");

    let direct_link = link(address_of(&server.endpoint)?, None).await?;
    let direct_api = through(&base, direct_link.address)?;
    let direct_api = direct_api.trim_end_matches('/').to_owned();
    let began = Instant::now();
    for path in &files {
        send_direct(&client, &server, &direct_api, path, &args).await?;
    }
    let direct_rate = total as f64 / (1024.0 * 1024.0) / began.elapsed().as_secs_f64();
    let direct_bytes =
        direct_link.up.load(Ordering::SeqCst) + direct_link.down.load(Ordering::SeqCst);
    eprintln!("direct: {direct_rate:.1} MB/s, {direct_bytes} bytes through the API");

    let per_gb = |bytes: u64| bytes as f64 / gigabytes;
    println!("| door | throughput | bytes through the API per GB uploaded |");
    println!("|---|---:|---:|");
    println!(
        "| tus (`/api/v1/uploads`, {} MB PATCHes) | {tus_rate:.1} MB/s | {:.0} ({:.1} MB) |",
        args.part_mb,
        per_gb(tus_bytes),
        per_gb(tus_bytes) / (1024.0 * 1024.0)
    );
    println!(
        "| direct (`/api/v1/direct-uploads`, {} MB parts, {} at once) | {direct_rate:.1} MB/s | {:.0} ({:.1} KB) |",
        args.part_mb,
        args.parallel,
        per_gb(direct_bytes),
        per_gb(direct_bytes) / 1024.0
    );
    println!(
        "| direct ÷ tus | {:.2} | {:.5} |",
        direct_rate / tus_rate,
        direct_bytes as f64 / tus_bytes as f64
    );
    drop(server);
    drop(bucket);
    Ok(())
}
