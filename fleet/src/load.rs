//! The client's load: listing creates on both replicas, retried with the
//! same idempotency key while the answer says to retry, and photo uploads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::sync::watch;

use crate::photos;
use crate::service::{Answer, Fleet};

/// A writer's pause between creates: a steady load of a few creates per
/// second per writer, so the longest drill (40 s, two writers) stays well
/// inside an endpoint's hourly delivery budget of 1,000.
const WRITER_PAUSE: Duration = Duration::from_millis(150);

/// How long a client keeps retrying one create before giving up.
const RETRY_FOR: Duration = Duration::from_secs(90);

/// A create the API acknowledged.
#[derive(Clone, Debug)]
pub struct Acked {
    /// Its listing number.
    pub number: String,
    /// The address it was created with (unique to its idempotency key).
    pub address: String,
}

/// What the writers saw.
#[derive(Clone, Debug, Default)]
pub struct Writes {
    /// Acknowledged creates.
    pub acked: Vec<Acked>,
    /// Creates abandoned: a final refusal, or retries ran out.
    pub abandoned: Vec<String>,
    /// Every answer, by label (`201`, `503 server.not_ready`, `no answer`).
    pub answers: BTreeMap<String, u64>,
    /// Answers that were a 5xx other than the envelope's 503.
    pub server_errors: u64,
    /// Creates that needed more than one request.
    pub retried: u64,
}

impl Writes {
    fn record(&mut self, answer: &Answer) {
        *self.answers.entry(answer.label()).or_default() += 1;
        if answer.is_server_error() {
            self.server_errors += 1;
        }
    }
}

/// Creates one listing at `address`, retrying with the same key on
/// alternating replicas while the answers say to.
async fn create(fleet: &Fleet, writer: usize, address: &str, writes: &Mutex<Writes>) {
    let key = ulid::Ulid::generate().to_string();
    let started = Instant::now();
    let mut attempt = 0usize;
    loop {
        let answer = Fleet::answer(
            fleet
                .request(Method::POST, writer + attempt, "/listings")
                .header("X-Idempotency-Key", &key)
                .json(&json!({
                    "address": address,
                    "owner_user_id": fleet.agency.owner,
                    "agent_one_id": fleet.agency.owner,
                })),
        )
        .await;
        let done = {
            let mut writes = match writes.lock() {
                Ok(writes) => writes,
                Err(poisoned) => poisoned.into_inner(),
            };
            writes.record(&answer);
            if answer.status == Some(201) {
                if attempt > 0 {
                    writes.retried += 1;
                }
                writes.acked.push(Acked {
                    number: answer.body["listing_number"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    address: address.to_owned(),
                });
                true
            } else if !answer.is_retryable() || started.elapsed() > RETRY_FOR {
                writes
                    .abandoned
                    .push(format!("{address}: {}", answer.label()));
                true
            } else {
                false
            }
        };
        if done {
            return;
        }
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs `writers` concurrent writers until `stop` is raised; each finishes
/// the create it has started (so a stop never abandons a key mid-retry).
pub async fn write_listings(
    fleet: &Fleet,
    drill: &str,
    writers: usize,
    stop: watch::Receiver<bool>,
) -> Writes {
    let writes = Arc::new(Mutex::new(Writes::default()));
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let fleet = fleet.clone();
            let writes = writes.clone();
            let stop = stop.clone();
            let drill = drill.to_owned();
            tokio::spawn(async move {
                let mut count = 0u64;
                loop {
                    let stopped = *stop.borrow();
                    if stopped {
                        break;
                    }
                    count += 1;
                    let address = format!(
                        "{count} {drill} Lane, writer {writer}, {}",
                        ulid::Ulid::generate()
                    );
                    create(&fleet, writer, &address, &writes).await;
                    tokio::time::sleep(WRITER_PAUSE).await;
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    match writes.lock() {
        Ok(writes) => writes.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Uploads `count` photos (one per request) to `listing`, alternating
/// replicas; returns the acknowledged operations and every other answer.
pub async fn upload_photos(
    fleet: &Fleet,
    listing: &str,
    count: u32,
    size: (u32, u32),
) -> (Vec<String>, Vec<String>) {
    let boundary = "fleet-drill-boundary";
    let mut operations = Vec::new();
    let mut refused = Vec::new();
    for n in 0..count {
        let jpeg = photos::photo(size.0, size.1, n + 1);
        let body = photos::upload_body(boundary, listing, &format!("room-{n}.jpg"), &jpeg);
        let answer = Fleet::answer(
            fleet
                .request(Method::POST, n as usize, "/media/upload")
                .header("X-Idempotency-Key", ulid::Ulid::generate().to_string())
                .header(
                    "Content-Type",
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(body),
        )
        .await;
        match answer.body["operation_id"].as_str() {
            Some(operation) if answer.status == Some(200) => operations.push(operation.to_owned()),
            _ => refused.push(answer.label()),
        }
    }
    (operations, refused)
}

/// Creates one listing (retrying) and returns its number.
pub async fn one_listing(fleet: &Fleet, drill: &str) -> Option<String> {
    let writes = Mutex::new(Writes::default());
    let address = format!("1 {drill} Square, {}", ulid::Ulid::generate());
    create(fleet, 0, &address, &writes).await;
    let writes = writes.into_inner().ok()?;
    writes.acked.first().map(|acked| acked.number.clone())
}
