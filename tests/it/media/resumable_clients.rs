//! Real tus clients, unmodified, upload a shoot to `/api/v1/uploads`
//! through a link that drops every megabyte and a half: tuspy (Python, sha1
//! checksums on every chunk) and tus-js-client (Node). Every photo becomes a
//! ready media item of the listing with the sha256 of the file sent, and
//! the bytes that crossed the link are the files' plus at most one chunk
//! per drop (and the requests' headers).

use std::io::Cursor;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::StatusCode;
use serde_json::Value;
use sha2::{Digest, Sha256};
use storage::ids::MediaId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Bytes between two drops of the link (client to server).
const DROP_EVERY: u64 = 1_500_000;
/// The clients' chunk: one request's bytes at most.
const CHUNK: u64 = 512 * 1024;
/// Allowance for one request's line and headers.
const HEADERS: u64 = 2048;

/// A TCP link in front of the API that drops the connection carrying the
/// client's bytes each time [`DROP_EVERY`] more of them went through,
/// counting what the client sent and how often it dropped.
struct LinkThatDrops {
    address: SocketAddr,
    sent: Arc<AtomicU64>,
    drops: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LinkThatDrops {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LinkThatDrops {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let drops = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let (s, d, r) = (sent.clone(), drops.clone(), requests.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (s, d, r) = (s.clone(), d.clone(), r.clone());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    carry(client, server, s, d, r).await;
                });
            }
        });
        Self {
            address,
            sent,
            drops,
            requests,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

/// Carries one connection both ways until either side ends or the link
/// drops it; dropping both sockets closes them.
async fn carry(
    client: TcpStream,
    server: TcpStream,
    sent: Arc<AtomicU64>,
    drops: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upward = async {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let Ok(read) = client_read.read(&mut buffer).await else {
                return;
            };
            if read == 0 {
                return;
            }
            // Request lines, for the headers' allowance.
            let text = &buffer[..read];
            let starts = [&b"PATCH "[..], b"POST ", b"HEAD ", b"OPTIONS ", b"DELETE "];
            requests.fetch_add(
                starts
                    .iter()
                    .map(|start| text.windows(start.len()).filter(|w| w == start).count() as u64)
                    .sum(),
                Ordering::SeqCst,
            );
            let before = sent.load(Ordering::SeqCst);
            let next_drop = (before / DROP_EVERY + 1) * DROP_EVERY;
            let allowed = (next_drop - before).min(read as u64) as usize;
            if server_write.write_all(&buffer[..allowed]).await.is_err() {
                return;
            }
            sent.fetch_add(allowed as u64, Ordering::SeqCst);
            if allowed < read || before + read as u64 == next_drop {
                drops.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
    };
    let downward = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    };
    tokio::select! {
        () = upward => {}
        () = downward => {}
    }
}

/// A photo of noise (it compresses like a detailed one): some megabytes.
fn noisy_jpeg(width: u32, height: u32, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    let image = image::RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let [a, b, c, _] = state.to_le_bytes();
        image::Rgb([a, b, c])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image)
        .write_to(&mut out, image::ImageFormat::Jpeg)
        .unwrap();
    out.into_inner()
}

/// A shoot of three photos in a folder; returns the folder and the photos.
fn shoot(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    (1..=3)
        .map(|n| {
            let bytes = noisy_jpeg(1600, 1200, n);
            let path = dir.join(format!("room-{n}.jpg"));
            std::fs::write(&path, &bytes).unwrap();
            (path, bytes)
        })
        .collect()
}

/// A client's command, and the folder it runs from (kept while it runs).
type Client = (Command, Option<tempfile::TempDir>);

