//! The reference: svix-server 1.99 built by `../shared/bench/svix/build.sh`,
//! run as its header says (PostgreSQL 15 and Redis 7 on loopback, the Redis
//! queue and cache), its API and workers in one process pinned to core 0;
//! PostgreSQL and Redis, throwaway ones per run, on core 1.
//!
//! Svix delivers with OpenSSL, which reads its trusted roots from
//! `SSL_CERT_FILE`: the receiver's certificate is appended to a copy of the
//! system bundle and the server started with that file.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::{Args, Target, endpoint_url};
use crate::jobs::Redis;
use crate::process::pinned;
use crate::webhooks::ReceiverProcess;

/// The system's certificate bundle (Debian's ca-certificates).
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The svix-server binary: the one the build script made in its work
/// directory when it is there (the script rebuilds from scratch each time
/// it runs), else what the script prints after building it.
pub(super) fn binary(args: &Args) -> anyhow::Result<PathBuf> {
    let built = args
        .svix_workdir
        .join("svix-webhooks/server/target/release/svix-server");
    if built.exists() && !args.svix_rebuild {
        eprintln!(
            "webhooks-svix: using {} (--svix-rebuild runs {} again)",
            built.display(),
            args.svix_build.display()
        );
        return Ok(built);
    }
    ensure!(
        args.svix_build.exists(),
        "no Svix build script at {} (--svix-build)",
        args.svix_build.display()
    );
    eprintln!(
        "webhooks-svix: building Svix with {} (about 8 minutes cold)",
        args.svix_build.display()
    );
    let output = Command::new("bash")
        .arg(&args.svix_build)
        .arg(&args.svix_workdir)
        .stderr(Stdio::inherit())
        .output()
        .context("running the Svix build script")?;
    ensure!(
        output.status.success(),
        "the Svix build script failed: {}",
        output.status
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let path = PathBuf::from(
        text.lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .context("the build script printed no path")?
            .trim(),
    );
    ensure!(path.exists(), "no Svix binary at {}", path.display());
    Ok(path)
}

/// `svix-server --version`, or `?`.
pub(super) fn version(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

/// The PostgreSQL server binaries: version 15's when installed, else the
/// newest.
fn postgres_bin_dir() -> anyhow::Result<PathBuf> {
    let preferred = PathBuf::from("/usr/lib/postgresql/15/bin");
    if preferred.join("initdb").exists() {
        return Ok(preferred);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .context("PostgreSQL server binaries (apt-get install postgresql-15)")?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found
        .pop()
        .context("no PostgreSQL server binaries under /usr/lib/postgresql")
}

/// `postgres --version`, or `?`.
pub(super) fn postgres_version() -> String {
    postgres_bin_dir()
        .ok()
        .and_then(|dir| {
            Command::new(dir.join("postgres"))
                .arg("--version")
                .output()
                .ok()
        })
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".into())
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next())
            == Some("0")
    })
}

/// A free port on loopback right now.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Starts PostgreSQL, prints `ready`, waits for its standard input to close,
/// then stops it and removes its directory: so it stops even when the
/// benchmark is killed. `$1` the binaries, `$2` the directory, `$3` the
/// port; the rest runs the commands as the cluster's owner (empty, or
/// `runuser -u postgres --`).
const KEEPER: &str = r#"
bin=$1 dir=$2 port=$3
shift 3
"$@" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300" \
  start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
echo ready
cat >/dev/null
"$@" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
rm -rf "$dir"
"#;

