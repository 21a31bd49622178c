//! `api listen` and `api trigger`: webhooks on a developer's machine. `listen`
//! follows the key's events over `GET /api/v1/webhooks/listen` and forwards
//! each to a local URL, signed as a delivery is (the specification's
//! headers) with a secret made for the session and printed at the start, and
//! prints one line per forward. `trigger` emits an event type's catalog
//! sample into the sandbox (`POST /api/v1/webhooks/trigger`).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures::StreamExt;
use platform::webhooks::client::{
    EVENT_ID_HEADER, EVENT_TYPE_HEADER, EventFields, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature,
};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use storage::Environment;
use storage::api_keys::key_shape;

/// How long to wait before following the stream again after it ended.
const RECONNECT: Duration = Duration::from_secs(1);

/// Where the API is and who is asking.
#[derive(Debug, Args)]
pub struct ApiAccess {
    /// The API's base URL, e.g. `https://api.example.com` (no `/api/v1`).
    #[arg(long, env = "LISTING_API_URL")]
    pub api_url: String,
    /// An API key: webhooks:read (listen), webhooks:write (trigger), media:write (upload).
    #[arg(long, env = "LISTING_API_KEY", hide_env_values = true)]
    pub key: String,
}

impl ApiAccess {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api_url.trim_end_matches('/'))
    }
}

/// `api listen`.
#[derive(Debug, Args)]
pub struct Listen {
    #[command(flatten)]
    access: ApiAccess,
    /// Where to forward each event, e.g. `http://localhost:4000/webhooks`.
    #[arg(long)]
    forward_to: String,
    /// Comma-separated event types; default every type.
    #[arg(long, value_delimiter = ',')]
    events: Vec<String>,
    /// Follow a live key's events too (by default only sandbox keys are
    /// accepted, so live traffic is not forwarded to a laptop by mistake).
    #[arg(long)]
    live: bool,
}

/// `api trigger`.
#[derive(Debug, Args)]
pub struct Trigger {
    /// The event type (e.g. `listing.created`) whose catalog sample to emit.
    event_type: String,
    #[command(flatten)]
    access: ApiAccess,
}

/// Runs `api listen` until interrupted.
pub async fn listen(args: Listen) -> anyhow::Result<()> {
    if let Some((_, Environment::Live)) = key_shape(&args.access.key)
        && !args.live
    {
        bail!(
            "this is a live key: listen forwards sandbox events by default; use a sandbox key (sk_test_…), or pass --live to forward live events"
        );
    }
    let forward_to = reqwest::Url::parse(&args.forward_to)
        .with_context(|| format!("--forward-to {} is not a URL", args.forward_to))?;
    let secret = storage::webhooks::generate_secret();
    let client = reqwest::Client::builder()
        .timeout(platform::webhooks::client::TIMEOUT)
        .build()?;
    let mut url = reqwest::Url::parse(&args.access.url("/api/v1/webhooks/listen"))
        .with_context(|| format!("--api-url {} is not a URL", args.access.api_url))?;
    let events: Vec<&str> = args
        .events
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .collect();
    if !events.is_empty() {
        url.query_pairs_mut()
            .append_pair("events", &events.join(","));
    }
    println!("Ready: forwarding events to {forward_to}.");
    println!("Signing secret for this session: {secret} (verify X-Webhook-Signature with it).");
    println!("Press Ctrl-C to stop.");
    let follow = async {
        loop {
            follow_once(&client, &url, &args.access.key, &forward_to, &secret).await?;
            println!("The event stream ended; following it again.");
            tokio::time::sleep(RECONNECT).await;
        }
    };
    tokio::select! {
        result = follow => result,
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// Follows the stream once, forwarding every event, until it ends.
async fn follow_once(
    client: &reqwest::Client,
    url: &reqwest::Url,
    key: &str,
    forward_to: &reqwest::Url,
    secret: &str,
) -> anyhow::Result<()> {
    let response = client
        .get(url.clone())
        .header("X-API-Key", key)
        .header("Accept", "text/event-stream")
        // The stream lasts as long as the session.
        .timeout(Duration::from_secs(365 * 86_400))
        .send()
        .await
        .context("cannot reach the API (check --api-url)")?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        bail!(
            "the API refused to stream events ({status}): {}",
            explain(&body)
        );
    }
    let mut bytes = response.bytes_stream();
    let mut pending = String::new();
    let mut data = String::new();
    while let Some(chunk) = bytes.next().await {
        pending.push_str(&String::from_utf8_lossy(
            &chunk.context("the event stream broke")?,
        ));
        while let Some(end) = pending.find('\n') {
            let line = pending[..end].trim_end_matches('\r').to_owned();
            pending.drain(..=end);
            if line.is_empty() {
                if !data.is_empty() {
                    forward(client, forward_to, secret, &data).await;
                    data.clear();
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
            // `event:`, `id:`, `retry:` and `:` comments need nothing here:
            // the data names its event.
        }
    }
    Ok(())
}

/// Forwards one streamed event, signed, and prints what came of it.
async fn forward(client: &reqwest::Client, forward_to: &reqwest::Url, secret: &str, data: &str) {
    let now = chrono::Utc::now();
    let Ok(fields) = serde_json::from_str::<EventFields>(data) else {
        println!(
            "{}  (an event the stream sent could not be read: {data})",
            now.format("%H:%M:%S")
        );
        return;
    };
    let nonce = ulid::Ulid::generate().to_string();
    let body = fields.envelope(&nonce);
    let signed_at = now.timestamp();
    let mut headers = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    put(SIGNATURE_HEADER, &signature(secret, signed_at, &body));
    put(TIMESTAMP_HEADER, &signed_at.to_string());
    put(EVENT_TYPE_HEADER, &fields.event_type);
    put(EVENT_ID_HEADER, &fields.event_id);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let started = Instant::now();
    let outcome = match client
        .post(forward_to.clone())
        .headers(headers)
        .body(body)
        .send()
        .await
    {
        Ok(response) => format!("{}", response.status().as_u16()),
        Err(err) if err.is_timeout() => "timeout".to_owned(),
        Err(err) if err.is_connect() => {
            "connection failed (is the local server running?)".to_owned()
        }
        Err(err) => format!("failed: {err}"),
    };
    println!(
        "{}  {}  {}  -> {}  {} ms",
        now.format("%Y-%m-%d %H:%M:%S"),
        fields.event_type,
        fields.event_id,
        outcome,
        started.elapsed().as_millis()
    );
}

/// Runs `api trigger`: prints the event emitted.
pub async fn trigger(args: Trigger) -> anyhow::Result<()> {
    let response = reqwest::Client::new()
        .post(args.access.url("/api/v1/webhooks/trigger"))
        .header("X-API-Key", &args.access.key)
        .header("X-Idempotency-Key", ulid::Ulid::generate().to_string())
        .json(&serde_json::json!({ "event_type": args.event_type }))
        .send()
        .await
        .context("cannot reach the API (check --api-url)")?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("the API refused the trigger ({status}): {}", explain(&body));
    }
    println!("{body}");
    Ok(())
}

/// The error envelope's message and fields, or the body as it came.
fn explain(body: &str) -> String {
    let Ok(envelope) = serde_json::from_str::<Value>(body) else {
        return body.to_owned();
    };
    let error = &envelope["error"];
    let mut text = error["message"].as_str().unwrap_or(body).to_owned();
    if let Some(fields) = error["details"]["fields"].as_object() {
        for (field, reason) in fields {
            text.push_str(&format!(
                " {field}: {}",
                reason.as_str().unwrap_or_default()
            ));
        }
    }
    text
}
