//! Resuming a progress stream: every event has an `id`, a reconnect naming
//! the last one it saw gets exactly the states after it, and a reconnect to a
//! finished operation that already saw its end is answered 204, which a real
//! `EventSource` (headless Chromium) takes as the end. The browser test runs
//! through a proxy that drops the connection mid-stream, so the browser's own
//! reconnect (with `Last-Event-ID`) is what resumes it.

use std::time::Duration;

use platform::progress::{MediaStep, ProgressEvent, ProgressState};
use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::ids::OperationId;
use tests::TestApp;
use tests::backend_tests;
use tests::browser::Browser;

use super::*;

/// One event of a stream as sent: its name, `id` and data.
#[derive(Debug)]
struct Sent {
    name: String,
    id: String,
    data: Value,
}

/// A media context without workers: the test publishes every state itself.
async fn media_without_workers(backend: tests::Backend) -> Media {
    Media::with_scopes(
        TestApp::builder(backend).spawn().await,
        &[Scope::MediaWrite],
    )
    .await
}

/// Uploads one photo; its `queued` state is published as number 1. Returns
/// the operation, its progress URL and the photo's media id.
async fn uploaded(media: &Media) -> (OperationId, String, String) {
    let response = media
        .upload(&[Part::File("files", "front.jpg", jpeg(300, 200))])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let operation = OperationId::parse(body["operation_id"].as_str().unwrap()).unwrap();
    (
        operation,
        body["progress_url"].as_str().unwrap().to_owned(),
        body["files"][0]["media_id"].as_str().unwrap().to_owned(),
    )
}

/// Publishes `step` of the operation as number `seq`.
async fn publish(media: &Media, operation: &OperationId, seq: u64, step: MediaStep) {
    let tenant = media.ctx.live();
    let snapshot = media
        .ctx
        .app
        .store
        .media()
        .snapshot(&tenant, operation)
        .await
        .unwrap();
    let state = ProgressState {
        event: ProgressEvent::Media {
            step,
            operation: snapshot,
        },
        seq,
    };
    media
        .ctx
        .app
        .state
        .platform()
        .progress
        .publish(&tenant, operation, state)
        .await
        .unwrap();
}

fn variant_done(media_id: &str, variant: &str) -> MediaStep {
    MediaStep::VariantDone {
        media_id: storage::ids::MediaId::parse(media_id).unwrap(),
        variant: variant.to_owned(),
        width: 10,
        height: 10,
    }
}

/// Opens the stream at `url` resuming after `last_event_id` (if any).
async fn request(media: &Media, url: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut request = media
        .ctx
        .app
        .client
        .get(url)
        .header("X-API-Key", &media.key);
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    tokio::time::timeout(Duration::from_secs(60), request.send())
        .await
        .unwrap()
        .unwrap()
}

/// Reads a stream to its end: its `retry` hint and its events.
async fn sent(response: reqwest::Response) -> (Option<u64>, Vec<Sent>) {
    assert_eq!(response.status(), StatusCode::OK);
    let text = tokio::time::timeout(Duration::from_secs(240), response.text())
        .await
        .unwrap()
        .unwrap();
    let mut retry = None;
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let (mut name, mut id, mut data) = (None, None, None);
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("retry:") {
                retry = value.trim().parse().ok();
            } else if let Some(value) = line.strip_prefix("event:") {
                name = Some(value.trim().to_owned());
            } else if let Some(value) = line.strip_prefix("id:") {
                id = Some(value.trim().to_owned());
            } else if let Some(value) = line.strip_prefix("data:") {
                data = serde_json::from_str(value.trim()).ok();
            }
        }
        if let Some(name) = name {
            let id = id.unwrap_or_else(|| panic!("event {name} without an id"));
            events.push(Sent {
                name,
                id,
                data: data.unwrap_or(Value::Null),
            });
        }
    }
    (retry, events)
}

fn names_and_ids(events: &[Sent]) -> Vec<(&str, &str)> {
    events
        .iter()
        .map(|event| (event.name.as_str(), event.id.as_str()))
        .collect()
}

