//! The Python and Node receiver snippets in `docs/receivers/` reach the same verdict,
//! with the same reason code, as this crate on the same deliveries.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use webhook_verify::{Verdict, Verifier, sign};

const SECRET: &str = "whsec_c25pcHBldC10ZXN0LXNlY3JldA";
const NOW: i64 = 1_780_000_000;
const EVENT: &str = "01JZ8Q4V6S3N2W0H5XKDQF9R7T";

/// One delivery as the snippets' command line takes it.
struct Case {
    name: &'static str,
    secret: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// `None` leaves the snippet to read its own clock.
    now: Option<i64>,
}

impl Case {
    fn new(name: &'static str, signed_at: i64, now: Option<i64>) -> Self {
        let body = json!({
            "event_id": EVENT, "event_type": "listing.created", "api_version": "2026-05-29",
            "timestamp": signed_at, "nonce": "01JZ8Q4V6TB1C2D3E4F5G6H7J8", "is_sandbox": false,
            "data": {"listing_number": "L-1001", "status": "draft", "address": "1 Main St"},
        })
        .to_string()
        .into_bytes();
        let signature = sign(SECRET, signed_at, &body);
        let headers = [
            ("Content-Type", "application/json".to_owned()),
            ("X-Webhook-Signature", signature.clone()),
            ("X-MediaAgency-Signature", signature),
            ("X-Webhook-Timestamp", signed_at.to_string()),
            ("X-Webhook-Event-Type", "listing.created".to_owned()),
            ("X-Event-Id", EVENT.to_owned()),
        ]
        .map(|(n, v)| (n.to_owned(), v))
        .into();
        Self {
            name,
            secret: SECRET,
            headers,
            body,
            now,
        }
    }

    fn set(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| n != name);
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn without(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| n != name);
        self
    }

    /// Changes the body after signing, as a tamperer would.
    fn body(mut self, change: impl FnOnce(String) -> String) -> Self {
        self.body = change(String::from_utf8(self.body).expect("JSON text")).into_bytes();
        self
    }

    /// Signs the current body again, as the sender would have.
    fn resign(self) -> Self {
        let timestamp: i64 = self.headers[3].1.parse().expect("signing time");
        let signature = sign(SECRET, timestamp, &self.body);
        self.set("X-Webhook-Signature", &signature)
            .set("X-MediaAgency-Signature", &signature)
    }

    fn names(mut self, case: fn(&str) -> String) -> Self {
        self.headers = self
            .headers
            .iter()
            .map(|(n, v)| (case(n), v.clone()))
            .collect();
        self
    }

    /// What this crate answers, in the snippets' `(verdict, reason)` terms.
    fn expected(&self) -> (String, String) {
        let verifier = Verifier::new(self.secret);
        let result = match self.now {
            Some(now) => verifier.verify(&self.headers, &self.body, now),
            None => verifier.verify_now(&self.headers, &self.body),
        };
        match result {
            Ok(Verdict::Accepted(_)) => ("accepted".into(), "accepted".into()),
            Ok(Verdict::Duplicate(_)) => ("duplicate".into(), "duplicate".into()),
            Err(error) => ("rejected".into(), error.code().into()),
        }
    }

    fn stdin(&self) -> String {
        let headers: serde_json::Map<String, Value> = self
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), Value::from(v.as_str())))
            .collect();
        let mut request =
            json!({"secret": self.secret, "headers": headers, "body_base64": base64(&self.body)});
        if let Some(now) = self.now {
            request["now"] = now.into();
        }
        request.to_string()
    }
}

