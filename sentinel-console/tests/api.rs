//! The console's JSON API on a fake clock, without a browser: top-N, sorting and search, the
//! sparkline, the breaker timeline, rule provenance, and edits (off by default, the auth
//! hook, invalid, conflict, written) against an in-memory store.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use sentinel_console::{Console, ConsoleError, ResourceQuery, SortKey, PAGE_BYTES, SPARK_SECONDS};
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::datasource::testkit::wait_status;
use sentinel_core::datasource::{
    CombinedJson, DataSource, Encoding, Expected, MemoryStore, WritableDataSource, WriteError,
};
use sentinel_core::series::MetricSeries;
use sentinel_core::{FakeClock, Sentinel};
use serde_json::{json, Value};
use tower::ServiceExt;

/// The writable side of one [`MemoryStore`] key, compare-and-set on the store's revision.
struct MemoryWriter {
    store: MemoryStore,
    key: String,
}

#[async_trait]
impl WritableDataSource for MemoryWriter {
    fn describe(&self) -> String {
        format!("memory key {}", self.key)
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        if let Expected::Revision(expected) = expected {
            if expected != Some(self.store.revision()) {
                return Err(WriteError::Conflict {
                    key: self.key.clone(),
                    expected: expected.unwrap_or(0),
                });
            }
        }
        self.store.put(self.key.clone(), bytes);
        Ok(Some(self.store.revision()))
    }

    async fn revision(&self) -> Result<Option<u64>, sentinel_core::datasource::SourceError> {
        Ok(Some(self.store.revision()))
    }
}

/// A data source named `name` on `store`'s key `rules`, read as a combined document.
async fn start_source(sentinel: &Sentinel, store: &MemoryStore, name: &str) -> DataSource {
    DataSource::builder(store.source("rules"), CombinedJson::new())
        .name(name)
        .start(sentinel)
        .await
        .expect("the source starts")
}

