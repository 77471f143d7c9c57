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
