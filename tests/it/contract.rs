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
            .args(["--checks", "all"])
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
