//! `bench uploads`: a photographer's shoot (20 files of 50 MB, 1 GB) sent
//! through tus by the same client, with the same chunk size, to our API
//! (`api serve --no-workers`, the release binary beside this one, embedded
//! profile) and to tus's reference Node server (`@tus/server` with
//! `@tus/file-store`, pinned in `bench/tus`), each pinned to core 0 while
//! the client runs on core 1. Rounds alternate the servers; the figures are
//! each server's median throughput, their ratio, the API's resident memory
//! before and at its peak, and, with the link dropping every
//! `--cut-every-mb`, the bytes the client sent per byte of the files.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clap::Args;
use reqwest::{Client, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::process::pinned;

/// Options of `bench uploads`.
#[derive(Debug, Args)]
pub struct UploadArgs {
    /// Files in the shoot.
    #[arg(long, default_value_t = 20)]
    files: usize,
    /// Size of each file, in MB.
    #[arg(long, default_value_t = 50)]
    file_mb: u64,
    /// Bytes per PATCH, in MB (the same for both servers).
    #[arg(long, default_value_t = 8)]
    chunk_mb: u64,
    /// Rounds per server (alternating).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The link drops every this many MB in the resumed run.
    #[arg(long, default_value_t = 100)]
    cut_every_mb: u64,
}

/// A server under test, killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) endpoint: String,
    pub(crate) headers: Vec<(String, String)>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The shoot: files that open as JPEG (the API judges formats by content)
/// and go on with noise, which neither server can compress.
pub(crate) fn shoot(dir: &Path, files: usize, bytes: u64) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for index in 0..files {
        let path = dir.join(format!("photo-{index:03}.jpg"));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        file.write_all(&[
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00,
        ])?;
        let mut written = 11u64;
        let mut block = vec![0u8; 1 << 20];
        while written < bytes {
            for word in block.chunks_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                word.copy_from_slice(&state.to_le_bytes()[..word.len()]);
            }
            let take = (bytes - written).min(block.len() as u64) as usize;
            file.write_all(&block[..take])?;
            written += take as u64;
        }
        file.flush()?;
        paths.push(path);
    }
    Ok(paths)
}

fn api_binary() -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name("api");
    if !path.exists() {
        bail!(
            "{} is missing: build it beside this binary (cargo build --release -p api -p bench)",
            path.display()
        );
    }
    Ok(path)
}

