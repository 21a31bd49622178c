//! The scenarios: each starts its roles, loads them one at a time with the same
//! load generator settings, and prints the figures and their ratio.

use clap::Args;
use serde_json::{Value, json};

use crate::figures::{median, round};
use crate::process::{self, Role};
use crate::wrk::{self, Figures, Load};

/// Load settings shared by the scenarios.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent connections.
    #[arg(long, default_value_t = 32)]
    connections: u32,
    /// Listings the API's agency holds before the measurement, seeded
    /// through the storage layer (`storage::volume`): the same requests
    /// against a database of this size.
    #[arg(long, default_value_t = 0)]
    listings: u64,
    /// `listing-read` and `listing-create`: rounds of the pair (reference,
    /// then API), one after the other; the ratio printed is the median of
    /// the rounds', so a drift of the machine during the run moves both
    /// sides of a round alike. `middleware` runs each stack once.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
}

impl LoadArgs {
    fn load(&self) -> Load {
        Load {
            seconds: self.seconds,
            connections: self.connections,
        }
    }
}

fn temp_dir() -> anyhow::Result<tempfile::TempDir> {
    Ok(tempfile::tempdir()?)
}

fn start_app(dir: &std::path::Path, stack: &str, listings: u64) -> anyhow::Result<Role> {
    process::start(&[
        "serve-app".into(),
        "--data-dir".into(),
        dir.to_string_lossy().into_owned(),
        "--stack".into(),
        stack.into(),
        "--listings".into(),
        listings.to_string(),
    ])
}