/// A throwaway PostgreSQL cluster on loopback, pinned to core 1, with its
/// default durability (fsync on), as the test suite starts one otherwise
/// (`scripts/test-services`). PostgreSQL refuses to run as root: as root
/// it runs as the `postgres` user.
struct Postgres {
    keeper: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Postgres {
    fn start() -> anyhow::Result<Self> {
        let bin = postgres_bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("webhooks-svix-pg.")
            .tempdir()?;
        let dir_text = dir.path().to_string_lossy().into_owned();
        let as_owner: Vec<String> = if running_as_root() {
            let chown = Command::new("chown")
                .args(["postgres:", &dir_text])
                .status()?;
            ensure!(chown.success(), "chown postgres: {dir_text}");
            ["runuser", "-u", "postgres", "--"]
                .map(str::to_owned)
                .to_vec()
        } else {
            Vec::new()
        };
        let mut initdb = match as_owner.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(bin.join("initdb"));
                command
            }
            None => Command::new(bin.join("initdb")),
        };
        let initdb = initdb
            .args(["-D", &format!("{dir_text}/data")])
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .context("initdb")?;
        ensure!(initdb.success(), "initdb failed: {initdb}");
        let port = free_port()?;
        let mut keeper_args = vec![
            "-c".to_owned(),
            KEEPER.to_owned(),
            "postgres-keeper".into(),
            bin.to_string_lossy().into_owned(),
            dir_text,
            port.to_string(),
        ];
        keeper_args.extend(as_owner);
        let mut keeper = pinned(1, "sh", &keeper_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting PostgreSQL")?;
        let stdin = keeper.stdin.take();
        let stdout = keeper.stdout.take().context("keeper stdout")?;
        let mut postgres = Self {
            keeper,
            stdin,
            port,
            _dir: dir,
        };
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if line.trim() != "ready" {
            postgres.stdin = None;
            bail!("PostgreSQL did not start");
        }
        Ok(postgres)
    }

    fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Closing its input makes the keeper stop the cluster and remove it.
        self.stdin = None;
        let _ = self.keeper.wait();
    }
}

/// svix-server serving, and what it runs on.
struct Running {
    server: Child,
    _redis: Redis,
    _postgres: Postgres,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// `svix-server` with the run's settings, in a directory of its own (it
/// reads `.env` and `config.toml` from its working directory).
fn svix_command(
    bin: &Path,
    core: Option<u32>,
    args: &[&str],
    env: &[(&str, String)],
    dir: &Path,
) -> Command {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let mut command = match core {
        Some(core) => pinned(core, &bin.to_string_lossy(), &args),
        None => {
            let mut command = Command::new(bin);
            command.args(&args);
            command
        }
    };
    command
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v)));
    command
}

