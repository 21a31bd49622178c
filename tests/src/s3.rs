//! A real S3-compatible server on loopback: `s3s-fs`, which keeps objects as
//! files in a temporary directory and checks every request's SigV4 signature
//! (pre-signed URLs included: expiry and tampering are refused as by AWS).
//! `scripts/test` installs it; one server per test, stopped when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use storage::objects::object_store::ObjectStore;
use storage::objects::{MediaObjects, ObjectStoreTarget, S3Settings};
use tokio::process::{Child, Command};

use crate::deployment::free_port;

/// Where `scripts/test` installs the server.
pub const S3S_FS_BINARY: &str = "/opt/s3s-fs/bin/s3s-fs";

/// Environment variable naming another `s3s-fs` binary (for a machine where
/// `/opt` is not writable).
pub const S3S_FS_BINARY_VARIABLE: &str = "TEST_S3S_FS";

/// The bucket every server starts with.
pub const BUCKET: &str = "media-test";

const REGION: &str = "us-east-1";
const ACCESS_KEY_ID: &str = "test-access-key";

/// A running `s3s-fs` with one empty bucket; stops when dropped.
pub struct S3Server {
    endpoint: String,
    secret_access_key: String,
    // Declared before `dir` so the server is killed before its files go.
    _child: Child,
    dir: tempfile::TempDir,
}

fn binary() -> PathBuf {
    let path = std::env::var_os(S3S_FS_BINARY_VARIABLE)
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from(S3S_FS_BINARY), PathBuf::from);
    assert!(
        path.is_file(),
        "the S3-compatible test server {} is missing: run `scripts/test` (its \
         \"S3-compatible server for the object-store tests\" step runs `cargo install \
         s3s-fs --version 0.14.1 --features binary --locked --root /opt/s3s-fs`), or \
         point {S3S_FS_BINARY_VARIABLE} at an s3s-fs binary",
        path.display()
    );
    path
}

impl S3Server {
    /// Starts the server on a free loopback port, with the bucket [`BUCKET`],
    /// and waits until it answers signed requests.
    pub async fn start() -> Self {
        let binary = binary();
        let dir = tempfile::tempdir().expect("temporary directory");
        let root = dir.path().join("data");
        // s3s-fs keeps a bucket as a directory under its root.
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket directory");
        let secret_access_key = format!("secret-{}", ulid::Ulid::generate());
        let log = dir.path().join("s3s-fs.log");
        let mut last_failure = String::new();
        // The port is free when picked but may be taken before the server
        // binds it: try a few.
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new(&binary)
                .arg("--host")
                .arg("127.0.0.1")
                .arg("--port")
                .arg(port.to_string())
                .arg("--access-key")
                .arg(ACCESS_KEY_ID)
                .arg("--secret-key")
                .arg(&secret_access_key)
                .arg(&root)
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log).expect("log file"))
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|err| panic!("cannot run {}: {err}", binary.display()));
            match wait_for_port(&mut child, port).await {
                Ok(()) => {
                    let server = Self {
                        endpoint: format!("http://127.0.0.1:{port}"),
                        secret_access_key,
                        _child: child,
                        dir,
                    };
                    server.wait_for_bucket().await;
                    return server;
                }
                Err(failure) => last_failure = failure,
            }
        }
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("s3s-fs did not start: {last_failure}\n{log}");
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `s3://<bucket>`.
    pub fn bucket_url(&self) -> String {
        format!("s3://{BUCKET}")
    }

    /// Explicit client settings for this server (nothing from the environment).
    pub fn settings(&self) -> S3Settings {
        S3Settings {
            endpoint: Some(self.endpoint.clone()),
            region: Some(REGION.to_owned()),
            access_key_id: Some(ACCESS_KEY_ID.to_owned()),
            secret_access_key: Some(self.secret_access_key.clone()),
            allow_http: Some(true),
        }
    }

    /// The target for `s3://<bucket>[/prefix]` on this server.
    pub fn target(&self, prefix: Option<&str>) -> ObjectStoreTarget {
        let url = match prefix {
            Some(prefix) => format!("{}/{prefix}", self.bucket_url()),
            None => self.bucket_url(),
        };
        ObjectStoreTarget::S3 {
            url,
            settings: self.settings(),
        }
    }

    /// The bucket, opened.
    pub fn media(&self) -> MediaObjects {
        self.target(None).open_media().expect("open the S3 store")
    }

    /// The `AWS_*` variables a subprocess needs to reach this server (with
    /// `OBJECT_STORE_URL` set to [`S3Server::bucket_url`]).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
            ("AWS_REGION", REGION.to_owned()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    /// The directory the server keeps its buckets in (one directory each).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A signed listing proves the credentials and the bucket.
    async fn wait_for_bucket(&self) {
        let media = self.media();
        let listed = tokio::time::timeout(
            Duration::from_secs(30),
            media.store().list_with_delimiter(None),
        )
        .await
        .expect("s3s-fs did not answer a listing within 30 s");
        if let Err(err) = listed {
            panic!("s3s-fs refused to list the test bucket: {err}");
        }
    }
}

