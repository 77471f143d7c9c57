//! Java services with Sentinel 1.8.9's token client (`sentinel-cluster-client-default`, token
//! client mode, server set through `ClusterClientConfigManager`) against this crate's server
//! on a real Redis. Needs `scripts/services.sh start redis` and `interop/token-server/build.sh`.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::{
    java_classpath, require_java, require_redis, sum_seconds, unique_flow, unix_secs, write_rules,
    FailoverProxy, Java, ServerProcess, JAVA_BUILD_SCRIPT,
};

/// JVM start-up on a busy 2-core machine.
const READY: Duration = Duration::from_secs(60);

fn start_clients(
    classpath: &str,
    logs: &std::path::Path,
    addr: std::net::SocketAddr,
    flow_id: i64,
    limit: u64,
    clients: u64,
    seconds: u64,
) -> Vec<Java> {
    let mut jvms: Vec<Java> = (0..clients)
        .map(|i| {
            let args = [
                "host=127.0.0.1".to_owned(),
                format!("port={}", addr.port()),
                format!("flowId={flow_id}"),
                format!("count={limit}"),
                "thresholdType=1".to_owned(),
                // 3 x the limit in all.
                format!("rate={}", 3 * limit / clients),
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
    jvms
}

fn collect(jvms: &mut [Java], seconds: u64) -> BTreeMap<u64, (u64, u64, u64)> {
    let timeout = Duration::from_secs(seconds + 30);
    let series: Vec<_> = jvms.iter_mut().map(|j| j.seconds(timeout)).collect();
    let total = sum_seconds(&series);
    for (s, (p, b, f)) in &total {
        println!("second {s}: admitted {p}, blocked {b}, failed {f}");
    }
    total
}

/// 3 Java processes offer 3 x a global limit of 200/s through one token server: every
/// second admits within [0.95, 1.01] x the limit.
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
    let mut jvms = start_clients(&classpath, dir.path(), addr, flow_id, LIMIT, 3, SECONDS);
    let total = collect(&mut jvms, SECONDS);
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
    let mut jvms = start_clients(
        &classpath,
        dir.path(),
        proxy.addr,
        flow_id,
        LIMIT,
        2,
        SECONDS,
    );
    let begin = unix_secs() + 1;
    // Kill the first server part-way into the third second of the run.
    let kill_at = std::time::UNIX_EPOCH + Duration::from_millis((begin + 2) * 1000 + 400);
    if let Ok(wait) = kill_at.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    first.kill();
    let total = collect(&mut jvms, SECONDS);
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