fn field(role: &Role, name: &str) -> String {
    match &role.announcement[name] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn read_url(role: &Role) -> String {
    format!(
        "http://127.0.0.1:{}/api/v1/listings/{}",
        field(role, "port"),
        field(role, "listing_number")
    )
}

fn key_header(role: &Role) -> Vec<String> {
    vec!["-H".into(), format!("X-API-Key: {}", field(role, "key"))]
}

fn report(name: &str, figures: &Figures) -> Value {
    json!({"name": name, "requests_per_second": figures.requests_per_second.round(), "p99_ms": figures.p99_ms, "non_2xx": figures.non_2xx})
}

fn check_clean(name: &str, figures: &Figures) -> anyhow::Result<()> {
    anyhow::ensure!(
        figures.non_2xx == 0,
        "{name}: {} responses were not 2xx",
        figures.non_2xx
    );
    Ok(())
}

/// A wrk script that POSTs a listing with a fresh idempotency key per request.
fn create_script(role: &Role, dir: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let body = json!({
        "address": "2 Load Street, Springfield",
        "owner_user_id": field(role, "owner_user_id"),
        "agent_one_id": field(role, "agent_id"),
    });
    let script = format!(
        r#"local counter = 0
wrk.method = "POST"
wrk.body = '{body}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "{key}"
request = function()
  counter = counter + 1
  wrk.headers["X-Idempotency-Key"] = "{run}-" .. counter
  return wrk.format()
end
"#,
        key = field(role, "key"),
        run = ulid::Ulid::generate(),
    );
    let path = dir.join("create.lua");
    std::fs::write(&path, script)?;
    Ok(vec!["-s".into(), path.to_string_lossy().into_owned()])
}

/// GET /listings/{n} with every middleware, against a bare axum JSON handler
/// returning the same body.
pub async fn listing_read(args: LoadArgs) -> anyhow::Result<()> {
    let dir = temp_dir()?;
    let app = start_app(&dir.path().join("app"), "full", args.listings)?;
    let body: Value = reqwest::Client::new()
        .get(read_url(&app))
        .header("X-API-Key", field(&app, "key"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let body_file = dir.path().join("body.json");
    std::fs::write(&body_file, serde_json::to_vec(&body)?)?;
    let bare = process::start(&[
        "serve-bare".into(),
        "--body".into(),
        body_file.to_string_lossy().into_owned(),
    ])?;
    let bare_url = format!("http://127.0.0.1:{}/bare", field(&bare, "port"));

    let load = args.load();
    let mut rounds = Vec::new();
    for _ in 0..args.rounds.max(1) {
        let bare_figures = wrk::run(&bare_url, &load, &[])?;
        let app_figures = wrk::run(&read_url(&app), &load, &key_header(&app))?;
        check_clean("bare", &bare_figures)?;
        check_clean("api", &app_figures)?;
        rounds.push((bare_figures, app_figures));
    }
    let ratios: Vec<f64> = rounds
        .iter()
        .map(|(bare, app)| app.requests_per_second / bare.requests_per_second)
        .collect();
    println!(
        "{}",
        json!({
            "scenario": "listing-read",
            "listings": args.listings,
            "body_bytes": serde_json::to_vec(&body)?.len(),
            "rounds": rounds.iter().zip(&ratios).map(|((bare, app), ratio)| json!({
                "bare_axum": report("bare axum JSON handler", bare),
                "api": report("GET /api/v1/listings/{n}, full middleware", app),
                "ratio": round(*ratio, 2),
            })).collect::<Vec<_>>(),
            "ratio": round(median(ratios.clone()), 2),
            "goal": ">= 0.8",
        })
    );
    Ok(())
}

/// Idempotent POST /listings against raw SQLite one-row transactions on a file
/// with the same settings.
pub async fn listing_create(args: LoadArgs) -> anyhow::Result<()> {
    let dir = temp_dir()?;
    let app = start_app(&dir.path().join("app"), "full", args.listings)?;
    let url = format!("http://127.0.0.1:{}/api/v1/listings", field(&app, "port"));
    let script = create_script(&app, dir.path())?;
    let mut rounds = Vec::new();
    for round in 0..args.rounds.max(1) {
        // The reference runs on core 0 while the API waits idle there.
        let raw = process::start(&[
            "raw-sqlite".into(),
            "--data-dir".into(),
            dir.path()
                .join(format!("raw-{round}"))
                .to_string_lossy()
                .into_owned(),
            "--seconds".into(),
            args.seconds.to_string(),
        ])?;
        let raw_per_second = raw.announcement["per_second"].as_f64().unwrap_or(f64::NAN);
        drop(raw);
        let figures = wrk::run(&url, &args.load(), &script)?;
        check_clean("api", &figures)?;
        rounds.push((raw_per_second, figures));
    }
    let ratios: Vec<f64> = rounds
        .iter()
        .map(|(raw, app)| app.requests_per_second / raw)
        .collect();
    println!(
        "{}",
        json!({
            "scenario": "listing-create",
            "listings": args.listings,
            "rounds": rounds.iter().zip(&ratios).map(|((raw, app), ratio)| json!({
                "raw_sqlite_transactions_per_second": raw.round(),
                "api": report("idempotent POST /api/v1/listings", app),
                "ratio": round(*ratio, 2),
            })).collect::<Vec<_>>(),
            "ratio": round(median(ratios.clone()), 2),
            "goal": ">= 0.7",
        })
    );
    Ok(())
}

/// The per-request cost of authentication, rate limiting and idempotency:
/// the same routes with the full stack and with the handlers alone.
pub async fn middleware(args: LoadArgs) -> anyhow::Result<()> {
    let dir = temp_dir()?;
    let load = args.load();
    let mut rows = Vec::new();
    for (route, post) in [
        ("GET /api/v1/listings/{n}", false),
        ("POST /api/v1/listings (idempotent)", true),
    ] {
        let mut per_stack = Vec::new();
        for stack in ["full", "unguarded"] {
            let app = start_app(
                &dir.path().join(format!("{stack}-{post}")),
                stack,
                args.listings,
            )?;
            let figures = if post {
                let url = format!("http://127.0.0.1:{}/api/v1/listings", field(&app, "port"));
                wrk::run(&url, &load, &create_script(&app, dir.path())?)?
            } else {
                wrk::run(&read_url(&app), &load, &key_header(&app))?
            };
            check_clean(stack, &figures)?;
            per_stack.push(figures);
        }
        let (full, bare) = (per_stack[0], per_stack[1]);
        let cost_us = (1.0 / full.requests_per_second - 1.0 / bare.requests_per_second) * 1e6;
        rows.push(json!({
            "route": route,
            "with_stack": report("auth + rate limit + idempotency", &full),
            "without_stack": report("handler only", &bare),
            "middleware_cost_us_per_request": (cost_us * 10.0).round() / 10.0,
            "ratio": (full.requests_per_second / bare.requests_per_second * 100.0).round() / 100.0,
        }));
    }
    println!("{}", json!({"scenario": "middleware", "routes": rows}));
    Ok(())
}
