//! The sentinel console in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, installed by `scripts/test.sh`) driven over WebDriver, against the
//! console service (`--bin console`'s routes, built by the same library function) with its
//! rules in the real etcd of `scripts/services.sh start etcd-main`.
//!
//! Each test starts its own service and browser; a lock runs them one at a time so the
//! latencies they measure are not those of five browsers sharing two cores. Screenshots of
//! every state go to `target/console-screenshots/`; `console.png`, from the refusal card's
//! test (feature `transport`), is the README's.

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use examples::console_service::{console_service, ConsoleService, ConsoleServiceConfig};
use fantoccini::{Client, ClientBuilder, Locator};
use sentinel_core::circuit_breaker::BreakerState;
use sentinel_core::datasource::testkit::until_within;
use sentinel_core::{Sentinel, SentinelEvent};
use sentinel_test_support::{env_or, unique_key};
use serde_json::{json, Value};

const TOKEN: &str = "console-test-token";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The longest any wait below may take before the test fails.
const WAIT: Duration = Duration::from_secs(20);
const ORDER: &str = "GET:/order/{id}";
const FLAKY: &str = "GET:/flaky";

/// One browser test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("console-screenshots")
}

/// Headless Chromium behind chromedriver; both end when this drops.
struct Browser {
    driver: Child,
    client: Option<Client>,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Self {
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(path).exists(),
                "{path} is missing: scripts/test.sh installs Debian's chromium and chromium-driver \
                 (apt-get install chromium chromium-driver)"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("an empty profile folder");
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--window-size=1400,1700",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        // chromedriver takes a moment to listen: retry the session until it answers.
        let client = loop {
            let mut builder =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
            match builder.capabilities(caps.clone()).connect(&url).await {
                Ok(client) => break client,
                Err(e) if started.elapsed() < WAIT => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("no WebDriver session from {CHROMEDRIVER} after {WAIT:?}: {e}"),
            }
        };
        eprintln!(
            "browser: chromedriver + chromium session in {:?}",
            started.elapsed()
        );
        Self {
            driver,
            client: Some(client),
            _profile: profile,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("an open session")
    }

    /// Evaluates `script` (a function body; `return` its value) in the page.
    async fn eval(&self, script: &str) -> Value {
        self.client()
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Polls `script` every `every` until it returns something other than `null` or
    /// `false`, for at most [`WAIT`]; returns that value and when it was first seen.
    async fn wait_for(&self, what: &str, every: Duration, script: &str) -> (Value, Instant) {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.eval(script).await;
            let seen = Instant::now();
            if !(value.is_null() || value == Value::Bool(false)) {
                return (value, seen);
            }
            if seen >= deadline {
                self.screenshot(&format!("timeout-{}", what.replace(' ', "-")))
                    .await;
                panic!("timed out after {WAIT:?} waiting in the page for {what}");
            }
            tokio::time::sleep(every).await;
        }
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client().screenshot().await.expect("a screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("the screenshot folder");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("the screenshot is written");
        eprintln!("screenshot: {}", path.display());
        path
    }

    async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The console service on a free port, its rules under a fresh etcd key.
struct Harness {
    service: ConsoleService,
    base: String,
    key: String,
    etcd: etcd_client::Client,
    http: reqwest::Client,
    /// Begins the service's graceful shutdown (as Ctrl-C does in `--bin console`).
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
}

impl Harness {
    async fn start(test: &str, rules: &Value) -> Self {
        Self::start_with(test, rules, |_| {}).await
    }

    /// As [`start`](Self::start), with the service's configuration changed by `configure`.
    async fn start_with(
        test: &str,
        rules: &Value,
        configure: impl FnOnce(&mut ConsoleServiceConfig),
    ) -> Self {
        let endpoint = env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
        let key = unique_key("/sentinel-console", test);
        let mut etcd = etcd_client::Client::connect([endpoint.as_str()], None)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "etcd at {endpoint}: {e}; start it with `scripts/services.sh start etcd-main`"
                )
            });
        etcd.put(key.as_str(), rules.to_string(), None)
            .await
            .expect("the rules are stored");
        let mut config = ConsoleServiceConfig {
            etcd: endpoint,
            key: key.clone(),
            edit_token: Some(TOKEN.to_owned()),
            #[cfg(feature = "transport")]
            transport: None,
        };
        configure(&mut config);
        let service = console_service(&config)
            .await
            .expect("the console service starts");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let app = service.app.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = service.console.shutdown_signal(async {
            let _ = stopped.await;
        });
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await;
        });
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .expect("an HTTP client");
        Self {
            service,
            base,
            key,
            etcd,
            http,
            stop: Some(stop),
            server,
        }
    }

    fn sentinel(&self) -> &Sentinel {
        &self.service.sentinel
    }

    /// Requests `path` `rate` times a second until the task is aborted.
    fn traffic(&self, path: &str, rate: u32) -> tokio::task::JoinHandle<()> {
        let url = format!("{}{path}", self.base);
        let http = self.http.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
            loop {
                tick.tick().await;
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move {
                    let _ = http.get(url).send().await;
                });
            }
        })
    }

    /// The key's value, per-key version and modification revision.
    async fn stored(&mut self) -> (String, i64, i64) {
        let response = self
            .etcd
            .get(self.key.as_str(), None)
            .await
            .expect("etcd get");
        let kv = response.kvs().first().expect("the key exists");
        (
            String::from_utf8_lossy(kv.value()).into_owned(),
            kv.version(),
            kv.mod_revision(),
        )
    }

    async fn open(&self, browser: &Browser) {
        self.open_at(browser, "/console").await;
    }

    /// Opens `api/stream` as a second viewer would.
    async fn stream(&self) -> reqwest::Response {
        self.http
            .get(format!("{}/console/api/stream", self.base))
            .timeout(WAIT)
            .send()
            .await
            .expect("the stream opens")
    }

    /// Opens the page at `path` and waits for its first snapshot.
    async fn open_at(&self, browser: &Browser, path: &str) {
        browser
            .client()
            .goto(&format!("{}{path}", self.base))
            .await
            .expect("the page opens");
        browser
            .wait_for(
                "the first snapshot",
                Duration::from_millis(20),
                "return Number(document.body.dataset.frames || 0) > 0",
            )
            .await;
    }

    async fn close(self, browser: Browser) {
        browser.close().await;
        self.stop().await;
    }

    async fn stop(self) {
        self.server.abort();
        self.service.source.close().await;
        #[cfg(feature = "transport")]
        if let Some(transport) = self.service.transport {
            transport.shutdown().await;
        }
    }
}

