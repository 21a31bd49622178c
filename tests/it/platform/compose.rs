//! `compose.yaml` runs where no container engine is: this test reads it and
//! holds it to the binaries. Every command of ours parses with the binary's
//! own command line (flags and the values the environment gives them), every
//! variable handed to our binaries is one they read, the services the URLs
//! name exist, and health checks probe the ports the binaries listen on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::{ArgAction, CommandFactory, Parser};
use serde_json::Value;

/// Values the operator supplies (`${NAME:?…}` in the file), as a deployment would.
const OPERATOR_SUPPLIED: [(&str, &str); 4] = [
    ("POSTGRES_PASSWORD", "postgres-password"),
    ("MASTER_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
    ("S3_SECRET_KEY", "s3-secret-access-key"),
    ("OPS_BASIC_AUTH", "ops:correct-horse-battery"),
];

/// Variables our binaries read outside their command lines: the log filter.
/// (The S3 client's `AWS_*` variables are checked against the client itself.)
const READ_OUTSIDE_THE_COMMAND_LINE: [&str; 1] = ["RUST_LOG"];

fn workspace_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn compose() -> Value {
    let mut yaml: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&workspace_file("compose.yaml")).expect("compose.yaml is YAML");
    yaml.apply_merge().expect("merge keys resolve");
    serde_json::to_value(yaml).expect("compose.yaml as JSON")
}

/// Replaces `${NAME}`, `${NAME:-default}` and `${NAME:?message}` the way
/// compose does, with the operator's values; collects the names required.
fn interpolate(text: &str, required: &mut BTreeSet<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("closed ${") + start;
        let expression = &rest[start + 2..end];
        let (name, default) = match expression.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (expression.split(":?").next().unwrap_or(expression), None),
        };
        let supplied = OPERATOR_SUPPLIED
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| *value);
        match (supplied, default) {
            (_, Some(default)) => out.push_str(default),
            (Some(value), None) => {
                required.insert(name.to_owned());
                out.push_str(value);
            }
            (None, None) => panic!("${{{name}}} has neither a default nor a documented value"),
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

fn strings(value: &Value, what: &str) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} is a list"))
        .iter()
        .map(|item| {
            item.as_str()
                .unwrap_or_else(|| panic!("{what}: strings"))
                .to_owned()
        })
        .collect()
}

fn environment(service: &Value, required: &mut BTreeSet<String>) -> BTreeMap<String, String> {
    let Some(map) = service["environment"].as_object() else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(name, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(number) => number.to_string(),
                Value::Bool(flag) => flag.to_string(),
                other => panic!("{name}: unexpected value {other}"),
            };
            (name.clone(), interpolate(&text, required))
        })
        .collect()
}

/// Host of a URL like `scheme://[user[:password]@]host[:port][/path]`.
fn host_of(url: &str) -> String {
    let url = reqwest::Url::parse(url).unwrap_or_else(|err| panic!("{url}: {err}"));
    url.host_str().expect("a host").to_owned()
}

/// What a command of ours resolves to: the clap command it names, and the
/// argument line it becomes once the environment is turned into flags.
fn command_line(
    service_name: &str,
    command: &[String],
    environment: &BTreeMap<String, String>,
) -> Vec<String> {
    let root = match command[0].as_str() {
        "api" => api::cli::Cli::command(),
        "workers" => workers::cli::Cli::command(),
        other => panic!("{service_name}: {other} is not one of our binaries"),
    };
    let mut subcommand = root.clone();
    for word in command[1..]
        .iter()
        .take_while(|word| !word.starts_with('-'))
    {
        subcommand = subcommand
            .find_subcommand(word)
            .unwrap_or_else(|| panic!("{service_name}: `{} {word}` does not exist", command[0]))
            .clone();
    }
    // The environment names this command reads, with the flag each stands for.
    let mut by_env = BTreeMap::new();
    for arg in root.get_arguments().chain(subcommand.get_arguments()) {
        if let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) {
            by_env.insert(
                env.to_string_lossy().into_owned(),
                (long, arg.get_action().clone()),
            );
        }
    }
    let mut line = command.to_vec();
    for (name, value) in environment {
        if READ_OUTSIDE_THE_COMMAND_LINE.contains(&name.as_str())
            || storage::objects::is_s3_environment_variable(name)
        {
            continue;
        }
        let (long, action) = by_env.get(name).unwrap_or_else(|| {
            panic!(
                "{service_name}: `{}` does not read {name} (it reads {:?})",
                command.join(" "),
                by_env.keys().collect::<Vec<_>>()
            )
        });
        match action {
            ArgAction::SetTrue => {
                if !matches!(value.as_str(), "" | "0" | "false" | "no" | "off") {
                    line.push(format!("--{long}"));
                }
            }
            _ => line.push(format!("--{long}={value}")),
        }
    }
    line
}

