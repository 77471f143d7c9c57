//! Decisions on the Redis budget (`sentinel-cluster-redis`): Sentinel's answers for bad and
//! unknown requests, rules that follow a data source, and one budget shared with a Rust
//! replica. Needs `scripts/services.sh start redis`.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::flow::{ClusterFlowConfig, FlowGrade, FlowRule};
use sentinel_core::Sentinel;
use sentinel_datasource_file::FileSource;
use sentinel_token_server::protocol::{ParamValue, Status};
use sentinel_token_server::{Health, RedisTokenService, TokenServer, TokenService};
use support::{require_redis, unique_flow, write_rules, Client, ServerProcess, WAIT};

fn backend(redis: &str, prefix: &str, replica: &str) -> RedisClusterBackend {
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis.to_owned()))
        .prefix(prefix)
        .replica_id(replica)
        .build()
        .expect("config");
    RedisClusterBackend::start(config).expect("inside a runtime")
}

/// A service on its own backend replica, following the cluster rules of a fresh engine.
fn followed(redis: &str, prefix: &str, replica: &str) -> (Arc<RedisTokenService>, Sentinel) {
    let service = Arc::new(RedisTokenService::new(backend(redis, prefix, replica)));
    let rules = Sentinel::builder().build();
    service.follow(&rules);
    (service, rules)
}

