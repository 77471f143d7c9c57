//! The backend's metrics reach the `metrics` facade (a debugging recorder installed for this
//! test binary alone), against the shared Redis (`scripts/services.sh start redis-main`).

mod support;

use std::sync::Arc;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use sentinel_cluster_redis::{ClusterStatus, RedisClusterBackend, RedisClusterConfig, RedisTarget};
use sentinel_core::datasource::testkit::wait_until;
use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_core::Sentinel;
use support::{prefix, redis_addr, START_HINT};

type Entries = Vec<(
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// The value of a metric with a name and (for labelled ones) a `flow_id`, if recorded.
fn value<'a>(entries: &'a Entries, name: &str, flow_id: Option<&str>) -> Option<&'a DebugValue> {
    entries
        .iter()
        .find(|(key, _, _, _)| {
            let key = key.key();
            key.name() == name
                && flow_id.is_none_or(|id| {
                    key.labels()
                        .any(|l| l.key() == "flow_id" && l.value() == id)
                })
        })
        .map(|(_, _, _, value)| value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_report_calls_grants_replicas_and_call_times() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");

    let config = RedisClusterConfig::builder(RedisTarget::Server(redis_addr()))
        .prefix(prefix("metrics"))
        .build()
        .expect("valid settings");
    let backend = RedisClusterBackend::start(config).expect("a runtime");
    let sentinel = Sentinel::builder()
        .cluster_backend(Arc::new(backend.clone()))
        .build();
    wait_until(&format!("the backend is live ({START_HINT})"), || {
        backend.status() == ClusterStatus::Live
    })
    .await;
    sentinel
        .flow_rules()
        .load_rules(vec![
            FlowRule::qps("r", 1e6).cluster(ClusterFlowConfig::new(71).global(true))
        ])
        .expect("loads");
    let slot = backend.slot(71).expect("a slot");
    wait_until("a lease", || {
        let _ = sentinel.entry("r").enter();
        slot.tokens() > 0
    })
    .await;
    // The slot reports what the shared window has left, for consoles.
    assert!(
        slot.window_left().is_some_and(|left| left < 1_000_000),
        "{:?}",
        slot.window_left()
    );

    // A snapshot drains what it reads: take one per look, and note each metric as it shows
    // up.
    let mut seen = [false; 4];
    wait_until("every lease metric", || {
        let _ = sentinel.entry("r").enter();
        let entries: Entries = snapshotter.snapshot().into_vec();
        let checks = [
            matches!(
                value(&entries, "sentinel_cluster_tokens_granted_total", Some("71")),
                Some(DebugValue::Counter(n)) if *n > 0
            ),
            // The first call may count the replicas before its own heartbeat is in.
            matches!(
                value(&entries, "sentinel_cluster_live_replicas", Some("71")),
                Some(DebugValue::Gauge(n)) if n.into_inner() >= 1.0
            ),
            matches!(
                value(&entries, "sentinel_cluster_redis_calls_total", None),
                Some(DebugValue::Counter(n)) if *n > 0
            ),
            matches!(
                value(&entries, "sentinel_cluster_redis_call_seconds", None),
                Some(DebugValue::Histogram(samples)) if !samples.is_empty()
            ),
        ];
        for (seen, now) in seen.iter_mut().zip(checks) {
            *seen |= now;
        }
        seen.iter().all(|s| *s)
    })
    .await;
    backend.shutdown().await;
}
