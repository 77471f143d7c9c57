//! The axum example service (`--bin service`), run as the README runs it: a route limited to
//! 5 requests a second answers 429 past it, 5xx responses open an error-ratio breaker,
//! `/metrics` shows the counts per resource, and the rules hot-update from a file and from
//! etcd (the real server of `scripts/services.sh start etcd-main`).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sentinel_test_support::{env_or, unique_key, OutputLines};

/// How long the service may take to print each awaited line.
const WAIT: Duration = Duration::from_secs(20);

const BIN: &str = env!("CARGO_BIN_EXE_service");

/// The service, running; killed when dropped.
struct Service {
    child: Child,
    output: OutputLines,
    /// Its log, shown when a test fails.
    log: OutputLines,
    base: String,
    client: reqwest::Client,
}

impl Service {
    fn start(args: &[&str]) -> Self {
        // A free port: bound, read, and let go for the service.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = Command::new(BIN)
            .args(["--listen", &listen])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the service starts");
        let output = OutputLines::read(child.stdout.take().expect("piped stdout"));
        let log = OutputLines::read(child.stderr.take().expect("piped stderr"));
        // Bounded, and straight to the service whatever proxy the environment names.
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .expect("an HTTP client");
        Self {
            child,
            output,
            log,
            base: format!("http://{listen}"),
            client,
        }
    }

    /// Waits until the service prints a line containing `needle` (after the last one
    /// waited for).
    fn wait_for(&mut self, needle: &str) {
        self.output.wait_for(needle, WAIT);
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// The status and body of `n` requests to `/order/{1..=n}`, one resource for all of
    /// them.
    async fn orders(&self, n: u64) -> Vec<(u16, String)> {
        let mut responses = Vec::new();
        for id in 1..=n {
            responses.push(self.get(&format!("/order/{id}")).await);
        }
        responses
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "the service's log:\n{}",
                self.log.rest(Duration::from_secs(1)).join("\n")
            );
        }
    }
}

/// Checks `n` requests made in a row against a limit of `limit` a second: Sentinel counts a
/// second in two 500 ms buckets, so a run spanning more buckets may pass more.
fn check_limited(responses: &[(u16, String)], limit: usize, took: Duration) {
    let passed = count(responses, 200);
    let blocked = count(responses, 429);
    assert_eq!(passed + blocked, responses.len(), "{responses:?}");
    let buckets = usize::try_from(took.as_millis() / 500).unwrap_or(usize::MAX);
    let most = limit.saturating_mul(buckets.saturating_add(2));
    assert!(
        (limit..=most).contains(&passed),
        "{passed} passed in {took:?} (limit {limit} a second): {responses:?}"
    );
    // The service's block handler answers with the block error, which names the resource.
    assert!(
        responses
            .iter()
            .filter(|(status, _)| *status == 429)
            .all(|(_, body)| body.contains("resource \"GET:/order/{id}\"")),
        "{responses:?}"
    );
}

/// The metric names the dashboard's queries read (`sentinel_...` in every `expr`).
fn dashboard_metrics(dashboard: &str) -> std::collections::BTreeSet<String> {
    let json: serde_json::Value = serde_json::from_str(dashboard).expect("the dashboard is JSON");
    let mut names = std::collections::BTreeSet::new();
    let mut stack = vec![&json];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(expr)) = map.get("expr") {
                    let mut rest = expr.as_str();
                    while let Some(at) = rest.find("sentinel_") {
                        let name: String = rest[at..]
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        rest = &rest[at + name.len()..];
                        names.insert(name);
                    }
                }
                stack.extend(map.values());
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    names
}

fn count(responses: &[(u16, String)], status: u16) -> usize {
    responses.iter().filter(|(s, _)| *s == status).count()
}

