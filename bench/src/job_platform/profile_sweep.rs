//! `bench profile-sweep`: agency A, with a library of 10,000 processed
//! photos, creates a delivery profile (the unbranded MLS template), so every
//! photo of its library is rendered again in the background; meanwhile
//! agency B uploads one photo at a time. Reports the sweep's photos a second
//! and B's photo against the fairness goal (2 × idle + one job).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Args;
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use storage::rules::delivery_profiles::templates;
use storage::volume::VolumePlan;

use super::fairness::{ms, photo, single_photo};
use crate::figures::median;
use crate::jobs::Redis;
use crate::media::api_server::{ApiArgs, ServerOptions, create_key, seed_agency, serve_prepared};

/// A library re-rendered while another agency uploads.
#[derive(Debug, Clone, Args)]
pub struct ProfileSweepArgs {
    /// Photos in agency A's library (rounded up to a multiple of ten: ten
    /// photos a listing).
    #[arg(long, default_value_t = 10_000)]
    library: u64,
    /// Samples of B's photo, on the idle server and during the sweep.
    #[arg(long, default_value_t = 5)]
    samples: usize,
    /// The photos' size in pixels (A's library and B's upload alike).
    #[arg(long, default_value_t = 3000)]
    width: u32,
    /// The photos' size in pixels.
    #[arg(long, default_value_t = 2000)]
    height: u32,
    /// Stop once this many of the library's photos are rendered (0: the
    /// whole library); the rate is then of the photos rendered.
    #[arg(long, default_value_t = 0)]
    stop_after: u64,
    /// Photos libvips renders the same two outputs of, one after another,
    /// after each sweep (the reference's photos a second; 0: none).
    #[arg(long, default_value_t = 20)]
    reference_photos: u32,
    /// Directory of our reference scripts (`vips_mls.sh`).
    #[arg(long, default_value = "bench/reference")]
    reference_dir: PathBuf,
    /// `embedded` (SQLite queue), `redis` (the queue on Redis).
    #[arg(long, value_delimiter = ',', default_value = "embedded")]
    profiles: Vec<String>,
    /// The API binary.
    #[command(flatten)]
    api: ApiArgs,
}

/// Agency A's library, seeded through the storage layer as a finished
/// upload leaves it (`storage::volume`: listings of ten photos, each with
/// its six variants recorded), with `jpeg` as every photo's original in
/// the data directory's media store. Returns the agency and its photos.
async fn seed_library(data_dir: &Path, library: u64, jpeg: &[u8]) -> anyhow::Result<(String, u64)> {
    let store = crate::servers::open_store(data_dir).await?;
    let plan = VolumePlan {
        listings: library.div_ceil(10),
        agents: 10,
        photos_per_listing: 10,
        ..VolumePlan::listings_only(0, 10)
    };
    let seeded = crate::servers::seed_without_endpoint(&store, &plan).await?;
    drop(store);
    // Every original is the same photo, hard-linked: the sweep reads and
    // decodes each one as it would a file of its own.
    let original = data_dir.join("library-original.jpg");
    std::fs::write(&original, jpeg)?;
    let db = read_only(data_dir).await?;
    let keys: Vec<String> =
        sqlx::query_scalar("select object_key from media_items where agency_id = ?")
            .bind(seeded.agency_id.as_str())
            .fetch_all(&db)
            .await?;
    let media = data_dir.join(storage::objects::LOCAL_MEDIA_DIR);
    for key in &keys {
        let path = media.join(key);
        std::fs::create_dir_all(path.parent().context("an object's folder")?)?;
        std::fs::hard_link(&original, &path)?;
    }
    Ok((seeded.agency_id.as_str().to_owned(), keys.len() as u64))
}

/// The data directory's database, read-only (the progress of the sweep is
/// read from it; nothing is written around the API).
async fn read_only(data_dir: &Path) -> anyhow::Result<SqlitePool> {
    let options = SqliteConnectOptions::new()
        .filename(data_dir.join(api::config::SQLITE_FILE))
        .read_only(true);
    Ok(SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?)
}

/// The outputs of `profile_id` recorded so far: (ready, failed).
async fn outputs_recorded(db: &SqlitePool, profile_id: &str) -> anyhow::Result<(u64, u64)> {
    let (ready, failed): (i64, i64) = sqlx::query_as(
        "select coalesce(sum(status = 'ready'), 0), coalesce(sum(status = 'failed'), 0)
         from media_outputs where profile_id = ?",
    )
    .bind(profile_id)
    .fetch_one(db)
    .await?;
    Ok((ready.try_into()?, failed.try_into()?))
}

