//! The document as served is the one recorded in `document.json` (its
//! `servers` aside, which name the test server). A change to the code that
//! changes the document fails here and lists every JSON path that differs;
//! when the change is meant, record the new document with
//! `RECORD_OPENAPI=1 cargo test -p tests --test it openapi::recorded` and name
//! the differences in the commit. So a refactoring that should leave the
//! contract alone shows that it did.

use std::path::PathBuf;

use serde_json::Value;
use tests::{Backend, TestApp};

/// Where the recorded document lives.
fn recorded_path() -> PathBuf {
    tests::services::workspace_root().join("tests/it/openapi/document.json")
}

/// The JSON pointers at which `served` and `recorded` differ (at most 200).
fn differences(served: &Value, recorded: &Value, at: &str, found: &mut Vec<String>) {
    if found.len() >= 200 {
        return;
    }
    match (served, recorded) {
        (Value::Object(left), Value::Object(right)) => {
            for (key, value) in left {
                let path = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                match right.get(key) {
                    Some(other) => differences(value, other, &path, found),
                    None => found.push(format!("{path}: served only")),
                }
            }
            for key in right.keys().filter(|key| !left.contains_key(*key)) {
                let path = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                found.push(format!("{path}: recorded only"));
            }
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => {
            for (index, (value, other)) in left.iter().zip(right).enumerate() {
                differences(value, other, &format!("{at}/{index}"), found);
            }
        }
        (left, right) if left != right => {
            let short = |value: &Value| {
                let text = value.to_string();
                if text.len() > 160 {
                    format!("{}…", &text[..text.floor_char_boundary(160)])
                } else {
                    text
                }
            };
            found.push(format!(
                "{at}: served {} recorded {}",
                short(left),
                short(right)
            ));
        }
        _ => {}
    }
}

#[tokio::test]
async fn the_served_document_is_the_recorded_one() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let response = app.get("/api/openapi.json").send().await.unwrap();
    assert!(response.status().is_success());
    let mut served: Value = response.json().await.unwrap();
    // The servers name this test's address; everything else is the contract.
    served["servers"] = Value::Array(Vec::new());
    if std::env::var_os("RECORD_OPENAPI").is_some() {
        let text = serde_json::to_string_pretty(&served).unwrap() + "\n";
        std::fs::write(recorded_path(), text).unwrap();
        return;
    }
    let recorded: Value = serde_json::from_str(
        &std::fs::read_to_string(recorded_path()).expect("tests/it/openapi/document.json"),
    )
    .unwrap();
    let mut found = Vec::new();
    differences(&served, &recorded, "", &mut found);
    assert!(
        found.is_empty(),
        "the served document differs from tests/it/openapi/document.json at:\n{}\n\
         If the change is meant, record it (RECORD_OPENAPI=1) and list these in the commit.",
        found.join("\n")
    );
}
