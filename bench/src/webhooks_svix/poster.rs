//! The posting client (a child role pinned to core 1): posts numbered events
//! to one system, as fast as it accepts them over a fixed number of
//! connections or at a fixed rate, and prints when each post was sent (and,
//! on stderr, how long the posts took to be answered: what acceptance adds
//! to each event's post→arrival latency).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use super::Post;
use crate::job_platform::percentile;

/// What the posting client is told.
#[derive(Debug, Clone, clap::Args)]
pub struct PosterArgs {
    /// Where events are posted.
    #[arg(long)]
    url: String,
    /// Bearer token.
    #[arg(long)]
    token: String,
    /// JSON body; `{seq}` stands for the event's sequence number.
    #[arg(long)]
    body: String,
    /// A header carrying a fresh idempotency key on every post (our API
    /// requires `X-Idempotency-Key`).
    #[arg(long)]
    idempotency_header: Option<String>,
    /// Events to post, numbered from 1.
    #[arg(long)]
    events: u64,
    /// Connections posting at once when posting as fast as accepted.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Events per second, each post on its own schedule whatever the
    /// earlier ones take; 0: as fast as the system accepts them.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
}

/// Now, in Unix microseconds (the receiver's clock is the same).
fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// Posts event `seq` and returns its post and how long its answer took, in
/// microseconds.
async fn post_one(client: &reqwest::Client, args: &PosterArgs, seq: u64) -> (Post, i64) {
    let body = args.body.replace("{seq}", &seq.to_string());
    let mut request = client
        .post(&args.url)
        .bearer_auth(&args.token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(header) = &args.idempotency_header {
        request = request.header(header, format!("{}-{seq}", ulid::Ulid::generate()));
    }
    let sent = now_micros();
    let status = request
        .send()
        .await
        .map_or(0, |response| response.status().as_u16());
    ((seq, sent, status), now_micros() - sent)
}

/// (child) Posts the events and prints `{"posts": [[seq, sent_us, status]…]}`.
pub async fn run_poster(args: PosterArgs) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(args.connections.max(64))
        .timeout(Duration::from_secs(60))
        .build()?;
    let args = Arc::new(args);
    let started = Instant::now();
    let mut posts: Vec<(Post, i64)> = Vec::with_capacity(usize::try_from(args.events)?);
    if args.rate > 0.0 {
        // Open loop: post n leaves at n / rate seconds.
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut sent = Vec::with_capacity(posts.capacity());
        for seq in 1..=args.events {
            ticker.tick().await;
            let (client, args) = (client.clone(), Arc::clone(&args));
            sent.push(tokio::spawn(
                async move { post_one(&client, &args, seq).await },
            ));
        }
        for post in sent {
            posts.push(post.await?);
        }
    } else {
        // Closed loop: each connection posts the next number when its
        // previous post was answered.
        let next = Arc::new(AtomicU64::new(1));
        let mut lanes = Vec::new();
        for _ in 0..args.connections.max(1) {
            let (client, args, next) = (client.clone(), Arc::clone(&args), Arc::clone(&next));
            lanes.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    if seq > args.events {
                        return mine;
                    }
                    mine.push(post_one(&client, &args, seq).await);
                }
            }));
        }
        for lane in lanes {
            posts.extend(lane.await.context("a posting connection")?);
        }
    }
    posts.sort_unstable_by_key(|(post, _)| post.0);
    let (posts, answered): (Vec<Post>, Vec<i64>) = posts.into_iter().unzip();
    let mut answered_ms: Vec<f64> = answered.iter().map(|us| *us as f64 / 1000.0).collect();
    answered_ms.sort_by(f64::total_cmp);
    eprintln!(
        "  posts answered in p50 {:.1} ms, p99 {:.1} ms",
        percentile(&answered_ms, 50.0),
        percentile(&answered_ms, 99.0)
    );
    println!(
        "{}",
        json!({"posts": posts, "seconds": started.elapsed().as_secs_f64()})
    );
    Ok(())
}