/// The sweep's jobs in the embedded queue (none on Redis): how many, and
/// under how many distinct dedupe keys; a sweep started twice would show
/// more jobs than keys.
async fn sweep_jobs(data_dir: &Path) -> anyhow::Result<(u64, u64)> {
    let options = SqliteConnectOptions::new()
        .filename(data_dir.join(api::config::QUEUE_FILE))
        .read_only(true);
    let queue = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    let (jobs, keys): (i64, i64) = sqlx::query_as(
        "select count(*), count(distinct idempotency_key) from Jobs where job_type = ?",
    )
    .bind(<platform::kinds::RenderOutputs as platform::Job>::KIND)
    .fetch_one(&queue)
    .await?;
    Ok((jobs.try_into()?, keys.try_into()?))
}

/// The unbranded MLS template, as the API takes it.
fn mls_profile() -> anyhow::Result<Value> {
    let template = templates()
        .into_iter()
        .find(|t| t.key == "mls_unbranded")
        .context("the MLS template")?;
    let outputs: Vec<api::routes::delivery_profiles::wire::OutputWire> =
        template.draft.outputs.into_iter().map(Into::into).collect();
    Ok(json!({ "name": template.draft.name, "outputs": outputs }))
}

/// One profile's figures.
async fn one_profile(
    args: &ProfileSweepArgs,
    jpeg: &[u8],
    redis_url: Option<String>,
) -> anyhow::Result<Value> {
    let bin = args.api.binary()?;
    let data = tempfile::tempdir()?;
    let seeding = Instant::now();
    let (library_agency, photos) = seed_library(data.path(), args.library, jpeg).await?;
    let busy_key = create_key(
        &bin,
        data.path(),
        &library_agency,
        "media:write,delivery_profiles:write",
    )?;
    let quiet = seed_agency(&bin, data.path(), "Benchmark Media B", "media:write")?;
    eprintln!(
        "library of {photos} photos seeded in {:.0} s",
        seeding.elapsed().as_secs_f64()
    );
    let options = ServerOptions {
        workers: true,
        redis_url,
        agencies: 0,
    };
    let db = read_only(data.path()).await?;
    let server = serve_prepared(&args.api, &options, data, &[]).await?;
    let client = reqwest::Client::new();
    // B on the idle server, after a warm-up.
    single_photo(&client, &server, &quiet.key, jpeg).await?;
    let (mut idle, mut jobs) = (Vec::new(), Vec::new());
    for _ in 0..args.samples {
        let times = single_photo(&client, &server, &quiet.key, jpeg).await?;
        idle.push(times.total.as_secs_f64() * 1000.0);
        jobs.push(times.job.as_secs_f64() * 1000.0);
    }

    // A's profile: its sweep renders the template's outputs of every photo.
    let profile = mls_profile()?;
    let per_photo = profile["outputs"].as_array().map_or(1, Vec::len) as u64;
    let created = Instant::now();
    let response = client
        .post(format!("{}/api/v1/delivery-profiles", server.base_url))
        .header("x-api-key", &busy_key)
        .header("x-idempotency-key", ulid::Ulid::generate().to_string())
        .json(&profile)
        .send()
        .await?;
    let status = response.status();
    let answer: Value = response.json().await?;
    ensure!(status.is_success(), "profile: {status} {answer}");
    let profile_id = answer["id"]
        .as_str()
        .context("the profile's id")?
        .to_owned();

    // The sweep's progress, read once a second.
    let target = if args.stop_after == 0 {
        photos
    } else {
        args.stop_after.min(photos)
    };
    let rendered = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (db, profile_id, rendered) = (db.clone(), profile_id.clone(), rendered.clone());
        tokio::spawn(async move {
            let mut reported = Instant::now();
            loop {
                let (ready, failed) = outputs_recorded(&db, &profile_id).await?;
                let done = (ready + failed) / per_photo;
                rendered.store(done, Ordering::Relaxed);
                if reported.elapsed() >= Duration::from_secs(60) {
                    eprintln!(
                        "{done} of {photos} photos rendered in {:.0} s",
                        created.elapsed().as_secs_f64()
                    );
                    reported = Instant::now();
                }
                if done >= target {
                    return anyhow::Ok((created.elapsed(), done, failed));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    // B's photos while the sweep runs.
    let (mut loaded, mut parts, mut swept_then) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.samples {
        let times = single_photo(&client, &server, &quiet.key, jpeg).await?;
        parts.push(json!({
            "answered_ms": ms(times.answered),
            "waited_ms": ms(times.waited),
            "job_ms": ms(times.job),
        }));
        let done = rendered.load(Ordering::Relaxed);
        ensure!(
            done < target,
            "the sweep finished before B's photo: use a bigger --library"
        );
        loaded.push(times.total.as_secs_f64() * 1000.0);
        swept_then.push(done);
    }
    let (elapsed, done, failed_outputs) = watcher.await??;
    let (sweep_job_count, sweep_key_count) = if options.redis_url.is_none() {
        sweep_jobs(server.data.path()).await?
    } else {
        (0, 0)
    };
    let photos_per_second = done as f64 / elapsed.as_secs_f64();
    let in_order: Vec<f64> = loaded.iter().copied().map(f64::round).collect();
    let worst_ms = loaded.iter().copied().fold(0.0, f64::max);
    let (idle_ms, job_ms, loaded_ms) = (median(idle), median(jobs), median(loaded));
    let goal_ms = 2.0 * idle_ms + job_ms;
    Ok(json!({
        "library_photos": photos,
        "outputs_per_photo": per_photo,
        "photos_rendered": done,
        "failed_outputs": failed_outputs,
        "sweep_jobs": sweep_job_count,
        "sweep_job_keys": sweep_key_count,
        "sweep_seconds": (elapsed.as_secs_f64() * 10.0).round() / 10.0,
        "photos_per_second": (photos_per_second * 100.0).round() / 100.0,
        "idle_ms": idle_ms.round(),
        "job_ms": job_ms.round(),
        "during_sweep_ms": loaded_ms.round(),
        "during_sweep_max_ms": worst_ms.round(),
        "goal_ms": goal_ms.round(),
        "ratio_to_goal": (loaded_ms / goal_ms * 100.0).round() / 100.0,
        "max_ratio_to_goal": (worst_ms / goal_ms * 100.0).round() / 100.0,
        "during_sweep_samples_ms": in_order,
        "during_sweep_parts": parts,
        "library_photos_rendered_when_b_finished": swept_then,
    }))
}

/// libvips rendering the template's two outputs of `photos` copies of the
/// photo, one process run after another (`vips_mls.sh INPUT OUT -`): its
/// photos a second.
fn reference_rate(args: &ProfileSweepArgs, jpeg: &[u8]) -> anyhow::Result<f64> {
    let script = args.reference_dir.join("vips_mls.sh");
    ensure!(
        script.exists(),
        "no reference script at {}",
        script.display()
    );
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("photo.jpg");
    std::fs::write(&input, jpeg)?;
    let started = Instant::now();
    for n in 0..args.reference_photos {
        let out = dir.path().join(format!("out-{n}"));
        let status = Command::new("bash")
            .arg(&script)
            .arg(&input)
            .arg(&out)
            .arg("-")
            .status()
            .context("running vips_mls.sh")?;
        ensure!(status.success(), "vips_mls.sh: {status}");
    }
    Ok(f64::from(args.reference_photos) / started.elapsed().as_secs_f64())
}

/// `bench profile-sweep`.
pub async fn profile_sweep(args: ProfileSweepArgs) -> anyhow::Result<()> {
    let jpeg = photo(args.width, args.height)?;
    eprintln!(
        "photo {}×{}, {} KB; library of {} photos",
        args.width,
        args.height,
        jpeg.len() / 1024,
        args.library
    );
    let mut report = Vec::new();
    for profile in &args.profiles {
        let redis = super::profile_redis(profile)?;
        let mut row = one_profile(&args, &jpeg, redis.as_ref().map(Redis::url)).await?;
        row["profile"] = json!(profile);
        if args.reference_photos > 0 {
            let vips = reference_rate(&args, &jpeg)?;
            let ours = row["photos_per_second"].as_f64().unwrap_or(f64::NAN);
            row["vips_photos_per_second"] = json!((vips * 100.0).round() / 100.0);
            row["rate_ratio_to_vips"] = json!((ours / vips * 100.0).round() / 100.0);
        }
        println!("{row}");
        report.push(row);
    }
    println!("{}", json!({ "profile_sweep": report }));
    Ok(())
}
