//! Golden comparison of the dashboard transport with Sentinel Java's own: a Java process
//! (`interop/`, `sentinel.interop.TransportService`: Sentinel 1.8.9 core,
//! sentinel-transport-simple-http and sentinel-parameter-flow-control) and a Rust engine
//! with `sentinel-transport` load the same rule files and make the same call burst; every
//! command is then asked of both and the answers compared: the same keys, the same JSON
//! types, the same `metric` line format, the same counts where the traffic is the same.
//!
//! The result per command is printed and written to `target/transport-golden.txt`. The
//! differences that are expected (each with its reason) are listed in [`EXPECTED`]; any other
//! difference fails the test.
//!
//! Needs the Java harness: `scripts/interop.sh build`.

mod java;

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use sentinel_core::datasource::testkit::WAIT;
use sentinel_core::datasource::{
    AuthorityJson, Converter, DegradeJson, FlowJson, ParamFlowJson, SystemJson,
};
use sentinel_core::{RuleSet, Sentinel};
use sentinel_transport::{Access, Transport, TransportConfig};
use serde_json::Value;

const RESOURCE: &str = "burst";
const OTHER: &str = "GET|/pipe";
const CALLS: usize = 8;
const FLOW: &str = r#"[{"resource":"burst","grade":1,"count":5.0,"limitApp":"default","strategy":0,"controlBehavior":0}]"#;
const DEGRADE: &str = r#"[{"resource":"burst","grade":0,"count":500.0,"timeWindow":10,"minRequestAmount":100,"statIntervalMs":1000,"slowRatioThreshold":0.9,"limitApp":"default"}]"#;
const SYSTEM: &str = r#"[{"highestSystemLoad":-1.0,"highestCpuUsage":-1.0,"qps":100000.0,"avgRt":-1,"maxThread":-1}]"#;
const AUTHORITY: &str = r#"[{"resource":"GET|/pipe","limitApp":"app-a,app-b","strategy":1}]"#;
const PARAM_FLOW: &str = r#"[{"resource":"hot","paramIdx":0,"count":5.0,"grade":1,"durationInSec":1,"controlBehavior":0,"maxQueueingTimeMs":0,"burstCount":0,"limitApp":"default","paramFlowItemList":[]}]"#;

/// Differences that are expected, by command, with the reason. A difference is written as
/// the comparison reports it (`only in Java: path`, `only in Rust: path`, `type of path:
/// java vs rust`).
const EXPECTED: &[(&str, &str, &str)] = &[
    (
        "setRules",
        "only in Java: [].clusterConfig.acquireRefuseStrategy",
        UNMODELLED_CLUSTER,
    ),
    (
        "setRules",
        "only in Java: [].clusterConfig.clientOfflineTime",
        UNMODELLED_CLUSTER,
    ),
    (
        "setRules",
        "only in Java: [].clusterConfig.resourceTimeout",
        UNMODELLED_CLUSTER,
    ),
    (
        "setRules",
        "only in Java: [].clusterConfig.resourceTimeoutStrategy",
        UNMODELLED_CLUSTER,
    ),
    (
        "getClusterMode",
        "only in Rust: .sharedLimits",
        "whether a cluster backend (the Redis one) shares flow limits: the engine has no token \
     client or server, so `mode` is -1 as for a Java process without cluster flow control",
    ),
];

/// Why four keys of a flow rule's `clusterConfig` are not read back.
const UNMODELLED_CLUSTER: &str =
    "Java's token-client timeouts, which the engine does not model (its cluster backend has \
     none); the converter drops them, so a Java client reading what is written back sees \
     its defaults, which are what the dashboard sends";

/// The Java process; killed on drop.
struct JavaTransport {
    child: Child,
    port: u16,
}

