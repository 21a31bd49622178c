//! The contract: the served OpenAPI document is a valid OpenAPI 3.1 document,
//! and schemathesis (pinned in tests/tools/requirements.txt), driving the
//! running service from that document with every check and every phase
//! (examples, coverage, fuzzing, and the stateful phase that follows the
//! document's links), finds nothing in at least 5,000 cases.

use std::collections::BTreeMap;
use std::process::Command;

use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use storage::{Environment, Store};
use tests::tools::python_tool;
use tests::{Backend, TestAgency, TestApp};

/// Far above what a run spends: the budgets stay on every request's path
/// without refusing the fuzzer (a 429 is documented, but ends a case early).
const UNREACHABLE: u32 = 1_000_000;

async fn served_document(app: &TestApp) -> String {
    let response = app.get("/api/openapi.json").send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

#[tokio::test]
async fn the_document_is_valid_openapi_3_1() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, served_document(&app).await).unwrap();
    let validator = python_tool("openapi-spec-validator");
    let checked = tokio::task::spawn_blocking(move || Command::new(validator).arg(&path).output())
        .await
        .unwrap()
        .expect("run openapi-spec-validator");
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// A key of `agency` with every scope, and budgets out of the fuzzer's way.
async fn unthrottled_key(store: &Store, agency: &TestAgency) -> String {
    let budgets: BTreeMap<String, u32> = api::endpoints::AGENCY_BUDGETS
        .iter()
        .map(|budget| (budget.name.to_owned(), UNREACHABLE))
        .collect();
    store
        .agencies()
        .set_rate_limit_overrides(&agency.id, &budgets)
        .await
        .unwrap();
    let limits = api::endpoints::ALL
        .iter()
        .map(|endpoint| (endpoint.name.to_owned(), UNREACHABLE))
        .collect();
    store
        .api_keys()
        .issue(
            &agency.id,
            NewApiKey {
                name: "contract".to_owned(),
                scopes: Scope::ALL.to_vec(),
                environment: Environment::Live,
                format: KeyFormat::Sk,
                created_by: Some(agency.owner_id.clone()),
                rate_limit_overrides: limits,
            },
        )
        .await
        .unwrap()
        .plaintext
        .expose()
        .to_owned()
}

#[tokio::test]
async fn schemathesis_finds_nothing_in_five_thousand_cases() {
    let app = TestApp::builder(Backend::Sqlite)
        .with_workers()
        .spawn()
        .await;
    let agency = app.agency().await;
    let key = unthrottled_key(&app.store, &agency).await;
    let config = tests::services::workspace_root().join("tests/schemathesis/schemathesis.toml");
    let schemathesis = python_tool("schemathesis");
    let base = app.base_url.clone();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(schemathesis)
            .arg("--config-file")
            .arg(config)
            .arg("--no-color")
            .arg("run")
            .arg(format!("{base}/api/openapi.json"))
            .args(["--url", &base])
            .args(["-H", &format!("X-API-Key: {key}")])
            .args(["-H", &format!("Authorization: Bearer {key}")])
            .args(["--phases", "examples,coverage,fuzzing,stateful"])
            .args(["--max-examples", "60"])
            // A fixed seed: a finding reproduces, and CI does not depend on luck.
            .args(["--seed", "20261126"])
            .output()
    })
    .await
    .unwrap()
    .expect("run schemathesis");
    let report = String::from_utf8_lossy(&run.stdout).into_owned();
    let summary = report
        .lines()
        .skip_while(|line| !line.contains("SUMMARY"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        run.status.success(),
        "schemathesis found something:\n{report}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let generated: u64 = report
        .lines()
        .find_map(|line| {
            let line = line.trim();
            line.strip_suffix("skipped")
                .or(Some(line))
                .and_then(|line| line.split_once(" generated"))
                .and_then(|(count, _)| count.trim().parse().ok())
        })
        .unwrap_or_else(|| panic!("no case count in the report:\n{summary}"));
    assert!(generated >= 5_000, "only {generated} cases:\n{summary}");
    assert!(
        summary.contains("Stateful"),
        "the stateful phase ran:\n{summary}"
    );
}

/// A deployment for a generated client: the webhooks context (its receiver
/// is an endpoint the service accepts), a key with every scope, a photo and
/// the served document, in `dir`.
struct ClientRun {
    ctx: crate::webhooks::Ctx,
    key: String,
    photo: std::path::PathBuf,
    document: std::path::PathBuf,
}

impl ClientRun {
    async fn new(dir: &std::path::Path) -> Self {
        let ctx = crate::webhooks::Ctx::new(Backend::Sqlite).await;
        let key = ctx.app.key(&ctx.agency, &Scope::ALL).await;
        let photo = dir.join("front.jpg");
        let image = image::RgbImage::from_fn(640, 480, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        });
        image.save(&photo).unwrap();
        let document = dir.join("openapi.json");
        std::fs::write(&document, served_document(&ctx.app).await).unwrap();
        Self {
            ctx,
            key,
            photo,
            document,
        }
    }

    /// The flow's arguments after its script.
    fn args(&self) -> Vec<String> {
        vec![
            self.ctx.app.base_url.clone(),
            self.key.clone(),
            self.ctx.agency.owner_id.to_string(),
            self.ctx.agent.to_string(),
            self.ctx.receiver.url.clone(),
            self.photo.display().to_string(),
        ]
    }
}

