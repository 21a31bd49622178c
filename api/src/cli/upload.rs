//! `api upload DIR --listing N`: a shoot's uploader. Every photo (and video,
//! PDF) of the folder goes to the listing through the resumable uploads
//! (tus 1.0 at `/api/v1/uploads`), several at once, with a progress bar per
//! file and one for the whole shoot. The uploads' URLs are kept in the
//! folder (`.api-upload.json`) as soon as they exist, so a run stopped by
//! Ctrl-C or a dropped network resumes when run again: each file from the
//! offset the server has, nothing sent twice. A dropped request is retried
//! from the server's offset a few times before the run gives up. Once every
//! file is up, it follows the batch's progress until the listing's media
//! are ready, and ends with a one-line summary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clap::Args;
use futures::StreamExt;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use reqwest::{Client, Response, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::{Mutex, Semaphore};

use super::listen::ApiAccess;

/// The file that keeps a folder's uploads between runs.
pub const STATE_FILE: &str = ".api-upload.json";
/// File extensions sent (the formats the API accepts, by their usual names).
const EXTENSIONS: [&str; 8] = ["jpg", "jpeg", "png", "webp", "gif", "mp4", "pdf", "jfif"];
/// Attempts of one file's request before the run gives up on it.
const ATTEMPTS: u32 = 8;

/// `api upload`.
#[derive(Debug, Args)]
pub struct Upload {
    /// The folder of the shoot: every JPEG, PNG, WebP, GIF, MP4 and PDF in it.
    dir: PathBuf,
    /// The listing the files belong to.
    #[arg(long)]
    listing: String,
    #[command(flatten)]
    access: ApiAccess,
    /// Files sent at once.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=16))]
    parallel: u16,
    /// Bytes per request, in MB (a dropped request costs at most this much again).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=50))]
    chunk_mb: u64,
    /// Do not wait for the listing's media to be processed.
    #[arg(long)]
    no_wait: bool,
}

/// What a folder's earlier runs left: the batch and each file's upload.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    listing: String,
    batch_id: Option<String>,
    /// How many files the batch announced.
    #[serde(default)]
    batch_files: usize,
    files: BTreeMap<String, FileState>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct FileState {
    size: u64,
    url: String,
    batch_id: String,
    #[serde(default)]
    media_id: Option<String>,
}

/// One file of the shoot.
#[derive(Clone, Debug)]
struct Photo {
    name: String,
    path: PathBuf,
    size: u64,
}

/// What the run shares between its uploads.
struct Run {
    client: Client,
    access: ApiAccess,
    listing: String,
    chunk: u64,
    state: Mutex<State>,
    state_path: PathBuf,
    overall: ProgressBar,
}

/// Runs `api upload`.
pub async fn upload(args: Upload) -> anyhow::Result<()> {
    let photos = photos(&args.dir)?;
    if photos.is_empty() {
        bail!(
            "{} holds no JPEG, PNG, WebP, GIF, MP4 or PDF files",
            args.dir.display()
        );
    }
    let state_path = args.dir.join(STATE_FILE);
    let mut state = read_state(&state_path, &args.listing)?;
    let client = Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .build()?;
    let started = Instant::now();
    let total: u64 = photos.iter().map(|photo| photo.size).sum();
    let pending: Vec<&Photo> = photos
        .iter()
        .filter(|photo| {
            state
                .files
                .get(&photo.name)
                .is_none_or(|file| file.media_id.is_none() || file.size != photo.size)
        })
        .collect();
    let resumed = pending
        .iter()
        .filter(|photo| state.files.contains_key(&photo.name))
        .count();
    // The files this run creates join the folder's batch while it has room
    // for them (a run stopped before it created every upload); otherwise
    // (files added since) they get a batch of their own.
    let fresh = pending
        .iter()
        .filter(|photo| !state.files.contains_key(&photo.name))
        .count();
    let members = state
        .files
        .values()
        .filter(|file| Some(&file.batch_id) == state.batch_id.as_ref())
        .count();
    if state.batch_id.is_none() || (fresh > 0 && members + fresh > state.batch_files) {
        let count = if state.batch_id.is_none() {
            pending.len()
        } else {
            fresh
        };
        state.batch_id = Some(create_batch(&client, &args.access, &args.listing, count).await?);
        state.batch_files = count;
    }
    let batch_id = state
        .batch_id
        .clone()
        .ok_or_else(|| anyhow!("no batch to upload into"))?;
    write_state(&state_path, &state)?;

    let bars = MultiProgress::new();
    let overall = bars.add(ProgressBar::new(total));
    overall.set_style(style(
        "{prefix:>12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ));
    overall.set_prefix("shoot");
    let done_before: u64 = photos
        .iter()
        .filter(|photo| !pending.iter().any(|p| p.name == photo.name))
        .map(|photo| photo.size)
        .sum();
    overall.set_position(done_before);
    let run = Arc::new(Run {
        client,
        access: args.access,
        listing: args.listing.clone(),
        chunk: args.chunk_mb * 1024 * 1024,
        state: Mutex::new(state),
        state_path,
        overall: overall.clone(),
    });
    let permits = Arc::new(Semaphore::new(usize::from(args.parallel)));
    let mut tasks = Vec::new();
    for photo in pending.iter().map(|photo| (*photo).clone()) {
        let bar = bars.add(ProgressBar::new(photo.size));
        bar.set_style(style("{prefix:>12} [{bar:40}] {bytes}/{total_bytes} {msg}"));
        bar.set_prefix(short(&photo.name));
        let (run, permits, batch_id) = (run.clone(), permits.clone(), batch_id.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await?;
            let result = send(&run, &batch_id, &photo, &bar).await;
            match &result {
                Ok(_) => bar.finish_with_message("sent"),
                Err(err) => bar.abandon_with_message(format!("stopped: {err:#}")),
            }
            result
        }));
    }
    let interrupted = tokio::select! {
        results = futures::future::join_all(tasks) => {
            let mut failed = Vec::new();
            for result in results {
                if let Err(err) = result.map_err(anyhow::Error::from).and_then(|r| r) {
                    failed.push(format!("{err:#}"));
                }
            }
            if !failed.is_empty() {
                overall.abandon();
                bail!(
                    "{} of {} files did not finish ({}). Run the same command again: it resumes from what the server has.",
                    failed.len(),
                    pending.len(),
                    failed.join("; ")
                );
            }
            false
        }
        _ = tokio::signal::ctrl_c() => true,
    };
    if interrupted {
        overall.abandon();
        bail!("stopped. Run the same command again: each file resumes from what the server has.");
    }
    overall.finish();
    let (ready, failed) = if args.no_wait {
        (None, None)
    } else {
        let outcome = follow(&run, &batch_id).await?;
        (Some(outcome.0), Some(outcome.1))
    };
    let seconds = started.elapsed().as_secs_f64();
    let megabytes = total as f64 / (1024.0 * 1024.0);
    let processed = match (ready, failed) {
        (Some(ready), Some(failed)) => format!("; {ready} ready, {failed} failed"),
        _ => String::new(),
    };
    println!(
        "{} files ({megabytes:.1} MB) uploaded to {} in {seconds:.0}s{}{processed}",
        photos.len(),
        args.listing,
        if resumed > 0 {
            format!(" ({resumed} resumed from an earlier run)")
        } else {
            String::new()
        },
    );
    Ok(())
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// A file name short enough for a bar's prefix.
fn short(name: &str) -> String {
    if name.chars().count() <= 12 {
        name.to_owned()
    } else {
        let tail: String = name
            .chars()
            .rev()
            .take(11)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// The folder's files of the accepted formats, by name.
fn photos(dir: &Path) -> anyhow::Result<Vec<Photo>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the folder {}", dir.display()))?;
    let mut photos = Vec::new();
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let accepted = path
            .extension()
            .and_then(|ext| ext.to_str())
            .is_some_and(|ext| EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()));
        if name.starts_with('.') || !accepted || !entry.file_type()?.is_file() {
            continue;
        }
        photos.push(Photo {
            name,
            size: entry.metadata()?.len(),
            path,
        });
    }
    photos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(photos)
}

fn read_state(path: &Path, listing: &str) -> anyhow::Result<State> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let state: State = serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not this tool's; remove it to start over",
                    path.display()
                )
            })?;
            if state.listing != listing {
                bail!(
                    "{} holds uploads to listing {}; remove it to upload this folder to {listing}",
                    path.display(),
                    state.listing
                );
            }
            Ok(state)
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(State {
            listing: listing.to_owned(),
            ..State::default()
        }),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Writes the state whole and in place of the old (a crash leaves one or the other).
