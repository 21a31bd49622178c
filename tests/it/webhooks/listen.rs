//! `api listen` and `api trigger` against a real server and a local
//! receiver, on both profiles: listen prints a session secret, forwards a
//! created listing's event to the local URL signed with it, and prints a
//! line for it; a triggered catalog sample arrives the same way; the event
//! filter holds; and both commands refuse what they cannot do.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tests::Backend;
use tests::receiver::WebhookReceiver;
use webhook_verify::Verifier;

use super::{Ctx, CtxOptions};

const PATIENCE: Duration = Duration::from_secs(30);

/// A running `api listen` and the lines it printed so far.
struct Listening {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Listening {
    fn start(ctx: &Ctx, key: &str, forward_to: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(tests::binaries::binary("api"))
            .args(["listen", "--api-url", &ctx.app.base_url, "--key", key])
            .args(["--forward-to", forward_to])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("api listen starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("stdout");
        let seen = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                seen.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    async fn line_containing(&self, text: &str) -> String {
        tests::deployment::eventually(PATIENCE, text, || async {
            self.lines().into_iter().find(|line| line.contains(text))
        })
        .await
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `api` with `args` to its end, without blocking the test's runtime
/// (which serves the API the command talks to).
async fn api(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(tests::binaries::binary("api"))
        .args(args)
        .output()
        .await
        .expect("api runs")
}

async fn listen_forwards_events_to_a_local_receiver(redis: bool, backend: Backend) {
    let ctx = Ctx::with(
        backend,
        CtxOptions {
            redis,
            ..CtxOptions::default()
        },
    )
    .await;
    let sandbox = ctx.sandbox_key().await;
    let local = WebhookReceiver::start_plain().await;
    let listening = Listening::start(
        &ctx,
        &sandbox,
        &local.url,
        &["--events", "listing.created,listing.status_changed"],
    );
    let ready = listening
        .line_containing("Signing secret for this session")
        .await;
    let secret = ready
        .split_whitespace()
        .find(|word| word.starts_with("whsec_"))
        .expect("the session secret is printed")
        .to_owned();
    // The stream is open once the server has a listener; give it a moment
    // by waiting for the ready line, then create a listing in the sandbox.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let number = ctx.create_listing_with(&sandbox).await;
    let arrived = local.wait_for(1, PATIENCE).await.remove(0);
    let body = arrived.json();
    assert_eq!(body["event_type"], "listing.created", "{body}");
    assert_eq!(body["data"]["listing_number"], number.as_str());
    assert_eq!(body["is_sandbox"], true);
    let signed_at: i64 = arrived
        .header("x-webhook-timestamp")
        .unwrap()
        .parse()
        .unwrap();
    let verdict = Verifier::new(&secret)
        .verify(&arrived.headers, &arrived.body, signed_at)
        .expect("signed with the session secret");
    assert!(
        matches!(verdict, webhook_verify::Verdict::Accepted(_)),
        "a first delivery"
    );
    assert!(
        Verifier::new("whsec_c2VjcmV0LXR3bw")
            .verify(&arrived.headers, &arrived.body, signed_at)
            .is_err(),
        "and not with any other"
    );
    let event_id = body["event_id"].as_str().unwrap();
    let line = listening.line_containing(event_id).await;
    assert!(
        line.contains("listing.created") && line.contains("-> 200") && line.contains(" ms"),
        "{line}"
    );
    // The created listing's invoice event is filtered out.
    assert!(
        local
            .received()
            .iter()
            .all(|r| r.json()["event_type"] != "invoice.created")
    );

    // A triggered sample arrives the same way.
    let triggered = api(&[
        "trigger",
        "listing.status_changed",
        "--api-url",
        &ctx.app.base_url,
        "--key",
        &sandbox,
    ])
    .await;
    assert!(
        triggered.status.success(),
        "{}",
        String::from_utf8_lossy(&triggered.stderr)
    );
    let emitted: serde_json::Value = serde_json::from_slice(&triggered.stdout).unwrap();
    assert_eq!(emitted["event_type"], "listing.status_changed");
    let emitted_id = emitted["event_id"].as_str().unwrap();
    let second = local.wait_for(2, PATIENCE).await.remove(1);
    assert_eq!(second.json()["event_id"], emitted_id);
    assert_eq!(
        second.json()["data"],
        storage::rules::events::EventType::ListingStatusChanged
            .catalog_entry()
            .sample()
    );
    listening.line_containing(emitted_id).await;

    // An unknown type in the stream's filter is refused before it opens.
    let unknown = ctx
        .send(
            reqwest::Method::GET,
            "/api/v1/webhooks/listen?events=listing.exploded",
            &sandbox,
            None,
        )
        .await;
    crate::support::expect_error(
        unknown,
        reqwest::StatusCode::UNPROCESSABLE_ENTITY,
        "validation.failed",
    )
    .await;

    // Refusals: a live key for trigger, an unknown type, a live key for
    // listen without --live, and a bad key.
    for (args, expected) in [
        (
            vec!["trigger", "listing.created", "--key", ctx.key.as_str()],
            "sandbox",
        ),
        (
            vec!["trigger", "listing.exploded", "--key", sandbox.as_str()],
            "event_types",
        ),
    ] {
        let mut args = args;
        args.extend(["--api-url", ctx.app.base_url.as_str()]);
        let refused = api(&args).await;
        assert!(!refused.status.success());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(expected), "{stderr}");
    }
    let live = api(&[
        "listen",
        "--api-url",
        &ctx.app.base_url,
        "--key",
        &ctx.key,
        "--forward-to",
        &local.url,
    ])
    .await;
    assert!(!live.status.success());
    assert!(String::from_utf8_lossy(&live.stderr).contains("--live"));
    let bad_key = api(&[
        "listen",
        "--api-url",
        &ctx.app.base_url,
        "--key",
        "sk_test_notakeyatall000000000000000000",
        "--forward-to",
        &local.url,
    ])
    .await;
    assert!(!bad_key.status.success());
    assert!(String::from_utf8_lossy(&bad_key.stderr).contains("401"));
}

#[tokio::test]
async fn listen_forwards_events_to_a_local_receiver_on_the_embedded_queue() {
    listen_forwards_events_to_a_local_receiver(false, Backend::Sqlite).await;
}

#[tokio::test]
async fn listen_forwards_events_to_a_local_receiver_on_the_redis_queue() {
    listen_forwards_events_to_a_local_receiver(true, Backend::Postgres).await;
}