/// Each delivery with the reason every implementation must give ("accepted" when accepted).
fn cases() -> Vec<(&'static str, Case)> {
    let good = || Case::new("good delivery", NOW, Some(NOW));
    let tampered = good().body(|body| body.replace("L-1001", "L-1002"));
    let not_an_envelope = good().body(|_| "[]".to_owned()).resign();
    let mut wrong_secret = good();
    wrong_secret.secret = "whsec_b3RoZXItc2VjcmV0";
    // A rotation's overlap: the new secret's signature first, the old one's
    // after; a receiver that knows either one accepts.
    let signed = good().headers[1].1.clone();
    let other = sign("whsec_bmV3LXNlY3JldA", NOW, &good().body);
    let third = sign("whsec_dGhpcmQtc2VjcmV0", NOW, &good().body);
    let overlap_old_known = good().set("X-Webhook-Signature", &format!("{other}, {signed}"));
    let overlap_new_known = good().set("X-Webhook-Signature", &format!("{signed}, {other}"));
    let overlap_neither = good().set("X-Webhook-Signature", &format!("{other}, {third}"));
    let overlap_malformed = good().set("X-Webhook-Signature", &format!("{signed}, sha1=00"));
    let uppercase_hex = good().headers[1]
        .1
        .to_uppercase()
        .replace("SHA256=", "sha256=");
    vec![
        ("accepted", good()),
        (
            "accepted",
            Case::new("snippet's own clock", unix_now(), None),
        ),
        ("accepted", Case::new("300 s late", NOW, Some(NOW + 300))),
        ("accepted", Case::new("300 s early", NOW, Some(NOW - 300))),
        ("accepted", good().without("X-Webhook-Signature")),
        ("accepted", good().without("X-MediaAgency-Signature")),
        ("accepted", good().names(str::to_uppercase)),
        ("accepted", good().names(str::to_lowercase)),
        ("accepted", overlap_old_known),
        ("accepted", overlap_new_known),
        ("signature_mismatch", overlap_neither),
        ("malformed_signature", overlap_malformed),
        ("signature_mismatch", tampered),
        ("signature_mismatch", wrong_secret),
        (
            "signature_mismatch",
            good().set("X-Webhook-Timestamp", &(NOW + 1).to_string()),
        ),
        (
            "timestamp_out_of_tolerance",
            Case::new("301 s late", NOW, Some(NOW + 301)),
        ),
        (
            "timestamp_out_of_tolerance",
            Case::new("301 s early", NOW, Some(NOW - 301)),
        ),
        (
            "timestamp_out_of_tolerance",
            Case::new("stale, own clock", unix_now() - 3600, None),
        ),
        (
            "missing_signature",
            good()
                .without("X-Webhook-Signature")
                .without("X-MediaAgency-Signature"),
        ),
        (
            "malformed_signature",
            good().set("X-Webhook-Signature", &uppercase_hex),
        ),
        ("missing_timestamp", good().without("X-Webhook-Timestamp")),
        (
            "malformed_timestamp",
            good().set("X-Webhook-Timestamp", &format!("+{NOW}")),
        ),
        ("malformed_body", not_an_envelope),
        ("missing_event_id", good().without("X-Event-Id")),
        (
            "event_id_mismatch",
            good().set("X-Event-Id", "01JZ8Q4V6S3N2W0H5XKDQF9R7V"),
        ),
    ]
}

/// Runs every case through one snippet and compares with this crate.
fn check_snippet(program: &str, file: &str) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/receivers")
        .join(file);
    // Canonical, so that Node's "am I the main module" test sees the path it was given.
    let script = script
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let mut seen = std::collections::BTreeSet::new();
    for (i, (reason, case)) in cases().into_iter().enumerate() {
        let verdict = if reason == "accepted" {
            "accepted"
        } else {
            "rejected"
        };
        let expected = (verdict.to_owned(), reason.to_owned());
        let label = format!("case {i} ({}), expecting {reason}", case.name);
        assert_eq!(case.expected(), expected, "this crate, {label}");
        let answer = run(program, &script, &case.stdin());
        assert_eq!(answer, expected, "{program} {file}, {label}");
        seen.insert(verdict);
    }
    // The cases cover both sides of the line.
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["accepted", "rejected"]
    );
}

fn run(program: &str, script: &std::path::Path, stdin: &str) -> (String, String) {
    let mut child = Command::new(program)
        .arg(script)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{program} must be installed to check the receiver snippets: {e}")
        });
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("snippet ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{program} exited {}: {}{stdout}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "one line expected: {stdout}");
    let answer: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let field = |name: &str| {
        answer[name]
            .as_str()
            .unwrap_or_else(|| panic!("no {name}: {stdout}"))
            .to_owned()
    };
    (field("verdict"), field("reason"))
}

#[test]
fn python_snippet_agrees_with_the_crate() {
    check_snippet("python3", "verify_webhook.py");
}

#[test]
fn node_snippet_agrees_with_the_crate() {
    check_snippet("node", "verify_webhook.mjs");
}

#[test]
fn a_crash_is_a_non_zero_exit_not_a_verdict() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/receivers");
    for (program, file) in [
        ("python3", "verify_webhook.py"),
        ("node", "verify_webhook.mjs"),
    ] {
        let script = dir.join(file).canonicalize().expect("snippet exists");
        let status = Command::new(program)
            .arg(&script)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .and_then(|mut child| {
                child.stdin.take().expect("piped").write_all(b"not json")?;
                child.wait()
            })
            .expect("snippet ran");
        assert!(!status.success(), "{program} {file} accepted garbage input");
    }
}

fn unix_now() -> i64 {
    let elapsed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(elapsed.as_secs()).expect("fits")
}

/// Standard base64 with padding; small enough not to need a dependency.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn base64_matches_the_standard_alphabet() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
}
