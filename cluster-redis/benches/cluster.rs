//! Cluster flow control's costs, against a running Redis (`SENTINEL_REDIS_ADDR`, default
//! 127.0.0.1:16379; `scripts/services.sh start redis-main`):
//! - entry + exit with one cluster rule in leased mode while a lease lasts, against the local
//!   QPS rule in the same run (criterion);
//! - Redis calls per second of one replica admitting 10 000 calls/s (printed);
//! - exact mode's p50 and p99 per call on loopback (printed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use sentinel_cluster_redis::{ClusterStatus, RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_core::Sentinel;
use sentinel_test_support::{env_or, unique_key, Latencies};

fn backend(runtime: &tokio::runtime::Runtime, exact: Option<i64>) -> RedisClusterBackend {
    let _guard = runtime.enter();
    let mut config = RedisClusterConfig::builder(RedisTarget::Server(env_or(
        "SENTINEL_REDIS_ADDR",
        "127.0.0.1:16379",
    )))
    .prefix(unique_key("sentinel:cluster:bench", "bench"));
    if let Some(flow) = exact {
        config = config.exact_flow(flow);
    }
    let config = config.build().expect("valid settings");
    let backend = RedisClusterBackend::start(config).expect("inside a runtime");
    let ready = Instant::now() + Duration::from_secs(10);
    while backend.status() != ClusterStatus::Live {
        assert!(
            Instant::now() < ready,
            "no Redis: start it with `scripts/services.sh start redis-main`"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    backend
}

fn cluster_rule(resource: &str, flow: i64, count: f64, window_ms: i32) -> FlowRule {
    FlowRule::qps(resource, count).cluster(
        ClusterFlowConfig::new(flow)
            .global(true)
            .window_interval_ms(window_ms),
    )
}

fn hot_path(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let backend = backend(runtime, None);
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![
            FlowRule::qps("local", 1e15),
            // The longest window the backend serves, so that the lease outlasts the run.
            cluster_rule("cluster", 901, 1e15, 60_000),
        ])
        .expect("valid rules");
    let slot = backend.slot(901).expect("registered");
    let mut group = c.benchmark_group("entry_exit");
    group.bench_function("local_qps_rule", |b| {
        b.iter(|| drop(std::hint::black_box(sentinel.entry("local").enter())))
    });
    group.bench_function("cluster_rule_leased", |b| {
        // While a lease lasts: the lease holds more than the run takes.
        slot.add_tokens(1 << 48);
        b.iter(|| drop(std::hint::black_box(sentinel.entry("cluster").enter())))
    });
    group.finish();
    runtime.block_on(backend.shutdown());
}

/// One replica admitting 10 000 calls/s (paced, limit far above it) for 3 s.
fn calls_per_second(runtime: &tokio::runtime::Runtime) {
    let backend = backend(runtime, None);
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![cluster_rule("paced", 902, 1e7, 1000)])
        .expect("valid rule");
    // One second to settle the lease size, then three measured.
    let rate = 10_000.0;
    let mut admitted = 0u64;
    let mut measured = (0u64, 0u64);
    let start = Instant::now();
    let mut issued = 0u64;
    while start.elapsed() < Duration::from_secs(4) {
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        while issued < due {
            issued += 1;
            if sentinel.entry("paced").enter().is_ok() {
                admitted += 1;
            }
        }
        if measured == (0, 0) && start.elapsed() >= Duration::from_secs(1) {
            measured = (backend.stats().redis_calls, admitted);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let calls = backend.stats().redis_calls - measured.0;
    let ok = admitted - measured.1;
    println!(
        "leased mode at 10 000 calls/s offered: {:.0} admitted/s, {:.1} Redis calls/s per replica",
        ok as f64 / 3.0,
        calls as f64 / 3.0
    );
    runtime.block_on(backend.shutdown());
}

fn exact_latency(runtime: &tokio::runtime::Runtime) {
    let backend = backend(runtime, Some(903));
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![cluster_rule("exact", 903, 1e9, 1000)])
        .expect("valid rule");
    let slot = backend.slot(903).expect("registered");
    let mut latencies = Latencies::with_capacity(5_000);
    runtime.block_on(async {
        for i in 0..5_500 {
            let t = Instant::now();
            let _ = backend.acquire_exact(&slot, 1).await;
            if i >= 500 {
                latencies.record(t.elapsed());
            }
            drop(sentinel.entry("exact").enter());
        }
    });
    println!(
        "exact mode, one call at a time on loopback: p50 {:?}, p99 {:?}",
        latencies.percentile(50.0),
        latencies.percentile(99.0)
    );
    runtime.block_on(backend.shutdown());
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut c = Criterion::default().configure_from_args();
    hot_path(&mut c, &runtime);
    calls_per_second(&runtime);
    exact_latency(&runtime);
    c.final_summary();
}
