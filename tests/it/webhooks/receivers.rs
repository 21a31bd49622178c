//! The README's receiver snippets (Python and Node) verify a real delivery
//! and reject a tampered one; the README shows them verbatim.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tests::Backend;
use tests::receiver::Received;

use super::Ctx;

fn snippet(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/receivers")
        .join(name)
}

fn run(program: &str, script: &str, secret: &str, delivery: &Received, body: &[u8]) -> Value {
    let input = json!({
        "secret": secret,
        "headers": delivery.headers,
        "body_base64": base64::engine::general_purpose::STANDARD.encode(body),
    });
    let mut child = Command::new(program)
        .arg(snippet(script))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn the_python_and_node_snippets_verify_a_real_delivery() {
    let ctx = Ctx::new(Backend::Sqlite).await;
    let (_, secret) = ctx
        .register_with(&ctx.key, json!({ "event_types": ["listing.created"] }))
        .await;
    ctx.create_listing().await;
    let delivery = ctx
        .receiver
        .wait_for(1, Duration::from_secs(20))
        .await
        .remove(0);
    let mut tampered = delivery.body.clone();
    let last = tampered.len() - 2;
    tampered[last] ^= 1;
    for (program, script) in [
        ("python3", "verify_webhook.py"),
        ("node", "verify_webhook.mjs"),
    ] {
        let good = run(program, script, &secret, &delivery, &delivery.body);
        assert_eq!(good["verdict"], "accepted", "{script}: {good}");
        let bad = run(program, script, &secret, &delivery, &tampered);
        assert_eq!(bad["verdict"], "rejected", "{script}: {bad}");
        let wrong_secret = run(program, script, "whsec_wrong", &delivery, &delivery.body);
        assert_eq!(
            wrong_secret["verdict"], "rejected",
            "{script}: {wrong_secret}"
        );
    }
}

#[test]
fn the_readme_shows_the_snippets_verbatim() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .unwrap();
    for script in ["verify_webhook.py", "verify_webhook.mjs"] {
        let text = std::fs::read_to_string(snippet(script)).unwrap();
        assert!(
            readme.contains(text.trim_end()),
            "README.md must show docs/receivers/{script} verbatim"
        );
    }
}
