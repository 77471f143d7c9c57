//! The transport against a dashboard double that sends exactly what the Sentinel 1.8
//! dashboard sends (`SentinelApiClient`: GET with each parameter URL-encoded, POST with a
//! UTF-8 form and `Content-Type: application/x-www-form-urlencoded; charset=UTF-8` for
//! machines at `v` >= 1.7.1, the `success` comparison; `MetricFetcher`: the
//! `startTime`/`endTime`/`refetch=false` window; `MachineRegistryController`: the heartbeat
//! form), and rule edits round-tripped through etcd and Redis to a second engine.
//!
//! The store tests need the test servers: `scripts/services.sh start etcd redis`
//! (`eval "$(scripts/services.sh env)"` exports their addresses).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use sentinel_core::datasource::testkit::wait_until;
use sentinel_core::datasource::{
    DataSource, FlowJson, ParamFlowJson, ReadableDataSource, WritableDataSource,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::{FakeClock, RuleFamily, RuleSet, Sentinel};
use sentinel_test_support::{env_or, unique_key};
use sentinel_transport::{Access, Transport, TransportConfig, PROTOCOL_VERSION};

const START_HINT: &str = "start the test servers with `scripts/services.sh start etcd redis` \
     (`eval \"$(scripts/services.sh env)\"` exports their addresses)";

/// The heartbeat forms the double received.
type Heartbeats = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// What `SentinelApiClient` sends, and the heartbeats `MachineRegistryController` receives.
struct Dashboard {
    http: reqwest::Client,
    machine: SocketAddr,
    heartbeats: Heartbeats,
    registry: Option<SocketAddr>,
}

impl Dashboard {
    /// A double for the machine at `machine`, without a registry endpoint.
    fn calling(machine: SocketAddr) -> Self {
        Self {
            http: reqwest::Client::new(),
            machine,
            heartbeats: Arc::default(),
            registry: None,
        }
    }

    /// A double that also receives heartbeats at `/registry/machine`, answering as the
    /// dashboard does.
    async fn with_registry() -> Self {
        let heartbeats: Heartbeats = Arc::default();
        let app = Router::new()
            .route(
                "/registry/machine",
                post(
                    |State(seen): State<Heartbeats>, body: axum::body::Bytes| async move {
                        let form = form_urlencoded::parse(&body).into_owned().collect();
                        seen.lock().unwrap_or_else(|e| e.into_inner()).push(form);
                        r#"{"success":true,"code":0,"msg":"success","data":null}"#
                    },
                ),
            )
            .with_state(heartbeats.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port for the dashboard double");
        let registry = listener.local_addr().expect("its address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            http: reqwest::Client::new(),
            machine: registry,
            heartbeats,
            registry: Some(registry),
        }
    }

    fn heartbeats(&self) -> Vec<HashMap<String, String>> {
        self.heartbeats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `executeCommand` with GET: `http://ip:port/api?k=v&...`, each key and value
    /// URL-encoded, empty values left out.
    async fn get(&self, api: &str, params: &[(&str, &str)]) -> (u16, String) {
        let mut url = format!("http://{}/{api}", self.machine);
        let query: Vec<String> = params
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        let response = self
            .http
            .get(url)
            .send()
            .await
            .expect("the command center answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// `executeCommand` with POST (machines at `v` >= 1.7.1): a UTF-8 form entity.
    async fn post(&self, api: &str, params: &[(&str, &str)]) -> (u16, String) {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let response = self
            .http
            .post(format!("http://{}/{api}", self.machine))
            .header(
                "Content-Type",
                "application/x-www-form-urlencoded; charset=UTF-8",
            )
            .body(body)
            .send()
            .await
            .expect("the command center answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// `setRulesAsync`: POST `type` and `data`; true when the answer is `success`.
    async fn set_rules(&self, ty: &str, data: &str) -> Result<(), (u16, String)> {
        let (status, body) = self.post("setRules", &[("type", ty), ("data", data)]).await;
        if status == 200 && body.trim().eq_ignore_ascii_case("success") {
            Ok(())
        } else {
            Err((status, body))
        }
    }

    /// `MetricFetcher.fetchOnce`: the window `doFetchAppMetric` computes at the dashboard's
    /// time `now` (epoch ms), asked as `metric?startTime=..&endTime=..&refetch=false`.
    async fn fetch_metric(&self, now: i64) -> (i64, i64, String) {
        let start = (now - 15_000) / 1000 * 1000;
        let end = start + 6_000;
        assert!(
            end <= now - 2_000,
            "MetricFetcher would wait: the window is too near"
        );
        let url = format!(
            "http://{}/metric?startTime={start}&endTime={end}&refetch=false",
            self.machine
        );
        let response = self
            .http
            .get(url)
            .header("Connection", "close")
            .send()
            .await
            .expect("the command center answers");
        assert_eq!(response.status().as_u16(), 200);
        (start, end, response.text().await.unwrap_or_default())
    }
}

/// Java's `URLEncoder.encode` (form encoding: space as `+`).
fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn config(app: &str) -> sentinel_transport::TransportConfigBuilder {
    TransportConfig::builder(app)
        .port(0)
        .collect_interval(Duration::from_millis(20))
}

async fn start(
    sentinel: &Sentinel,
    config: sentinel_transport::TransportConfigBuilder,
) -> Transport {
    Transport::start(sentinel.clone(), config.build().expect("a valid config"))
        .await
        .expect("the transport starts")
}

fn local(transport: &Transport) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), transport.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_registers_with_every_field_within_one_interval() {
    let dashboard = Dashboard::with_registry().await;
    let registry = dashboard.registry.expect("a registry");
    let sentinel = Sentinel::new();
    let before = epoch_ms();
    let transport = start(
        &sentinel,
        config("heartbeat-app")
            .dashboard(registry.to_string())
            .heartbeat_interval(Duration::from_millis(200))
            .hostname("test-host"),
    )
    .await;
    wait_until("a heartbeat", || !dashboard.heartbeats().is_empty()).await;
    let form = &dashboard.heartbeats()[0];
    assert_eq!(form.get("app").map(String::as_str), Some("heartbeat-app"));
    assert_eq!(form.get("app_type").map(String::as_str), Some("0"));
    assert_eq!(form.get("hostname").map(String::as_str), Some("test-host"));
    assert_eq!(form.get("ip").map(String::as_str), Some("127.0.0.1"));
    assert_eq!(
        form.get("port"),
        Some(&transport.port().to_string()),
        "the bound command port"
    );
    assert_eq!(form.get("v").map(String::as_str), Some(PROTOCOL_VERSION));
    let v: Vec<u32> = PROTOCOL_VERSION
        .split('.')
        .map(|p| p.parse().expect("numeric"))
        .collect();
    assert!(
        v >= vec![1, 7, 1],
        "the dashboard POSTs setRules from 1.7.1"
    );
    let version: i64 = form["version"].parse().expect("epoch ms");
    assert!(
        version >= before,
        "version is epoch ms now: {version} < {before}"
    );
    assert_eq!(form.len(), 7, "{form:?}");
    // A second heartbeat follows within the interval's reach.
    wait_until("a second heartbeat", || dashboard.heartbeats().len() >= 2).await;
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_lines_count_a_known_burst_in_the_window_the_dashboard_asks() {
    let clock = FakeClock::at_ms(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("burst", 5.0)])
        .expect("valid rules");
    let started = epoch_ms();
    let transport = start(&sentinel, config("metric-app")).await;
    let mut passed = 0;
    for _ in 0..8 {
        if let Ok(entry) = sentinel.entry("burst").enter() {
            passed += 1;
            drop(entry);
        }
    }
    assert_eq!(passed, 5);
    drop(sentinel.entry("GET|/pipe").enter());
    clock.advance_ms(1000);
    wait_until("the burst second collected", || {
        transport.series().newest_second() == Some(1_000_000)
    })
    .await;
    let dashboard = Dashboard::calling(local(&transport));
    // The dashboard's clock 15 s after the transport started: its window starts at the
    // burst's epoch second.
    let (start_ms, end_ms, body) = dashboard.fetch_metric(started + 15_000).await;
    let lines: Vec<&str> = body.lines().collect();
    for line in &lines {
        let fields: Vec<&str> = line.split('|').collect();
        assert_eq!(fields.len(), 10, "{line}");
        let ts: i64 = fields[0].parse().expect("a timestamp");
        assert_eq!(ts % 1000, 0, "whole seconds: {line}");
        if !fields[1].starts_with("__") {
            assert!(
                ts >= start_ms && ts <= end_ms,
                "{line} outside [{start_ms}, {end_ms}]"
            );
        }
    }
    let burst: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("|burst|"))
        .collect();
    assert_eq!(burst.len(), 1, "{body}");
    let own = sentinel.resource_seconds("burst", 1_000_000, 1_001_000);
    let fields: Vec<u64> = burst[0]
        .split('|')
        .skip(2)
        .map(|f| f.parse().expect("a number"))
        .collect();
    assert_eq!(
        fields[..6],
        [
            own[0].pass,
            own[0].block,
            own[0].success,
            own[0].error,
            0,
            0
        ],
        "pass, block, success, exception, rt, occupied against the engine's counters"
    );
    assert_eq!(fields[..2], [5, 3]);
    assert!(
        lines.iter().any(|l| l.contains("|GET_/pipe|")),
        "`|` in a name becomes `_`: {body}"
    );
    // The same window asked again gives the same resource rows.
    let (_, _, again) = dashboard.fetch_metric(started + 15_000).await;
    let rows = |b: &str| -> Vec<String> {
        b.lines()
            .filter(|l| !l.contains("|__"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rows(&body), rows(&again));
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_answer_with_java_status_codes_and_shapes() {
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("GET:/order", 10.0)])
        .expect("valid rules");
    drop(sentinel.entry("GET:/order").enter());
    let transport = start(&sentinel, config("shapes-app")).await;
    let dashboard = Dashboard::calling(local(&transport));
    assert_eq!(
        dashboard.get("version", &[]).await,
        (200, PROTOCOL_VERSION.to_owned())
    );
    let (status, body) = dashboard.get("nope", &[]).await;
    assert_eq!((status, body.as_str()), (400, "Unknown command `nope`"));
    let (status, body) = dashboard.get("getRules", &[("type", "bogus")]).await;
    assert_eq!((status, body.as_str()), (400, "invalid type"));
    let (status, body) = dashboard.get("getRules", &[("type", "FLOW")]).await;
    assert_eq!(status, 200);
    let rules: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(rules[0]["resource"], "GET:/order");
    assert_eq!(rules[0]["count"], 10.0);
    let (_, body) = dashboard.get("clusterNode", &[("type", "notZero")]).await;
    let nodes: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let node = &nodes[0];
    for key in [
        "resource",
        "threadNum",
        "passQps",
        "blockQps",
        "totalQps",
        "averageRt",
        "successQps",
        "exceptionQps",
        "oneMinutePass",
        "oneMinuteBlock",
        "oneMinuteException",
        "oneMinuteTotal",
        "timestamp",
    ] {
        assert!(node.get(key).is_some(), "NodeVo field {key}: {node}");
    }
    assert_eq!(node["oneMinutePass"], 1);
    let (_, body) = dashboard.get("jsonTree", &[]).await;
    let tree: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(tree[0]["resource"], "machine-root");
    assert_eq!(tree[2]["parentId"], tree[1]["id"]);
    let (_, body) = dashboard.get("systemStatus", &[]).await;
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    for key in ["rqps", "qps", "b", "r", "t"] {
        assert!(status.get(key).is_some(), "{key}: {status}");
    }
    let (_, body) = dashboard.get("getClusterMode", &[]).await;
    let mode: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(mode["mode"], -1);
    assert_eq!(
        dashboard.get("getSwitch", &[]).await.1,
        "Sentinel switch value: true"
    );
    let (_, body) = dashboard.get("api", &[]).await;
    let api: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert!(api
        .as_array()
        .is_some_and(|a| a.iter().any(|c| c["url"] == "/metric")));
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_set_rules_and_set_switch_with_a_clear_message() {
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("read-only-app")).await;
    let dashboard = Dashboard::calling(local(&transport));
    let (status, body) = dashboard
        .set_rules("flow", r#"[{"resource":"a","count":1}]"#)
        .await
        .expect_err("refused");
    assert_eq!(status, 400);
    assert!(
        body.contains("read-only") && body.contains("setRules"),
        "{body}"
    );
    let (status, body) = dashboard.get("setSwitch", &[("value", "false")]).await;
    assert_eq!(status, 400);
    assert!(body.contains("read-only"), "{body}");
    assert!(sentinel.is_enabled());
    assert!(sentinel.flow_rules().rules().is_empty());
    transport.shutdown().await;
}

/// This machine's address as other hosts see it, for a caller that is not loopback.
fn outward_ip() -> IpAddr {
    let ip = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect("192.0.2.1:9")?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .expect("a network interface");
    assert!(
        !ip.is_loopback(),
        "this test needs a non-loopback interface to call from"
    );
    ip
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_caller_is_refused_unless_allowed() {
    let ip = outward_ip();
    let sentinel = Sentinel::new();
    let any = config("allow-app").bind_ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let closed = start(&sentinel, any.clone()).await;
    let dashboard = Dashboard::calling(SocketAddr::new(ip, closed.port()));
    let (status, body) = dashboard.get("version", &[]).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains(&ip.to_string()), "{body}");
    // Loopback is always admitted.
    let (status, _) = Dashboard::calling(local(&closed)).get("version", &[]).await;
    assert_eq!(status, 200);
    closed.shutdown().await;
    let open = start(&sentinel, any.allow_clients([ip])).await;
    let dashboard = Dashboard::calling(SocketAddr::new(ip, open.port()));
    assert_eq!(dashboard.get("version", &[]).await.0, 200);
    open.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_port_moves_to_the_next_and_binds_loopback_by_default() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = busy.local_addr().expect("its address").port();
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("port-app").port(port)).await;
    assert!(transport.port() > port && transport.port() < port + 64);
    assert!(transport.local_addr().ip().is_loopback());
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_only_edits_apply_only_when_chosen() {
    let sentinel = Sentinel::new();
    let data = r#"[{"resource":"mem","count":2.0,"grade":1,"limitApp":"default","id":3,"app":"x","ip":"1.2.3.4","port":8719,"gmtCreate":1700000000000}]"#;
    let no_store = start(&sentinel, config("nostore-app").access(Access::ReadWrite)).await;
    let (status, body) = Dashboard::calling(local(&no_store))
        .set_rules("flow", data)
        .await
        .expect_err("no store, no memory-only");
    assert_eq!(status, 400);
    assert!(
        body.contains("no rule store") && body.contains("memory_only_edits"),
        "{body}"
    );
    no_store.shutdown().await;
    let memory = start(
        &sentinel,
        config("memory-app")
            .access(Access::ReadWrite)
            .memory_only_edits(true),
    )
    .await;
    let dashboard = Dashboard::calling(local(&memory));
    dashboard
        .set_rules("flow", data)
        .await
        .expect("applied in memory");
    let rules = sentinel.flow_rules().rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resource, "mem");
    let (status, body) = dashboard.get("setSwitch", &[("value", "false")]).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Sentinel set switch value: false")
    );
    assert!(!sentinel.is_enabled());
    memory.shutdown().await;
}

/// The dashboard's flow rule for `resource`, as `FlowRuleEntity.toRule()` and fastjson
/// write it, with the entity's own keys too.
fn dashboard_flow_rule(resource: &str, count: f64) -> String {
    format!(
        r#"{{"id":12,"app":"store-app","ip":"127.0.0.1","port":8719,"gmtCreate":1700000000000,"gmtModified":1700000000000,"clusterConfig":{{"acquireRefuseStrategy":0,"clientOfflineTime":2000,"fallbackToLocalWhenFail":true,"resourceTimeout":2000,"resourceTimeoutStrategy":0,"sampleCount":10,"strategy":0,"thresholdType":0,"windowIntervalMs":1000}},"clusterMode":false,"controlBehavior":0,"count":{count:?},"grade":1,"limitApp":"default","maxQueueingTimeMs":500,"resource":"{resource}","strategy":0,"warmUpPeriodSec":10}}"#
    )
}

fn has_flow(sentinel: &Sentinel, resource: &str, count: f64) -> bool {
    sentinel
        .flow_rules()
        .rules()
        .iter()
        .any(|r| r.resource == resource && r.count == count)
}

/// Two engines on one store key, the transport on the first writing to that key: an edit
/// reaches both, an invalid one and a conflicting one change nothing.
async fn round_trip<S: ReadableDataSource>(
    source: impl Fn() -> S,
    writer: Arc<dyn WritableDataSource>,
    other: Arc<dyn WritableDataSource>,
) {
    let a = Sentinel::new();
    let b = Sentinel::new();
    let source_a = DataSource::builder(source(), FlowJson::new())
        .start(&a)
        .await
        .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
    let source_b = DataSource::builder(source(), FlowJson::new())
        .start(&b)
        .await
        .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
    let transport = start(
        &a,
        config("store-app")
            .access(Access::ReadWrite)
            .rule_store(RuleFamily::Flow, writer.clone()),
    )
    .await;
    let dashboard = Dashboard::calling(local(&transport));
    // The dashboard lists the rules before it edits them.
    assert_eq!(dashboard.get("getRules", &[("type", "flow")]).await.0, 200);
    let edit = format!("[{}]", dashboard_flow_rule("GET:/edited", 3.0));
    dashboard
        .set_rules("flow", &edit)
        .await
        .expect("the store accepted the edit");
    assert!(
        has_flow(&a, "GET:/edited", 3.0),
        "applied here before `success`"
    );
    wait_until("the second engine applies the edit from the store", || {
        has_flow(&b, "GET:/edited", 3.0)
    })
    .await;
    let (_, listed) = dashboard.get("getRules", &[("type", "flow")]).await;
    assert!(listed.contains("GET:/edited"), "{listed}");

    // An invalid rule: refused naming its index and field, nothing written.
    let revision = writer.revision().await.expect("a revision");
    let invalid = format!(
        "[{},{}]",
        dashboard_flow_rule("GET:/fine", 1.0),
        dashboard_flow_rule("GET:/bad", -1.0)
    );
    let (status, body) = dashboard
        .set_rules("flow", &invalid)
        .await
        .expect_err("invalid");
    assert_eq!(status, 400);
    assert!(body.contains("#1") && body.contains("`count`"), "{body}");
    assert!(
        !body.contains("clusterConfig"),
        "no payload in the message: {body}"
    );
    assert_eq!(writer.revision().await.expect("a revision"), revision);
    assert!(has_flow(&a, "GET:/edited", 3.0) && !has_flow(&a, "GET:/fine", 1.0));

    // Someone else writes the key: the dashboard's next edit, based on what it read before,
    // is a conflict and changes nothing.
    other
        .write(&RuleSet::new().with_flow(vec![FlowRule::qps("GET:/other", 7.0)]))
        .await
        .expect("the other writer");
    wait_until("both engines apply the other write", || {
        has_flow(&a, "GET:/other", 7.0) && has_flow(&b, "GET:/other", 7.0)
    })
    .await;
    let stale = format!("[{}]", dashboard_flow_rule("GET:/stale", 4.0));
    let (status, body) = dashboard
        .set_rules("flow", &stale)
        .await
        .expect_err("a conflict");
    assert_eq!(status, 400);
    assert!(body.contains("changed since"), "{body}");
    assert!(has_flow(&b, "GET:/other", 7.0) && !has_flow(&b, "GET:/stale", 4.0));
    // After reloading, the edit goes through.
    dashboard.get("getRules", &[("type", "flow")]).await;
    dashboard
        .set_rules("flow", &stale)
        .await
        .expect("after a reload");
    wait_until("the second engine applies the reloaded edit", || {
        has_flow(&b, "GET:/stale", 4.0)
    })
    .await;
    transport.shutdown().await;
    source_a.close().await;
    source_b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_rules_round_trip_through_etcd_to_a_second_engine() {
    use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
    let endpoints = env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    let key = unique_key("/rules", "transport");
    let config = || {
        EtcdConfig::builder()
            .endpoints([endpoints.as_str()])
            .build()
            .expect("an etcd config")
    };
    let connect = || async {
        let writer = EtcdRuleWriter::connect(config())
            .await
            .unwrap_or_else(|e| panic!("etcd at {endpoints}: {e}; {START_HINT}"));
        Arc::new(writer.at(key.as_str())) as Arc<dyn WritableDataSource>
    };
    let source = || EtcdSource::key(config(), key.as_str());
    round_trip(source, connect().await, connect().await).await;
}

/// A key of the Redis of `scripts/services.sh` that no other test uses, and its channel.
struct RedisKey {
    addr: String,
    key: String,
    channel: String,
}

impl RedisKey {
    fn new(test: &str) -> Self {
        let key = unique_key("rules:", test);
        Self {
            addr: env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379"),
            channel: format!("{key}:channel"),
            key,
        }
    }

    fn config(&self) -> sentinel_datasource_redis::RedisConfig {
        sentinel_datasource_redis::RedisConfig::builder()
            .server(self.addr.as_str())
            .build()
            .expect("a Redis config")
    }

    /// A source of the key, its payloads published on the channel.
    fn source(&self) -> sentinel_datasource_redis::RedisSource {
        use sentinel_datasource_redis::{ChangeMode, RedisSource};
        RedisSource::new(
            self.config(),
            self.key.as_str(),
            ChangeMode::Payload(self.channel.clone()),
        )
    }

    /// A writer of the key, connected.
    async fn writer(&self) -> Arc<dyn WritableDataSource> {
        let writer = sentinel_datasource_redis::RedisRuleWriter::connect(self.config())
            .await
            .unwrap_or_else(|e| panic!("Redis at {}: {e}; {START_HINT}", self.addr));
        Arc::new(writer.at(self.key.as_str(), self.channel.as_str()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_rules_round_trip_through_redis_to_a_second_engine() {
    let redis = RedisKey::new("transport");
    round_trip(
        || redis.source(),
        redis.writer().await,
        redis.writer().await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_param_flow_rules_write_to_their_store() {
    let redis = RedisKey::new("transport-param");
    let writer = redis.writer().await;
    let sentinel = Sentinel::new();
    let source = DataSource::builder(redis.source(), ParamFlowJson::new())
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
    let transport = start(&sentinel, config_param(writer)).await;
    let dashboard = Dashboard::calling(local(&transport));
    // ParamFlowRuleEntity.getRule() as fastjson writes it.
    let data = r#"[{"burstCount":0,"clusterMode":false,"controlBehavior":0,"count":5.0,"durationInSec":1,"grade":1,"limitApp":"default","maxQueueingTimeMs":0,"paramFlowItemList":[],"paramIdx":0,"resource":"GET:/hot"}]"#;
    let (status, body) = dashboard.post("setParamFlowRules", &[("data", data)]).await;
    assert_eq!((status, body.as_str()), (200, "success"));
    let rules = sentinel.param_flow_rules().rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resource, "GET:/hot");
    let (_, listed) = dashboard.get("getParamFlowRules", &[]).await;
    assert!(listed.contains("GET:/hot"), "{listed}");
    transport.shutdown().await;
    source.close().await;
}

fn config_param(writer: Arc<dyn WritableDataSource>) -> sentinel_transport::TransportConfigBuilder {
    config("param-app")
        .access(Access::ReadWrite)
        .rule_store(RuleFamily::ParamFlow, writer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_bodies_must_be_forms_with_a_length_as_in_java() {
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("post-app")).await;
    let url = format!("http://{}/version", local(&transport));
    let http = reqwest::Client::new();
    let json = http
        .post(&url)
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("an answer");
    assert_eq!(json.status().as_u16(), 415);
    assert_eq!(
        json.text().await.unwrap_or_default(),
        "Only form-encoded post request is supported"
    );
    let empty = http.post(&url).send().await.expect("an answer");
    assert_eq!(empty.status().as_u16(), 411);
    // Query and form parameters together, `+` and `%xx` decoded, empty values dropped.
    let dashboard = Dashboard::calling(local(&transport));
    let (status, body) = dashboard
        .post("getRules?type=", &[("type", "flow"), ("unused", "")])
        .await;
    assert_eq!((status, body.as_str()), (200, "[]"));
    transport.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_revisions_refuses_edits_and_keeps_its_file() {
    use sentinel_datasource_file::FileRuleWriter;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("flow.json");
    std::fs::write(&path, "[]").expect("the rules file");
    let sentinel = Sentinel::new();
    let transport = start(
        &sentinel,
        config("file-app")
            .access(Access::ReadWrite)
            .rule_store(RuleFamily::Flow, Arc::new(FileRuleWriter::new(&path))),
    )
    .await;
    let dashboard = Dashboard::calling(local(&transport));
    let edit = format!("[{}]", dashboard_flow_rule("GET:/file", 2.0));
    let (status, body) = dashboard
        .set_rules("flow", &edit)
        .await
        .expect_err("no CAS");
    assert_eq!(status, 400);
    assert!(body.contains("keeps no revisions"), "{body}");
    assert_eq!(std::fs::read_to_string(&path).expect("the file"), "[]");
    transport.shutdown().await;
}
