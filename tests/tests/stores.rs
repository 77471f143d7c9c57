//! Java and Rust services on one rule store: Sentinel 1.8's own data sources (Redis, etcd,
//! Nacos, a file; `interop/`, `sentinel.interop.StoreService`) and this project's, on the same
//! key and channel, etcd key, Nacos dataId (on rnacos) and file.
//!
//! For each store: a rule set written by the backend's `WritableDataSource` is applied by the
//! Java service with the same rules as the Rust engine's (Java's `FlowRuleManager.getRules()`
//! against the engine's active rules; degrade, param-flow, authority and system rules too,
//! through a file); a rule set published as Java and its dashboard publish
//! is applied by the Rust engine; and the same burst against both services admits what Java's
//! own decision admits.
//!
//! Needs the test servers (`scripts/services.sh start etcd redis nacos`) and the Java harness
//! (`scripts/interop.sh build`).

mod java;

use std::io::Write;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;

use sentinel_core::datasource::testkit::{wait_until, WAIT};
use sentinel_core::datasource::{DataSource, FlowJson, ReadableDataSource, WritableDataSource};
use sentinel_core::flow::FlowRule;
use sentinel_core::{RuleSet, Sentinel};
use sentinel_test_support::{env_or, unique_key};
use serde_json::{json, Value};

const START_HINT: &str =
    "start the test servers with `scripts/services.sh start etcd redis nacos` \
     (`eval \"$(scripts/services.sh env)\"` exports their addresses)";

/// The Java service, driven over its stdin and stdout.
struct JavaService {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl JavaService {
    fn start(args: &[String]) -> Self {
        Self::start_family(args, "flow")
    }

    /// The service reading `family` (flow, degrade, paramFlow, authority or system).
    fn start_family(args: &[String], family: &str) -> Self {
        let mut command =
            java::java("sentinel.interop.StoreService").unwrap_or_else(|e| panic!("{e}"));
        command.args(args).env("INTEROP_FAMILY", family);
        let (mut child, lines) = java::spawn_with_lines(&mut command, "openjdk-17-jdk-headless");
        let stdin = child.stdin.take().expect("piped stdin");
        let mut service = Self {
            child,
            stdin,
            lines,
        };
        // Sentinel prints where its logs go (`INFO: ...`) before the service is ready.
        let mut first = service.read();
        while first.starts_with("INFO: ") || first.starts_with("SLF4J") {
            first = service.read();
        }
        assert_eq!(
            first, "ready",
            "the Java service did not start ({args:?}); {START_HINT}"
        );
        service
    }

    /// The next line of output, within the testkit's wait (Java starts a JVM and connects).
    fn read(&mut self) -> String {
        self.lines
            .recv_timeout(WAIT + Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("the Java service did not answer; {START_HINT}"))
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("the Java service reads its stdin");
        self.stdin.flush().expect("flush");
        let answer = self.read();
        assert!(
            !answer.starts_with("error"),
            "Java answered {command:?} with {answer}"
        );
        answer
    }

    fn rules(&mut self) -> Vec<Value> {
        serde_json::from_str(&self.ask("rules")).expect("Java prints its rules as JSON")
    }

    fn burst(&mut self, resource: &str, calls: usize) -> usize {
        self.ask(&format!("burst {resource} {calls}"))
            .parse()
            .expect("Java prints a count")
    }
}

impl Drop for JavaService {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// The rules as JSON, as the Rust engine has them (Sentinel JSON names).
fn rust_rules(sentinel: &Sentinel) -> Vec<Value> {
    sentinel
        .flow_rules()
        .rules()
        .iter()
        .map(|r| serde_json::to_value(r).expect("a rule serializes"))
        .collect()
}

/// Every field the Rust rule has, Java's rule has with the same value (Java adds fields the
/// engine leaves out, such as `regex: false`); rules compared by resource.
fn assert_same_rules(java: &[Value], rust: &[Value]) {
    assert_eq!(java.len(), rust.len(), "Java has {java:?}, Rust {rust:?}");
    for r in rust {
        let j = java
            .iter()
            .find(|j| j["resource"] == r["resource"])
            .unwrap_or_else(|| panic!("Java has no rule on {}: {java:?}", r["resource"]));
        for (key, value) in r.as_object().into_iter().flatten() {
            let same = match (value.as_f64(), j[key].as_f64()) {
                (Some(a), Some(b)) => (a - b).abs() < 1e-9,
                _ => *value == j[key],
            };
            assert!(
                same,
                "field {key}: Rust {value}, Java {} (rule {r})",
                j[key]
            );
        }
    }
}

/// Calls `resource` `calls` times at once on the Rust engine; how many passed.
fn burst(sentinel: &Sentinel, resource: &str, calls: usize) -> usize {
    (0..calls)
        .filter(|_| sentinel.entry(resource).enter().is_ok())
        .count()
}

/// The `sentinel-rules` binary that `cargo test --workspace` builds for its own tests.
fn sentinel_rules() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| java::root().join("target"));
    let bin = target.join("debug/sentinel-rules");
    assert!(
        bin.exists(),
        "{} is not built: cargo build -p sentinel-rules",
        bin.display()
    );
    bin
}