fn write_state(path: &Path, state: &State) -> anyhow::Result<()> {
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, serde_json::to_vec_pretty(state)?)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Why a response is not what was asked: its envelope's message.
async fn refusal(response: Response) -> anyhow::Error {
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    match body["error"]["message"].as_str() {
        Some(message) => anyhow!("{status}: {message}"),
        None => anyhow!("{status}"),
    }
}

async fn create_batch(
    client: &Client,
    access: &ApiAccess,
    listing: &str,
    file_count: usize,
) -> anyhow::Result<String> {
    let response = client
        .post(access.url("/api/v1/upload-batches"))
        .header("X-API-Key", &access.key)
        .header("X-Idempotency-Key", ulid::Ulid::generate().to_string())
        .json(&serde_json::json!({"file_count": file_count, "listing_number": listing}))
        .send()
        .await
        .with_context(|| format!("cannot reach {}", access.api_url))?;
    if response.status() != StatusCode::CREATED {
        return Err(refusal(response).await.context("the batch was not opened"));
    }
    let body: serde_json::Value = response.json().await?;
    body["batch_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the batch's answer has no batch_id"))
}

/// The upload URL, absolute.
fn absolute(access: &ApiAccess, url: &str) -> String {
    if url.starts_with('/') {
        access.url(url)
    } else {
        url.to_owned()
    }
}