/// Runs a one-off `svix-server` command and returns what it printed.
fn svix_once(
    bin: &Path,
    args: &[&str],
    env: &[(&str, String)],
    dir: &Path,
) -> anyhow::Result<String> {
    let output = svix_command(bin, None, args, env, dir)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("svix-server {args:?}"))?;
    ensure!(
        output.status.success(),
        "svix-server {args:?}: {}",
        output.status
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Which retry schedule Svix runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RetrySchedule {
    /// Its own default: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
    Svix,
    /// Ours, the specification's: 30 s, 5 min, 30 min, 2 h.
    Specification,
}

/// The specification's waits before each retry, in seconds, as Svix's
/// `retry_schedule` setting spells them ("30,300,1800,7200").
fn specification_retry_schedule() -> String {
    (2..=platform::webhooks::schedule::MAX_ATTEMPTS)
        .filter_map(platform::webhooks::schedule::delay_before)
        .map(|wait| wait.as_secs().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts PostgreSQL, Redis and svix-server trusting the receiver, creates
/// an application with `endpoints` endpoints at the receiver, and returns
/// where to post messages.
pub(super) async fn start(
    bin: &Path,
    receiver: &ReceiverProcess,
    endpoints: u32,
    retry_schedule: RetrySchedule,
) -> anyhow::Result<Target> {
    let (postgres, redis) =
        tokio::task::block_in_place(|| anyhow::Ok((Postgres::start()?, Redis::start_on(1)?)))?;
    let dir = tempfile::Builder::new()
        .prefix("webhooks-svix.")
        .tempdir()?;
    // The roots Svix trusts: the system's and the receiver's certificate.
    let bundle = dir.path().join("ca-bundle.pem");
    let mut roots = std::fs::read(SYSTEM_BUNDLE).unwrap_or_default();
    roots.push(b'\n');
    roots.extend(std::fs::read(&receiver.cert_file)?);
    std::fs::File::create(&bundle)?.write_all(&roots)?;
    let port = free_port()?;
    let env = [
        ("SVIX_DB_DSN", postgres.url()),
        ("SVIX_REDIS_DSN", redis.url()),
        ("SVIX_QUEUE_TYPE", "redis".into()),
        ("SVIX_CACHE_TYPE", "redis".into()),
        (
            "SVIX_JWT_SECRET",
            format!("bench-{}", ulid::Ulid::generate()),
        ),
        ("SVIX_WHITELIST_SUBNETS", "[127.0.0.1/32]".into()),
        ("SVIX_LISTEN_ADDRESS", format!("127.0.0.1:{port}")),
        // As quiet as our server (its LOG_LEVEL stops at info; RUST_LOG
        // overrides it).
        ("RUST_LOG", "warn".into()),
        ("SSL_CERT_FILE", bundle.to_string_lossy().into_owned()),
    ];
    let mut env = env.to_vec();
    if retry_schedule == RetrySchedule::Specification {
        env.push(("SVIX_RETRY_SCHEDULE", specification_retry_schedule()));
    }
    let token = tokio::task::block_in_place(|| {
        svix_once(bin, &["migrate"], &env, dir.path())?;
        let printed = svix_once(bin, &["jwt", "generate"], &env, dir.path())?;
        printed
            .lines()
            .find_map(|line| line.strip_prefix("Token (Bearer):"))
            .map(|token| token.trim().to_owned())
            .with_context(|| format!("svix-server jwt generate said {printed:?}"))
    })?;
    // Its log (warnings and errors) goes to our standard error.
    let server = svix_command(bin, Some(0), &["--run-migrations"], &env, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting svix-server")?;
    let running = Running {
        server,
        _redis: redis,
        _postgres: postgres,
        _dir: dir,
    };
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let client = reqwest::Client::builder().no_proxy().build()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = client.get(format!("{base}/health/ping")).send().await
            && response.status().is_success()
        {
            break;
        }
        ensure!(Instant::now() < deadline, "svix-server did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let call = |path: String, body: Value| {
        let request = client
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body);
        async move {
            let response = request.send().await?;
            let status = response.status();
            let answer: Value = response.json().await.unwrap_or_default();
            ensure!(status.is_success(), "Svix {path}: {status} {answer}");
            anyhow::Ok(answer)
        }
    };
    let app = call("/app/".into(), json!({"name": "Benchmark Media"})).await?;
    let app = app["id"].as_str().context("application id")?.to_owned();
    for n in 0..endpoints {
        call(
            format!("/app/{app}/endpoint/"),
            json!({
                "url": endpoint_url(receiver, n),
                "description": format!("bench {n}"),
                "version": 1,
            }),
        )
        .await?;
    }
    // The message carries what our delivery carries: the envelope with the
    // listing's data, so both bodies are about the same size and the
    // receiver finds the sequence number in the same place.
    let body = json!({
        "eventType": "listing.created",
        "payload": {
            "event_id": "evt_01KBENCHMARKSVIXPAYLOAD00",
            "event_type": "listing.created",
            "api_version": "2024-01-01",
            "timestamp": 1_767_225_600,
            "nonce": "01KBENCHMARKSVIXNONCE00000",
            "is_sandbox": false,
            "data": {
                "listing_number": "L-2026-000000",
                "status": "Coming Soon",
                "address": "{seq} Delivery Lane, Springfield",
                "owner_user_id": "usr_01KBENCHMARKOWNER000000000",
                "agent_one_id": "usr_01KBENCHMARKAGENT000000000",
                "agent_two_id": null,
                "package": "standard",
            },
        },
    });
    Ok(Target {
        post_url: format!("{base}/app/{app}/msg/"),
        token,
        body: body.to_string(),
        // Optional in Svix, and not sent: its clients need not.
        idempotency_header: None,
        _running: Box::new(running),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_specification_schedule_is_spelled_as_svix_reads_it() {
        assert_eq!(super::specification_retry_schedule(), "30,300,1800,7200");
    }
}