/// The binary's `GET /health` once it answers 200 (decisions from Redis), within the bound.
async fn healthy(server: &mut ServerProcess) -> String {
    server.out.wait_for("health on", WAIT);
    let health: std::net::SocketAddr = server
        .out
        .seen()
        .iter()
        .find_map(|l| l.strip_prefix("health on "))
        .expect("the health line")
        .parse()
        .expect("an address");
    let mut up = String::new();
    tokio::time::timeout(WAIT, async {
        while !up.starts_with("HTTP/1.1 200") {
            up = support::http_get(health, "/health").await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("healthy once Redis answers, last: {up}"));
    up
}

/// Asks `flow_id` for a token until the answer is `want` (at most [`WAIT`]); the last answer.
async fn flow_until(client: &mut Client, flow_id: i64, want: Status) -> Status {
    let mut last = client.flow(flow_id, 1).await.status;
    let _ = tokio::time::timeout(WAIT, async {
        while last != want {
            tokio::time::sleep(Duration::from_millis(20)).await;
            last = client.flow(flow_id, 1).await.status;
        }
    })
    .await;
    last
}

fn cluster_rule(resource: &str, flow_id: i64, count: f64) -> FlowRule {
    FlowRule::qps(resource, count).cluster(ClusterFlowConfig::new(flow_id).global(true))
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    tokio::time::timeout(WAIT, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} within {WAIT:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_as_sentinels_server_answers_them() {
    let redis = require_redis().await;
    let (flow_id, prefix) = unique_flow("answers");
    let (service, rules) = followed(&redis, &prefix, "ts-answers");
    let mut thread_rule = cluster_rule("threads", flow_id + 1, 5.0);
    thread_rule.grade = FlowGrade::Thread;
    let per_client = FlowRule::qps("avg", 5.0).cluster(ClusterFlowConfig::new(flow_id + 2));
    rules
        .flow_rules()
        .load_rules(vec![
            cluster_rule("res", flow_id, 1000.0),
            thread_rule,
            per_client,
        ])
        .expect("rules load");
    until("the backend is live", || service.health() == Health::Up).await;
    // Not positive: BAD_REQUEST (DefaultTokenService.notValidRequest).
    assert_eq!(
        service.request_token(0, 1, false).status,
        Status::BAD_REQUEST
    );
    assert_eq!(
        service.request_token(flow_id, 0, false).status,
        Status::BAD_REQUEST
    );
    // No rule with this flowId, and a thread-grade rule (no request for it in 1.8.9).
    assert_eq!(
        service.request_token(flow_id + 100, 1, false).status,
        Status::NO_RULE_EXISTS
    );
    assert_eq!(
        service.request_token(flow_id + 1, 1, false).status,
        Status::NO_RULE_EXISTS
    );
    // thresholdType 0 (average per client) is not served either.
    assert_eq!(
        service.request_token(flow_id + 2, 1, false).status,
        Status::NO_RULE_EXISTS
    );
    // Param-flow: BAD_REQUEST without parameters, else no rule served.
    assert_eq!(
        service.request_param_token(flow_id, 1, &[]).status,
        Status::BAD_REQUEST
    );
    assert_eq!(
        service
            .request_param_token(flow_id, 1, &[ParamValue::Int(1)])
            .status,
        Status::NO_RULE_EXISTS
    );
    // The rule decides (the first lease takes one tick: retried within the bound).
    let mut ok = service.request_token(flow_id, 1, false);
    until("a token granted", || {
        ok = service.request_token(flow_id, 1, false);
        ok.status == Status::OK
    })
    .await;
    assert_eq!(ok.wait_in_ms, 0);
    service.backend().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_rules_follow_a_file_data_source() {
    let redis = require_redis().await;
    let (flow_id, prefix) = unique_flow("follow");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.json");
    let rule_json = |id: i64| {
        format!(
            r#"[{{"resource":"r","count":1000,"clusterMode":true,"clusterConfig":{{"flowId":{id},"thresholdType":1}}}}]"#
        )
    };
    std::fs::write(&path, rule_json(flow_id)).expect("write");
    let (service, rules) = followed(&redis, &prefix, "ts-follow");
    let source = DataSource::builder(FileSource::new(&path).expect("source"), FlowJson::new())
        .without_snapshot()
        .start(&rules)
        .await
        .expect("source starts");
    let server = TokenServer::builder()
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .start(service.clone())
        .await
        .expect("server");
    let mut client = Client::connect(server.local_addr()).await;
    let status = flow_until(&mut client, flow_id, Status::OK).await;
    assert_eq!(status, Status::OK, "the file's rule is served");
    std::fs::write(&path, rule_json(flow_id + 1)).expect("rewrite");
    let old = flow_until(&mut client, flow_id, Status::NO_RULE_EXISTS).await;
    assert_eq!(
        old,
        Status::NO_RULE_EXISTS,
        "the replaced rule is no longer served"
    );
    server.shutdown().await;
    source.close().await;
    service.backend().shutdown().await;
}

/// A token server (serving a Java-style client over the protocol) and a Rust replica using
/// `sentinel-cluster-redis` directly, on one `flowId` with a global limit of 100/s, each
/// offering 150/s: together they admit at most the limit in every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_server_and_a_rust_replica_share_one_budget() {
    const LIMIT: f64 = 100.0;
    let redis = require_redis().await;
    let (flow_id, prefix) = unique_flow("shared");
    let service = Arc::new(RedisTokenService::new(backend(
        &redis,
        &prefix,
        "ts-shared",
    )));
    let server_rules = Sentinel::builder().build();
    service.follow(&server_rules);
    server_rules
        .flow_rules()
        .load_rules(vec![cluster_rule("r", flow_id, LIMIT)])
        .expect("rules");
    let server = TokenServer::builder()
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .start(service.clone())
        .await
        .expect("server");
    let replica_backend = backend(&redis, &prefix, "rust-replica");
    let replica = Sentinel::builder()
        .cluster_backend(Arc::new(replica_backend.clone()))
        .build();
    replica
        .flow_rules()
        .load_rules(vec![cluster_rule("r", flow_id, LIMIT)])
        .expect("rules");

    // Counts per Unix second, for 4 whole seconds after a warm-up second.
    let first = support::unix_secs() + 2;
    let counts: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let record = move |counts: &Arc<Vec<AtomicU64>>| {
        let s = support::unix_secs();
        if let Some(slot) = s.checked_sub(first).and_then(|i| counts.get(i as usize)) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    };
    let end = first + 4;
    let java_like = {
        let counts = counts.clone();
        let addr = server.local_addr();
        tokio::spawn(async move {
            let mut client = Client::connect(addr).await;
            let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / 150));
            while support::unix_secs() < end {
                tick.tick().await;
                if client.flow(flow_id, 1).await.status == Status::OK {
                    record(&counts);
                }
            }
        })
    };
    let rust = {
        let counts = counts.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / 150));
            while support::unix_secs() < end {
                tick.tick().await;
                if replica.entry("r").enter().is_ok() {
                    record(&counts);
                }
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(20), async {
        java_like.await.expect("token client task");
        rust.await.expect("replica task");
    })
    .await
    .expect("the run ends");
    for (i, c) in counts.iter().enumerate() {
        let admitted = c.load(Ordering::Relaxed);
        println!(
            "second {}: admitted {admitted} (limit {LIMIT})",
            first + i as u64
        );
        assert!(
            admitted as f64 <= LIMIT * 1.01,
            "second {}: {admitted} admitted over the shared limit {LIMIT}",
            first + i as u64
        );
    }
    // The budget is used, not only never exceeded: over the run, together they admit at least
    // half of it. (Not per second: on a starved 2-core machine a second can fall to 78 of 100,
    // which says nothing about sharing; the accuracy of a quiet run, 100 every second, is in
    // docs/token-server.md.)
    let total: u64 = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert!(
        total as f64 >= LIMIT * 4.0 * 0.5,
        "only {total} admitted in 4 s of a shared {LIMIT}/s"
    );
    server.shutdown().await;
    service.backend().shutdown().await;
    replica_backend.shutdown().await;
}

/// The binary: its health endpoint says UP once Redis answers, and SIGTERM stops it
/// gracefully (exit status 0, the connected client closed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reports_health_and_stops_gracefully_on_sigterm() {
    let redis = require_redis().await;
    let (flow_id, prefix) = unique_flow("binary");
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), flow_id, 100);
    let mut server = ServerProcess::start_with(
        &redis,
        &prefix,
        &rules,
        &["--health", "127.0.0.1:0", "--command-port", "0"],
    );
    let up = healthy(&mut server).await;
    assert!(up.contains(r#""status":"UP""#), "{up}");
    // The dashboard's command center: a token server (mode 1) on its port.
    server.out.wait_for("commands on", WAIT);
    let commands: std::net::SocketAddr = server
        .out
        .seen()
        .iter()
        .find_map(|l| l.strip_prefix("commands on "))
        .expect("the commands line")
        .parse()
        .expect("an address");
    let mode = support::http_get(commands, "/getClusterMode").await;
    assert!(mode.contains(r#""mode":1"#), "{mode}");
    let info = support::http_get(commands, "/cluster/server/info").await;
    assert!(
        info.contains(&format!(r#""port":{}"#, server.addr.port())),
        "{info}"
    );
    let mut client = Client::connect(server.addr).await;
    assert_ne!(client.flow(flow_id, 1).await.status, Status::NO_RULE_EXISTS);
    let pid = server.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
    let status = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(status) = server.child.try_wait().expect("wait") {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("stops within the bound");
    assert!(status.success(), "exit status {status}");
    assert_eq!(
        client.recv().await,
        None,
        "the client's connection is closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_flows_show_their_last_second_s_decisions() {
    let redis = require_redis().await;
    let (flow_id, prefix) = unique_flow("served");
    let (service, rules) = followed(&redis, &prefix, "ts-served");
    rules
        .flow_rules()
        .load_rules(vec![
            cluster_rule("served-res", flow_id, 3.0),
            FlowRule::qps("local-only", 5.0),
        ])
        .expect("rules load");
    let served = service.served_flows();
    assert_eq!(served.len(), 1, "only the cluster rule: {served:?}");
    assert_eq!(
        (served[0].flow_id, served[0].rule.resource.as_str()),
        (flow_id, "served-res")
    );
    until("the backend is live", || service.health() == Health::Up).await;
    // Offered ~50/s against 3/s until a whole second shows both passes and blocks.
    let mut seen = (0, 0);
    tokio::time::timeout(WAIT, async {
        loop {
            service.request_token(flow_id, 1, false);
            let flow = service.served_flows().remove(0);
            seen = (flow.pass_qps, flow.block_qps);
            if seen.0 > 0 && seen.1 > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("a second with passes and blocks within {WAIT:?}: {seen:?}"));
    // A second of the server's clock overlaps at most two of Redis's windows.
    assert!(seen.0 <= 6, "{seen:?}");
    service.backend().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_keeps_the_budget_in_a_redis_cluster_or_behind_redis_sentinel() {
    use sentinel_test_support::addresses::redis::{cluster_addrs, master_name, sentinel_addrs};
    let (sentinels, master, cluster) = (sentinel_addrs(), master_name(), cluster_addrs());
    let targets: [(&str, Vec<&str>); 2] = [
        ("cluster", vec!["--redis-cluster", cluster.as_str()]),
        (
            "sentinel",
            vec![
                "--redis-sentinel",
                sentinels.as_str(),
                "--redis-master",
                master.as_str(),
            ],
        ),
    ];
    for (name, target) in targets {
        let (flow_id, prefix) = unique_flow(name);
        let dir = tempfile::tempdir().expect("tempdir");
        let rules = write_rules(dir.path(), flow_id, 1000);
        let mut server =
            ServerProcess::start_on(&target, &prefix, &rules, &["--health", "127.0.0.1:0"]);
        let up = healthy(&mut server).await;
        assert!(up.contains(r#""status":"UP""#), "{name}: {up}");
        let mut client = Client::connect(server.addr).await;
        // Granted from the store's budget (the first lease takes a tick: retried).
        let last = flow_until(&mut client, flow_id, Status::OK).await;
        assert_eq!(
            last,
            Status::OK,
            "{name} ({target:?}): no token granted within {WAIT:?}; {}",
            support::START_HINT
        );
    }
}