/// Sends one file: its upload found again or created, then its bytes from
/// the server's offset, retried from the server's offset when a request
/// drops. Returns the media item.
async fn send(
    run: &Run,
    batch_id: &str,
    photo: &Photo,
    bar: &ProgressBar,
) -> anyhow::Result<String> {
    let known = run.state.lock().await.files.get(&photo.name).cloned();
    let mut url = match known.filter(|file| file.size == photo.size) {
        Some(file) => Some(file.url),
        None => None,
    };
    let mut attempt = 0;
    let mut progressed_to = 0;
    loop {
        let outcome = async {
            let (upload, offset) = match &url {
                Some(existing) => match offset_of(run, existing).await? {
                    Some(Offset::At(offset)) => (existing.clone(), offset),
                    Some(Offset::Complete(media_id)) => return Ok(Some(media_id)),
                    // Expired or ended on the server: start it again.
                    None => (create(run, batch_id, photo).await?, 0),
                },
                None => (create(run, batch_id, photo).await?, 0),
            };
            url = Some(upload.clone());
            bar.set_position(offset);
            append(run, &upload, photo, offset, bar).await.map(Some)
        }
        .await;
        match outcome {
            Ok(Some(media_id)) => {
                let mut state = run.state.lock().await;
                if let Some(file) = state.files.get_mut(&photo.name) {
                    file.media_id = Some(media_id.clone());
                }
                write_state(&run.state_path, &state)?;
                return Ok(media_id);
            }
            Ok(None) => {}
            Err(err) if attempt + 1 < ATTEMPTS && retriable(&err) => {
                // A request that moved the file on starts the count again:
                // only a link that carries nothing gives up.
                if bar.position() > progressed_to {
                    progressed_to = bar.position();
                    attempt = 0;
                }
                attempt += 1;
                tracing::debug!(file = %photo.name, attempt, "retrying after: {err:#}");
                bar.set_message(format!("link dropped, retrying ({attempt}/{ATTEMPTS})"));
                tokio::time::sleep(Duration::from_millis(250 * 2u64.pow(attempt.min(5)))).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Whether an error is the network's (worth a retry), not a refusal.
fn retriable(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<reqwest::Error>().is_some_and(|err| {
            err.is_connect() || err.is_request() || err.is_body() || err.is_timeout()
        }) || cause.downcast_ref::<std::io::Error>().is_some()
            || cause.to_string().starts_with("409")
            || cause.to_string().starts_with("5")
    })
}

enum Offset {
    At(u64),
    Complete(String),
}

/// Where an upload stands on the server; `None` when it ended there.
async fn offset_of(run: &Run, url: &str) -> anyhow::Result<Option<Offset>> {
    let response = run
        .client
        .head(absolute(&run.access, url))
        .header("X-API-Key", &run.access.key)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .await?;
    match response.status() {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND | StatusCode::GONE => return Ok(None),
        status => bail!("{status}: the upload's offset was not given"),
    }
    if let Some(media_id) = response.headers().get("upload-media-id") {
        return Ok(Some(Offset::Complete(media_id.to_str()?.to_owned())));
    }
    let offset = response
        .headers()
        .get("upload-offset")
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .ok_or_else(|| anyhow!("the server gave no Upload-Offset"))?;
    Ok(Some(Offset::At(offset)))
}

/// Creates the file's upload and keeps its URL in the folder's state.
async fn create(run: &Run, batch_id: &str, photo: &Photo) -> anyhow::Result<String> {
    let metadata = [
        ("filename", photo.name.as_str()),
        ("listing_number", run.listing.as_str()),
        ("batch_id", batch_id),
    ]
    .iter()
    .map(|(key, value)| format!("{key} {}", STANDARD.encode(value)))
    .collect::<Vec<_>>()
    .join(",");
    let response = run
        .client
        .post(run.access.url("/api/v1/uploads"))
        .header("X-API-Key", &run.access.key)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", photo.size.to_string())
        .header("Upload-Metadata", metadata)
        .send()
        .await?;
    if response.status() != StatusCode::CREATED {
        return Err(refusal(response)
            .await
            .context(format!("{} was not accepted", photo.name)));
    }
    let url = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| anyhow!("the server gave no Location"))?
        .to_owned();
    let mut state = run.state.lock().await;
    state.files.insert(
        photo.name.clone(),
        FileState {
            size: photo.size,
            url: url.clone(),
            batch_id: batch_id.to_owned(),
            media_id: None,
        },
    );
    write_state(&run.state_path, &state)?;
    Ok(url)
}

/// Sends the file's bytes from `offset` in chunks; returns its media item.
async fn append(
    run: &Run,
    url: &str,
    photo: &Photo,
    mut offset: u64,
    bar: &ProgressBar,
) -> anyhow::Result<String> {
    let mut file = tokio::fs::File::open(&photo.path)
        .await
        .with_context(|| format!("cannot read {}", photo.path.display()))?;
    let counted = Arc::new(std::sync::atomic::AtomicU64::new(offset));
    loop {
        let length = run.chunk.min(photo.size - offset);
        file.seek(std::io::SeekFrom::Start(offset)).await?;
        let mut chunk = vec![0u8; usize::try_from(length)?];
        file.read_exact(&mut chunk).await?;
        // The bars move as the bytes leave, 64 KB at a time.
        let pieces: Vec<bytes::Bytes> = bytes::Bytes::from(chunk)
            .chunks(64 * 1024)
            .map(bytes::Bytes::copy_from_slice)
            .collect();
        let (bar, overall, counted_stream) = (bar.clone(), run.overall.clone(), counted.clone());
        let body = futures::stream::iter(pieces).map(move |piece| {
            bar.inc(piece.len() as u64);
            overall.inc(piece.len() as u64);
            counted_stream.fetch_add(piece.len() as u64, std::sync::atomic::Ordering::Relaxed);
            Ok::<_, std::io::Error>(piece)
        });
        let sent_before = counted.load(std::sync::atomic::Ordering::Relaxed);
        let response = run
            .client
            .patch(absolute(&run.access, url))
            .header("X-API-Key", &run.access.key)
            .header("Tus-Resumable", "1.0.0")
            .header("Upload-Offset", offset.to_string())
            .header("Content-Type", "application/offset+octet-stream")
            .header("Content-Length", length.to_string())
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(err) => {
                // What the bars counted past the server's offset is sent again.
                let counted_now = counted.load(std::sync::atomic::Ordering::Relaxed);
                run.overall.set_position(
                    run.overall
                        .position()
                        .saturating_sub(counted_now - sent_before),
                );
                counted.store(offset, std::sync::atomic::Ordering::Relaxed);
                return Err(err.into());
            }
        };
        if response.status() != StatusCode::NO_CONTENT {
            let counted_now = counted.load(std::sync::atomic::Ordering::Relaxed);
            run.overall.set_position(
                run.overall
                    .position()
                    .saturating_sub(counted_now - sent_before),
            );
            return Err(refusal(response)
                .await
                .context(format!("{} was refused", photo.name)));
        }
        if let Some(media_id) = response.headers().get("upload-media-id") {
            return Ok(media_id.to_str()?.to_owned());
        }
        offset = response
            .headers()
            .get("upload-offset")
            .and_then(|value| value.to_str().ok()?.parse().ok())
            .ok_or_else(|| anyhow!("the server gave no Upload-Offset"))?;
        counted.store(offset, std::sync::atomic::Ordering::Relaxed);
        if offset >= photo.size {
            bail!(
                "the server has every byte of {} but named no media item",
                photo.name
            );
        }
    }
}