backend_tests! {
    async fn a_reconnect_with_last_event_id_gets_exactly_the_states_after_it(backend) {
        let media = media_without_workers(backend).await;
        let (operation, _, media_id) = uploaded(&media).await;
        publish(&media, &operation, 2, MediaStep::Processing { media_id: None }).await;
        publish(&media, &operation, 3, variant_done(&media_id, "thumbnail")).await;
        publish(&media, &operation, 4, variant_done(&media_id, "web")).await;
        let url = media.ctx.app.url(&format!("/api/v1/progress/{operation}"));

        // From the start: a hint, then a snapshot numbered as the state it shows.
        let first = request(&media, &url, None).await;
        publish(&media, &operation, 5, variant_done(&media_id, "mls")).await;
        publish(&media, &operation, 6, MediaStep::FileDone {
            media_id: storage::ids::MediaId::parse(&media_id).unwrap(),
        }).await;
        publish(&media, &operation, 7, MediaStep::completed()).await;
        let (retry, events) = sent(first).await;
        assert_eq!(retry, Some(2000));
        assert_eq!(
            names_and_ids(&events),
            [("snapshot", "4"), ("variant_done", "5"), ("file_done", "6"), ("completed", "7")]
        );

        // Resumed after 3: the states after it, each once, no snapshot.
        let (retry, events) = sent(request(&media, &url, Some("3")).await).await;
        assert_eq!(retry, Some(2000));
        assert_eq!(
            names_and_ids(&events),
            [("variant_done", "4"), ("variant_done", "5"), ("file_done", "6"), ("completed", "7")]
        );
        let variants: Vec<&str> = events[..2].iter().map(|e| e.data["variant"].as_str().unwrap()).collect();
        assert_eq!(variants, ["web", "mls"]);
        for event in &events {
            assert_eq!(event.data["seq"].as_u64().unwrap().to_string(), event.id);
            assert_eq!(event.data["operation"]["operation_id"], operation.as_str());
        }
        // Resumed after 0 (a snapshot with nothing published yet): every state.
        let (_, events) = sent(request(&media, &url, Some("0")).await).await;
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "3", "4", "5", "6", "7"]);
        // The parameter does what the header does, for clients that cannot send it.
        let (_, events) = sent(request(&media, &format!("{url}?last_event_id=5"), None).await).await;
        assert_eq!(names_and_ids(&events), [("file_done", "6"), ("completed", "7")]);

        // After its terminal event, nothing more: 204, no body.
        let done = request(&media, &url, Some("7")).await;
        assert_eq!(done.status(), StatusCode::NO_CONTENT);
        assert!(done.text().await.unwrap().is_empty());
    }

    async fn a_resumed_stream_goes_on_live_until_the_end(backend) {
        let media = media_without_workers(backend).await;
        let (operation, _, media_id) = uploaded(&media).await;
        publish(&media, &operation, 2, MediaStep::Processing { media_id: None }).await;
        publish(&media, &operation, 3, variant_done(&media_id, "thumbnail")).await;
        let url = media.ctx.app.url(&format!("/api/v1/progress/{operation}"));
        // Subscribed when the response starts; the rest is published live.
        let resumed = request(&media, &url, Some("2")).await;
        publish(&media, &operation, 4, variant_done(&media_id, "web")).await;
        // A state published again (a retried publisher) is not repeated.
        publish(&media, &operation, 3, variant_done(&media_id, "thumbnail")).await;
        publish(&media, &operation, 5, MediaStep::completed()).await;
        let (_, events) = sent(resumed).await;
        assert_eq!(
            names_and_ids(&events),
            [("variant_done", "3"), ("variant_done", "4"), ("completed", "5")]
        );
    }

    async fn a_finished_operation_without_a_recorded_end_still_ends_a_resumed_stream(backend) {
        let media = media_without_workers(backend).await;
        let (operation, _, _) = uploaded(&media).await;
        let tenant = media.ctx.live();
        let store = media.ctx.app.store.media();
        let media_id = store.snapshot(&tenant, &operation).await.unwrap().files[0].media_id.clone();
        // The upload finishes, but its `completed` is never published.
        store.fail_item(&tenant, &media_id, "unreadable").await.unwrap();
        assert!(store.complete_upload_if_done(&tenant, &operation).await.unwrap().is_some());
        let url = media.ctx.app.url(&format!("/api/v1/progress/{operation}"));
        let (_, events) = sent(request(&media, &url, None).await).await;
        // The end made from the stored status is numbered after the last state.
        assert_eq!(names_and_ids(&events), [("snapshot", "1"), ("completed", "2")]);
        assert_eq!(events[1].data["operation"]["status"], "failed");
        let (_, events) = sent(request(&media, &url, Some("1")).await).await;
        assert_eq!(names_and_ids(&events), [("completed", "2")]);
        assert_eq!(request(&media, &url, Some("2")).await.status(), StatusCode::NO_CONTENT);
    }

    async fn a_last_event_id_that_is_not_an_event_id_is_refused(backend) {
        let media = media_without_workers(backend).await;
        let (operation, _, _) = uploaded(&media).await;
        let url = media.ctx.app.url(&format!("/api/v1/progress/{operation}"));
        for bad in ["abc", "-1", "1.5", "99999999999999999999999"] {
            let response = request(&media, &url, Some(bad)).await;
            assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "validation.failed", "{body}");
            assert!(body["error"]["details"]["fields"]["Last-Event-ID"].is_string(), "{body}");
        }
        let response = request(&media, &format!("{url}?last_event_id=x"), None).await;
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        // Another agency's operation stays unknown, resumed or not.
        let other = media.ctx.app.agency().await;
        let other_key = media.ctx.app.key(&other, &[Scope::MediaWrite]).await;
        let response = media.ctx.app.client.get(&url)
            .header("X-API-Key", &other_key)
            .header("Last-Event-ID", "1")
            .send().await.unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "operation_not_found", "{body}");
    }
}

