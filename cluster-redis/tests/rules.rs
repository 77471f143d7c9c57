//! The backend inside one process, against the shared Redis (`scripts/services.sh start
//! redis-main`): a reload keeps an unchanged rule's lease, a changed `flowId` starts fresh,
//! bad cluster settings are refused with index and field, and the backend reports its status.

mod support;

use std::sync::Arc;

use sentinel_cluster_redis::{
    ClusterError, ClusterStatus, RedisClusterBackend, RedisClusterConfig, RedisTarget,
};
use sentinel_core::cluster::ClusterDecision;
use sentinel_core::datasource::testkit::wait_until;
use sentinel_core::flow::{ClusterFlowConfig, ControlBehavior, FlowRule};
use sentinel_core::{RuleError, Sentinel};
use support::{prefix, redis_addr, START_HINT};

fn backend(test: &str) -> RedisClusterBackend {
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis_addr()))
        .prefix(prefix(test))
        .build()
        .expect("valid settings");
    RedisClusterBackend::start(config).expect("a runtime")
}

async fn live(backend: &RedisClusterBackend) {
    wait_until(&format!("the backend is live ({START_HINT})"), || {
        backend.status() == ClusterStatus::Live
    })
    .await;
}

fn rule(flow: i64, count: f64) -> FlowRule {
    FlowRule::qps("r", count).cluster(ClusterFlowConfig::new(flow).global(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_an_unchanged_rules_lease_and_a_new_flow_id_starts_fresh() {
    let backend = backend("reload");
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    live(&backend).await;
    sentinel
        .flow_rules()
        .load_rules(vec![rule(11, 1e6)])
        .expect("loads");
    let slot = backend.slot(11).expect("a slot");
    // Demand makes the backend lease.
    wait_until("a lease", || {
        let _ = sentinel.entry("r").enter();
        slot.tokens() > 0
    })
    .await;
    sentinel
        .flow_rules()
        .load_rules(vec![rule(11, 1e6), FlowRule::qps("other", 5.0)])
        .expect("loads");
    assert!(
        Arc::ptr_eq(&slot, &backend.slot(11).expect("still registered")),
        "an unchanged rule keeps its slot and its lease"
    );
    sentinel
        .flow_rules()
        .load_rules(vec![rule(12, 1e6)])
        .expect("loads");
    assert!(backend.slot(11).is_none(), "the old flow is released");
    let fresh = backend.slot(12).expect("a new slot");
    assert!(!Arc::ptr_eq(&slot, &fresh));
    // The old flow's remainder is given back by the background task.
    wait_until("the remainder is given back", || {
        backend.stats().given_back > 0
    })
    .await;
    backend.shutdown().await;
    assert_eq!(backend.status(), ClusterStatus::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cluster_settings_are_refused_with_index_and_field() {
    let backend = backend("validation");
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    let short = FlowRule::qps("a", 10.0).cluster(
        ClusterFlowConfig::new(1)
            .global(true)
            .window_interval_ms(50),
    );
    let shaped = rule(2, 10.0).control_behavior(ControlBehavior::WarmUp);
    let mut unknown = rule(3, 10.0);
    if let Some(c) = unknown.cluster_config.as_mut() {
        c.threshold_type = 5;
    }
    let error = sentinel
        .flow_rules()
        .load_rules(vec![rule(4, 1.0), short, shaped])
        .expect_err("refused");
    let RuleError::Invalid { issues, .. } = error else {
        panic!("not an invalid-rules error: {error:?}");
    };
    let found: Vec<(usize, &str)> = issues.iter().map(|i| (i.index, i.field.as_str())).collect();
    assert_eq!(
        found,
        vec![
            (1, "clusterConfig.windowIntervalMs"),
            (2, "controlBehavior")
        ],
        "{issues:?}"
    );
    let error = sentinel
        .flow_rules()
        .load_rules(vec![unknown])
        .expect_err("refused");
    assert!(
        error.to_string().contains("clusterConfig.thresholdType"),
        "{error}"
    );
    let mut no_flow_id = rule(5, 10.0);
    if let Some(c) = no_flow_id.cluster_config.as_mut() {
        c.flow_id = None;
    }
    let error = sentinel
        .flow_rules()
        .load_rules(vec![no_flow_id])
        .expect_err("refused");
    assert!(
        error.to_string().contains("clusterConfig.flowId"),
        "{error}"
    );
    backend.shutdown().await;
}

#[test]
fn the_backend_needs_a_runtime_and_sane_settings() {
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis_addr()))
        .build()
        .expect("valid settings");
    assert!(matches!(
        RedisClusterBackend::start(config),
        Err(ClusterError::NoRuntime)
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = runtime.enter();
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis_addr()))
        .call_timeout(std::time::Duration::ZERO)
        .build();
    assert!(matches!(
        config,
        Err(ClusterError::Config {
            field: "call_timeout",
            ..
        })
    ));
}

/// A partition between the backend and Redis: the engine's listeners hear
/// `ClusterDegraded`, then `ClusterResumed` once Redis is reachable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_hear_when_cluster_checks_degrade_and_resume() {
    use sentinel_core::SentinelEvent;
    use sentinel_test_support::Partition;
    use std::sync::Mutex;

    let partition = Partition::start(&redis_addr()).await;
    let config = RedisClusterConfig::builder(RedisTarget::Server(partition.addr().to_owned()))
        .prefix(prefix("events"))
        .replica_id("events-test")
        .build()
        .expect("valid settings");
    let backend = RedisClusterBackend::start(config).expect("a runtime");
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    let heard: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = heard.clone();
    sentinel.add_listener(move |event: &SentinelEvent| {
        let name = match event {
            SentinelEvent::ClusterDegraded { backend, .. } => format!("degraded {backend}"),
            SentinelEvent::ClusterResumed { backend } => format!("resumed {backend}"),
            _ => return,
        };
        if let Ok(mut heard) = record.lock() {
            heard.push(name);
        }
    });
    sentinel
        .flow_rules()
        .load_rules(vec![rule(91, 1_000.0)])
        .expect("valid rules");
    live(&backend).await;
    partition.cut();
    let calls = || {
        for _ in 0..50 {
            drop(sentinel.entry("r").enter());
        }
    };
    let said = |what: &str| {
        heard
            .lock()
            .map(|h| h.iter().any(|e| e.starts_with(what)))
            .unwrap_or(false)
    };
    wait_until("a ClusterDegraded event", || {
        calls();
        said("degraded")
    })
    .await;
    partition.heal();
    wait_until(&format!("a ClusterResumed event ({START_HINT})"), || {
        calls();
        said("resumed")
    })
    .await;
    let heard = heard.lock().map(|h| h.clone()).unwrap_or_default();
    assert_eq!(heard[0], "degraded redis replica events-test", "{heard:?}");
    backend.shutdown().await;
}

/// The runtime that ran the backend shut down while the engine still uses it: the status
/// says so and the rules fall back (the engine's local check), where nothing would ever
/// fetch a lease again.
#[test]
fn a_backend_whose_runtime_shut_down_says_so_and_falls_back() {
    let runtime = one_worker_runtime();
    let config = RedisClusterConfig::builder(RedisTarget::Server("127.0.0.1:1".into()))
        .prefix(prefix("runtime-gone"))
        .build()
        .expect("valid settings");
    let backend = RedisClusterBackend::start_on(config, runtime.handle());
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![rule(21, 100.0)])
        .expect("loads");
    drop(runtime);
    assert!(
        matches!(backend.status(), ClusterStatus::Degraded { .. }),
        "{:?}",
        backend.status()
    );
    let passed = (0..10)
        .filter(|_| sentinel.entry("r").enter().is_ok())
        .count();
    assert_eq!(passed, 10, "the local fallback (100/s) admits them");
}

/// Exact mode from synchronous code: `acquire_exact_blocking` on a runtime that runs
/// elsewhere, within its time budget, then `enter()`.
#[test]
fn exact_mode_has_a_synchronous_entry_point() {
    let runtime = one_worker_runtime();
    let config = RedisClusterConfig::builder(RedisTarget::Server(redis_addr()))
        .prefix(prefix("exact-blocking"))
        .exact_flow(22)
        // A generous budget: the shared 2-core machine may be busy.
        .call_timeout(std::time::Duration::from_millis(200))
        .build()
        .expect("valid settings");
    let backend = RedisClusterBackend::start_on(config, runtime.handle());
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    runtime.block_on(live(&backend));
    // A limit of 3 in a 60 s window: a window boundary cannot fall inside the test.
    let rule = FlowRule::qps("r", 0.05).cluster(
        ClusterFlowConfig::new(22)
            .global(true)
            .window_interval_ms(60_000),
    );
    sentinel.flow_rules().load_rules(vec![rule]).expect("loads");
    let slot = backend.slot(22).expect("a slot");
    let mut decisions = Vec::new();
    for _ in 0..4 {
        let started = std::time::Instant::now();
        let decision = backend.acquire_exact_blocking(&slot, 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        if decision == ClusterDecision::Pass {
            assert!(
                sentinel.entry("r").enter().is_ok(),
                "the granted token passes"
            );
        }
        decisions.push(decision);
    }
    assert_eq!(
        decisions,
        [
            ClusterDecision::Pass,
            ClusterDecision::Pass,
            ClusterDecision::Pass,
            ClusterDecision::Block
        ],
        "{START_HINT}"
    );
    runtime.block_on(backend.shutdown());
}

/// A runtime of one worker thread, beside the test's own thread.
fn one_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}