fn admin(api: &Path, data_dir: &Path, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let output = Command::new(api)
        .arg("admin")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()?;
    if !output.status.success() {
        bail!(
            "api admin {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Starts `api serve --no-workers` on core 0 with an agency and a key, its
/// environment `env` added (an object store's, say).
pub(crate) async fn start_api(
    client: &Client,
    data_dir: &Path,
    env: &[(String, String)],
) -> anyhow::Result<Server> {
    let api = api_binary()?;
    std::fs::create_dir_all(data_dir)?;
    let migrate = Command::new(&api)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .arg("migrate")
        .arg("--data-dir")
        .arg(data_dir)
        .output()?;
    if !migrate.status.success() {
        bail!("api migrate: {}", String::from_utf8_lossy(&migrate.stderr));
    }
    let agency = admin(&api, data_dir, &["create-agency", "--name", "Bench Media"])?;
    let agency_id = agency["agency_id"]
        .as_str()
        .context("agency_id")?
        .to_owned();
    let key = admin(
        &api,
        data_dir,
        &[
            "create-key",
            "--agency",
            &agency_id,
            "--name",
            "bench",
            "--scopes",
            "media:write",
        ],
    )?;
    let key = key["key"].as_str().context("key")?.to_owned();
    let listen = format!("127.0.0.1:{}", free_port()?);
    let ops = format!("127.0.0.1:{}", free_port()?);
    let args: Vec<String> = [
        "serve",
        "--no-workers",
        "--listen",
        &listen,
        "--ops-listen",
        &ops,
        "--data-dir",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .chain([data_dir.display().to_string()])
    .collect();
    let child = pinned(0, &api.to_string_lossy(), &args)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let server = Server {
        child,
        endpoint: format!("http://{listen}/api/v1/uploads"),
        headers: vec![("X-API-Key".to_owned(), key)],
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client
            .get(format!("http://{listen}/api/openapi.json"))
            .send()
            .await;
        if ready.is_ok_and(|response| response.status() == StatusCode::OK) {
            return Ok(server);
        }
        if Instant::now() > deadline {
            bail!("api serve did not come up");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts tus's reference server on core 0 (installing it once).
fn start_reference(data_dir: &Path) -> anyhow::Result<Server> {
    // The workspace, where `bench/tus` and `target/` are.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .context("the workspace")?;
    let tools = root.join("target/bench-tools/tus");
    std::fs::create_dir_all(&tools)?;
    for file in ["package.json", "package-lock.json", "tus_server.mjs"] {
        std::fs::copy(root.join("bench/tus").join(file), tools.join(file))?;
    }
    if !tools.join("node_modules/@tus/server").is_dir() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&tools)
            .status()
            .context("npm (Debian's nodejs and npm)")?;
        if !status.success() {
            bail!("npm ci of bench/tus failed");
        }
    }
    std::fs::create_dir_all(data_dir)?;
    let port = free_port()?.to_string();
    let args = [
        tools.join("tus_server.mjs").display().to_string(),
        port,
        data_dir.display().to_string(),
    ];
    let mut child = pinned(0, "node", &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let announced: serde_json::Value = serde_json::from_str(line.trim())
        .with_context(|| format!("the reference server said {line:?}"))?;
    Ok(Server {
        endpoint: announced["url"].as_str().context("url")?.to_owned(),
        child,
        headers: Vec::new(),
    })
}

/// The server's address, for the dropping link.
pub(crate) fn address_of(endpoint: &str) -> anyhow::Result<SocketAddr> {
    let url = reqwest::Url::parse(endpoint)?;
    Ok(format!(
        "{}:{}",
        url.host_str().context("host")?,
        url.port().context("port")?
    )
    .parse()?)
}

/// The same endpoint through `link`.
pub(crate) fn through(endpoint: &str, link: SocketAddr) -> anyhow::Result<String> {
    let mut url = reqwest::Url::parse(endpoint)?;
    url.set_port(Some(link.port()))
        .map_err(|()| anyhow!("port"))?;
    Ok(url.to_string())
}

fn request(
    client: &Client,
    server: &Server,
    method: reqwest::Method,
    url: &str,
) -> reqwest::RequestBuilder {
    let mut builder = client.request(method, url).header("Tus-Resumable", "1.0.0");
    for (name, value) in &server.headers {
        builder = builder.header(name, value);
    }
    builder
}

/// Sends one file by tus from its creation to its last byte, resuming from
/// the server's offset (HEAD) whenever a request fails.
async fn send_file(
    client: &Client,
    server: &Server,
    endpoint: &str,
    path: &Path,
    chunk: u64,
) -> anyhow::Result<()> {
    let bytes = tokio::fs::read(path).await?;
    let length = bytes.len() as u64;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("photo.jpg");
    let metadata = format!(
        "filename {},filetype {}",
        STANDARD.encode(name),
        STANDARD.encode("image/jpeg")
    );
    let created = request(client, server, reqwest::Method::POST, endpoint)
        .header("Upload-Length", length.to_string())
        .header("Upload-Metadata", metadata)
        .send()
        .await?;
    if created.status() != StatusCode::CREATED {
        bail!("creation answered {}", created.status());
    }
    let location = created.headers()["location"].to_str()?.to_owned();
    let url = reqwest::Url::parse(endpoint)?.join(&location)?.to_string();
    let mut offset = 0u64;
    let mut failures = 0;
    while offset < length {
        let end = (offset + chunk).min(length);
        let sent = request(client, server, reqwest::Method::PATCH, &url)
            .header("Upload-Offset", offset.to_string())
            .header("Content-Type", "application/offset+octet-stream")
            .body(bytes[offset as usize..end as usize].to_vec())
            .send()
            .await;
        match sent {
            Ok(response) if response.status() == StatusCode::NO_CONTENT => {
                offset = response.headers()["upload-offset"].to_str()?.parse()?;
            }
            _ => {
                failures += 1;
                if failures > 100 {
                    bail!("{name}: too many failed requests");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                // The server's offset, through a fresh connection.
                loop {
                    let head = request(client, server, reqwest::Method::HEAD, &url)
                        .send()
                        .await;
                    if let Ok(head) = head
                        && head.status() == StatusCode::OK
                    {
                        offset = head.headers()["upload-offset"].to_str()?.parse()?;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    Ok(())
}

pub(crate) async fn send_shoot(
    client: &Client,
    server: &Server,
    endpoint: &str,
    files: &[PathBuf],
    chunk: u64,
) -> anyhow::Result<Duration> {
    let began = Instant::now();
    for path in files {
        send_file(client, server, endpoint, path, chunk).await?;
    }
    Ok(began.elapsed())
}

/// Kilobytes of resident memory of `pid` now and at its peak.
pub(crate) fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A TCP link to `upstream` that counts the bytes each way and, with
/// `drop_every`, drops the connection carrying the client's bytes each time
/// that many more have gone up.
pub(crate) struct Link {
    pub(crate) address: SocketAddr,
    /// Bytes from the client to the server.
    pub(crate) up: Arc<AtomicU64>,
    /// Bytes from the server to the client.
    pub(crate) down: Arc<AtomicU64>,
}

pub(crate) async fn link(upstream: SocketAddr, drop_every: Option<u64>) -> anyhow::Result<Link> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (up, down) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let counters = (up.clone(), down.clone());
    let every = drop_every.unwrap_or(u64::MAX);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (sent, received) = counters.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let upward = async {
                    let mut buffer = vec![0u8; 256 * 1024];
                    loop {
                        let Ok(read) = client_read.read(&mut buffer).await else {
                            return;
                        };
                        if read == 0 {
                            return;
                        }
                        let before = sent.load(Ordering::SeqCst);
                        let next_drop = (before / every).saturating_add(1).saturating_mul(every);
                        let allowed = (next_drop - before).min(read as u64) as usize;
                        if server_write.write_all(&buffer[..allowed]).await.is_err() {
                            return;
                        }
                        sent.fetch_add(allowed as u64, Ordering::SeqCst);
                        if allowed < read || before + read as u64 == next_drop {
                            return;
                        }
                    }
                };
                let downward = async {
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let Ok(read) = server_read.read(&mut buffer).await else {
                            return;
                        };
                        if read == 0 || client_write.write_all(&buffer[..read]).await.is_err() {
                            return;
                        }
                        received.fetch_add(read as u64, Ordering::SeqCst);
                    }
                };
                tokio::select! {
                    () = upward => {}
                    () = downward => {}
                }
            });
        }
    });
    Ok(Link { address, up, down })
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs the comparison and prints its figures.
pub async fn compare(args: UploadArgs) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let file_bytes = args.file_mb * 1024 * 1024;
    let chunk = args.chunk_mb * 1024 * 1024;
    eprintln!(
        "writing the shoot: {} files of {} MB",
        args.files, args.file_mb
    );
    let files = shoot(work.path(), args.files, file_bytes)?;
    let total = file_bytes * args.files as u64;
    let client = Client::builder().build()?;
    let api = start_api(&client, &work.path().join("api"), &[]).await?;
    let reference = start_reference(&work.path().join("reference"))?;
    let api_pid = api.child.id();
    let (rss_before, _) = memory(api_pid);
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 0..args.rounds {
        let order: [(&Server, &mut Vec<f64>); 2] = if round % 2 == 0 {
            [(&api, &mut ours), (&reference, &mut theirs)]
        } else {
            [(&reference, &mut theirs), (&api, &mut ours)]
        };
        for (server, figures) in order {
            let took = send_shoot(&client, server, &server.endpoint, &files, chunk).await?;
            let rate = total as f64 / (1024.0 * 1024.0) / took.as_secs_f64();
            eprintln!("round {round}: {} {rate:.1} MB/s", server.endpoint);
            figures.push(rate);
        }
    }
    let (rss_after, rss_peak) = memory(api_pid);
    let mut resent = Vec::new();
    for server in [&api, &reference] {
        let link = link(
            address_of(&server.endpoint)?,
            Some(args.cut_every_mb * 1024 * 1024),
        )
        .await?;
        let endpoint = through(&server.endpoint, link.address)?;
        send_shoot(&client, server, &endpoint, &files, chunk).await?;
        resent.push(link.up.load(Ordering::SeqCst) as f64 / total as f64);
    }
    let (ours, theirs) = (median(ours), median(theirs));
    println!("| figure | API | @tus/server 2.4.5 + @tus/file-store 2.1.1 | ratio |");
    println!("|---|---:|---:|---:|");
    println!(
        "| {} × {} MB by {} MB chunks, median of {} rounds | {ours:.1} MB/s | {theirs:.1} MB/s | {:.2} |",
        args.files,
        args.file_mb,
        args.chunk_mb,
        args.rounds,
        ours / theirs
    );
    println!(
        "| bytes sent per byte of the files, the link dropping every {} MB | {:.3} | {:.3} | |",
        args.cut_every_mb, resent[0], resent[1]
    );
    println!(
        "| API resident memory: before, after, peak (growth) | {} MB, {} MB, {} MB (+{} MB) | | |",
        rss_before / 1024,
        rss_after / 1024,
        rss_peak / 1024,
        rss_peak.saturating_sub(rss_before) / 1024
    );
    Ok(())
}