fn default_rules() -> Value {
    json!({
        "flow": [{ "resource": ORDER, "count": 5 }],
        "degrade": [{ "resource": FLAKY, "grade": 1, "count": 0.4, "timeWindow": 30,
                      "minRequestAmount": 5, "statIntervalMs": 1000 }],
    })
}

/// The CPU time this process has used (user + system), from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime and stime are the 14th and 15th fields: 12th and 13th after the name.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// 10 000 resources called every second (resource i i % 7 + 1 times) on a thread of its
/// own, until this drops.
struct TenThousandResources {
    stop: Arc<std::sync::atomic::AtomicBool>,
    load: Option<std::thread::JoinHandle<()>>,
}

impl TenThousandResources {
    async fn start(sentinel: &Sentinel) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let engine = sentinel.clone();
        let load = std::thread::spawn(move || {
            let names: Vec<String> = (0..10_000).map(|i| format!("bulk/{i:05}")).collect();
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                for (i, name) in names.iter().enumerate() {
                    for _ in 0..(i % 7 + 1) {
                        drop(engine.entry(name).enter());
                    }
                }
                std::thread::sleep(Duration::from_secs(1).saturating_sub(started.elapsed()));
            }
        });
        assert!(
            until_within(WAIT, || sentinel.resources().len() >= 10_000).await,
            "the resources exist"
        );
        Self {
            stop,
            load: Some(load),
        }
    }
}

impl Drop for TenThousandResources {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(load) = self.load.take() {
            let _ = load.join();
        }
    }
}