impl Drop for JavaTransport {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start_java(rules: &std::path::Path, logs: &std::path::Path) -> (JavaTransport, usize) {
    let port = free_port();
    let mut command = java::java_with(
        "sentinel.interop.TransportService",
        "classpath-transport.txt",
        &[
            ("csp.sentinel.log.dir", logs.display().to_string()),
            ("csp.sentinel.api.port", port.to_string()),
            ("csp.sentinel.metric.flush.interval", "1".to_owned()),
            ("project.name", "golden-java".to_owned()),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    command
        .arg(rules)
        .arg(RESOURCE)
        .arg(CALLS.to_string())
        .arg(OTHER);
    let (child, lines) = java::spawn_with_lines(&mut command, "openjdk-17-jdk-headless maven");
    let java = JavaTransport { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("the Java transport service did not report its burst: {e}"));
        if let Some(passed) = line.strip_prefix("burst ") {
            return (java, passed.trim().parse().expect("a count"));
        }
    }
}

async fn get(port: u16, path: &str) -> (u16, String) {
    try_get(port, path)
        .await
        .unwrap_or_else(|e| panic!("GET /{path} on port {port}: {e}"))
}

async fn try_get(port: u16, path: &str) -> Result<(u16, String), reqwest::Error> {
    let response = reqwest::get(format!("http://127.0.0.1:{port}/{path}")).await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.unwrap_or_default()))
}

