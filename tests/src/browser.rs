//! Headless Chromium for page tests, driven through chromedriver's W3C
//! WebDriver protocol (plain HTTP), with Chrome DevTools commands for what
//! WebDriver lacks (extra request headers). Debian's `chromium` and
//! `chromium-driver` packages; `scripts/test` installs them.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::deployment::free_port;

/// A browser session; chromedriver and Chromium end with it.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    client: reqwest::Client,
    profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session makes chromedriver quit its Chromium; killing
        // chromedriver alone would leave Chromium running after the test.
        self.end_session();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub async fn start() -> Self {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (apt-get install chromium chromium-driver)");
        let base = format!("http://127.0.0.1:{port}");
        let client = crate::app::base_client().build().expect("client");
        let deadline = Instant::now() + Duration::from_secs(20);
        while client.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().expect("profile directory");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let created: Value = client
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("session JSON");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Self {
            driver,
            base,
            session,
            client,
            profile,
        }
    }

    /// Where Chromium keeps this session's profile (on its command line).
    pub fn profile_dir(&self) -> &Path {
        self.profile.path()
    }

    /// Deletes the WebDriver session; chromedriver answers once Chromium
    /// has quit. `Drop` cannot await, and the test's runtime may have its one
    /// thread here, so the request goes from a thread and runtime of its own,
    /// with a client of its own. Best effort: the driver is killed next.
    fn end_session(&self) {
        let url = format!("{}/session/{}", self.base, self.session);
        let ending = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let client = crate::app::base_client()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .ok()?;
                client.delete(url).send().await.ok()
            })
        });
        let _ = ending.join();
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut request = self.client.request(method, url);
        if !body.is_null() {
            request = request.json(&body);
        }
        let response: Value = request
            .send()
            .await
            .expect("webdriver request")
            .json()
            .await
            .expect("webdriver JSON");
        response["value"].clone()
    }

    /// Sends `header` with every request the page makes.
    pub async fn set_header(&self, name: &str, value: &str) {
        let cdp = |cmd: &str, params: Value| json!({"cmd": cmd, "params": params});
        self.call(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            cdp("Network.enable", json!({})),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            cdp(
                "Network.setExtraHTTPHeaders",
                json!({"headers": {name: value}}),
            ),
        )
        .await;
    }

    /// Opens `url`.
    pub async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    /// Runs `script` in the page as an asynchronous WebDriver script: it gets
    /// `args`, then a callback it calls with its result. `timeout` only turns
    /// a script that never answers into a failure.
    pub async fn run_async(&self, script: &str, args: Value, timeout: Duration) -> Value {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.call(
            reqwest::Method::POST,
            "/timeouts",
            json!({ "script": millis }),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            "/execute/async",
            json!({ "script": script, "args": args }),
        )
        .await
    }

    /// The element matching `css`, waiting up to `timeout` for it.
    pub async fn find(&self, css: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .call(
                    reqwest::Method::POST,
                    "/element",
                    json!({"using": "css selector", "value": css}),
                )
                .await;
            if let Some(id) = found
                .as_object()
                .filter(|o| !o.contains_key("error"))
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
            {
                return id.to_owned();
            }
            assert!(Instant::now() < deadline, "no element {css}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks an element.
    pub async fn click(&self, element: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            json!({}),
        )
        .await;
    }

    /// An element's text.
    pub async fn text(&self, element: &str) -> String {
        let text = self
            .call(
                reqwest::Method::GET,
                &format!("/element/{element}/text"),
                Value::Null,
            )
            .await;
        match text.as_str() {
            Some(text) => text.to_owned(),
            None => panic!("no text of element {element}: {text}"),
        }
    }

    /// Types `text` into an element (after clearing it).
    pub async fn type_into(&self, element: &str, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/clear"),
            json!({}),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Chooses files in a file input, as a person picking them does.
    pub async fn choose_files(&self, element: &str, paths: &[&std::path::Path]) {
        let text = paths
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join("\n");
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Runs `script` in the page and returns its result.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            json!({ "script": script, "args": args }),
        )
        .await
    }

    /// The page's URL.
    pub async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits (at most `timeout`) until the text of the element matching
    /// `css` contains `wanted`; returns the text.
    pub async fn wait_for_text(&self, css: &str, wanted: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            // Read in one script, so a page that replaces its content
            // meanwhile (auto-refresh) never leaves a stale element.
            let text = self
                .run(
                    "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;",
                    json!([css]),
                )
                .await;
            if let Some(text) = text.as_str()
                && text.contains(wanted)
            {
                return text.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "{css} says {text}, not {wanted:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Lays the page out `width` CSS pixels wide (a phone at 375).
    pub async fn set_width(&self, width: u32) {
        let cdp = json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": {
            "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600
        }});
        self.call(reqwest::Method::POST, "/goog/cdp/execute", cdp)
            .await;
    }

    /// Whether the page is wider than the window (something overflows sideways).
    pub async fn overflows_sideways(&self) -> bool {
        self.run(
            "return document.documentElement.scrollWidth > window.innerWidth + 1;",
            json!([]),
        )
        .await
        .as_bool()
        .unwrap_or(true)
    }

    /// A PNG of the whole page.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        // The document's own width (what a person sees), its whole height.
        let size = self
            .run(
                "return [document.documentElement.clientWidth, document.documentElement.scrollHeight];",
                json!([]),
            )
            .await;
        let width = size[0].as_u64().unwrap_or(1280);
        let height = size[1].as_u64().unwrap_or(900);
        let metrics = json!({"cmd": "Page.captureScreenshot", "params": {
            "format": "png", "captureBeyondViewport": true,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        }});
        let shot = self
            .call(reqwest::Method::POST, "/goog/cdp/execute", metrics)
            .await;
        let data = shot["data"].as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap_or_default()
    }

    /// The page's violations of WCAG 2.1 A and AA as axe-core (pinned in
    /// `tests/tools/package.json`) finds them: contrast, labels, names,
    /// structure. Each as `rule: elements`.
    pub async fn accessibility_violations(&self) -> Vec<String> {
        let axe = crate::tools::node_tools().join("node_modules/axe-core/axe.min.js");
        let source = std::fs::read_to_string(&axe).expect("axe-core (run scripts/test)");
        self.run(&format!("{source}\nreturn true;"), json!([]))
            .await;
        let found = self
            .run_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, { runOnly: { type: 'tag',
                     values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
                   .then((result) => done(result.violations.map((violation) =>
                     violation.id + ': ' + violation.nodes.slice(0, 5)
                       .map((node) => node.target.join(' ')).join(', '))))
                   .catch((error) => done(['axe failed: ' + error]));",
                json!([]),
                Duration::from_secs(60),
            )
            .await;
        found
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|item| item.as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_else(|| vec![format!("axe did not answer: {found}")])
    }

    /// Saves a screenshot of the page at 1280 px and at 375 px as
    /// `NAME-1280.png` and `NAME-375.png` under `$PORTAL_SCREENSHOTS` (when
    /// set: a person looks at them), and checks at both widths that axe-core
    /// finds no WCAG 2.1 AA violation and at 375 px that nothing overflows
    /// sideways.
    pub async fn look_at(&self, name: &str) {
        let dir = std::env::var_os("PORTAL_SCREENSHOTS").map(std::path::PathBuf::from);
        for width in [1280, 375] {
            self.set_width(width).await;
            if width == 375 {
                assert!(
                    !self.overflows_sideways().await,
                    "{name} overflows sideways at 375 px"
                );
            }
            let violations = self.accessibility_violations().await;
            assert!(
                violations.is_empty(),
                "{name} at {width} px breaks WCAG 2.1 AA: {violations:#?}"
            );
            if let Some(dir) = &dir {
                std::fs::create_dir_all(dir).expect("screenshot directory");
                let png = self.screenshot().await;
                std::fs::write(dir.join(format!("{name}-{width}.png")), png).expect("screenshot");
            }
        }
        self.set_width(1280).await;
    }
}