fn engine() -> (Sentinel, FakeClock, Arc<MetricSeries>) {
    let clock = FakeClock::at_ms(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    (sentinel, clock, Arc::new(MetricSeries::new()))
}

/// `res-00` to `res-29`, resource i called i times in one second, then the second ends.
fn thirty_resources(sentinel: &Sentinel, clock: &FakeClock) {
    for i in 0..30 {
        for _ in 0..i {
            drop(sentinel.entry(&format!("res-{i:02}")).enter());
        }
    }
    clock.advance_ms(1000);
}

async fn call(
    router: &axum::Router,
    method: &str,
    uri: &str,
    auth: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = auth {
        request = request.header("authorization", token);
    }
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    }
    .expect("a request");
    let response = router.clone().oneshot(request).await.expect("an answer");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_table_is_the_top_n_of_the_newest_second_sorted_and_searched_on_the_server() {
    let (sentinel, clock, series) = engine();
    let console = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console");
    thirty_resources(&sentinel, &clock);

    let top = console.snapshot(&ResourceQuery {
        limit: 5,
        ..ResourceQuery::default()
    });
    let names: Vec<_> = top
        .resources
        .rows
        .iter()
        .map(|r| r.resource.as_str())
        .collect();
    assert_eq!(names, ["res-29", "res-28", "res-27", "res-26", "res-25"]);
    assert_eq!((top.resources.total, top.resources.matched), (29, 29));
    assert_eq!(top.resources.rows[0].pass, 29);
    let second = top.resources.engine_second_ms.expect("a second");
    assert_eq!(
        sentinel.resource_seconds("res-29", second, second + 1000)[0].pass,
        29,
        "the row is the engine's own second"
    );
    let spark = &top.resources.rows[0].spark_pass;
    assert_eq!(spark.len(), SPARK_SECONDS);
    assert_eq!(
        spark[SPARK_SECONDS - 1],
        29,
        "the newest second is the last point"
    );
    assert!(spark[..SPARK_SECONDS - 1].iter().all(|&v| v == 0));

    let searched = console.snapshot(&ResourceQuery {
        q: "RES-1".into(),
        sort: SortKey::Resource,
        desc: false,
        limit: 3,
    });
    let names: Vec<_> = searched
        .resources
        .rows
        .iter()
        .map(|r| r.resource.as_str())
        .collect();
    assert_eq!(
        searched.resources.matched, 10,
        "res-10..res-19, case-insensitive"
    );
    assert_eq!(names, ["res-10", "res-11", "res-12"]);
}

#[tokio::test]
async fn the_api_serves_the_page_under_200_kb_and_the_same_data_as_json() {
    let (sentinel, clock, series) = engine();
    let router: axum::Router = axum::Router::new().nest(
        "/console",
        Console::builder(&sentinel)
            .series(series)
            .build()
            .expect("a console")
            .router(),
    );
    thirty_resources(&sentinel, &clock);
    let page = router
        .clone()
        .oneshot(
            Request::get("/console")
                .body(Body::empty())
                .expect("a request"),
        )
        .await
        .expect("an answer");
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.into_body().collect().await.expect("a body").to_bytes();
    assert_eq!(html.len(), PAGE_BYTES);
    assert!(html.len() < 200 * 1024, "the page is {} bytes", html.len());

    let (status, resources) = call(
        &router,
        "GET",
        "/console/api/resources?sort=resource&desc=false&limit=2",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(resources["rows"][0]["resource"], json!("res-01"));
    assert_eq!(resources["rows"].as_array().map(Vec::len), Some(2));
    let (_, snapshot) = call(&router, "GET", "/console/api/snapshot?limit=1", None, None).await;
    assert_eq!(
        snapshot["resources"]["rows"][0]["resource"],
        json!("res-29")
    );
    assert_eq!(snapshot["editing"], json!(false));
    let (status, _) = call(&router, "GET", "/console/api/system", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_breaker_trip_is_in_the_timeline_with_its_reason() {
    let (sentinel, clock, series) = engine();
    sentinel
        .degrade_rules()
        .load_rules(vec![DegradeRule::error_count("db", 3.0, 10)])
        .expect("rules");
    let console = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console");
    for _ in 0..5 {
        if let Ok(mut entry) = sentinel.entry("db").enter() {
            entry.set_error();
        }
    }
    let snapshot = console.snapshot(&ResourceQuery::default());
    let trip = snapshot.timeline.first().expect("a transition");
    assert_eq!((trip.from.as_str(), trip.to.as_str()), ("CLOSED", "OPEN"));
    assert_eq!(trip.resource, "db");
    assert!(trip.reason.starts_with("error count"), "{}", trip.reason);
    assert_eq!(snapshot.breakers[0].state, "OPEN");

    clock.advance_ms(10_000);
    drop(sentinel.entry("db").enter());
    let timeline = console.snapshot(&ResourceQuery::default()).timeline;
    let states: Vec<_> = timeline.iter().map(|t| t.to.as_str()).collect();
    assert_eq!(states, ["CLOSED", "HALF_OPEN", "OPEN"], "newest first");
    assert_eq!(timeline[0].reason, "probe succeeded");
}

#[tokio::test]
async fn edits_are_off_by_default_behind_the_auth_hook_and_compare_and_set() {
    let (sentinel, _clock, series) = engine();
    let store = MemoryStore::new();
    store.put("rules", r#"{"flow":[{"resource":"a","count":5}]}"#);
    let source = start_source(&sentinel, &store, "mem").await;
    let writer = Arc::new(MemoryWriter {
        store: store.clone(),
        key: "rules".into(),
    });

    let off: axum::Router = Console::builder(&sentinel)
        .series(series.clone())
        .source(source.status_watch())
        .writable("mem", writer.clone(), Encoding::Combined)
        .build()
        .expect("a console")
        .router();
    let (status, _) = call(&off, "GET", "/api/sources/mem/edit", Some("Bearer t"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "editing is off by default");

    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .source(source.status_watch())
        .writable("mem", writer, Encoding::Combined)
        .editing(|headers| {
            headers
                .get("authorization")
                .is_some_and(|v| v == "Bearer t")
        })
        .build()
        .expect("a console")
        .router();
    let (status, _) = call(
        &router,
        "GET",
        "/api/sources/mem/edit",
        Some("Bearer nope"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, view) = call(
        &router,
        "GET",
        "/api/sources/mem/edit",
        Some("Bearer t"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["document"]["flow"][0]["count"], json!(5.0));
    let revision = view["revision"].as_u64().expect("a revision");

    let invalid = json!({ "expected_revision": revision, "document": {
        "flow": [{ "resource": "a", "count": 1 }, { "resource": "b", "count": -1 }] } });
    let (status, outcome) = call(
        &router,
        "PUT",
        "/api/sources/mem/rules",
        Some("Bearer t"),
        Some(invalid),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(outcome["issues"][0]["index"], json!(1));
    assert_eq!(outcome["issues"][0]["field"], json!("count"));
    assert_eq!(store.revision(), revision, "nothing was stored");

    let stale = json!({ "expected_revision": revision - 1, "document": { "flow": [] } });
    let (status, outcome) = call(
        &router,
        "PUT",
        "/api/sources/mem/rules",
        Some("Bearer t"),
        Some(stale),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(outcome["current"], json!(revision));

    let edit = json!({ "expected_revision": revision, "document": { "flow": [{ "resource": "a", "count": 7 }] } });
    let (status, outcome) = call(
        &router,
        "PUT",
        "/api/sources/mem/rules",
        Some("Bearer t"),
        Some(edit),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(outcome["revision"], json!(revision + 1));
    wait_status(&source, "the edit applied", |s| s.applied_count == 2).await;
    assert_eq!(
        sentinel.flow_rules().rules()[0].count,
        7.0,
        "applied through the source"
    );
    let (_, rules) = call(&router, "GET", "/api/rules", None, None).await;
    assert_eq!(rules["sources"][0]["source"], json!("mem"));
    assert_eq!(
        rules["sources"][0]["document"]["flow"][0]["count"],
        json!(7.0)
    );
    source.close().await;
}

#[test]
fn a_writer_for_an_unknown_source_or_no_runtime_is_a_typed_error() {
    let (sentinel, _clock, _series) = engine();
    let store = MemoryStore::new();
    let writer = Arc::new(MemoryWriter {
        store,
        key: "k".into(),
    });
    let err = Console::builder(&sentinel)
        .series(Arc::new(MetricSeries::new()))
        .writable("nope", writer, Encoding::Combined)
        .build()
        .expect_err("unknown source");
    assert!(
        matches!(err, ConsoleError::UnknownSource { ref name } if name == "nope"),
        "{err}"
    );
    let err = Console::builder(&sentinel).build().expect_err("no runtime");
    assert!(matches!(err, ConsoleError::NoRuntime), "{err}");
}

/// A cluster backend that hands out slots with a lease of 7 tokens, 3 live replicas and 40
/// tokens left in the window, as a Redis backend would after a call.
#[derive(Debug)]
struct ReportingBackend;

impl sentinel_core::cluster::ClusterBackend for ReportingBackend {
    fn register(
        &self,
        specs: &[sentinel_core::cluster::ClusterRuleSpec],
    ) -> Vec<Arc<sentinel_core::cluster::ClusterSlot>> {
        specs
            .iter()
            .map(|spec| {
                let slot = sentinel_core::cluster::ClusterSlot::new(spec.clone());
                slot.add_tokens(7);
                slot.set_live_replicas(3);
                slot.set_window_left(40);
                Arc::new(slot)
            })
            .collect()
    }
}

#[tokio::test]
async fn the_cluster_and_system_panels_show_leases_replicas_admitted_and_the_bbr_capacity() {
    let sentinel = Sentinel::builder()
        .clock(FakeClock::at_ms(1_000_000))
        .cluster_backend(Arc::new(ReportingBackend))
        .build();
    let mut rule = sentinel_core::flow::FlowRule::qps("GET:/order", 100.0);
    rule.cluster_mode = true;
    let mut config = sentinel_core::flow::ClusterFlowConfig::default();
    config.flow_id = Some(9);
    config.threshold_type = 1;
    rule.cluster_config = Some(config);
    sentinel.flow_rules().load_rules(vec![rule]).expect("rules");
    let console = Console::builder(&sentinel)
        .series(Arc::new(MetricSeries::new()))
        .build()
        .expect("a console");
    let snapshot = serde_json::to_value(console.snapshot(&ResourceQuery::default()))
        .expect("the snapshot serializes");
    let flows = &snapshot["cluster"]["flows"];
    assert_eq!(flows.as_array().map(Vec::len), Some(1), "{flows}");
    let flow = &flows[0];
    assert_eq!(flow["flow_id"], 9);
    assert_eq!(flow["resource"], "GET:/order");
    assert_eq!(flow["limit"], 100.0, "a global threshold over a 1 s window");
    assert_eq!(flow["lease"], 7);
    assert_eq!(flow["live_replicas"], 3);
    assert_eq!(flow["admitted"], 60.0, "the limit less the 40 left");
    // Nothing completed: Sentinel's floors give the estimate of one success per bucket at
    // the longest RT.
    assert!(snapshot["system"]["bbr_capacity"]
        .as_f64()
        .is_some_and(|c| c > 0.0));
}

/// The shadow panel: each shadow rule's would-blocks in `api/shadow` and in the snapshot,
/// and the page has the panel.
#[tokio::test]
async fn the_shadow_panel_shows_would_blocks_per_rule() {
    let (sentinel, _clock, series) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![sentinel_core::flow::FlowRule::qps(
            "GET:/order",
            100.0,
        )])
        .expect("rules");
    let shadow = sentinel_core::RuleSet::new()
        .with_flow(vec![sentinel_core::flow::FlowRule::qps("GET:/order", 10.0)]);
    sentinel.load_shadow_rules(shadow).expect("shadow rules");
    for _ in 0..150 {
        drop(sentinel.entry("GET:/order").enter());
    }
    let console = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console");
    let router: axum::Router = console.router();
    let (status, rows) = call(&router, "GET", "/api/shadow", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(rows[0]["resource"], "GET:/order", "{rows}");
    assert_eq!(rows[0]["family"], "flow");
    assert_eq!(rows[0]["kind"], "qps");
    assert_eq!(rows[0]["this_second"], 90, "{rows}");
    assert_eq!(rows[0]["total"], 90);
    let snapshot = serde_json::to_value(console.snapshot(&ResourceQuery::default()))
        .expect("the snapshot serializes");
    assert_eq!(snapshot["shadow"], rows);
    let router: axum::Router = router;
    let page = router
        .oneshot(Request::get("/").body(Body::empty()).expect("a request"))
        .await
        .expect("an answer");
    let html = page.into_body().collect().await.expect("a body").to_bytes();
    let html = String::from_utf8_lossy(&html);
    assert!(
        html.contains("id=\"shadow-body\""),
        "the page has the shadow panel"
    );
}

/// A GET with these headers; the status, headers and body.
async fn get_with(
    router: &axum::Router,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut request = Request::builder().uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::empty()).expect("a request");
    let response = router.clone().oneshot(request).await.expect("an answer");
    let (parts, body) = response.into_parts();
    // An event stream never ends: its first frame is enough.
    let bytes = match tokio::time::timeout(std::time::Duration::from_secs(5), body.collect()).await
    {
        Ok(collected) => collected.expect("a body").to_bytes().to_vec(),
        Err(_) => Vec::new(),
    };
    (parts.status, parts.headers, bytes)
}

#[tokio::test]
async fn reads_pass_the_host_check_and_the_read_hook_and_answers_carry_the_policy() {
    let (sentinel, _clock, series) = engine();
    let open: axum::Router = Console::builder(&sentinel)
        .series(series.clone())
        .allowed_hosts(["console.example.com"])
        .build()
        .expect("a console")
        .router();
    for host in [
        "localhost:3000",
        "127.0.0.1:8721",
        "[::1]:8721",
        "console.example.com",
    ] {
        let (status, headers, _) = get_with(&open, "/api/system", &[("host", host)]).await;
        assert_eq!(status, StatusCode::OK, "{host}");
        let policy = headers["content-security-policy"].to_str().expect("ascii");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(policy.contains("script-src 'sha256-"), "{policy}");
        assert_eq!(headers["x-frame-options"], "DENY");
    }
    // DNS rebinding: a name someone else's DNS points at this machine.
    for uri in ["/", "/api/snapshot", "/api/stream"] {
        let (status, headers, _) =
            get_with(&open, uri, &[("host", "rebind.attacker.example:3000")]).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{uri}");
        assert!(headers.contains_key("content-security-policy"));
    }

    let guarded: axum::Router = Console::builder(&sentinel)
        .series(series)
        .read_auth(|headers| headers.get("x-operator").is_some_and(|v| v == "yes"))
        .build()
        .expect("a console")
        .router();
    for uri in ["/", "/api/snapshot", "/api/stream", "/api/sources"] {
        let (status, _, _) = get_with(&guarded, uri, &[("host", "localhost")]).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{uri} without the read check"
        );
    }
    let (status, _, body) = get_with(&guarded, "/api/snapshot", &[("x-operator", "yes")]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(serde_json::from_slice::<Value>(&body).is_ok());
}

#[tokio::test]
async fn the_page_is_served_gzipped_and_under_the_mount_point_with_a_slash() {
    let (sentinel, _clock, series) = engine();
    let console = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console");
    let app: axum::Router = console.mount("/console/");
    for uri in ["/console", "/console/"] {
        let (status, headers, body) = get_with(&app, uri, &[("accept-encoding", "gzip")]).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert_eq!(headers["content-encoding"], "gzip", "{uri}");
        assert!(
            body.len() < PAGE_BYTES / 2,
            "{uri}: {} bytes gzipped of {PAGE_BYTES}",
            body.len()
        );
    }
    let (_, headers, body) = get_with(&app, "/console/", &[]).await;
    assert!(!headers.contains_key("content-encoding"));
    assert_eq!(body.len(), PAGE_BYTES);
}

/// Reads `stream` until its text contains `needle`, for at most 5 s.
async fn read_until(stream: &mut tokio::net::TcpStream, needle: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut buffer = [0u8; 16 * 1024];
    while !text.contains(needle) {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Ok(Ok(n)) if n > 0 => text.push_str(&String::from_utf8_lossy(&buffer[..n])),
            _ => break,
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_event_stream_ends_when_shutdown_begins_and_serve_returns_within_1s() {
    use tokio::io::AsyncWriteExt;
    let sentinel = Sentinel::new();
    let console = Console::builder(&sentinel).build().expect("a console");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(console.serve(addr, async {
        let _ = stopped.await;
    }));
    let mut viewer = None;
    for _ in 0..100 {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(stream) => {
                viewer = Some(stream);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    let mut viewer = viewer.expect("the console listens");
    viewer
        .write_all(b"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("request sent");
    let first = read_until(&mut viewer, "event: snapshot").await;
    assert!(
        first.contains("event: snapshot"),
        "the stream opened: {first}"
    );

    let began = std::time::Instant::now();
    let _ = stop.send(());
    let served = tokio::time::timeout(std::time::Duration::from_secs(1), server).await;
    let took = began.elapsed();
    eprintln!("measured: serve returned {took:?} after shutdown began, one viewer open");
    assert!(
        matches!(served, Ok(Ok(Ok(())))),
        "serve did not return within 1 s of shutdown with a viewer open: {served:?}"
    );
    // The viewer sees its stream end: the chunked body's last chunk, then the connection closes.
    let rest = read_until(&mut viewer, "0\r\n\r\n").await;
    assert!(rest.ends_with("0\r\n\r\n"), "the stream ended: {rest:?}");
}

/// A store that keeps no revisions (as a file): stores anything, answers no revision.
struct NoRevisions(MemoryStore);

#[async_trait]
impl WritableDataSource for NoRevisions {
    fn describe(&self) -> String {
        "a store without revisions".to_owned()
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        if let Expected::Revision(_) = expected {
            return Err(WriteError::NoRevisions {
                target: self.describe(),
            });
        }
        self.0.put("rules", bytes);
        Ok(None)
    }
}

#[tokio::test]
async fn a_store_without_revisions_is_not_offered_and_the_editor_keeps_the_stored_text() {
    let (sentinel, _clock, series) = engine();
    let hand_written = "{ \"flow\": [ { \"resource\": \"a\", \"count\": 5 } ] }\n";
    let store = MemoryStore::new();
    store.put("rules", hand_written);
    let source = start_source(&sentinel, &store, "mem").await;
    let file_like = MemoryStore::new();
    file_like.put("rules", r#"{"degrade":[]}"#);
    let file_source = start_source(&sentinel, &file_like, "file-like").await;
    let writer = Arc::new(MemoryWriter {
        store: store.clone(),
        key: "rules".into(),
    });
    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .source(source.status_watch())
        .source(file_source.status_watch())
        .writable("mem", writer, Encoding::Combined)
        .stored_text("mem", store.source("rules"))
        .writable(
            "file-like",
            Arc::new(NoRevisions(file_like.clone())),
            Encoding::Combined,
        )
        .editing(|_| true)
        .build()
        .expect("a console")
        .router();

    // The probe of the store answers within a few polls.
    let mut offered = Value::Null;
    for _ in 0..100 {
        let (_, sources) = call(&router, "GET", "/api/sources", None, None).await;
        if sources[1]["editable"] == json!(false) {
            offered = sources;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(offered[1]["name"], json!("file-like"), "{offered}");
    assert!(
        offered[1]["not_editable"]
            .as_str()
            .is_some_and(|r| r.contains("keeps no revisions")),
        "{offered}"
    );
    assert_eq!(offered[0]["editable"], json!(true));
    let (status, _) = call(&router, "GET", "/api/sources/file-like/edit", None, None).await;
    assert_eq!(status, StatusCode::CONFLICT);

    let (status, view) = call(&router, "GET", "/api/sources/mem/edit", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        view["text"],
        json!(hand_written),
        "the stored text, not 9 keys a rule"
    );
    let edited = hand_written.replace('5', "7");
    let request = json!({ "expected_revision": view["revision"], "text": edited });
    let (status, outcome) = call(
        &router,
        "PUT",
        "/api/sources/mem/rules",
        None,
        Some(request),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    let (_, view) = call(&router, "GET", "/api/sources/mem/edit", None, None).await;
    assert_eq!(view["text"], json!(edited), "stored as written");
    source.close().await;
    file_source.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_events_are_coalesced_into_at_most_one_update_every_250_ms() {
    let (sentinel, _clock, series) = engine();
    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console")
        .router();
    let request = Request::builder()
        .uri("/api/stream")
        .body(Body::empty())
        .expect("a request");
    let mut body = router
        .oneshot(request)
        .await
        .expect("an answer")
        .into_body();
    let first = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "the first snapshot");

    // A rule apply every 50 ms for 1 s: 20 engine events.
    let emitting = sentinel.clone();
    let events = tokio::spawn(async move {
        for i in 0..20 {
            let rule = sentinel_core::flow::FlowRule::qps("a", f64::from(1 + i % 2));
            let _ = emitting.flow_rules().load_rules(vec![rule]);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    let started = tokio::time::Instant::now();
    let until = started + std::time::Duration::from_millis(1000);
    let mut updates = 0;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(until, body.frame()).await {
        if frame
            .data_ref()
            .is_some_and(|d| d.windows(13).any(|w| w == b"event: update"))
        {
            updates += 1;
        }
    }
    let _ = events.await;
    eprintln!("measured: 20 rule applies in 1 s, {updates} updates sent");
    // 1 s / 250 ms, the second's own update, and one for scheduling on a busy machine.
    assert!(
        (1..=6).contains(&updates),
        "{updates} updates for 20 events in 1 s"
    );
}

/// While the store holds a rejected payload, the API's provenance is the applied payload's
/// (the rules in force and their applied time), and the rejected payload's revision and hash
/// are reported apart; after a fix the rejection stays visible with the new applied revision.
#[tokio::test]
async fn provenance_during_a_rejection_is_the_applied_payloads() {
    let (sentinel, _clock, series) = engine();
    let store = MemoryStore::new();
    store.put("rules", r#"{"flow":[{"resource":"a","count":5}]}"#);
    let applied = store.revision().to_string();
    let source = start_source(&sentinel, &store, "mem").await;
    let applied_hash = source.status().applied_hash.expect("an applied hash");
    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .source(source.status_watch())
        .build()
        .expect("a console")
        .router();

    store.put("rules", r#"{"flow":[{"resource":"a","count":-1}]}"#);
    let rejected = store.revision().to_string();
    let status = wait_status(&source, "the rejection", |s| s.rejected_count == 1).await;
    let rejected_hash = status.rejected_hash.expect("a rejected hash");
    let (code, sources) = call(&router, "GET", "/api/sources", None, None).await;
    assert_eq!(code, StatusCode::OK);
    let mem = &sources[0];
    assert_eq!(mem["name"], json!("mem"));
    assert_eq!(mem["revision"], json!(applied), "{mem}");
    assert_eq!(mem["hash"], json!(applied_hash), "{mem}");
    assert_eq!(mem["store_rejected"], json!(true), "{mem}");
    assert_eq!(mem["rejected_revision"], json!(rejected), "{mem}");
    assert_eq!(mem["rejected_hash"], json!(rejected_hash), "{mem}");
    assert!(mem["last_rejected_ms"].as_u64().is_some(), "{mem}");
    assert!(
        mem["last_applied_ms"].as_u64() <= mem["last_rejected_ms"].as_u64(),
        "{mem}"
    );

    store.put("rules", r#"{"flow":[{"resource":"a","count":7}]}"#);
    let fixed = store.revision().to_string();
    wait_status(&source, "the fix", |s| s.applied_count == 2).await;
    let (_, sources) = call(&router, "GET", "/api/sources", None, None).await;
    let mem = &sources[0];
    assert_eq!(mem["revision"], json!(fixed), "{mem}");
    assert_ne!(mem["hash"], json!(applied_hash), "{mem}");
    assert_eq!(mem["store_rejected"], json!(false), "{mem}");
    assert_eq!(mem["rejected_revision"], json!(rejected), "{mem}");
    source.close().await;
}

/// What the dashboard transport refuses is on the page: the snapshot's `transport` names
/// each refused command with its reason, message, caller and time, and an open event stream
/// gets it at once, not with the next second's update (the fake clock sends none for 1 s).
#[cfg(feature = "transport")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transports_refused_edits_are_shown_with_reason_and_time_as_they_happen() {
    use std::time::Duration;

    let (sentinel, _clock, series) = engine();
    // Read-only (the default): every edit the dashboard sends is refused.
    let transport = sentinel_transport::Transport::start(
        sentinel.clone(),
        sentinel_transport::TransportConfig::builder("console-refusals")
            .port(0)
            .build()
            .expect("a transport config"),
    )
    .await
    .expect("the transport starts");
    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .transport(&transport)
        .build()
        .expect("a console")
        .router();
    let (_, snapshot) = call(&router, "GET", "/api/snapshot", None, None).await;
    assert_eq!(
        snapshot["transport"]["refused"], 0,
        "{}",
        snapshot["transport"]
    );

    let request = Request::builder()
        .uri("/api/stream")
        .body(Body::empty())
        .expect("a request");
    let mut body = router
        .clone()
        .oneshot(request)
        .await
        .expect("an answer")
        .into_body();
    let first = tokio::time::timeout(Duration::from_secs(5), body.frame()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "the first snapshot");

    let before = epoch_now_ms();
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{}/setRules", transport.port());
    let answer =
        sentinel_test_support::post_form(&http, &url, &[("type", "degrade"), ("data", "[]")])
            .await
            .expect("the command center answers");
    assert_eq!(answer.status(), 400, "read-only refuses the edit");

    let polled = tokio::time::Instant::now();
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .ok()
        .flatten()
        .and_then(Result::ok)
        .and_then(|f| f.into_data().ok())
        .expect("an update");
    let waited = polled.elapsed();
    let text = String::from_utf8_lossy(&frame);
    eprintln!("measured: the refusal reached the open stream {waited:?} after it was polled");
    assert!(
        text.contains("event: update") && text.contains("\"transport\""),
        "{text}"
    );
    assert!(
        waited < Duration::from_millis(700),
        "the stream woke for the refusal, not for the next second: {waited:?}"
    );

    let (_, snapshot) = call(&router, "GET", "/api/snapshot", None, None).await;
    let refusals = &snapshot["transport"];
    assert_eq!(refusals["refused"], 1, "{refusals}");
    assert_eq!(refusals["by_reason"], json!([["read_only", 1]]));
    let refused = &refusals["recent"][0];
    assert_eq!(refused["command"], "setRules");
    assert_eq!(refused["reason"], "read_only");
    assert_eq!(refused["caller"], "127.0.0.1");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("read-only")),
        "{refused}"
    );
    let at = refused["at_ms"].as_i64().expect("a time");
    assert!(at >= before - 1000 && at <= epoch_now_ms() + 1000, "{at}");
    transport.shutdown().await;
}

/// Now, in Unix epoch milliseconds.
#[cfg(feature = "transport")]
fn epoch_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Without a transport the snapshot's `transport` is null (the page hides its card).
#[tokio::test]
async fn without_a_transport_the_snapshot_has_no_refusals() {
    let (sentinel, _clock, series) = engine();
    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console")
        .router();
    let (_, snapshot) = call(&router, "GET", "/api/snapshot", None, None).await;
    assert_eq!(snapshot["transport"], Value::Null);
}

/// A command refused anywhere (the engine's `CommandRefused` event, as
/// `Sentinel::report_command_refused` sends it) is in the console's record: in the snapshot's
/// `commands_refused`, newest first, and sent at once to an open stream (the fake clock sends
/// no second's update).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_command_event_is_recorded_and_reaches_an_open_stream() {
    use std::time::Duration;

    let (sentinel, _clock, series) = engine();
    let router: axum::Router = Console::builder(&sentinel)
        .series(series)
        .build()
        .expect("a console")
        .router();
    let (_, snapshot) = call(&router, "GET", "/api/snapshot", None, None).await;
    assert_eq!(snapshot["commands_refused"], json!([]));
    let request = Request::builder()
        .uri("/api/stream")
        .body(Body::empty())
        .expect("a request");
    let mut body = router
        .clone()
        .oneshot(request)
        .await
        .expect("an answer")
        .into_body();
    let first = tokio::time::timeout(Duration::from_secs(5), body.frame()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "the first snapshot");

    sentinel.report_command_refused("transport", "setRules", "read_only", "read-only here");
    let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .ok()
        .flatten()
        .and_then(Result::ok)
        .and_then(|f| f.into_data().ok())
        .expect("an update for the event");
    let text = String::from_utf8_lossy(&frame);
    assert!(
        text.contains("event: update") && text.contains("\"commands_refused\""),
        "{text}"
    );

    sentinel.report_command_refused("tokens", "acquire", "forbidden", "not allowed");
    let (_, snapshot) = call(&router, "GET", "/api/snapshot", None, None).await;
    let refused = snapshot["commands_refused"].as_array().expect("a list");
    assert_eq!(refused.len(), 2, "{refused:?}");
    let (newest, oldest) = (&refused[0], &refused[1]);
    assert_eq!(
        (
            &newest["component"],
            &newest["command"],
            &newest["reason"],
            &newest["message"]
        ),
        (
            &json!("tokens"),
            &json!("acquire"),
            &json!("forbidden"),
            &json!("not allowed")
        )
    );
    assert_eq!(oldest["command"], "setRules");
    assert!(newest["seq"].as_u64() > oldest["seq"].as_u64());
    assert!(
        newest["at_ms"].as_u64().is_some_and(|at| at > 0),
        "{newest}"
    );
}
