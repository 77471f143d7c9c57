//! The `metrics` feature counts pass, block and error per resource through the facade.
#![cfg(feature = "metrics")]

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use sentinel_core::flow::FlowRule;
use sentinel_core::{FakeClock, Sentinel};

fn counter(
    snapshot: &[(
        CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    name: &str,
    resource: &str,
) -> u64 {
    snapshot
        .iter()
        .find(|(key, _, _, _)| {
            key.kind() == MetricKind::Counter
                && key.key().name() == name
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "resource" && l.value() == resource)
        })
        .map_or(0, |(_, _, _, value)| match value {
            DebugValue::Counter(n) => *n,
            _ => 0,
        })
}

#[test]
fn pass_block_and_error_are_counted_per_resource() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let sentinel = Sentinel::builder().clock(FakeClock::at_ms(10_000)).build();
        sentinel
            .flow_rules()
            .load_rules(vec![FlowRule::qps("r", 2.0)])
            .expect("valid");
        let mut first = sentinel.entry("r").enter().expect("pass");
        first.set_error();
        drop(first);
        drop(sentinel.entry("r").enter().expect("pass"));
        assert!(sentinel.entry("r").enter().is_err());
        drop(sentinel.entry("other").enter());
    });
    let snapshot = snapshotter.snapshot().into_vec();
    assert_eq!(counter(&snapshot, "sentinel_pass_total", "r"), 2);
    assert_eq!(counter(&snapshot, "sentinel_block_total", "r"), 1);
    assert_eq!(counter(&snapshot, "sentinel_error_total", "r"), 1);
    assert_eq!(counter(&snapshot, "sentinel_pass_total", "other"), 1);
}

/// A shadow rule's would-blocks go to `sentinel_shadow_block_total`, with the labels of
/// `sentinel_block_total`, and are no blocks.
#[test]
fn shadow_would_blocks_are_counted_with_the_block_labels() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let sentinel = Sentinel::builder().clock(FakeClock::at_ms(10_000)).build();
        let shadow = sentinel_core::RuleSet::new().with_flow(vec![FlowRule::qps("r", 2.0)]);
        sentinel.load_shadow_rules(shadow).expect("valid");
        for _ in 0..5 {
            drop(
                sentinel
                    .entry("r")
                    .enter()
                    .expect("a shadow rule never blocks"),
            );
        }
    });
    let snapshot = snapshotter.snapshot().into_vec();
    assert_eq!(counter(&snapshot, "sentinel_shadow_block_total", "r"), 3);
    assert_eq!(counter(&snapshot, "sentinel_block_total", "r"), 0);
    assert_eq!(counter(&snapshot, "sentinel_pass_total", "r"), 5);
    let labels: Vec<(String, String)> = snapshot
        .iter()
        .find(|(key, _, _, _)| key.key().name() == "sentinel_shadow_block_total")
        .map(|(key, _, _, _)| {
            key.key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let want = [("resource", "r"), ("reason", "flow"), ("kind", "qps")];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(labels, want);
}

type Snapshot = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// The value of the series `name` whose labels include every `(key, value)` of `labels`.
fn series<'a>(
    snapshot: &'a Snapshot,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a DebugValue> {
    snapshot
        .iter()
        .find(|(key, _, _, _)| {
            key.key().name() == name
                && labels
                    .iter()
                    .all(|(k, v)| key.key().labels().any(|l| l.key() == *k && l.value() == *v))
        })
        .map(|(_, _, _, value)| value)
}

/// A cluster QPS rule of 0 that falls back to a local check (no backend is installed).
fn cluster_rule(resource: &str) -> FlowRule {
    let mut rule = FlowRule::qps(resource, 0.0);
    rule.cluster_mode = true;
    let mut config = sentinel_core::flow::ClusterFlowConfig::default();
    config.flow_id = Some(1);
    config.fallback_to_local_when_fail = true;
    rule.cluster_config = Some(config);
    rule
}

#[test]
fn blocks_carry_their_reason_and_kind_and_breakers_sources_concurrency_and_rt_are_reported() {
    use sentinel_core::circuit_breaker::DegradeRule;

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = FakeClock::at_ms(10_000);
    metrics::with_local_recorder(&recorder, || {
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        sentinel
            .flow_rules()
            .load_rules(vec![
                FlowRule::qps("r", 1.0),
                FlowRule::thread("t", 0.0),
                // No cluster backend: checked locally (fallbackToLocalWhenFail).
                cluster_rule("c"),
            ])
            .expect("valid");
        sentinel
            .degrade_rules()
            .load_rules(vec![
                DegradeRule::error_count("b", 1.0, 10).min_request_amount(1)
            ])
            .expect("valid");
        let held = sentinel.entry("r").enter().expect("pass");
        clock.advance_ms(250);
        drop(held);
        assert!(sentinel.entry("r").enter().is_err());
        assert!(sentinel.entry("t").enter().is_err());
        assert!(sentinel.entry("c").enter().is_err());
        // Sentinel opens an error-count breaker once errors exceed the count.
        for _ in 0..2 {
            let mut failing = sentinel.entry("b").enter().expect("pass");
            failing.set_error();
            drop(failing);
        }
        assert!(sentinel.entry("b").enter().is_err(), "the breaker opened");
        let _in_flight = sentinel.entry("busy").enter().expect("pass");
        let snapshot = snapshotter.snapshot().into_vec();

        let blocks = |resource, reason, kind| match series(
            &snapshot,
            "sentinel_block_total",
            &[("resource", resource), ("reason", reason), ("kind", kind)],
        ) {
            Some(DebugValue::Counter(n)) => *n,
            other => panic!("{resource} {reason} {kind}: {other:?}"),
        };
        assert_eq!(blocks("r", "flow", "qps"), 1);
        assert_eq!(blocks("t", "flow", "concurrency"), 1);
        assert_eq!(blocks("c", "cluster", "qps"), 1);
        assert_eq!(blocks("b", "circuit_breaker", "error_count"), 1);
        assert!(matches!(
            series(&snapshot, "sentinel_circuit_breaker_state", &[("resource", "b"), ("grade", "error_count")]),
            Some(DebugValue::Gauge(v)) if v.into_inner() == 1.0
        ));
        assert!(matches!(
            series(
                &snapshot,
                "sentinel_circuit_breaker_transitions_total",
                &[("resource", "b"), ("from", "closed"), ("to", "open")]
            ),
            Some(DebugValue::Counter(1))
        ));
        assert!(matches!(
            series(&snapshot, "sentinel_concurrency", &[("resource", "busy")]),
            Some(DebugValue::Gauge(v)) if v.into_inner() == 1.0
        ));
        assert!(matches!(
            series(&snapshot, "sentinel_concurrency", &[("resource", "r")]),
            Some(DebugValue::Gauge(v)) if v.into_inner() == 0.0
        ));
        assert!(matches!(
            series(&snapshot, "sentinel_rt_seconds", &[("resource", "r")]),
            Some(DebugValue::Histogram(samples)) if samples.iter().any(|s| s.into_inner() == 0.25)
        ));
        assert!(matches!(
            series(
                &snapshot,
                "sentinel_rules_applied_total",
                &[("source", "api")]
            ),
            Some(DebugValue::Counter(2))
        ));
        assert!(matches!(
            series(&snapshot, "sentinel_active_rules", &[("family", "flow")]),
            Some(DebugValue::Gauge(v)) if v.into_inner() == 3.0
        ));
        assert!(series(
            &snapshot,
            "sentinel_rules_last_applied_timestamp_seconds",
            &[("source", "api")]
        )
        .is_some());
    });
}