#[test]
fn compose_runs_the_distributed_profile_with_what_the_binaries_read() {
    let compose = compose();
    let services = compose["services"].as_object().expect("services");
    let mut required = BTreeSet::new();
    let image_of = |name: &str| {
        services[name]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    // The shape: two API replicas, workers, PostgreSQL, Redis, an S3 store.
    assert_eq!(compose["services"]["api"]["deploy"]["replicas"], 2);
    for name in ["api", "workers", "postgres", "redis", "s3"] {
        assert!(services.contains_key(name), "service {name}");
    }
    assert!(image_of("postgres").starts_with("postgres:"));
    assert!(image_of("redis").starts_with("redis:"));
    assert!(image_of("s3").starts_with("minio/minio:"));
    // Every long-running service says when it is healthy.
    for (name, service) in services {
        let one_shot = service["depends_on"]
            .as_object()
            .is_some_and(|_| service.get("entrypoint").is_some());
        if !one_shot {
            assert!(
                service["healthcheck"]["test"].is_array(),
                "{name} has a health check"
            );
        }
    }

    // Our two binaries: every command, flag and variable exists and parses.
    let mut lines = BTreeMap::new();
    for name in ["api", "workers"] {
        let service = &services[name];
        assert_eq!(
            image_of(name),
            image_of("api"),
            "one image for both binaries"
        );
        let command = strings(&service["command"], &format!("{name}.command"));
        let environment = environment(service, &mut required);
        let line = command_line(name, &command, &environment);
        for dependency in ["postgres", "redis"] {
            assert_eq!(
                service["depends_on"][dependency]["condition"], "service_healthy",
                "{name} waits for {dependency}"
            );
        }
        lines.insert(name, (line, environment, service.clone()));
    }

    let (api_line, api_env, api_service) = &lines["api"];
    let parsed = api::cli::Cli::try_parse_from(api_line)
        .unwrap_or_else(|err| panic!("api: {}\n{err}", api_line.join(" ")));
    let api::cli::Command::Serve(serve) = parsed.command else {
        panic!("the api service runs `api serve`");
    };
    serve.validate().expect("api settings are valid");
    assert!(
        serve.no_workers,
        "jobs run in the workers service, not in the API replicas"
    );
    assert!(serve.storage.is_distributed());
    // The health check probes the ops listener the binary opens.
    let probe = strings(&api_service["healthcheck"]["test"], "api.healthcheck").join(" ");
    assert!(
        probe.contains(&format!(
            "http://127.0.0.1:{}/readyz",
            serve.ops_listen.port()
        )),
        "{probe}"
    );
    let exposed = strings(&api_service["expose"], "api.expose");
    for port in [serve.listen.port(), serve.ops_listen.port()] {
        assert!(exposed.contains(&port.to_string()), "api exposes {port}");
    }
    // The trusted proxies are the compose network, where the TLS proxy sits.
    let subnet = compose["networks"]["platform"]["ipam"]["config"][0]["subnet"]
        .as_str()
        .expect("platform subnet");
    assert_eq!(api_env["TRUSTED_PROXIES"], subnet);

    let (workers_line, workers_env, workers_service) = &lines["workers"];
    let parsed = workers::cli::Cli::try_parse_from(workers_line)
        .unwrap_or_else(|err| panic!("workers: {}\n{err}", workers_line.join(" ")));
    let workers::cli::Command::Run {
        storage,
        workers: worker_args,
        status_listen,
    } = parsed.command;
    storage
        .validate()
        .expect("workers storage settings are valid");
    workers::cli::settings(&worker_args).expect("workers settings are valid");
    let status_listen = status_listen.expect("workers serve a status listener");
    let probe = strings(
        &workers_service["healthcheck"]["test"],
        "workers.healthcheck",
    )
    .join(" ");
    assert!(
        probe.contains(&format!("http://127.0.0.1:{}/readyz", status_listen.port())),
        "{probe}"
    );
    let exposed = strings(&workers_service["expose"], "workers.expose");
    assert!(exposed.contains(&status_listen.port().to_string()));
    // SIGTERM's grace covers the time in-flight jobs are given.
    let grace: u64 = workers_service["stop_grace_period"]
        .as_str()
        .and_then(|text| text.strip_suffix('s'))
        .and_then(|seconds| seconds.parse().ok())
        .expect("stop_grace_period in seconds");
    assert!(grace > worker_args.shutdown_seconds);

    // The same deployment behind both: one database, queue, store and key.
    for shared in [
        "DATABASE_URL",
        "REDIS_URL",
        "MASTER_KEY",
        "OBJECT_STORE_URL",
        "AWS_ENDPOINT",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ] {
        assert_eq!(api_env.get(shared), workers_env.get(shared), "{shared}");
        assert!(api_env.contains_key(shared), "{shared}");
    }

    // The URLs name services of this file, configured to match.
    let postgres_env = environment(&services["postgres"], &mut required);
    let database = reqwest::Url::parse(&api_env["DATABASE_URL"]).expect("DATABASE_URL");
    assert_eq!(database.host_str(), Some("postgres"));
    assert_eq!(database.username(), postgres_env["POSTGRES_USER"]);
    assert_eq!(
        database.password(),
        Some(postgres_env["POSTGRES_PASSWORD"].as_str())
    );
    assert_eq!(database.path(), format!("/{}", postgres_env["POSTGRES_DB"]));
    assert_eq!(host_of(&api_env["REDIS_URL"]), "redis");
    let s3_env = environment(&services["s3"], &mut required);
    assert_eq!(host_of(&api_env["AWS_ENDPOINT"]), "s3");
    assert_eq!(api_env["AWS_ACCESS_KEY_ID"], s3_env["MINIO_ROOT_USER"]);
    assert_eq!(
        api_env["AWS_SECRET_ACCESS_KEY"],
        s3_env["MINIO_ROOT_PASSWORD"]
    );
    let bucket = api_env["OBJECT_STORE_URL"]
        .strip_prefix("s3://")
        .expect("an S3 bucket");
    let bucket_step = strings(&services["s3-bucket"]["entrypoint"], "s3-bucket.entrypoint");
    assert!(
        bucket_step
            .iter()
            .any(|word| word.ends_with(&format!("/{bucket}"))),
        "the bucket is created: {bucket_step:?}"
    );
    // The queue lives in Redis: it must keep what it acknowledged and never evict it.
    let redis = strings(&services["redis"]["command"], "redis.command").join(" ");
    assert!(redis.contains("--appendonly yes") && redis.contains("--appendfsync always"));
    assert!(redis.contains("--maxmemory-policy noeviction"));

    // Every value the operator must supply is named in the file's header.
    environment(&services["s3-bucket"], &mut required);
    let header = workspace_file("compose.yaml");
    for name in &required {
        assert!(
            header.contains(&format!("{name}=")),
            "the header shows how to set {name}"
        );
    }
    assert_eq!(required.len(), OPERATOR_SUPPLIED.len(), "{required:?}");

    // The image both services run carries both binaries and the health checks' curl.
    let dockerfile = workspace_file("Dockerfile");
    for needed in ["target/release/api", "target/release/workers", " curl "] {
        assert!(dockerfile.contains(needed), "Dockerfile: {needed}");
    }
}