/// POSTs `params` as the dashboard does: a UTF-8 form, `; charset=UTF-8`.
async fn post(port: u16, command: &str, params: &[(&str, &str)]) -> (u16, String) {
    let url = format!("http://127.0.0.1:{port}/{command}");
    let response = sentinel_test_support::post_form(&reqwest::Client::new(), &url, params)
        .await
        .unwrap_or_else(|e| panic!("POST /{command} on port {port}: {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Whether a metric answer or log holds the burst's two resources.
fn has_burst(body: &str) -> bool {
    body.contains("|burst|") && body.contains("|GET_/pipe|")
}

/// How many times the Java side is started before its metric index is given up on.
const JAVA_STARTS: usize = 5;

/// Starts the Java side (in a fresh log folder under `work` each time) until the burst's
/// second is in its metric index, and returns it with its burst's passes.
///
/// Sentinel Java 1.8's metric writer loses the index entry of the first second a fresh
/// process writes (its first write reopens the index). When that second is the burst's (no
/// `__system_load__` line came first), the `metric` command never finds the burst: the
/// index file stays empty, or its first entry is a later second. That is Java's quirk, not
/// something to compare, so such a start is replaced by another.
async fn start_indexed_java(
    rules: &std::path::Path,
    work: &std::path::Path,
) -> (JavaTransport, usize) {
    for start in 1..=JAVA_STARTS {
        let logs = work.join(format!("logs-{start}"));
        let (java, passed) = start_java(rules, &logs);
        wait_for_metric_log(&logs, has_burst).await;
        // The writer writes a second's index entry before its lines: once the lines are
        // there, an empty index means the entry was lost.
        if metric_index_bytes(&logs) > 0 {
            return (java, passed);
        }
        eprintln!(
            "Java start {start} of {JAVA_STARTS}: its metric index lost the burst's second; \
             starting it again"
        );
    }
    panic!("Java's metric index lost the burst's second in {JAVA_STARTS} starts");
}

/// The size of Java's metric index files in `logs`.
fn metric_index_bytes(logs: &std::path::Path) -> u64 {
    std::fs::read_dir(logs)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.contains("metrics.log") && name.ends_with(".idx")
        })
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

/// Waits, within [`WAIT`], until one of Java's metric log files in `logs` (not its index)
/// holds lines for which `ready` holds.
async fn wait_for_metric_log(logs: &std::path::Path, ready: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let written = std::fs::read_dir(logs)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.contains("metrics.log") && !name.ends_with(".idx")
            })
            .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
            .any(|text| ready(&text));
        if written {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for Java to write the burst to its metric log in {}",
            logs.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asks `path` until `ready` holds for the body, within [`WAIT`].
async fn get_until(port: u16, path: &str, what: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        // Java's command center binds in a thread of its own: it may not listen yet.
        let last = match try_get(port, path).await {
            Ok((200, body)) if ready(&body) => return body,
            Ok((status, body)) => format!("{status}: {body}"),
            Err(error) => error.to_string(),
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what} on port {port}; the last answer to \
             GET /{path} was {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The JSON kind of a value; numbers as `int` or `float`.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every difference of keys and types between two JSON values (arrays: their elements
/// merged, so every element's keys count).
fn differences(path: &str, java: &Value, rust: &Value, out: &mut Vec<String>) {
    match (java, rust) {
        (Value::Object(j), Value::Object(r)) => {
            for (key, jv) in j {
                let p = format!("{path}.{key}");
                match r.get(key) {
                    Some(rv) => differences(&p, jv, rv, out),
                    None => out.push(format!("only in Java: {p}")),
                }
            }
            for key in r.keys().filter(|k| !j.contains_key(*k)) {
                out.push(format!("only in Rust: {path}.{key}"));
            }
        }
        (Value::Array(j), Value::Array(r)) => {
            let merge = |items: &[Value]| {
                let mut merged = serde_json::Map::new();
                for item in items {
                    if let Value::Object(o) = item {
                        for (k, v) in o {
                            merged.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
                merged
            };
            let (jm, rm) = (merge(j), merge(r));
            if jm.is_empty() && rm.is_empty() {
                if let (Some(jv), Some(rv)) = (j.first(), r.first()) {
                    differences(&format!("{path}[]"), jv, rv, out);
                }
            } else {
                differences(
                    &format!("{path}[]"),
                    &Value::Object(jm),
                    &Value::Object(rm),
                    out,
                );
            }
        }
        (j, r) if kind(j) != kind(r) => {
            out.push(format!("type of {path}: {} vs {}", kind(j), kind(r)));
        }
        _ => {}
    }
}

fn json(command: &str, side: &str, body: &str) -> Value {
    serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("{side} `{command}` is not JSON ({e}): {body}"))
}

/// The resource lines of a metric body, by resource: the fields after the timestamp.
fn metric_rows(body: &str) -> BTreeMap<String, Vec<String>> {
    body.lines()
        .map(|l| l.split('|').map(str::to_owned).collect::<Vec<_>>())
        .filter(|f| f.len() > 1 && !f[1].starts_with("__"))
        .map(|f| (f[1].clone(), f[2..].to_vec()))
        .collect()
}

fn load_rust_rules(sentinel: &Sentinel) {
    let mut set = RuleSet::new();
    set.merge(
        FlowJson::new()
            .convert(FLOW.as_bytes())
            .expect("flow rules"),
    );
    set.merge(
        DegradeJson::new()
            .convert(DEGRADE.as_bytes())
            .expect("degrade rules"),
    );
    set.merge(
        SystemJson::new()
            .convert(SYSTEM.as_bytes())
            .expect("system rules"),
    );
    set.merge(
        AuthorityJson::new()
            .convert(AUTHORITY.as_bytes())
            .expect("authority rules"),
    );
    set.merge(
        ParamFlowJson::new()
            .convert(PARAM_FLOW.as_bytes())
            .expect("param rules"),
    );
    sentinel
        .flow_rules()
        .load_rules(set.flow.unwrap_or_default())
        .expect("flow");
    sentinel
        .degrade_rules()
        .load_rules(set.degrade.unwrap_or_default())
        .expect("degrade");
    sentinel
        .system_rules()
        .load_rules(set.system.unwrap_or_default())
        .expect("system");
    sentinel
        .authority_rules()
        .load_rules(set.authority.unwrap_or_default())
        .expect("authority");
    sentinel
        .param_flow_rules()
        .load_rules(set.param_flow.unwrap_or_default())
        .expect("param flow");
}

/// The burst's passed calls, and when the engine second holding it began, in epoch ms.
fn rust_burst(sentinel: &Sentinel) -> (usize, i64) {
    // Inside one second of the engine's clock, as the Java side does on its own.
    while sentinel.clock().now_ms() % 1000 > 300 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let into_second = (sentinel.clock().now_ms() % 1000) as i64;
    let second_began = epoch_ms() - into_second;
    let passed = (0..CALLS)
        .filter(|_| sentinel.entry(RESOURCE).enter().is_ok())
        .count();
    drop(sentinel.entry(OTHER).enter());
    (passed, second_began)
}

/// Now, in Unix epoch milliseconds.
fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The timestamp of `resource`'s row in a metric body.
fn metric_stamp(body: &str, resource: &str) -> Option<i64> {
    body.lines().find_map(|line| {
        let fields: Vec<&str> = line.split('|').collect();
        (fields.get(1) == Some(&resource))
            .then(|| fields[0].parse().ok())
            .flatten()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_answers_as_sentinel_java_for_the_same_rules_and_burst() {
    let work = tempfile::tempdir().expect("a temporary directory");
    let rules = work.path().join("rules");
    std::fs::create_dir_all(&rules).expect("a rules directory");
    for (name, text) in [
        ("flow.json", FLOW),
        ("degrade.json", DEGRADE),
        ("system.json", SYSTEM),
        ("authority.json", AUTHORITY),
        ("paramFlow.json", PARAM_FLOW),
    ] {
        std::fs::write(rules.join(name), text).expect("a rule file");
    }
    let since = epoch_ms() - 10_000;
    let (java, java_passed) = start_indexed_java(&rules, work.path()).await;

    let sentinel = Sentinel::new();
    load_rust_rules(&sentinel);
    // Edits change memory only, as Java's do, so both sides take the same `setRules`.
    let config = TransportConfig::builder("golden-rust")
        .port(0)
        .access(Access::ReadWrite)
        .memory_only_edits(true)
        .collect_interval(Duration::from_millis(100))
        .build()
        .expect("a config");
    let transport = Transport::start(sentinel.clone(), config)
        .await
        .expect("the transport starts");
    let (rust_passed, burst_second_began) = rust_burst(&sentinel);
    assert_eq!(
        (java_passed, rust_passed),
        (5, 5),
        "the same burst admits the same calls"
    );
    let rust = transport.port();
    let java_port = java.port;

    let mut report: Vec<(String, Vec<String>)> = Vec::new();
    let mut counts: Vec<String> = Vec::new();

    // metric: the burst's second, once each side has written it.
    let metric = format!("metric?startTime={since}&endTime={}", since + 60_000);
    let java_metric = get_until(java_port, &metric, "the Java metric log", has_burst).await;
    let rust_metric = get_until(rust, &metric, "the Rust series", has_burst).await;
    let mut diffs = Vec::new();
    for (side, body) in [("Java", &java_metric), ("Rust", &rust_metric)] {
        for line in body.lines() {
            let fields: Vec<&str> = line.split('|').collect();
            if fields.len() != 10 || fields.iter().any(|f| f.is_empty()) {
                diffs.push(format!("{side} line not in the 10-field format: {line}"));
            }
            if fields
                .first()
                .and_then(|t| t.parse::<i64>().ok())
                .is_none_or(|t| t % 1000 != 0)
            {
                diffs.push(format!("{side} timestamp not a whole epoch second: {line}"));
            }
        }
    }
    let (jr, rr) = (metric_rows(&java_metric), metric_rows(&rust_metric));
    if jr.keys().ne(rr.keys()) {
        diffs.push(format!(
            "resources: {:?} vs {:?}",
            jr.keys().collect::<Vec<_>>(),
            rr.keys().collect::<Vec<_>>()
        ));
    }
    for (name, jf) in &jr {
        if let Some(rf) = rr.get(name) {
            // pass, block, success, exception (RT differs by machine speed)
            if jf[..4] != rf[..4] {
                diffs.push(format!("{name} counts: {:?} vs {:?}", &jf[..4], &rf[..4]));
            }
            counts.push(format!(
                "metric {name}: pass|block|success|exception {} (both)",
                rf[..4].join("|")
            ));
        }
    }
    // Stamps (issue #46 point 4): Java stamps a row with the start of the epoch second whose
    // calls it counts (its burst is in the first 300 ms of one). The engine's seconds start
    // `offset mod 1000` ms into the epoch's, so the transport stamps a row with the whole
    // epoch second nearest the start of the engine second it counts: at most 500 ms from
    // it (5 ms more for reading the two clocks), the second holding most of the interval.
    match (
        metric_stamp(&java_metric, RESOURCE),
        metric_stamp(&rust_metric, RESOURCE),
    ) {
        (Some(java_stamp), Some(rust_stamp)) => {
            let off = rust_stamp - burst_second_began;
            if off.abs() > 505 {
                diffs.push(format!(
                    "Rust burst row stamped {rust_stamp}, {off} ms from the start of the engine \
                     second it counts ({burst_second_began}); Java stamps the second it counts"
                ));
            }
            if java_stamp > rust_stamp {
                diffs.push(format!(
                    "Java's burst (first) stamped {java_stamp}, after Rust's {rust_stamp}"
                ));
            }
            counts.push(format!(
                "metric stamps: Java burst row {java_stamp}; Rust burst row {rust_stamp}, \
                 {off} ms from the start of the engine second it counts"
            ));
        }
        (java, rust) => diffs.push(format!("burst row stamps: Java {java:?}, Rust {rust:?}")),
    }
    report.push(("metric".into(), diffs));

    // Plain-text commands: the same text.
    for command in ["version", "getSwitch", "nope"] {
        let (js, jb) = get(java_port, command).await;
        let (rs, rb) = get(rust, command).await;
        let mut diffs = Vec::new();
        if js != rs {
            diffs.push(format!("status {js} vs {rs}"));
        }
        if jb != rb {
            diffs.push(format!("body {jb:?} vs {rb:?}"));
        }
        report.push((command.into(), diffs));
    }

    // JSON commands: the same keys and types.
    for command in [
        "api",
        "basicInfo",
        "jsonTree",
        "clusterNode",
        "clusterNode?type=notZero",
        "clusterNodeById?id=burst",
        "getRules?type=flow",
        "getRules?type=degrade",
        "getRules?type=system",
        "getRules?type=authority",
        "getParamFlowRules",
        "getClusterMode",
        "systemStatus",
    ] {
        let (js, jb) = get(java_port, command).await;
        let (rs, rb) = get(rust, command).await;
        let mut diffs = Vec::new();
        if js != rs {
            diffs.push(format!("status {js} vs {rs}"));
        }
        let (jv, rv) = (json(command, "Java", &jb), json(command, "Rust", &rb));
        differences("", &jv, &rv, &mut diffs);
        if let (Value::Array(ja), Value::Array(ra)) = (&jv, &rv) {
            if command != "api" && ja.len() != ra.len() {
                diffs.push(format!("entries: {} vs {}", ja.len(), ra.len()));
            }
            counts.push(format!(
                "{command}: {} entries (Java), {} (Rust)",
                ja.len(),
                ra.len()
            ));
        }
        if command == "clusterNodeById?id=burst" {
            for key in ["oneMinutePass", "oneMinuteBlock", "oneMinuteTotal"] {
                if jv[key] != rv[key] {
                    diffs.push(format!("{key}: {} vs {}", jv[key], rv[key]));
                }
            }
            counts.push(format!(
                "clusterNodeById burst: oneMinutePass {} oneMinuteBlock {} (Rust), {} {} (Java)",
                rv["oneMinutePass"],
                rv["oneMinuteBlock"],
                jv["oneMinutePass"],
                jv["oneMinuteBlock"]
            ));
        }
        if command == "api" {
            let urls = |v: &Value| -> Vec<String> {
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c["url"].as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let java_urls = urls(&jv);
            for url in urls(&rv) {
                if !java_urls.contains(&url) {
                    diffs.push(format!("command only in Rust: {url}"));
                }
            }
        }
        report.push((command.into(), diffs));
    }

    // Edits, as the dashboard sends them (a form POST, `; charset=UTF-8`), then the rules
    // read back.
    let edited_flow = r#"[{"clusterConfig":{"acquireRefuseStrategy":0,"clientOfflineTime":2000,"fallbackToLocalWhenFail":true,"resourceTimeout":2000,"resourceTimeoutStrategy":0,"sampleCount":10,"strategy":0,"thresholdType":0,"windowIntervalMs":1000},"clusterMode":false,"controlBehavior":0,"count":7.0,"grade":1,"limitApp":"default","maxQueueingTimeMs":500,"resource":"edited","strategy":0,"warmUpPeriodSec":10}]"#;
    let edited_param = r#"[{"burstCount":0,"clusterMode":false,"controlBehavior":0,"count":9.0,"durationInSec":1,"grade":1,"limitApp":"default","maxQueueingTimeMs":0,"paramFlowItemList":[],"paramIdx":0,"resource":"hot-edited"}]"#;
    for (command, params, read) in [
        (
            "setRules",
            vec![("type", "flow"), ("data", edited_flow)],
            "getRules?type=flow",
        ),
        (
            "setParamFlowRules",
            vec![("data", edited_param)],
            "getParamFlowRules",
        ),
        ("setSwitch", vec![("value", "true")], "getSwitch"),
    ] {
        let mut diffs = Vec::new();
        let (js, jb) = post(java_port, command, &params).await;
        let (rs, rb) = post(rust, command, &params).await;
        if (js, &jb) != (rs, &rb) {
            diffs.push(format!("answer {js} {jb:?} vs {rs} {rb:?}"));
        }
        let (_, jr) = get(java_port, read).await;
        let (_, rr) = get(rust, read).await;
        if read == "getSwitch" {
            if jr != rr {
                diffs.push(format!("read back {jr:?} vs {rr:?}"));
            }
        } else {
            let (jv, rv) = (json(read, "Java", &jr), json(read, "Rust", &rr));
            differences("", &jv, &rv, &mut diffs);
            if jv.as_array().map(Vec::len) != rv.as_array().map(Vec::len) || !rr.contains("edited")
            {
                diffs.push(format!("read back {jr} vs {rr}"));
            }
        }
        report.push((command.into(), diffs));
    }

    let mut text =
        String::from("transport golden comparison (Sentinel 1.8.9 Java vs sentinel-transport)\n");
    let mut unexpected = Vec::new();
    for (command, diffs) in &report {
        let unexplained: Vec<&String> = diffs
            .iter()
            .filter(|d| {
                !EXPECTED
                    .iter()
                    .any(|(c, e, _)| c == command && d.as_str() == *e)
            })
            .collect();
        let explained = diffs.len() - unexplained.len();
        text.push_str(&format!(
            "{command}: {}\n",
            if diffs.is_empty() {
                "same".to_owned()
            } else if unexplained.is_empty() {
                format!("same but {explained} expected difference(s)")
            } else {
                format!(
                    "DIFFERS: {}",
                    unexplained
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        ));
        for (c, e, why) in EXPECTED.iter().filter(|(c, _, _)| c == command) {
            if diffs.iter().any(|d| d == e) {
                text.push_str(&format!("    expected: {c}: {e} ({why})\n"));
            }
        }
        unexpected.extend(unexplained.into_iter().map(|d| format!("{command}: {d}")));
    }
    for line in &counts {
        text.push_str(&format!("  {line}\n"));
    }
    println!("{text}");
    let out = java::root().join("target/transport-golden.txt");
    let _ = std::fs::write(&out, &text);
    transport.shutdown().await;
    drop(java);
    assert!(
        unexpected.is_empty(),
        "{} unexpected difference(s):\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