// Multi-threaded: a test thread blocked in `wait_for` leaves the HTTP client's tasks running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_limits_trips_exports_metrics_and_follows_its_rules_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rules = dir.path().join("service-rules.json");
    let rules_arg = rules.display().to_string();
    let mut service = Service::start(&["--rules", &rules_arg]);
    service.wait_for(">> rules applied (v1)");
    service.wait_for("listening on");

    // 5 a second for every id: 20 requests in a row.
    let start = Instant::now();
    let statuses = service.orders(20).await;
    check_limited(&statuses, 5, start.elapsed());

    // One call in two fails with a 500: the error-ratio breaker (40 %, 5 calls) opens.
    for _ in 0..10 {
        let (status, _) = service.get("/flaky").await;
        if status == 429 {
            break;
        }
    }
    service.wait_for(">> breaker on GET:/flaky: CLOSED -> OPEN");
    assert_eq!(service.get("/flaky").await.0, 429);

    // A broken payload is rejected (and counted); the rules in force stay.
    std::fs::write(&rules, "{ not json").expect("break the rules file");
    service.wait_for(">> rules REJECTED");

    let (status, metrics) = service.get("/metrics").await;
    assert_eq!(status, 200);
    for line in [
        r#"sentinel_pass_total{resource="GET:/order/{id}"}"#,
        r#"sentinel_block_total{resource="GET:/order/{id}",reason="flow",kind="qps"}"#,
        r#"sentinel_block_total{resource="GET:/flaky",reason="circuit_breaker",kind="error_ratio"}"#,
        r#"sentinel_error_total{resource="GET:/flaky"}"#,
        r#"sentinel_circuit_breaker_state{resource="GET:/flaky",grade="error_ratio"} 1"#,
        r#"sentinel_circuit_breaker_transitions_total{resource="GET:/flaky",grade="error_ratio",from="closed",to="open"} 1"#,
        r#"sentinel_concurrency{resource="GET:/order/{id}"} 0"#,
        r#"sentinel_rules_rejected_total{source="#,
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }
    // Every series the Grafana dashboard in docs/grafana queries is in the exporter's output.
    let dashboard = include_str!("../../docs/grafana/sentinel-dashboard.json");
    let queried = dashboard_metrics(dashboard);
    assert!(queried.len() >= 10, "{queried:?}");
    for name in &queried {
        let exported = metrics
            .lines()
            .any(|l| !l.starts_with('#') && l.split(['{', ' ']).next() == Some(name.as_str()));
        assert!(
            exported,
            "the dashboard queries {name}, which /metrics lacks:\n{metrics}"
        );
    }

    // The file changes while the service runs: the new limit applies without a restart.
    std::fs::write(
        &rules,
        r#"{"flow": [{"resource": "GET:/order/{id}", "count": 1000}]}"#,
    )
    .expect("edit the rules file");
    service.wait_for(">> rules applied (v2)");
    let statuses = service.orders(20).await;
    assert_eq!(count(&statuses, 200), 20, "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_follows_its_rules_in_etcd() {
    use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter};

    let endpoint = env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    let key = unique_key("/sentinel-test", "service");
    let config = EtcdConfig::builder()
        .endpoints([endpoint.as_str()])
        .build()
        .expect("an etcd config");
    let writer = EtcdRuleWriter::connect(config).await.unwrap_or_else(|e| {
        panic!("etcd at {endpoint}: {e}; start it with `scripts/services.sh start etcd-main`")
    });
    // The combined document the service reads.
    let rules = |count: u32| {
        format!(r#"{{"flow": [{{"resource": "GET:/order/{{id}}", "count": {count}}}]}}"#)
    };
    writer
        .put_bytes(key.as_str(), rules(2))
        .await
        .expect("put the rules");

    let mut service = Service::start(&["--etcd", &endpoint, "--key", &key]);
    service.wait_for(">> rules applied (v1)");
    service.wait_for("listening on");
    let start = Instant::now();
    let statuses = service.orders(12).await;
    check_limited(&statuses, 2, start.elapsed());

    writer
        .put_bytes(key.as_str(), rules(1000))
        .await
        .expect("put the new rules");
    service.wait_for(">> rules applied (v2)");
    let statuses = service.orders(12).await;
    assert_eq!(count(&statuses, 200), 12, "{statuses:?}");
}