/// Runs `command`, failing the test with its output unless it succeeds;
/// returns its standard output.
async fn succeed(mut command: Command, what: &str) -> String {
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// What a flow printed last: one JSON object of what it saw.
fn verdict(stdout: &str) -> serde_json::Value {
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| panic!("no verdict in:\n{stdout}"))
}

fn assert_flow(seen: &serde_json::Value) {
    assert_eq!(seen["read_status"], "Coming Soon", "{seen}");
    assert_eq!(seen["paged"], 2, "{seen}");
    assert!(
        seen["endpoint"]
            .as_str()
            .is_some_and(|id| id.starts_with("whe_")),
        "{seen}"
    );
    let progress = seen["progress"].as_array().unwrap();
    assert_eq!(progress.last().unwrap(), "completed", "{seen}");
    assert_eq!(seen["cancelled"], "Cancelled", "{seen}");
}

#[tokio::test]
async fn a_generated_python_client_drives_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let run = ClientRun::new(dir.path()).await;
    let clients = tests::services::workspace_root().join("tests/clients");
    let mut generate = Command::new(python_tool("openapi-python-client"));
    generate
        .arg("generate")
        .arg("--path")
        .arg(&run.document)
        .arg("--config")
        .arg(clients.join("python-config.yaml"))
        .args(["--meta", "none"])
        .arg("--output-path")
        .arg(dir.path().join("listing_api_client"));
    succeed(generate, "openapi-python-client generate").await;
    let mut flow = Command::new(python_tool("python"));
    flow.arg(clients.join("python_flow.py"))
        .args(run.args())
        .env("PYTHONPATH", dir.path());
    let seen = verdict(&succeed(flow, "the Python flow").await);
    assert_flow(&seen);
    // The endpoint it registered hears the cancellation.
    let arrived = run
        .ctx
        .receiver
        .wait_for(1, std::time::Duration::from_secs(30))
        .await;
    assert_eq!(arrived[0].json()["event_type"], "listing.cancelled");
}

#[tokio::test]
async fn a_generated_typescript_client_drives_the_api() {
    // Inside the tools' directory, so the flow resolves their node_modules.
    let work = tempfile::tempdir_in(tests::tools::node_tools()).unwrap();
    let run = ClientRun::new(work.path()).await;
    let bin = tests::tools::node_tools().join("node_modules/.bin");
    let mut generate = Command::new(bin.join("openapi-typescript"));
    generate
        .arg(&run.document)
        .arg("-o")
        .arg(work.path().join("api.d.ts"));
    succeed(generate, "openapi-typescript").await;
    let flow = work.path().join("typescript_flow.mts");
    std::fs::copy(
        tests::services::workspace_root().join("tests/clients/typescript_flow.mts"),
        &flow,
    )
    .unwrap();
    let mut check = Command::new(bin.join("tsc"));
    check
        .args(["--noEmit", "--strict", "--skipLibCheck", "--types", "node"])
        .args(["--target", "es2022", "--module", "nodenext"])
        .args([
            "--moduleResolution",
            "nodenext",
            "--allowImportingTsExtensions",
        ])
        .arg(&flow)
        .current_dir(work.path());
    succeed(check, "tsc on the flow and the generated types").await;
    let mut node = Command::new(bin.join("tsx"));
    node.arg(&flow).args(run.args()).current_dir(work.path());
    let seen = verdict(&succeed(node, "the TypeScript flow").await);
    assert_flow(&seen);
    let arrived = run
        .ctx
        .receiver
        .wait_for(1, std::time::Duration::from_secs(30))
        .await;
    assert_eq!(arrived[0].json()["event_type"], "listing.cancelled");
}
