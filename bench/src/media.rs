//! Media benchmarks (issue 7).
//!
//! - `variants`: the six delivery variants of a 24-megapixel JPEG with our
//!   engine ([`workers::media::variants::make_variants`], in a child process
//!   of this binary) against the libvips reference
//!   (`../shared/bench/vips/vips_six.sh INPUT OUTDIR parallel`). Both run
//!   under `/usr/bin/time -f %M` (GNU time's peak RSS: the largest single
//!   process of the command) and are timed from here, spawn to exit, so wall
//!   time and peak RSS are measured the same way for both. Runs alternate
//!   which side goes first, after waiting for an idle machine; medians are
//!   reported. Neither side is pinned: the reference's `parallel` mode is two
//!   lanes for a two-core box, and our engine uses every core.
//! - `upload`: the release `api serve` (embedded profile, `--no-workers`)
//!   pinned to core 0 receives one streamed ~1 GB multipart upload from a
//!   client pinned to core 1; the API's `VmRSS` is sampled before and during.
//! - `sse`: the same server holds 10,000 open progress streams
//!   (`/v1/progress/{operation_id}?token=…`, one HTTP/1.1 connection each)
//!   from a client on core 1; the API's `VmRSS` is read with all of them open.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use clap::Args;
use serde_json::{Value, json};
use workers::media::variants::{VariantLimits, make_variants};

use crate::process::pinned;

// ------------------------------------------------------------------ variants

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

/// One timed command.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Spawn to exit, seconds.
    wall: f64,
    /// GNU time's `%M`, KiB.
    max_rss_kb: u64,
}

/// `bench variants-run` (the child): read, render the six variants, write
/// them; prints the engine's time. Runs without an async runtime.
pub fn variants_run(input: &Path, out: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(input).with_context(|| input.display().to_string())?;
    let started = Instant::now();
    let variants = make_variants(&bytes, &VariantLimits::default())?;
    let engine_ms = started.elapsed().as_secs_f64() * 1e3;
    drop(bytes);
    std::fs::create_dir_all(out)?;
    for v in &variants {
        std::fs::write(
            out.join(format!("{}.{}", v.name, v.format.extension())),
            &v.bytes,
        )?;
    }
    println!("{}", json!({"engine_ms": engine_ms}));
    Ok(())
}

/// Makes the reference's inputs with its own script when they are missing.
fn reference_inputs(args: &VariantArgs) -> anyhow::Result<Vec<PathBuf>> {
    reference_pair(&args.vips_dir, &args.input_dir)
}

/// The reference's two 24 MP inputs in `input_dir`, made by its
/// `make_input.py` (in `vips_dir`) when missing.
fn reference_pair(vips_dir: &Path, input_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let inputs = vec![
        input_dir.join("input_24mp.jpg"),
        input_dir.join("input_24mp_orient6.jpg"),
    ];
    if inputs.iter().all(|p| p.exists()) {
        return Ok(inputs);
    }
    let script = vips_dir.join("make_input.py");
    eprintln!("generating the inputs with {}", script.display());
    let status = Command::new("python3")
        .arg(&script)
        .arg(input_dir)
        .status()
        .context("running python3 (needs pillow and numpy)")?;
    ensure!(status.success(), "{} failed: {status}", script.display());
    Ok(inputs)
}

/// The reference's upright 24 MP input (see [`reference_pair`]).
pub fn reference_input(vips_dir: &Path, input_dir: &Path) -> anyhow::Result<PathBuf> {
    let mut inputs = reference_pair(vips_dir, input_dir)?;
    Ok(inputs.swap_remove(0))
}

/// Runs `program args` under `/usr/bin/time -f %M`, timing it from here.
fn timed(program: &Path, args: &[OsString], time_file: &Path) -> anyhow::Result<Sample> {
    let started = Instant::now();
    let status = Command::new("/usr/bin/time")
        .arg("-o")
        .arg(time_file)
        .args(["-f", "%M"])
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .context("running /usr/bin/time")?;
    let wall = started.elapsed().as_secs_f64();
    ensure!(status.success(), "{} failed: {status}", program.display());
    let text = std::fs::read_to_string(time_file)?;
    let max_rss_kb = text
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .context("no %M from /usr/bin/time")?;
    Ok(Sample { wall, max_rss_kb })
}

