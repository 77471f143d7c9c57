//! Java services with Sentinel 1.8.9's token client (`sentinel-cluster-client-default`, token
//! client mode, server set through `ClusterClientConfigManager`) against this crate's server
//! on a real Redis. Needs `scripts/services.sh start redis` and `interop/token-server/build.sh`.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use sentinel_test_support::FailoverProxy;

use support::{
    java_classpath, require_java, require_redis, sum_seconds, unique_flow, unix_secs, write_rules,
    Java, ServerProcess, JAVA_BUILD_SCRIPT,
};

/// JVM start-up on a busy 2-core machine.
const READY: Duration = Duration::from_secs(60);

/// Starts `clients` harness JVMs offering `rate` calls/s each, and returns them once all are
/// ready, with the Unix second their run starts.
#[allow(clippy::too_many_arguments)]
fn start_clients(
    classpath: &str,
    logs: &std::path::Path,
    addr: std::net::SocketAddr,
    flow_id: i64,
    limit: u64,
    clients: u64,
    rate: u64,
    seconds: u64,
) -> (Vec<Java>, u64) {
    let mut jvms: Vec<Java> = (0..clients)
        .map(|i| {
            let args = [
                "host=127.0.0.1".to_owned(),
                format!("port={}", addr.port()),
                format!("flowId={flow_id}"),
                format!("count={limit}"),
                "thresholdType=1".to_owned(),
                format!("rate={rate}"),
                format!("seconds={seconds}"),
                "threads=4".to_owned(),
                "mode=token".to_owned(),
                "timeoutMs=500".to_owned(),
            ];
            Java::start(
                classpath,
                "tokenserver.TokenClientLoad",
                &format!("svc-{i}"),
                &args,
                logs,
            )
        })
        .collect();
    for jvm in &mut jvms {
        jvm.out.wait_for("ready", READY);
    }
    let start = unix_secs() + 1;
    for jvm in &mut jvms {
        jvm.go(start);
    }
    (jvms, start)
}

/// A Rust replica on `sentinel-cluster-redis` (same Redis, prefix and flowId) offering `rate`
/// calls/s from Unix second `start` for `seconds`: what it admitted per second.
async fn rust_replica(
    redis: &str,
    prefix: &str,
    flow_id: i64,
    limit: u64,
    rate: u64,
    start: u64,
    seconds: u64,
) -> BTreeMap<u64, (u64, u64, u64)> {
    use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
    use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis.to_owned()))
        .prefix(prefix)
        .build()
        .expect("config");
    let backend = RedisClusterBackend::start(config).expect("in a runtime");
    let replica = sentinel_core::Sentinel::builder()
        .cluster_backend(std::sync::Arc::new(backend.clone()))
        .build();
    replica
        .flow_rules()
        .load_rules(vec![FlowRule::qps("token-server-interop", limit as f64)
            .cluster(ClusterFlowConfig::new(flow_id).global(true))])
        .expect("rules");
    let mut series = BTreeMap::new();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    while unix_secs() < start {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    loop {
        tick.tick().await;
        let now = unix_secs();
        if now >= start + seconds {
            break;
        }
        let e: &mut (u64, u64, u64) = series.entry(now).or_default();
        match replica.entry("token-server-interop").enter() {
            Ok(_) => e.0 += 1,
            Err(_) => e.1 += 1,
        }
    }
    backend.shutdown().await;
    series
}

fn collect(
    jvms: &mut [Java],
    seconds: u64,
    more: Vec<BTreeMap<u64, (u64, u64, u64)>>,
) -> BTreeMap<u64, (u64, u64, u64)> {
    let timeout = Duration::from_secs(seconds + 30);
    let mut series: Vec<_> = jvms.iter_mut().map(|j| j.seconds(timeout)).collect();
    series.extend(more);
    let total = sum_seconds(&series);
    for (s, (p, b, f)) in &total {
        println!("second {s}: admitted {p}, blocked {b}, failed {f}");
    }
    total
}