/// One store, both directions: `writer` writes through the backend's WritableDataSource,
/// `sentinel-rules push` writes to `url`, and the Java service publishes.
async fn both_ways<S, W>(test: &str, java_args: Vec<String>, url: &str, source: S, writer: W)
where
    S: ReadableDataSource + 'static,
    W: WritableDataSource,
{
    let sentinel = Sentinel::new();
    let mut java = JavaService::start(&java_args);
    let handle = DataSource::builder(source, FlowJson::new())
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("the Rust source does not start: {e}; {START_HINT}"));

    // Rust writes, Java applies.
    let written = format!("{test}-written");
    let rules = RuleSet::new().with_flow(vec![
        FlowRule::qps(written.as_str(), 4.0),
        FlowRule::qps(format!("{test}-other").as_str(), 7.0),
    ]);
    writer
        .write(&rules)
        .await
        .expect("the writer stores the rules");
    wait_until("the Java service applies the write", || {
        java.rules().len() == 2
    })
    .await;
    wait_until("the Rust engine applies its own write", || {
        sentinel.flow_rules().rules().len() == 2
    })
    .await;
    assert_same_rules(&java.rules(), &rust_rules(&sentinel));
    let java_passed = java.burst(&written, 10);
    assert_eq!(java_passed, 4, "Java admits its QPS limit");
    assert_eq!(
        burst(&sentinel, &written, 10),
        java_passed,
        "the same burst against Rust"
    );

    // `sentinel-rules push` writes, Java applies.
    let pushed = format!("{test}-pushed");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("pushed.json");
    let list = json!([{"resource": pushed, "count": 5}]);
    std::fs::write(&file, list.to_string()).expect("the rules file is written");
    let out = std::process::Command::new(sentinel_rules())
        .arg("push")
        .arg(&file)
        .args(["--to", url, "--family", "flow"])
        .output()
        .expect("sentinel-rules runs");
    assert!(
        out.status.success(),
        "sentinel-rules push to {url} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("the Java service applies the push", || {
        java.rules().iter().any(|r| r["resource"] == json!(pushed))
    })
    .await;
    wait_until("the Rust engine applies the push", || {
        sentinel
            .flow_rules()
            .rules()
            .iter()
            .any(|r| r.resource == pushed)
    })
    .await;
    assert_same_rules(&java.rules(), &rust_rules(&sentinel));
    let java_passed = java.burst(&pushed, 10);
    assert_eq!(java_passed, 5, "Java admits its QPS limit");
    assert_eq!(
        burst(&sentinel, &pushed, 10),
        java_passed,
        "the same burst against Rust"
    );

    // Java publishes (Sentinel's conventions for the store), Rust applies.
    let published = format!("{test}-published");
    let payload = json!([{"resource": published, "count": 3, "limitApp": "default", "grade": 1}]);
    java.ask(&format!("publish {payload}"));
    wait_until("the Rust engine applies Java's publish", || {
        sentinel
            .flow_rules()
            .rules()
            .iter()
            .any(|r| r.resource == published)
    })
    .await;
    wait_until("the Java service applies its own publish", || {
        java.rules()
            .iter()
            .any(|r| r["resource"] == json!(published))
    })
    .await;
    assert_same_rules(&java.rules(), &rust_rules(&sentinel));
    let java_passed = java.burst(&published, 10);
    assert_eq!(java_passed, 3, "Java admits its QPS limit");
    assert_eq!(
        burst(&sentinel, &published, 10),
        java_passed,
        "the same burst against Rust"
    );
    handle.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_key_and_channel_shared_with_sentinel_java() {
    use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
    let addr = env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379");
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let key = unique_key("rules:", "interop");
    let channel = format!("{key}:channel");
    let config = || {
        RedisConfig::builder()
            .server(addr.as_str())
            .build()
            .expect("a Redis config")
    };
    let writer = RedisRuleWriter::connect(config())
        .await
        .unwrap_or_else(|e| panic!("Redis at {addr}: {e}; {START_HINT}"))
        .at(key.as_str(), channel.as_str());
    // Java's RedisDataSource convention: the message on the channel is the value.
    let source = RedisSource::new(config(), key.as_str(), ChangeMode::Payload(channel.clone()));
    let args = vec![
        "redis".into(),
        host.into(),
        port.into(),
        key.clone(),
        channel.clone(),
    ];
    let url = format!("redis://{addr}/{key}?channel={channel}");
    both_ways("redis", args, &url, source, writer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_key_shared_with_sentinel_java() {
    use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
    let endpoints = env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    let key = unique_key("/rules", "interop");
    let config = || {
        EtcdConfig::builder()
            .endpoints([endpoints.as_str()])
            .build()
            .expect("an etcd config")
    };
    let writer = EtcdRuleWriter::connect(config())
        .await
        .unwrap_or_else(|e| panic!("etcd at {endpoints}: {e}; {START_HINT}"))
        .at(key.as_str());
    let source = EtcdSource::key(config(), key.as_str());
    let url = format!("etcd://{}{key}", endpoints.trim_start_matches("http://"));
    both_ways(
        "etcd",
        vec!["etcd".into(), endpoints.clone(), key.clone()],
        &url,
        source,
        writer,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_data_id_shared_with_sentinel_java() {
    use sentinel_datasource_nacos::{ConfigKey, NacosConfig, NacosRuleWriter, NacosSource};
    let addr = env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848");
    let data_id = unique_key("interop", "nacos").replace('/', "-") + "-flow-rules";
    let config = || {
        NacosConfig::builder()
            .servers([addr.as_str()])
            .build()
            .expect("a Nacos config")
    };
    let writer = NacosRuleWriter::new(config())
        .unwrap_or_else(|e| panic!("Nacos at {addr}: {e}; {START_HINT}"))
        .at(ConfigKey::new(data_id.as_str(), "SENTINEL_GROUP"));
    let source = NacosSource::new(config(), data_id.as_str(), "SENTINEL_GROUP")
        .unwrap_or_else(|e| panic!("Nacos at {addr}: {e}; {START_HINT}"));
    let url = format!("nacos://{addr}/{data_id}");
    both_ways(
        "nacos",
        vec!["nacos".into(), addr.clone(), data_id.clone()],
        &url,
        source,
        writer,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_shared_with_sentinel_java() {
    use sentinel_datasource_file::{FileRuleWriter, FileSource};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("flow-rules.json");
    std::fs::write(&path, "[]").expect("the rules file is created");
    let source = FileSource::new(&path).expect("a file source");
    let writer = FileRuleWriter::new(&path);
    let args = vec!["file".into(), path.display().to_string()];
    let url = format!("file://{}", path.display());
    both_ways("file", args, &url, source, writer).await;
}

/// The rules of `set` (one family) written to a file by the Rust writer read the same in
/// Sentinel Java's `FileRefreshableDataSource` and its family manager as in the Rust engine.
async fn family_in_a_file<C>(
    family: &str,
    set: RuleSet,
    converter: C,
    active: fn(&Sentinel) -> Vec<Value>,
) where
    C: sentinel_core::datasource::Converter<[u8], RuleSet> + 'static,
{
    use sentinel_datasource_file::{FileRuleWriter, FileSource};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("{family}-rules.json"));
    std::fs::write(&path, "[]").expect("the rules file is created");
    let sentinel = Sentinel::new();
    let handle = DataSource::builder(FileSource::new(&path).expect("a file source"), converter)
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("the Rust source does not start: {e}"));
    let mut java = JavaService::start_family(&["file".into(), path.display().to_string()], family);
    let expected = active_count(&set);
    FileRuleWriter::new(&path)
        .write(&set)
        .await
        .expect("the writer stores the rules");
    wait_until(
        &format!("the Rust engine applies the {family} rules"),
        || active(&sentinel).len() == expected,
    )
    .await;
    if family == "system" {
        // Java's SystemRuleManager.getRules() answers one rule per threshold it holds; this
        // engine's rules merge into one: compare the thresholds.
        let thresholds = |rules: &[Value]| {
            let mut set = serde_json::Map::new();
            for rule in rules {
                for (key, value) in rule.as_object().into_iter().flatten() {
                    if value.as_f64().is_some_and(|v| v >= 0.0) {
                        set.insert(key.clone(), json!(value.as_f64()));
                    }
                }
            }
            set
        };
        let rust = thresholds(&active(&sentinel));
        wait_until("the Java service applies the system rules", || {
            thresholds(&java.rules()) == rust
        })
        .await;
    } else {
        wait_until(
            &format!("the Java service applies the {family} rules"),
            || java.rules().len() == expected,
        )
        .await;
        assert_same_rules(&java.rules(), &active(&sentinel));
    }
    handle.close().await;
}

fn active_count(set: &RuleSet) -> usize {
    set.degrade.as_ref().map_or(0, Vec::len)
        + set.param_flow.as_ref().map_or(0, Vec::len)
        + set.authority.as_ref().map_or(0, Vec::len)
        + set.system.as_ref().map_or(0, Vec::len)
}

/// A serialized rule list as its rules.
fn list(rules: Result<Value, serde_json::Error>) -> Vec<Value> {
    match rules.expect("rules serialize") {
        Value::Array(list) => list,
        other => vec![other],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_in_a_file_reads_the_same_in_sentinel_java() {
    use sentinel_core::authority::AuthorityRule;
    use sentinel_core::circuit_breaker::DegradeRule;
    use sentinel_core::datasource::{AuthorityJson, DegradeJson, ParamFlowJson, SystemJson};
    use sentinel_core::param_flow::{ParamFlowItem, ParamFlowRule};
    use sentinel_core::system::SystemRule;

    family_in_a_file(
        "degrade",
        RuleSet::new().with_degrade(vec![
            DegradeRule::error_ratio("file-errors", 0.5, 10)
                .min_request_amount(7)
                .stat_interval_ms(2_000),
            DegradeRule::slow_ratio("file-slow", 200.0, 0.3, 5),
            DegradeRule::error_count("file-count", 3.0, 2),
        ]),
        DegradeJson::new(),
        |s| list(serde_json::to_value(s.degrade_rules().rules())),
    )
    .await;
    family_in_a_file(
        "paramFlow",
        RuleSet::new().with_param_flow(vec![
            ParamFlowRule::qps("file-param", 0, 5.0)
                .burst_count(2)
                .duration_in_sec(2)
                .item(ParamFlowItem::long(42, 9))
                .item(ParamFlowItem::string("vip", 20)),
            ParamFlowRule::thread("file-param-threads", 1, 3.0),
            ParamFlowRule::qps("file-param-spaced", 0, 10.0).rate_limiter(300),
        ]),
        ParamFlowJson::new(),
        |s| list(serde_json::to_value(s.param_flow_rules().rules())),
    )
    .await;
    family_in_a_file(
        "authority",
        RuleSet::new().with_authority(vec![
            AuthorityRule::white_list("file-auth", "web,app"),
            AuthorityRule::black_list("file-admin", "crawler"),
        ]),
        AuthorityJson::new(),
        |s| list(serde_json::to_value(s.authority_rules().rules())),
    )
    .await;
    family_in_a_file(
        "system",
        RuleSet::new().with_system(vec![SystemRule::new().qps(100.0).max_thread(20)]),
        SystemJson::new(),
        |s| list(serde_json::to_value(s.system_rules().rules())),
    )
    .await;
}