/// What [`FaultyStore`] does to the requests it passes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFault {
    /// Nothing: every request reaches the server.
    None,
    /// Every request about a multipart upload (`?uploadId=`) is answered
    /// 404 `NoSuchUpload`, as S3 answers once the upload was aborted (by
    /// a bucket's lifecycle rule, say). `s3s-fs` lists an aborted upload's
    /// parts as none instead.
    UploadGone,
    /// Every request is answered 403 `AccessDenied`, as by a store whose
    /// credentials were revoked (not retried, unlike a 5xx).
    Refuse,
    /// A `HEAD` says the object is one byte longer than it is, as a store
    /// that assembled an upload's parts wrongly would.
    MisreportSize,
}

/// An HTTP relay in front of an S3 server that can be told to answer as a
/// store in trouble does ([`StoreFault`]). Requests pass on with their
/// `Host` header, so their signatures still hold. Stops when dropped.
pub struct FaultyStore {
    endpoint: String,
    fault: std::sync::Arc<std::sync::Mutex<StoreFault>>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultyStore {
    /// Starts the relay to `upstream` (`http://127.0.0.1:PORT`).
    pub async fn start(upstream: &str) -> Self {
        use axum::body::Body;
        use axum::extract::Request;
        use axum::response::Response;

        let fault = std::sync::Arc::new(std::sync::Mutex::new(StoreFault::None));
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("HTTP client");
        let upstream = upstream.to_owned();
        let state = (fault.clone(), client, upstream);
        let relay = move |request: Request| {
            let (fault, client, upstream) = state.clone();
            async move {
                let now = *fault.lock().expect("fault");
                let query = request.uri().query().unwrap_or_default().to_owned();
                let answer = |status: u16, code: &str| {
                    Response::builder()
                        .status(status)
                        .header("content-type", "application/xml")
                        .body(Body::from(format!(
                            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{code}</Message></Error>"
                        )))
                        .expect("response")
                };
                match now {
                    StoreFault::Refuse => return answer(403, "AccessDenied"),
                    StoreFault::UploadGone if query.contains("uploadId=") => {
                        return answer(404, "NoSuchUpload");
                    }
                    _ => {}
                }
                let (parts, body) = request.into_parts();
                let url = format!(
                    "{upstream}{}",
                    parts.uri.path_and_query().map_or("/", |path| path.as_str())
                );
                let body = axum::body::to_bytes(body, 64 * 1024 * 1024)
                    .await
                    .unwrap_or_default();
                let mut headers = parts.headers.clone();
                for hop in ["connection", "content-length", "transfer-encoding"] {
                    headers.remove(hop);
                }
                let passed = client
                    .request(parts.method.clone(), url)
                    .headers(headers)
                    .body(body)
                    .send()
                    .await;
                let Ok(passed) = passed else {
                    return answer(502, "BadGateway");
                };
                let head = parts.method == reqwest::Method::HEAD;
                let mut response = Response::builder().status(passed.status());
                for (name, value) in passed.headers() {
                    match name.as_str() {
                        "connection" | "transfer-encoding" => {}
                        // A `HEAD` has no body to measure: its length is
                        // passed on as the server said it (or not).
                        "content-length" if head && now == StoreFault::MisreportSize => {
                            let length: u64 = value
                                .to_str()
                                .ok()
                                .and_then(|value| value.parse().ok())
                                .unwrap_or_default();
                            response = response.header(name, length + 1);
                        }
                        "content-length" if !head => {}
                        _ => response = response.header(name, value),
                    }
                }
                let bytes = passed.bytes().await.unwrap_or_default();
                response.body(Body::from(bytes)).expect("response")
            }
        };
        let app = axum::Router::new().fallback(relay);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the relay");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            endpoint,
            fault,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`: the endpoint to give the API.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// From now on, `fault`.
    pub fn set(&self, fault: StoreFault) {
        *self.fault.lock().expect("fault") = fault;
    }

    /// The target for `s3://<bucket>/<prefix>` of `server`, reached
    /// through this relay.
    pub fn target(&self, server: &S3Server, prefix: &str) -> ObjectStoreTarget {
        let mut settings = server.settings();
        settings.endpoint = Some(self.endpoint.clone());
        ObjectStoreTarget::S3 {
            url: format!("{}/{prefix}", server.bucket_url()),
            settings,
        }
    }
}

impl Drop for FaultyStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until `port` accepts connections, or the server exits.
async fn wait_for_port(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().map_err(|err| err.to_string())? {
            return Err(format!("s3s-fs exited with {status}"));
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("s3s-fs did not listen on port {port} within 30 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