/// 3 Java processes (through one token server) and a Rust replica (on
/// `sentinel-cluster-redis` directly) offer together 3 x a global limit of 200/s on one
/// `flowId`: every second admits within [0.95, 1.01] x the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_token_clients_share_one_global_limit() {
    let redis = require_redis().await;
    let classpath = require_java();
    let dir = tempfile::tempdir().expect("tempdir");
    let (flow_id, prefix) = unique_flow("java-accuracy");
    const LIMIT: u64 = 200;
    const SECONDS: u64 = 5;
    let rules = write_rules(dir.path(), flow_id, LIMIT);
    let _server = ServerProcess::start(&redis, &prefix, &rules);
    let addr = _server.addr;
    // 150/s from each of the four.
    let rate = 3 * LIMIT / 4;
    let (mut jvms, start) = start_clients(
        &classpath,
        dir.path(),
        addr,
        flow_id,
        LIMIT,
        3,
        rate,
        SECONDS,
    );
    let rust = rust_replica(&redis, &prefix, flow_id, LIMIT, rate, start, SECONDS).await;
    println!(
        "the Rust replica admitted {:?}",
        rust.values().map(|v| v.0).collect::<Vec<_>>()
    );
    let total = collect(&mut jvms, SECONDS, vec![rust]);
    assert_eq!(total.len() as u64, SECONDS, "every second reported");
    for (s, (admitted, _, _)) in &total {
        let ratio = *admitted as f64 / LIMIT as f64;
        assert!(
            (0.95..=1.01).contains(&ratio),
            "second {s}: admitted {admitted} of {LIMIT} ({ratio:.3} x)"
        );
    }
}

/// Two token servers behind one address (a TCP proxy that connects to the first that
/// accepts); the one the clients use is killed (SIGKILL) mid-run. The clients reconnect
/// (Sentinel's client waits 2 s) to the other and get decisions again, and no second admits
/// over the limit: the killed server's lease is lost, never granted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_clients_fail_over_to_another_server_without_going_over_the_limit() {
    let redis = require_redis().await;
    let classpath = require_java();
    let dir = tempfile::tempdir().expect("tempdir");
    let (flow_id, prefix) = unique_flow("java-failover");
    const LIMIT: u64 = 200;
    const SECONDS: u64 = 8;
    let rules = write_rules(dir.path(), flow_id, LIMIT);
    let mut first = ServerProcess::start(&redis, &prefix, &rules);
    let second = ServerProcess::start(&redis, &prefix, &rules);
    let proxy = FailoverProxy::start(vec![first.addr, second.addr]).await;
    let (mut jvms, begin) = start_clients(
        &classpath,
        dir.path(),
        proxy.addr(),
        flow_id,
        LIMIT,
        2,
        3 * LIMIT / 2,
        SECONDS,
    );
    // Kill the first server part-way into the third second of the run.
    let kill_at = std::time::UNIX_EPOCH + Duration::from_millis((begin + 2) * 1000 + 400);
    if let Ok(wait) = kill_at.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    first.kill();
    let total = collect(&mut jvms, SECONDS, Vec::new());
    for (s, (admitted, _, _)) in &total {
        assert!(
            *admitted as f64 <= LIMIT as f64 * 1.01,
            "second {s}: admitted {admitted}, over the limit {LIMIT}"
        );
    }
    // The last two seconds: reconnected to the second server, deciding at the limit.
    let tail: Vec<u64> = total.values().rev().take(2).map(|(p, _, _)| *p).collect();
    for admitted in tail {
        assert!(
            admitted as f64 >= LIMIT as f64 * 0.9,
            "after the fail-over the clients get decisions again: admitted {admitted} of {LIMIT}"
        );
    }
    drop(second);
}

#[test]
fn a_missing_java_harness_fails_naming_the_script_that_builds_it() {
    let empty = tempfile::tempdir().expect("tempdir");
    let error = java_classpath(empty.path()).expect_err("nothing built there");
    assert!(error.contains(JAVA_BUILD_SCRIPT), "{error}");
}