/// Waits (up to 60 s) until the CPUs are at least 90% idle over 300 ms, so
/// other work on the machine (a build) does not skew one side.
fn wait_idle() {
    let sample = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        Some((cpu.iter().take(8).sum(), cpu.get(3)? + cpu.get(4)?))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Some((t1, i1)) = sample() else { return };
        std::thread::sleep(Duration::from_millis(300));
        let Some((t2, i2)) = sample() else { return };
        if (i2 - i1) * 10 >= (t2 - t1).max(1) * 9 {
            return;
        }
    }
    eprintln!("warning: the machine was still busy after 60 s");
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn round(value: f64, places: i32) -> f64 {
    let factor = 10f64.powi(places);
    (value * factor).round() / factor
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

// ------------------------------------------------------------ the API server

/// Where the `api` binary is.
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// The `api` binary; default: the release build beside this binary
    /// (`cargo build --release -p api`).
    #[arg(long)]
    api_bin: Option<PathBuf>,
    /// File-descriptor limit (soft and hard) the API and the client run
    /// with; default: this process's hard limit.
    #[arg(long)]
    nofile: Option<u64>,
}

impl ApiArgs {
    /// The file-descriptor limit to run the children with.
    fn nofile(&self) -> anyhow::Result<u64> {
        if let Some(n) = self.nofile {
            return Ok(n);
        }
        let limits = std::fs::read_to_string("/proc/self/limits")?;
        let hard = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max open files"))
            .and_then(|l| l.split_whitespace().nth(1))
            .context("Max open files in /proc/self/limits")?;
        Ok(if hard == "unlimited" {
            1 << 20
        } else {
            hard.parse()?
        })
    }

    fn binary(&self) -> anyhow::Result<PathBuf> {
        let path = match &self.api_bin {
            Some(path) => path.clone(),
            None => std::env::current_exe()?
                .parent()
                .context("the bench binary's directory")?
                .join("api"),
        };
        ensure!(
            path.exists(),
            "no api binary at {}: run `cargo build --release -p api` first",
            path.display()
        );
        Ok(path)
    }
}

/// `program args` pinned to `core` with the file-descriptor limit raised.
fn launch(core: u32, nofile: u64, program: &Path, args: &[String]) -> Command {
    let inner = pinned(core, &program.to_string_lossy(), args);
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--nofile={nofile}:{nofile}"))
        .arg(inner.get_program())
        .args(inner.get_args());
    command
}

/// Variables that would take `api` off the embedded profile.
const PROFILE_ENV: [&str; 5] = [
    "DATABASE_URL",
    "REDIS_URL",
    "OBJECT_STORE_URL",
    "MASTER_KEY",
    "DATA_DIR",
];