/// Follows the batch's progress until it ends; returns (ready, failed).
async fn follow(run: &Run, batch_id: &str) -> anyhow::Result<(u64, u64)> {
    let spinner = ProgressBar::new_spinner();
    spinner.set_message("processing: making the delivery variants");
    spinner.enable_steady_tick(Duration::from_millis(120));
    let response = run
        .client
        .get(run.access.url(&format!("/api/v1/progress/{batch_id}")))
        .header("X-API-Key", &run.access.key)
        .send()
        .await?;
    if response.status() != StatusCode::OK {
        spinner.finish_and_clear();
        // Already finished (204), or no access to progress: say what is known.
        return Ok((0, 0));
    }
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let mut outcome = (0, 0);
    'read: while let Some(chunk) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let event = block
                .lines()
                .find_map(|line| line.strip_prefix("event: "))
                .unwrap_or_default()
                .to_owned();
            let data: serde_json::Value = block
                .lines()
                .find_map(|line| line.strip_prefix("data: "))
                .and_then(|json| serde_json::from_str(json).ok())
                .unwrap_or_default();
            let files = data["operation"]["files"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let count =
                |status: &str| files.iter().filter(|file| file["status"] == status).count() as u64;
            spinner.set_message(format!(
                "processing: {} of {} ready",
                count("ready"),
                files.len()
            ));
            if event == "completed" || event == "failed" {
                outcome = (count("ready"), count("failed"));
                break 'read;
            }
        }
    }
    spinner.finish_and_clear();
    Ok(outcome)
}
