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

mod answer_time;
mod callers;
mod commands;
mod edits;
mod refusals;
mod registered;
mod stale_views;

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

    /// A double for the machine at `machine` whose calls come from this host's `source`
    /// address (a caller that is not the address it connects to).
    fn calling_from(machine: SocketAddr, source: IpAddr) -> Self {
        Self {
            http: reqwest::Client::builder()
                .local_address(source)
                .build()
                .expect("an HTTP client"),
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
        let url = format!("http://{}/{api}", self.machine);
        let response = sentinel_test_support::post_form(&self.http, &url, params)
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

/// A key of the etcd of `scripts/services.sh` that no other test uses.
struct EtcdKey {
    endpoints: String,
    key: String,
}

impl EtcdKey {
    fn new(test: &str) -> Self {
        Self {
            endpoints: env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790"),
            key: unique_key("/rules", test),
        }
    }

    fn config(&self) -> sentinel_datasource_etcd::EtcdConfig {
        sentinel_datasource_etcd::EtcdConfig::builder()
            .endpoints([self.endpoints.as_str()])
            .build()
            .expect("an etcd config")
    }

    fn source(&self) -> sentinel_datasource_etcd::EtcdSource {
        sentinel_datasource_etcd::EtcdSource::key(self.config(), self.key.as_str())
    }

    /// A writer of the key, connected.
    async fn writer(&self) -> Arc<dyn WritableDataSource> {
        let writer = sentinel_datasource_etcd::EtcdRuleWriter::connect(self.config())
            .await
            .unwrap_or_else(|e| panic!("etcd at {}: {e}; {START_HINT}", self.endpoints));
        Arc::new(writer.at(self.key.as_str()))
    }

    /// An engine whose flow rules come from the key.
    async fn engine(&self) -> (Sentinel, DataSource) {
        let sentinel = Sentinel::new();
        let source = DataSource::builder(self.source(), FlowJson::new())
            .start(&sentinel)
            .await
            .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
        (sentinel, source)
    }
}

/// A fresh etcd key holding the flow rules `rules`, a writer of it, and an engine whose
/// flow rules come from it.
async fn etcd_with(
    test: &str,
    rules: &[(&str, f64)],
) -> (Arc<dyn WritableDataSource>, Sentinel, DataSource) {
    let etcd = EtcdKey::new(test);
    let store = etcd.writer().await;
    let (sentinel, source) = etcd.engine().await;
    write_directly(&store, &sentinel, rules).await;
    (store, sentinel, source)
}

/// The store is still at `revision` and the engine enforces `rules`.
async fn assert_unchanged(
    store: &Arc<dyn WritableDataSource>,
    revision: Option<u64>,
    sentinel: &Sentinel,
    rules: &[(&str, f64)],
) {
    assert_eq!(store.revision().await.expect("a revision"), revision);
    assert_eq!(flow_of(sentinel), pairs(rules));
}

/// A transport that writes flow edits to `store`.
fn store_config(
    app: &str,
    store: Arc<dyn WritableDataSource>,
) -> sentinel_transport::TransportConfigBuilder {
    config(app)
        .access(Access::ReadWrite)
        .rule_store(RuleFamily::Flow, store)
}

/// The flow rules a dashboard page was shown, from which its edits post whole lists, as
/// `SentinelApiClient` does: the dashboard's copy of the machine's rules (each as
/// `FlowRuleEntity.toRule()` writes it, the entity's keys beside) with the one change.
struct Shown(Vec<serde_json::Value>);

impl Shown {
    /// `getRules?type=flow` through `dashboard`.
    async fn read(dashboard: &Dashboard) -> Self {
        let (status, body) = dashboard.get("getRules", &[("type", "flow")]).await;
        assert_eq!(status, 200, "{body}");
        let mut rules: Vec<serde_json::Value> = serde_json::from_str(&body).expect("a JSON list");
        for (i, rule) in rules.iter_mut().enumerate() {
            if let Some(rule) = rule.as_object_mut() {
                rule.insert("id".into(), serde_json::json!(100 + i));
                rule.insert("app".into(), serde_json::json!("store-app"));
                rule.insert("gmtCreate".into(), serde_json::json!(1_700_000_000_000_i64));
            }
        }
        Self(rules)
    }

    fn list(rules: impl IntoIterator<Item = serde_json::Value>) -> String {
        serde_json::Value::Array(rules.into_iter().collect()).to_string()
    }

    /// The list as shown (a save without a change), in another order.
    fn unchanged(&self) -> String {
        Self::list(self.0.iter().rev().cloned())
    }

    /// The list with a new rule.
    fn adding(&self, resource: &str, count: f64) -> String {
        let added: serde_json::Value =
            serde_json::from_str(&dashboard_flow_rule(resource, count)).expect("JSON");
        Self::list(self.0.iter().cloned().chain([added]))
    }

    /// The list without `resource`'s rule.
    fn deleting(&self, resource: &str) -> String {
        Self::list(self.0.iter().filter(|r| r["resource"] != resource).cloned())
    }

    /// The list with `resource`'s count changed.
    fn editing(&self, resource: &str, count: f64) -> String {
        Self::list(self.0.iter().cloned().map(|mut r| {
            if r["resource"] == resource {
                r["count"] = serde_json::json!(count);
            }
            r
        }))
    }
}

/// The engine's flow rules `(resource, count)`, sorted.
fn flow_of(sentinel: &Sentinel) -> Vec<(String, f64)> {
    let mut rules: Vec<(String, f64)> = sentinel
        .flow_rules()
        .rules()
        .iter()
        .map(|r| (r.resource.clone(), r.count))
        .collect();
    rules.sort_by(|a, b| a.0.cmp(&b.0));
    rules
}

/// `(resource, count)` pairs as [`flow_of`] lists them.
fn pairs(rules: &[(&str, f64)]) -> Vec<(String, f64)> {
    let mut rules: Vec<(String, f64)> = rules.iter().map(|(r, c)| ((*r).to_owned(), *c)).collect();
    rules.sort_by(|a, b| a.0.cmp(&b.0));
    rules
}

/// Writes `rules` to the store directly (not through the transport) and waits until
/// `sentinel` applied them.
async fn write_directly(
    store: &Arc<dyn WritableDataSource>,
    sentinel: &Sentinel,
    rules: &[(&str, f64)],
) {
    let set = RuleSet::new().with_flow(rules.iter().map(|(r, c)| FlowRule::qps(*r, *c)).collect());
    store.write(&set).await.expect("a direct store write");
    let want = pairs(rules);
    wait_until("the engine applies the direct store write", || {
        flow_of(sentinel) == want
    })
    .await;
}

/// The `CommandRefused` events `sentinel`'s listeners receive, as
/// `component command reason message`.
fn refused_events(sentinel: &Sentinel) -> Arc<Mutex<Vec<String>>> {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    sentinel.add_listener(move |event: &sentinel_core::SentinelEvent| {
        if let sentinel_core::SentinelEvent::CommandRefused {
            component,
            command,
            reason,
            message,
        } = event
        {
            sink.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{component} {command} {reason} {message}"));
        }
    });
    seen
}