/// A running `api serve`.
struct ApiServer {
    child: Child,
    pid: u32,
    base_url: String,
    _data: tempfile::TempDir,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `api admin <args> --data-dir DIR` and returns its JSON.
fn admin(bin: &Path, data_dir: &Path, args: &[&str]) -> anyhow::Result<Value> {
    let mut command = Command::new(bin);
    for var in PROFILE_ENV {
        command.env_remove(var);
    }
    let output = command
        .arg("admin")
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("api admin {args:?}"))?;
    ensure!(
        output.status.success(),
        "api admin {args:?}: {}",
        output.status
    );
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Seeds an agency with a `media:write` key, starts `api serve` on core 0
/// and waits until it answers; returns it and the key.
async fn start_api(args: &ApiArgs) -> anyhow::Result<(ApiServer, String)> {
    let bin = args.binary()?;
    let data = tempfile::tempdir()?;
    let agency = admin(
        &bin,
        data.path(),
        &["create-agency", "--name", "Benchmark Media"],
    )?;
    let agency_id = agency["agency_id"].as_str().context("agency_id")?;
    let key = admin(
        &bin,
        data.path(),
        &[
            "create-key",
            "--agency",
            agency_id,
            "--name",
            "media-benchmark",
            "--scopes",
            "media:write",
        ],
    )?;
    let key = key["key"].as_str().context("key")?.to_owned();
    let (port, ops_port) = (free_port()?, free_port()?);
    let serve_args = vec![
        "serve".to_owned(),
        "--data-dir".into(),
        data.path().to_string_lossy().into_owned(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--ops-listen".into(),
        format!("127.0.0.1:{ops_port}"),
        "--no-workers".into(),
    ];
    let mut command = launch(0, args.nofile()?, &bin, &serve_args);
    for var in PROFILE_ENV {
        command.env_remove(var);
    }
    let child = command
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting api serve")?;
    let pid = child.id();
    let server = ApiServer {
        child,
        pid,
        base_url: format!("http://127.0.0.1:{port}"),
        _data: data,
    };
    let health = format!("http://127.0.0.1:{ops_port}/healthz");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = client.get(&health).send().await
            && response.status().is_success()
        {
            break;
        }
        ensure!(Instant::now() < deadline, "api serve did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // prlimit and taskset exec the program: the pid is the API's.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))?;
    ensure!(comm.trim() == "api", "pid {pid} is {comm:?}, not the API");
    Ok((server, key))
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kb(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("{field} of {pid}"))
}

/// Samples a process's `VmRSS` every few milliseconds on its own thread.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak_kb: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kb = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (stop, peak_kb) = (stop.clone(), peak_kb.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(rss) = status_kb(pid, "VmRSS") {
                        peak_kb.fetch_max(rss, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Self {
            stop,
            peak_kb,
            thread,
        }
    }

    /// Stops sampling; the largest `VmRSS` seen, KiB.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak_kb.load(Ordering::Relaxed)
    }
}

fn mib(kb: u64) -> f64 {
    round(kb as f64 / 1024.0, 1)
}

/// Starts a client role of this binary pinned to core 1.
fn start_client(nofile: u64, args: &[String]) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?;
    launch(1, nofile, &exe, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {args:?}"))
}

/// The first line a child prints, as JSON.
fn read_line_json(child: &mut Child) -> anyhow::Result<Value> {
    let stdout = child.stdout.take().context("client stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    serde_json::from_str(line.trim()).with_context(|| format!("client said {line:?}"))
}

// -------------------------------------------------------------------- upload

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

/// Generates a multipart body lazily, chunk by chunk: `files` parts whose
/// content is a JPEG magic followed by pseudo-random bytes.
struct MultipartBody {
    boundary: String,
    files: u64,
    file_bytes: u64,
    file: u64,
    written: u64,
    header_sent: bool,
    done: bool,
    rng: u64,
}

/// Bytes per generated content chunk.
const CHUNK: u64 = 256 * 1024;

impl MultipartBody {
    fn new(boundary: String, files: u64, file_bytes: u64) -> Self {
        Self {
            boundary,
            files,
            file_bytes,
            file: 0,
            written: 0,
            header_sent: false,
            done: false,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Total length of the body.
    fn len(&self) -> u64 {
        let header = |i: u64| self.part_header(i).len() as u64;
        (0..self.files)
            .map(|i| header(i) + self.file_bytes + 2)
            .sum::<u64>()
            + self.closing().len() as u64
    }

    fn part_header(&self, i: u64) -> String {
        format!(
            "--{}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"photo-{i:03}.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n",
            self.boundary
        )
    }

    fn closing(&self) -> String {
        format!("--{}--\r\n", self.boundary)
    }

    fn random_chunk(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            // xorshift64*
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            out.extend_from_slice(&self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

impl Iterator for MultipartBody {
    type Item = Result<Bytes, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.file == self.files {
            self.done = true;
            return Some(Ok(Bytes::from(self.closing())));
        }
        if !self.header_sent {
            self.header_sent = true;
            return Some(Ok(Bytes::from(self.part_header(self.file))));
        }
        let left = self.file_bytes - self.written;
        let mut chunk = self.random_chunk(usize::try_from(left.min(CHUNK)).ok()?);
        if self.written == 0 {
            let magic = [0xFF, 0xD8, 0xFF, 0xE0];
            let n = magic.len().min(chunk.len());
            chunk[..n].copy_from_slice(&magic[..n]);
        }
        self.written += chunk.len() as u64;
        if self.written == self.file_bytes {
            chunk.extend_from_slice(b"\r\n");
            self.file += 1;
            self.written = 0;
            self.header_sent = false;
        }
        Some(Ok(Bytes::from(chunk)))
    }
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

// ----------------------------------------------------------------------- sse

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
    let first = response.chunk().await?.context("stream ended at once")?;
    ensure!(
        first.windows(8).any(|w| w == b"snapshot"),
        "first event: {:?}",
        String::from_utf8_lossy(&first)
    );
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