/// Bytes and events of `api/stream` over `span`, read as a second viewer would.
async fn stream_bytes(http: &reqwest::Client, url: &str, span: Duration) -> (usize, usize) {
    let mut response = http
        .get(url)
        .timeout(span + Duration::from_secs(5))
        .send()
        .await
        .expect("the stream opens");
    let (mut bytes, mut events) = (0, 0);
    let deadline = tokio::time::Instant::now() + span;
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
        bytes += chunk.len();
        // One full snapshot, then updates with what changed.
        events += chunk.windows(7).filter(|w| w == b"event: ").count();
    }
    (bytes, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_appears_with_the_engines_qps_within_2s_of_traffic() {
    let _one = ONE_AT_A_TIME.lock().await;
    let harness = Harness::start("qps", &default_rules()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    let row = format!(
        "const r = document.querySelector('#res-body tr[data-resource=\"{ORDER}\"]'); \
         if (!r || Number(r.querySelector('.pass').textContent) + Number(r.querySelector('.block').textContent) === 0) return null; \
         return {{ pass: Number(r.querySelector('.pass').textContent), block: Number(r.querySelector('.block').textContent), \
                   second: Number(document.getElementById('res-table').dataset.engineSecond) }};"
    );

    let started = Instant::now();
    let traffic = harness.traffic("/order/7", 40);
    let (first, seen) = browser
        .wait_for("the order resource", Duration::from_millis(10), &row)
        .await;
    let appeared = seen - started;
    eprintln!("measured: resource shown {appeared:?} after traffic started ({first})");
    assert!(
        appeared <= Duration::from_secs(2),
        "the resource took {appeared:?} to appear"
    );

    // A full second of traffic: the page's numbers against the engine's own for that second.
    let full = format!(
        "const s = Number(document.getElementById('res-table').dataset.engineSecond); \
         if (s < {}) return null; {row}",
        first["second"].as_u64().expect("a second") + 1000
    );
    let (shown, _) = browser
        .wait_for("a full second", Duration::from_millis(20), &full)
        .await;
    browser.screenshot("resources").await;
    let second = shown["second"].as_u64().expect("a second");
    let engine = harness
        .sentinel()
        .resource_seconds(ORDER, second, second + 1000);
    let engine = engine.first().expect("the engine counted that second");
    for (what, page, counted) in [
        ("pass", shown["pass"].as_u64(), engine.pass),
        ("block", shown["block"].as_u64(), engine.block),
    ] {
        let page = page.expect("a number") as f64;
        let counted = counted as f64;
        assert!(
            (page - counted).abs() <= 0.05 * counted.max(1.0),
            "{what}: page {page}, engine {counted}"
        );
    }
    assert!(engine.block > 0, "40/s against 5/s blocks: {engine:?}");
    let blocked_by = browser
        .eval(&format!(
            "return document.querySelector('#res-body tr[data-resource=\"{ORDER}\"] .blk-now').textContent"
        ))
        .await;
    assert!(
        blocked_by.as_str().is_some_and(|t| t.starts_with("flow ")),
        "this second's block reasons by family: {blocked_by}"
    );

    // What one viewer's stream transfers per second (a second reader, as the page reads it).
    let url = format!("{}/console/api/stream?limit=50", harness.base);
    let span = Duration::from_secs(4);
    let (bytes, events) = stream_bytes(&harness.http, &url, span).await;
    eprintln!(
        "measured: one viewer, 2 resources: {} bytes/s, {events} snapshots in {span:?}",
        bytes as u64 / span.as_secs()
    );
    assert!(
        events >= 3,
        "about one snapshot a second: {events} in {span:?}"
    );
    traffic.abort();
    harness.close(browser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_trip_shows_in_the_timeline_within_1s_of_the_engines_event() {
    let _one = ONE_AT_A_TIME.lock().await;
    let harness = Harness::start("breaker", &default_rules()).await;
    let tripped: Arc<OnceLock<Instant>> = Arc::default();
    let mark = tripped.clone();
    harness
        .sentinel()
        .add_listener(move |event: &SentinelEvent| {
            if let SentinelEvent::BreakerStateChanged { resource, to, .. } = event {
                if resource == FLAKY && *to == BreakerState::Open {
                    let _ = mark.set(Instant::now());
                }
            }
        });
    let browser = Browser::start().await;
    harness.open(&browser).await;
    let traffic = harness.traffic("/flaky", 20);
    let (shown, seen) = browser
        .wait_for(
            "the trip in the timeline",
            Duration::from_millis(10),
            &format!(
                "const r = document.querySelector('#timeline-body tr[data-resource=\"{FLAKY}\"][data-to=\"OPEN\"]'); \
                 return r && r.textContent"
            ),
        )
        .await;
    let event = *tripped.get().expect("the engine reported the trip");
    let latency = seen.saturating_duration_since(event);
    eprintln!("measured: breaker trip shown {latency:?} after the engine's event ({shown})");
    assert!(
        latency <= Duration::from_secs(1),
        "the trip took {latency:?} to show"
    );
    let text = shown.as_str().unwrap_or_default();
    assert!(
        text.contains("CLOSED")
            && text.contains("error ratio")
            && text.contains("over threshold 0.4"),
        "the transition names its reason: {text}"
    );
    let state = browser
        .eval(&format!(
            "return document.querySelector('#breakers-body tr[data-resource=\"{FLAKY}\"] .state').textContent"
        ))
        .await;
    assert_eq!(state, json!("OPEN"));
    // The next second's row shows the blocks by the breaker.
    browser
        .wait_for(
            "the breaker's blocks in the table",
            Duration::from_millis(20),
            &format!(
                "const r = document.querySelector('#res-body tr[data-resource=\"{FLAKY}\"]'); \
                 return r && Number(r.querySelector('.block').textContent) > 0 \
                   && r.querySelector('.blk').textContent.includes('breaker')"
            ),
        )
        .await;
    traffic.abort();
    browser.screenshot("breaker-open").await;
    harness.close(browser).await;
}

/// Loads the editor with the token, and returns the revision it shows.
async fn load_editor(browser: &Browser) -> i64 {
    let client = browser.client();
    client
        .find(Locator::Id("edit-token"))
        .await
        .expect("the token field")
        .send_keys(TOKEN)
        .await
        .expect("typed");
    client
        .find(Locator::Id("edit-load"))
        .await
        .expect("the load button")
        .click()
        .await
        .expect("clicked");
    let (revision, _) = browser
        .wait_for(
            "the editor's document",
            Duration::from_millis(20),
            "return document.getElementById('edit-result').dataset.outcome === 'loaded' \
             && Number(document.getElementById('edit-form').dataset.revision)",
        )
        .await;
    revision.as_i64().expect("a revision")
}

/// Replaces the editor's text by typing `document`, then saves; returns when it clicked.
async fn type_and_save(browser: &Browser, document: &Value) -> Instant {
    let client = browser.client();
    let area = client
        .find(Locator::Id("edit-doc"))
        .await
        .expect("the editor");
    area.clear().await.expect("cleared");
    area.send_keys(&document.to_string()).await.expect("typed");
    let save = client
        .find(Locator::Id("edit-save"))
        .await
        .expect("the save button");
    let clicked = Instant::now();
    save.click().await.expect("clicked");
    clicked
}

async fn outcome(browser: &Browser, expected: &str) -> Value {
    browser
        .wait_for(
            &format!("the edit's outcome ({expected})"),
            Duration::from_millis(10),
            "const r = document.getElementById('edit-result'); \
             return r.dataset.outcome && r.dataset.outcome !== 'loaded' && \
               { outcome: r.dataset.outcome, text: r.textContent, revision: document.getElementById('edit-form').dataset.revision }",
        )
        .await
        .0
}

fn flow_count(sentinel: &Sentinel) -> Option<f64> {
    sentinel
        .flow_rules()
        .rules()
        .iter()
        .find(|r| r.resource == ORDER)
        .map(|r| r.count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_in_the_page_changes_the_etcd_key_and_the_engine_applies_it_within_1s() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut harness = Harness::start("edit", &default_rules()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    let (text, version, revision) = harness.stored().await;
    assert_eq!(load_editor(&browser).await, revision);
    let loaded = browser
        .eval("return document.getElementById('edit-doc').value")
        .await;
    assert_eq!(
        loaded.as_str(),
        Some(text.as_str()),
        "the editor holds the key's text as stored, not the engine's rules"
    );

    let mut edited = default_rules();
    edited["flow"][0]["count"] = json!(7);
    let clicked = type_and_save(&browser, &edited).await;
    let applied = Arc::new(Mutex::new(None));
    let sentinel = harness.sentinel().clone();
    let seen = until_within(WAIT, || {
        let now = flow_count(&sentinel) == Some(7.0);
        if now {
            *applied.lock().expect("lock") = Some(Instant::now());
        }
        now
    })
    .await;
    assert!(seen, "the engine never applied the edit");
    let latency = applied.lock().expect("lock").expect("a time") - clicked;
    let shown = outcome(&browser, "written").await;
    assert_eq!(shown["outcome"], json!("written"), "{shown}");
    eprintln!("measured: edit saved in the page -> applied by the engine in {latency:?}");
    assert!(
        latency <= Duration::from_secs(1),
        "the engine applied the edit {latency:?} after the save"
    );

    let (value, new_version, new_revision) = harness.stored().await;
    assert_eq!(new_version, version + 1, "one write to the key");
    assert!(new_revision > revision);
    assert_eq!(
        shown["revision"].as_str(),
        Some(new_revision.to_string().as_str()),
        "the page shows the store's new revision"
    );
    let stored: Value = serde_json::from_str(&value).expect("a combined document");
    assert_eq!(stored["flow"][0]["count"].as_f64(), Some(7.0));
    browser
        .wait_for(
            "the new rule in the provenance panel",
            Duration::from_millis(20),
            "return [...document.querySelectorAll('#rules-sources pre')].some(p => p.textContent.includes('\"count\": 7'))",
        )
        .await;
    browser.screenshot("edit-written").await;
    harness.close(browser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_edit_shows_index_and_field_and_changes_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut harness = Harness::start("invalid", &default_rules()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    let before = harness.stored().await;
    let version = harness.sentinel().rules_version();
    load_editor(&browser).await;

    let mut edited = default_rules();
    edited["flow"] = json!([
        { "resource": ORDER, "count": 9 },
        { "resource": "GET:/other", "count": -1 },
    ]);
    type_and_save(&browser, &edited).await;
    let shown = outcome(&browser, "invalid").await;
    assert_eq!(shown["outcome"], json!("invalid"), "{shown}");
    let issue = browser
        .eval(
            "const li = document.querySelector('#edit-issues li'); \
             return li && { family: li.dataset.family, index: li.dataset.index, field: li.dataset.field, text: li.textContent };",
        )
        .await;
    assert_eq!(
        (&issue["family"], &issue["index"], &issue["field"]),
        (&json!("flow"), &json!("1"), &json!("count")),
        "{issue}"
    );
    browser.screenshot("edit-invalid").await;
    assert_eq!(harness.stored().await, before, "nothing was written");
    assert_eq!(harness.sentinel().rules_version(), version);
    assert_eq!(flow_count(harness.sentinel()), Some(5.0));
    harness.close(browser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_after_someone_elses_write_is_a_conflict_showing_the_newer_revision() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut harness = Harness::start("conflict", &default_rules()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    load_editor(&browser).await;

    let mut theirs = default_rules();
    theirs["flow"][0]["count"] = json!(11);
    let key = harness.key.clone();
    harness
        .etcd
        .put(key, theirs.to_string(), None)
        .await
        .expect("someone else writes");
    let (value, _, newer) = harness.stored().await;

    let mut mine = default_rules();
    mine["flow"][0]["count"] = json!(3);
    type_and_save(&browser, &mine).await;
    let shown = outcome(&browser, "conflict").await;
    assert_eq!(shown["outcome"], json!("conflict"), "{shown}");
    let text = shown["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("revision {newer}")),
        "the newer revision is shown: {text}"
    );
    browser.screenshot("edit-conflict").await;
    assert_eq!(harness.stored().await.0, value, "their write stands");
    harness.close(browser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_resources_stay_responsive_with_server_side_top_n() {
    let _one = ONE_AT_A_TIME.lock().await;
    let harness = Harness::start("many", &default_rules()).await;
    let load = TenThousandResources::start(harness.sentinel()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    let (count, _) = browser
        .wait_for(
            "the table's count",
            Duration::from_millis(50),
            "const t = document.getElementById('res-count').textContent; \
             return document.querySelectorAll('#res-body tr').length === 50 && /10000 resources|1000[0-9] resources/.test(t) && t",
        )
        .await;
    eprintln!("table: {count}");
    let top = browser
        .eval("return document.querySelector('#res-body tr').dataset.resource")
        .await;
    assert!(
        top.as_str().is_some_and(|r| r.starts_with("bulk/")),
        "sorted by pass QPS, a 7-call resource first: {top}"
    );

    // Search: typed in the page, answered by the server.
    let typed = Instant::now();
    browser
        .client()
        .find(Locator::Id("res-search"))
        .await
        .expect("the search field")
        .send_keys("bulk/0420")
        .await
        .expect("typed");
    browser
        .wait_for(
            "the search result",
            Duration::from_millis(10),
            "const rows = [...document.querySelectorAll('#res-body tr')]; \
             return rows.length === 10 && rows.every(r => r.dataset.resource.startsWith('bulk/0420'))",
        )
        .await;
    let searched = typed.elapsed();
    // Sort by name, ascending.
    let clicked = Instant::now();
    browser
        .client()
        .find(Locator::Css("#res-table th[data-sort=\"resource\"] button"))
        .await
        .expect("the resource header")
        .click()
        .await
        .expect("clicked");
    browser
        .wait_for(
            "the sorted table",
            Duration::from_millis(10),
            "const r = document.querySelector('#res-body tr'); \
             return r && r.dataset.resource === 'bulk/04200' && document.querySelector('#res-table th[data-sort=\"resource\"]').getAttribute('aria-sort') === 'ascending'",
        )
        .await;
    let sorted = clicked.elapsed();
    // The page's main thread answers while snapshots keep arriving.
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let asked = Instant::now();
        browser.eval("return document.body.dataset.frames").await;
        worst = worst.max(asked.elapsed());
    }
    eprintln!(
        "measured: 10 000 resources: search answered in {searched:?}, sort in {sorted:?}, \
         worst script round trip {worst:?}"
    );
    assert!(
        searched <= Duration::from_secs(2),
        "search took {searched:?}"
    );
    assert!(sorted <= Duration::from_secs(2), "sort took {sorted:?}");
    browser.screenshot("ten-thousand-resources").await;

    // One viewer at 1 Hz: the server's CPU per second and the bytes it sends, against the
    // same 10 000 resources without a viewer.
    let span = Duration::from_secs(5);
    browser
        .client()
        .goto("about:blank")
        .await
        .expect("page closed");
    let idle_start = cpu_time();
    tokio::time::sleep(span).await;
    let idle = cpu_time().saturating_sub(idle_start);
    let viewing_start = cpu_time();
    let url = format!("{}/console/api/stream?limit=50", harness.base);
    let (bytes, events) = stream_bytes(&harness.http, &url, span).await;
    let viewing = cpu_time().saturating_sub(viewing_start);
    eprintln!(
        "measured: one viewer at 1 Hz, 10 000 resources: {} bytes/s, {events} snapshots in {span:?}; \
         process CPU {:?}/s with the viewer, {:?}/s without",
        bytes as u64 / span.as_secs(),
        viewing / span.as_secs() as u32,
        idle / span.as_secs() as u32,
    );
    assert!(
        events >= 3,
        "about one snapshot a second: {events} in {span:?}"
    );
    drop(load);
    harness.close(browser).await;
}

/// The longest main-thread task the page may run in 500-row mode at 10 000 resources, in
/// this test. The target is 200 ms, measured 74-154 ms on 2 loaded cores (docs/console.md);
/// the bound leaves room for a 2-core machine busy with other builds.
const LONGEST_TASK: f64 = 300.0;

/// 500 rows of 10 000 resources: the page's longest main-thread task (the Long Tasks API,
/// observed in the page from the switch to 500 rows through five more updates) stays under
/// [`LONGEST_TASK`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_rows_of_ten_thousand_resources_keep_every_main_thread_task_short() {
    let _one = ONE_AT_A_TIME.lock().await;
    let harness = Harness::start("rows500", &default_rules()).await;
    let load = TenThousandResources::start(harness.sentinel()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    // The observer keeps the longest task seen since `longest` was last reset. A 250 ms busy
    // loop first proves it reports tasks in this browser.
    let (probe, _) = browser
        .wait_for(
            "the long-task observer",
            Duration::from_millis(20),
            "if (!window.longest) { \
               window.longest = { ms: 0, tasks: 0 }; \
               new PerformanceObserver((list) => { for (const e of list.getEntries()) { \
                 window.longest.tasks += 1; window.longest.ms = Math.max(window.longest.ms, e.duration); \
               } }).observe({ type: 'longtask' }); \
               setTimeout(() => { const t = performance.now(); while (performance.now() - t < 250) {} }, 0); \
               return false; \
             } \
             return window.longest.ms >= 250 && window.longest.ms;",
        )
        .await;
    eprintln!("measured: the observer saw the 250 ms probe as {probe} ms");
    let frames = browser
        .eval(
            "window.longest = { ms: 0, tasks: 0 }; \
             const s = document.getElementById('res-limit'); s.value = '500'; \
             s.dispatchEvent(new Event('change')); \
             return Number(document.body.dataset.frames)",
        )
        .await
        .as_u64()
        .expect("a frame count");
    // The first 500-row snapshot, then five updates that rebuild the table.
    browser
        .wait_for(
            "500 rows and five updates",
            Duration::from_millis(100),
            &format!(
                "return document.querySelectorAll('#res-body tr').length === 500 \
                   && Number(document.body.dataset.frames) >= {}",
                frames + 6
            ),
        )
        .await;
    let longest = browser
        .eval(
            "return { ms: window.longest.ms, tasks: window.longest.tasks, \
               rows: document.querySelectorAll('#res-body tr').length };",
        )
        .await;
    eprintln!("measured: 500 rows of 10 000 resources: longest main-thread task {longest}");
    browser.screenshot("five-hundred-rows").await;
    let ms = longest["ms"].as_f64().expect("a duration");
    assert!(
        ms < LONGEST_TASK,
        "a main-thread task took {ms} ms at 500 rows (bound {LONGEST_TASK} ms, target 200): {longest}"
    );
    drop(load);
    harness.close(browser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_page_does_not_hold_up_shutdown_and_dims_once_its_stream_is_gone() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut harness = Harness::start("shutdown", &default_rules()).await;
    let browser = Browser::start().await;
    harness.open(&browser).await;
    // A second viewer, reading the stream as the page does.
    let mut reader = harness.stream().await;
    assert!(
        matches!(reader.chunk().await, Ok(Some(_))),
        "the first snapshot"
    );

    let began = Instant::now();
    let _ = harness.stop.take().expect("not stopped yet").send(());
    let exited = tokio::time::timeout(Duration::from_secs(1), &mut harness.server).await;
    let took = began.elapsed();
    eprintln!("measured: the service exited {took:?} after shutdown began, two viewers open");
    assert!(
        exited.is_ok(),
        "the service still runs 1 s after shutdown began, with viewers open"
    );
    let ended = tokio::time::timeout(WAIT, async {
        while let Ok(Some(_)) = reader.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the second viewer's stream ended");
    let (shown, _) = browser
        .wait_for(
            "the page dimmed",
            Duration::from_millis(20),
            "return document.body.classList.contains('stale') \
               && getComputedStyle(document.querySelector('main')).opacity < 1 \
               && document.getElementById('conn').textContent",
        )
        .await;
    assert!(
        shown.as_str().is_some_and(|t| t.contains("data as of")),
        "the page says how old its data is: {shown}"
    );
    browser.screenshot("disconnected").await;
    harness.close(browser).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_viewer_costs_under_5_kb_a_second_with_12_resources_and_a_flapping_breaker() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut rules = default_rules();
    rules["degrade"].as_array_mut().expect("a list").push(
        json!({ "resource": "bw/00", "grade": 2, "count": 1, "timeWindow": 1,
                      "minRequestAmount": 1, "statIntervalMs": 1000 }),
    );
    let harness = Harness::start("bandwidth", &rules).await;
    let transitions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = transitions.clone();
    harness
        .sentinel()
        .add_listener(move |event: &SentinelEvent| {
            if matches!(event, SentinelEvent::BreakerStateChanged { .. }) {
                counting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    // 12 resources called 20 times a second each; every other call of bw/00 fails, so its
    // breaker opens, probes after 1 s, and opens or closes again.
    let sentinel = harness.sentinel().clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let load = std::thread::spawn(move || {
        let names: Vec<String> = (0..12).map(|i| format!("bw/{i:02}")).collect();
        let mut n = 0u64;
        while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
            for name in &names {
                if let Ok(mut entry) = sentinel.entry(name).enter() {
                    if name == "bw/00" {
                        n += 1;
                    }
                    if name == "bw/00" && n.is_multiple_of(2) {
                        entry.set_error();
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let flapping = until_within(WAIT, || {
        transitions.load(std::sync::atomic::Ordering::Relaxed) >= 2
    })
    .await;
    assert!(
        flapping,
        "the breaker never flapped: {:?}",
        harness.sentinel().circuit_breakers()
    );
    let full = harness
        .http
        .get(format!("{}/console/api/snapshot", harness.base))
        .send()
        .await
        .expect("a snapshot")
        .bytes()
        .await
        .expect("its body")
        .len();

    // Steady state: what arrives after the first snapshot, over 5 s.
    let mut response = harness.stream().await;
    let opened = tokio::time::Instant::now();
    let from = opened + Duration::from_millis(1500);
    let span = Duration::from_secs(5);
    let flaps_before = transitions.load(std::sync::atomic::Ordering::Relaxed);
    let (mut first, mut bytes, mut events) = (0, 0, 0);
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(from + span, response.chunk()).await {
        if tokio::time::Instant::now() < from {
            first += chunk.len();
        } else {
            bytes += chunk.len();
            events += chunk.windows(7).filter(|w| w == b"event: ").count();
        }
    }
    let flaps = transitions.load(std::sync::atomic::Ordering::Relaxed) - flaps_before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = load.join();
    let per_second = bytes as u64 / span.as_secs();
    eprintln!(
        "measured: one viewer, 12 resources, {flaps} breaker transitions in ~6.5 s: {per_second} bytes/s \
         ({events} updates in {span:?}) after a first {first} bytes; a full snapshot is {full} bytes"
    );
    assert!(
        flaps >= 3,
        "the breaker flapped while measured: {flaps} transitions"
    );
    assert!(events >= 4, "about one update a second: {events}");
    assert!(
        per_second <= 5_000,
        "one viewer costs {per_second} bytes/s, over the 5 KB/s target"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_1280_px_every_card_holds_its_content() {
    let _one = ONE_AT_A_TIME.lock().await;
    let harness = Harness::start("layout", &default_rules()).await;
    let browser = Browser::start().await;
    browser
        .client()
        .set_window_size(1280, 1000)
        .await
        .expect("the window is 1280 px wide");
    // The page with a trailing slash, as /console serves it.
    harness.open_at(&browser, "/console/").await;
    // Load and CPU are read while a page is open.
    browser
        .wait_for(
            "load and CPU",
            Duration::from_millis(50),
            "return !document.getElementById('system-body').textContent.includes('not read yet')",
        )
        .await;
    // The worst cases through the page's own renderers: a file source's 64-hex revision and a
    // long rejection (resolved by a later apply), a long shadow rule, 50 breakers.
    let measured = browser
        .eval(
            "const hex = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'; \
             const s = Object.assign({}, view.sources[0], { name: 'file-rules', revision: hex, hash: hex, last_error: null, \
               last_applied_ms: Date.now(), editable: false, not_editable: 'not editable here: its store keeps no revisions', \
               last_rejection: { at_ms: Date.now() - 5000, error: 'rejected', \
               issues: [{ family: 'flow', index: 3, field: 'count', message: 'must be a finite number at least 0 '.repeat(6) }] } }); \
             renderSources([s]); \
             renderShadow([{ family: 'flow', resource: 'r', kind: 'qps', this_second: 1, last_second: 2, total: 3, \
               breaker_state: null, transitions: [0, 0, 0], rule: JSON.stringify({ resource: 'GET:/' + 'x'.repeat(200), count: 5, limitApp: 'default', strategy: 0 }) }], []); \
             renderBreakers(Array.from({ length: 50 }, (_, i) => ({ resource: 'res-' + i, state: 'CLOSED', strategy: 'error ratio', \
               count: 0.5, slow_ratio_threshold: 1, time_window: 10, min_request_amount: 5 })), view.timeline); \
             const over = [...document.querySelectorAll('main > section')] \
               .filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.getAttribute('aria-labelledby')); \
             const card = (id) => document.getElementById(id).closest('section').getBoundingClientRect().height; \
             const cell = document.querySelector('#sources-body .last-error'); \
             return { width: document.documentElement.clientWidth, over, breakers: card('h-br'), \
               resolved: cell.dataset.resolved, red: cell.classList.contains('bad'), \
               offered: [...document.getElementById('edit-source').options].map((o) => o.value), \
               why: document.querySelector('#edit-not-offered li[data-source=\"file-rules\"]')?.textContent };",
        )
        .await;
    browser.screenshot("layout-1280").await;
    eprintln!("measured: layout at 1280 px: {measured}");
    assert_eq!(
        measured["width"].as_u64().map(|w| w <= 1280),
        Some(true),
        "{measured}"
    );
    assert_eq!(
        measured["over"],
        json!([]),
        "cards whose content overflows: {measured}"
    );
    assert!(
        measured["breakers"].as_f64().is_some_and(|h| h < 900.0),
        "the breakers card is bounded with 50 breakers: {measured}"
    );
    assert_eq!(
        (&measured["resolved"], &measured["red"]),
        (&json!("true"), &json!(false)),
        "a rejection followed by an apply is marked resolved: {measured}"
    );
    assert_eq!(
        measured["offered"],
        json!([]),
        "a store without revisions is not offered: {measured}"
    );
    assert!(
        measured["why"]
            .as_str()
            .is_some_and(|t| t.contains("keeps no revisions")),
        "the page says why: {measured}"
    );
    harness.close(browser).await;
}

/// While the store holds a rejected payload, the page's sources table and provenance line
/// name the applied payload's revision (the rules in force), and the last-error cell the
/// rejected one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provenance_during_a_rejection_names_the_applied_revision() {
    let _one = ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let mut harness = Harness::start("provenance", &default_rules()).await;
    // The initial read's revision is etcd's header revision, not the key's: read it back.
    let applied = harness
        .service
        .source
        .status()
        .applied_revision
        .expect("an applied revision");
    let browser = Browser::start().await;
    harness.open(&browser).await;

    let mut broken = default_rules();
    broken["flow"][0]["count"] = json!(-1);
    let key = harness.key.clone();
    harness
        .etcd
        .put(key, broken.to_string(), None)
        .await
        .expect("a rejected payload is stored");
    let (_, _, rejected) = harness.stored().await;
    assert_ne!(applied, rejected.to_string());
    let (shown, _) = browser
        .wait_for(
            "the rejection on the page",
            Duration::from_millis(50),
            &format!(
                "const row = document.querySelector('#sources-body tr[data-source]'); \
                 const cell = row && row.querySelector('.last-error'); \
                 if (!cell || !cell.textContent.includes('revision {rejected}')) return false; \
                 const line = document.querySelector('#rules-sources details .muted'); \
                 return {{ revision: row.querySelector('td.revision').title, error: cell.textContent, \
                   line: line && line.textContent }};"
            ),
        )
        .await;
    browser.screenshot("provenance-rejected").await;
    assert_eq!(shown["revision"], json!(applied), "{shown}");
    let line = shown["line"].as_str().unwrap_or_default();
    assert!(
        line.contains(&format!("revision {applied},")),
        "the provenance line names the applied revision: {shown}"
    );
    assert!(
        line.contains(&format!("rejected payload (revision {rejected})")),
        "and says the store holds a rejected one: {shown}"
    );
    eprintln!(
        "measured: provenance during a rejection in {:?}",
        started.elapsed()
    );
    harness.close(browser).await;
}

/// With the dashboard's command center (feature `transport`, read-only as `--bin console`
/// runs it), the commands the dashboard sends and the service refuses show on an open page:
/// the count per reason and the latest refusal first, within 2 s. The screenshot taken at the
/// end, with a breaker open, is the README's (`sentinel-console/docs/console.png`).
#[cfg(feature = "transport")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_dashboard_command_shows_on_an_open_page_within_2s() {
    let _one = ONE_AT_A_TIME.lock().await;
    let harness = Harness::start_with("refused", &default_rules(), |config| {
        config.transport = Some(
            sentinel_transport::TransportConfig::builder("console-test")
                .port(0)
                .build()
                .expect("a transport config"),
        );
    })
    .await;
    let port = harness
        .service
        .transport
        .as_ref()
        .expect("the command center")
        .port();
    let browser = Browser::start().await;
    harness.open(&browser).await;
    let before = browser
        .eval(
            "return !document.getElementById('refused-section').hidden \
               && document.getElementById('refused-summary').textContent",
        )
        .await;
    assert!(
        before
            .as_str()
            .is_some_and(|t| t.starts_with("None refused")),
        "the card is shown, with nothing refused yet: {before}"
    );
    // Traffic meanwhile, for the screenshot: the order route over its limit, the flaky
    // route's breaker tripping.
    let traffic = [
        harness.traffic("/order/7", 20),
        harness.traffic("/flaky", 20),
    ];

    let mut sent = None;
    for (command, params) in [
        ("setRules", &[("type", "degrade"), ("data", "[]")][..]),
        ("setSwitch", &[("value", "false")][..]),
    ] {
        let url = format!("http://127.0.0.1:{port}/{command}");
        sent = Some(Instant::now());
        let answer = sentinel_test_support::post_form(&harness.http, &url, params)
            .await
            .expect("the command center answers");
        assert_eq!(answer.status(), 400, "read-only: {command} is refused");
    }
    let (shown, seen) = browser
        .wait_for(
            "the refusals on the page",
            Duration::from_millis(10),
            "const rows = [...document.querySelectorAll('#refused-body tr[data-reason]')]; \
             if (rows.length < 2) return null; \
             return { summary: document.getElementById('refused-summary').textContent, \
               command: rows[0].dataset.command, reason: rows[0].dataset.reason, text: rows[0].textContent };",
        )
        .await;
    let latency = seen.saturating_duration_since(sent.expect("a command was sent"));
    eprintln!(
        "measured: a refused command shown {latency:?} after its answer was asked for ({shown})"
    );
    assert!(
        latency <= Duration::from_secs(2),
        "the refusal took {latency:?} to show"
    );
    let summary = shown["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("2 refused") && summary.contains("read_only 2"),
        "the count per reason: {shown}"
    );
    assert_eq!(
        (&shown["command"], &shown["reason"]),
        (&json!("setSwitch"), &json!("read_only")),
        "the latest refusal first: {shown}"
    );
    let text = shown["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("127.0.0.1") && text.contains("read-only"),
        "the caller and what it was told: {shown}"
    );
    assert!(
        harness.sentinel().is_enabled(),
        "the switch was not changed"
    );
    // The transport also reports each refusal as an engine event: listed with the rule
    // events.
    let (events, _) = browser
        .wait_for(
            "the refusals among the rule events",
            Duration::from_millis(20),
            "const rows = [...document.querySelectorAll('#rule-events-body tr[data-kind=\"refused\"]')]; \
             return rows.length >= 2 && rows.map((r) => r.dataset.component + ' ' + r.dataset.command + ' ' + r.dataset.reason);",
        )
        .await;
    assert_eq!(
        events,
        json!([
            "transport setSwitch read_only",
            "transport setRules read_only"
        ]),
        "newest first"
    );

    // The README's screenshot: the breaker open and the order route blocked as well.
    browser
        .wait_for(
            "the breaker open and blocks",
            Duration::from_millis(20),
            &format!(
                "const b = document.querySelector('#breakers-body tr[data-resource=\"{FLAKY}\"] .state'); \
                 const r = document.querySelector('#res-body tr[data-resource=\"{ORDER}\"]'); \
                 return b && b.textContent === 'OPEN' && r && Number(r.querySelector('.block').textContent) > 0"
            ),
        )
        .await;
    for task in traffic {
        task.abort();
    }
    browser.screenshot("console").await;
    harness.close(browser).await;
}