/// Runs `command`, which prints one JSON line per file.
async fn run(mut command: Command) -> Vec<Value> {
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("the client runs");
    assert!(
        output.status.success(),
        "the client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Uploads the shoot with `client` (given the endpoint, listing and batch)
/// through a link that drops, then checks the listing's media and the bytes.
/// The listing holds each photo as a ready item of its name, size and sha256.
async fn listing_holds_the_photos(
    media: &Media,
    number: &str,
    photos: &[(std::path::PathBuf, Vec<u8>)],
) {
    let items = listing_media(media, number).await;
    assert_eq!(items.len(), photos.len(), "{items:?}");
    let tenant = media.ctx.live();
    for (path, bytes) in photos {
        let name = path.file_name().unwrap().to_str().unwrap();
        let item = items
            .iter()
            .find(|item| item["filename"] == name)
            .unwrap_or_else(|| panic!("{name} in {items:?}"));
        assert_eq!(item["status"], "ready", "{item}");
        let id =
            MediaId::parse(item["id"].as_str().or(item["media_id"].as_str()).unwrap()).unwrap();
        let stored = media
            .ctx
            .app
            .store
            .media()
            .item(&tenant, &id)
            .await
            .unwrap();
        assert_eq!(
            stored.content_sha256,
            hex::encode(Sha256::digest(bytes)),
            "{name}"
        );
        assert_eq!(stored.size_bytes, bytes.len() as i64, "{name}");
    }
}

async fn shoot_through_a_dropping_link(
    client: impl FnOnce(&str, &str, &str, &str, &[std::path::PathBuf]) -> Client,
) {
    let media = Media::new(tests::Backend::Sqlite).await;
    let number = media.ctx.listing().await;
    let folder = tempfile::tempdir().unwrap();
    let photos = shoot(folder.path());
    let batch = {
        let response = media
            .ctx
            .app
            .client
            .post(media.ctx.app.url("/api/v1/upload-batches"))
            .header("X-API-Key", &media.key)
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&serde_json::json!({"file_count": photos.len(), "listing_number": number}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json::<Value>().await.unwrap()
    };
    let stream = media
        .open_stream(&media.local(batch["progress_url"].as_str().unwrap()), None)
        .await;
    let upstream: SocketAddr = media
        .ctx
        .app
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let link = LinkThatDrops::start(upstream).await;
    let paths: Vec<_> = photos.iter().map(|(path, _)| path.clone()).collect();
    let (command, _work) = client(
        &link.url("/api/v1/uploads"),
        &media.key,
        &number,
        batch["batch_id"].as_str().unwrap(),
        &paths,
    );
    let uploaded = run(command).await;
    assert_eq!(uploaded.len(), photos.len(), "{uploaded:?}");

    let events = read_events(stream).await;
    assert_eq!(events.last().unwrap().0, "completed", "{events:?}");
    listing_holds_the_photos(&media, &number, &photos).await;

    let drops = link.drops.load(Ordering::SeqCst);
    let sent = link.sent.load(Ordering::SeqCst);
    let requests = link.requests.load(Ordering::SeqCst);
    let files: u64 = photos.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    eprintln!("{files} bytes of files: {sent} sent in {requests} requests, {drops} drops");
    assert!(
        drops >= 2,
        "the link dropped {drops} times over {sent} bytes"
    );
    assert!(
        sent <= files + drops * CHUNK + requests * HEADERS,
        "{sent} bytes sent for {files} bytes of files, {drops} drops, {requests} requests"
    );
}

#[tokio::test]
async fn tuspy_uploads_a_shoot_through_a_link_that_drops() {
    shoot_through_a_dropping_link(|endpoint, key, number, batch, paths| {
        let mut command = Command::new(tests::tools::python_tool("python"));
        command
            .arg(tests::services::workspace_root().join("tests/clients/tus_upload.py"))
            .args([endpoint, key, number, batch, &CHUNK.to_string()])
            .args(paths);
        (command, None)
    })
    .await;
}

#[tokio::test]
async fn tus_js_client_uploads_a_shoot_through_a_link_that_drops() {
    shoot_through_a_dropping_link(|endpoint, key, number, batch, paths| {
        let work = tempfile::tempdir_in(tests::tools::node_tools()).unwrap();
        let script = work.path().join("tus_upload.mjs");
        std::fs::copy(
            tests::services::workspace_root().join("tests/clients/tus_upload.mjs"),
            &script,
        )
        .unwrap();
        let mut command = Command::new("node");
        command
            .arg(&script)
            .args([endpoint, key, number, batch, &CHUNK.to_string()])
            .args(paths);
        (command, Some(work))
    })
    .await;
}

/// `api upload DIR --listing N`, through a link that drops: a first run is
/// interrupted (SIGINT, as Ctrl-C) midway, the same command run again
/// resumes every file from the server's offset, and the listing's media
/// end ready with a one-line summary. What crossed the link is the files'
/// bytes plus at most one chunk per drop and per interruption.
#[tokio::test]
async fn api_upload_resumes_a_folder_after_ctrl_c_and_a_dropping_link() {
    let media = Media::new(tests::Backend::Sqlite).await;
    let number = media.ctx.listing().await;
    let folder = tempfile::tempdir().unwrap();
    let photos = shoot(folder.path());
    std::fs::write(folder.path().join("notes.txt"), "not a photo: skipped").unwrap();
    let upstream: SocketAddr = media
        .ctx
        .app
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let link = LinkThatDrops::start(upstream).await;
    let command = || {
        let mut command = tokio::process::Command::new(tests::binaries::binary("api"));
        command
            .arg("upload")
            .arg(folder.path())
            .args([
                "--listing",
                &number,
                "--api-url",
                &link.url(""),
                "--key",
                &media.key,
            ])
            .args(["--chunk-mb", "1", "--parallel", "2"])
            .env("RUST_LOG", "api=debug")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    };

    // The first run, interrupted once half the shoot went through.
    let files: u64 = photos.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    let began = std::time::Instant::now();
    let first = command().spawn().unwrap();
    while link.sent.load(Ordering::SeqCst) < files / 2 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = first.id().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    eprintln!("interrupting at {:?}", began.elapsed());
    let first = first.wait_with_output().await.unwrap();
    eprintln!(
        "first run ended at {:?}: {}",
        began.elapsed(),
        String::from_utf8_lossy(&first.stderr)
    );
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(!first.status.success(), "{said}");
    assert!(said.contains("Run the same command again"), "{said}");
    assert!(folder.path().join(".api-upload.json").is_file());

    // The same command again: it resumes and waits for the media.
    let second = command().output().await.unwrap();
    eprintln!(
        "second run ended at {:?}: {}",
        began.elapsed(),
        String::from_utf8_lossy(&second.stderr)
    );
    let summary = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "{summary}\n{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let line = summary.lines().last().unwrap_or_default();
    assert!(line.starts_with("3 files ("), "{line}");
    assert!(line.contains(&format!("uploaded to {number}")), "{line}");
    assert!(line.contains("resumed from an earlier run"), "{line}");
    assert!(line.ends_with("3 ready, 0 failed"), "{line}");

    listing_holds_the_photos(&media, &number, &photos).await;
    let drops = link.drops.load(Ordering::SeqCst);
    let sent = link.sent.load(Ordering::SeqCst);
    let requests = link.requests.load(Ordering::SeqCst);
    let chunk = 1024 * 1024;
    eprintln!(
        "api upload: {files} bytes of files, {sent} sent in {requests} requests, {drops} drops"
    );
    assert!(drops >= 2, "the link dropped {drops} times");
    // Two files were in flight when the run was interrupted.
    assert!(
        sent <= files + (drops + 2) * chunk + requests * HEADERS,
        "{sent} bytes sent for {files} bytes of files, {drops} drops, {requests} requests"
    );
}