/// What `EventSource` saw of a stream, until it closed for good.
const FOLLOW: &str = r"
const [url, done] = [arguments[0], arguments[arguments.length - 1]];
const seen = [];
const source = new EventSource(url);
for (const name of ['snapshot', 'queued', 'processing', 'variant_done', 'file_done', 'failed', 'completed']) {
  source.addEventListener(name, (event) => seen.push({ type: event.type, id: event.lastEventId }));
}
source.onerror = () => {
  seen.push({ type: 'error', state: source.readyState });
  if (source.readyState === EventSource.CLOSED) done(seen);
};
";

/// A TCP proxy in front of the API that can cut its open connections, as a
/// dropped network would, and tells what went through it.
struct CuttingProxy {
    address: std::net::SocketAddr,
    traffic: std::sync::Arc<Traffic>,
    cut: tokio::sync::watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

/// What went through the proxy: each connection's request and response text.
#[derive(Default)]
struct Traffic {
    connections: std::sync::Mutex<Vec<(String, String)>>,
    changed: tokio::sync::Notify,
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CuttingProxy {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let traffic = std::sync::Arc::new(Traffic::default());
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let shared = traffic.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let index = {
                    let mut connections = shared.connections.lock().unwrap();
                    connections.push(Default::default());
                    connections.len() - 1
                };
                tokio::spawn(relay(client, server, index, shared.clone(), cuts.clone()));
            }
        });
        Self {
            address,
            traffic,
            cut,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Drops every open connection.
    fn cut(&self) {
        self.cut.send_modify(|generation| *generation += 1);
    }

    /// Waits until `done` holds of the connections' (request, response) texts.
    async fn wait_for(&self, what: &str, done: impl Fn(&[(String, String)]) -> bool) {
        let patience = async {
            loop {
                let changed = self.traffic.changed.notified();
                if done(&self.traffic.connections.lock().unwrap()) {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(120), patience)
            .await
            .is_err()
        {
            panic!(
                "never saw {what}: {:?}",
                self.traffic.connections.lock().unwrap()
            );
        }
    }
}

/// Copies bytes both ways, recording them, until either side closes or the
/// proxy cuts.
async fn relay(
    client: tokio::net::TcpStream,
    server: tokio::net::TcpStream,
    index: usize,
    traffic: std::sync::Arc<Traffic>,
    mut cuts: tokio::sync::watch::Receiver<u64>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    cuts.borrow_and_update();
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let record = |upstream: bool, bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        let mut connections = traffic.connections.lock().unwrap();
        let (request, response) = &mut connections[index];
        if upstream {
            request.push_str(&text)
        } else {
            response.push_str(&text)
        }
        drop(connections);
        traffic.changed.notify_waiters();
    };
    let up = async {
        let mut buffer = vec![0; 16 * 1024];
        while let Ok(read @ 1..) = client_read.read(&mut buffer).await {
            record(true, &buffer[..read]);
            if server_write.write_all(&buffer[..read]).await.is_err() {
                break;
            }
        }
    };
    let down = async {
        let mut buffer = vec![0; 16 * 1024];
        while let Ok(read @ 1..) = server_read.read(&mut buffer).await {
            record(false, &buffer[..read]);
            if client_write.write_all(&buffer[..read]).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        () = async { tokio::join!(up, down); } => {}
        _ = cuts.changed() => {}
    }
}

#[tokio::test]
async fn event_source_in_chromium_resumes_after_a_drop_and_stops_at_the_end() {
    let media = media_without_workers(tests::Backend::Sqlite).await;
    let (operation, progress_url, media_id) = uploaded(&media).await;
    publish(
        &media,
        &operation,
        2,
        MediaStep::Processing { media_id: None },
    )
    .await;
    let upstream = media
        .ctx
        .app
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let proxy = CuttingProxy::start(upstream).await;
    let browser = Browser::start().await;
    // A page of the same origin as the stream, so it needs no CORS.
    browser.open(&proxy.url("/api/v1/")).await;
    let path = progress_url.split_once("/v1/progress/").unwrap().1;
    let url = proxy.url(&format!("/v1/progress/{path}"));
    let follow = browser.run_async(FOLLOW, json!([url]), Duration::from_secs(180));
    // Each request for the stream, and each connection's responses (a
    // browser reuses a connection once a stream has ended).
    let requests = |connections: &[(String, String)]| -> Vec<String> {
        connections
            .iter()
            .flat_map(|(requests, _)| requests.split("GET ").skip(1))
            .filter(|request| request.starts_with("/v1/progress/"))
            .map(str::to_owned)
            .collect()
    };
    let responses = |connections: &[(String, String)]| -> String {
        connections
            .iter()
            .map(|(_, response)| response.as_str())
            .collect()
    };
    let drive = async {
        proxy
            .wait_for("the snapshot", |c| responses(c).contains("event: snapshot"))
            .await;
        publish(&media, &operation, 3, variant_done(&media_id, "web")).await;
        proxy
            .wait_for("variant_done", |c| {
                responses(c).contains("event: variant_done")
            })
            .await;
        // The network drops; the browser reconnects by itself, naming the last id.
        proxy.cut();
        proxy
            .wait_for("a reconnect", |c| requests(c).len() >= 2)
            .await;
        publish(&media, &operation, 4, MediaStep::completed()).await;
        // It reconnects once more after the end, and is told there is no more.
        proxy
            .wait_for("the last reconnect", |c| {
                responses(c).contains("HTTP/1.1 204")
            })
            .await;
    };
    let (seen, ()) = tokio::join!(follow, drive);
    let seen: Vec<(String, String)> = seen
        .as_array()
        .unwrap_or_else(|| panic!("EventSource never closed: {seen}"))
        .iter()
        .map(|event| {
            let detail = event["id"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| event["state"].to_string());
            (event["type"].as_str().unwrap().to_owned(), detail)
        })
        .collect();
    let mut seen: Vec<(&str, &str)> = seen.iter().map(|(t, d)| (t.as_str(), d.as_str())).collect();
    // A reconnect the browser retried before it got through shows as two
    // `error` events in a row (a browser's timing, not the stream's): one
    // reconnect is one, whatever its tries.
    seen.dedup_by(|later, earlier| *later == ("error", "0") && *earlier == ("error", "0"));
    // Each state once, in order; `error` with state 0 is a reconnect, with
    // state 2 the browser giving up for good.
    assert_eq!(
        seen,
        [
            ("snapshot", "2"),
            ("variant_done", "3"),
            ("error", "0"),
            ("completed", "4"),
            ("error", "0"),
            ("error", "2"),
        ]
    );
    let connections = proxy.traffic.connections.lock().unwrap().clone();
    let header = |request: &str| {
        request.lines().find_map(|line| {
            line.to_ascii_lowercase()
                .strip_prefix("last-event-id:")
                .map(|value| value.trim().to_owned())
        })
    };
    // The ids each request resumed from; a reconnect the browser retried
    // (its first try cut with the network) names the same id twice in a
    // row and counts once, as its `error` events do above.
    let mut resumed_from: Vec<Option<String>> =
        requests(&connections).iter().map(|r| header(r)).collect();
    let tries = resumed_from.clone();
    resumed_from.dedup();
    assert_eq!(
        resumed_from,
        [None, Some("3".to_owned()), Some("4".to_owned())],
        "the first request, a reconnect from 3, one from 4 and no reconnect after the 204: {tries:?}"
    );
    assert_eq!(responses(&connections).matches("HTTP/1.1 204").count(), 1);
}
